"""``import_sacct_files`` (parse the next file while writing one) gives what one import per
file gives, stops at a bad file with its name, and backs ``gpupool import sacct FILES…``."""
from __future__ import annotations

import json
import sys

import pytest
import sqlalchemy as sa

from gpupool.errors import InputError
from gpupool.ledger import Ledger
from gpupool.ledger import schema as s
from gpupool.ledger.imports import import_sacct, import_sacct_files

from .conftest import REPO
from .test_real_slurm_fixtures import SACCT_JSON


def _files(tmp_path, n_jobs=300, days=3):
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import bench_ledger
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    per_day, _, _ = bench_ledger.generate(n_jobs, days)
    paths = []
    for d, lines in enumerate(per_day):
        p = tmp_path / f"sacct-{d}.txt"
        p.write_text(bench_ledger.HEADER + "\n" + "\n".join(lines) + "\n")
        paths.append(p)
    return paths


def _tables(ledger):
    out = {}
    with ledger.read() as conn:
        for table in (s.jobs, s.events, s.allocations, s.usage):
            cols = [c for c in table.c if c.name not in ("id", "source")]
            out[table.name] = sorted(tuple(r) for r in conn.execute(sa.select(*cols)))
    return out


def test_pipelined_import_equals_one_import_per_file(tmp_path):
    paths = _files(tmp_path)
    one, many = Ledger(tmp_path / "one.db"), Ledger(tmp_path / "many.db")
    for p in paths:
        import_sacct(one, p)
    results = import_sacct_files(many, paths)
    assert [r["source"] for r in results] == [str(p) for p in paths]
    assert sum(r["jobs_added"] for r in results) == 300
    assert _tables(one) == _tables(many)
    assert all(r["jobs_added"] == 0 for r in import_sacct_files(many, paths))  # idempotent


def test_a_bad_file_stops_the_run_with_its_name_and_keeps_the_earlier_ones(tmp_path):
    good, bad, later = _files(tmp_path)
    bad.write_text(bad.read_text().replace("|", ";", 1))  # header no longer names JobID
    ledger = Ledger(tmp_path / "l.db")
    with pytest.raises(InputError, match=str(bad.name)):
        import_sacct_files(ledger, [good, bad, later])
    with ledger.read() as conn:
        sources = set(conn.execute(sa.select(s.jobs.c.source)).scalars())
    assert sources == {str(good)}


def test_cli_imports_text_and_json_files_in_order(tmp_path, cli):
    paths = _files(tmp_path)
    db = tmp_path / "cli.db"
    out = json.loads(cli("import", "sacct", "--db", db, "--json", paths[0], SACCT_JSON, paths[1], paths[2]).output)
    assert [r["source"] for r in out] == [str(paths[0]), str(SACCT_JSON), str(paths[1]), str(paths[2])]
    assert out[1]["clusters"] == ["lab"] and out[0]["clusters"] == ["bench"]
