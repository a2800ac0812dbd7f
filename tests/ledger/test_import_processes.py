"""``import_sacct_files`` with the parsing in a child process (``sacct_staged``) stores exactly
what one plain ``import_sacct`` per file stores — every row of every table, ids included —
for daily exports (staged and copied with ``INSERT … SELECT``) and for everything else
(re-imports, changed records, duplicates, several clusters, running jobs), raises the parser's
own error for a bad file in its turn, and copes without a child (none can start, or it dies)."""
from __future__ import annotations

import random
import threading

import pytest
import sqlalchemy as sa

from gpupool.errors import InputError
from gpupool.ledger import Ledger
from gpupool.ledger import schema as s
from gpupool.ledger.imports import sacct_staged
from gpupool.ledger.imports.sacct import import_sacct, import_sacct_files

from .test_import_files import _files
from .test_ingest_fast_paths import HEADER, T0, _line


def _tables(ledger: Ledger) -> dict[str, list[tuple]]:
    out = {}
    with ledger.read() as conn:
        for table in (s.jobs, s.events, s.allocations, s.usage, s.imports, s.policy_versions):
            cols = [c for c in table.c if c.name != "imported_at"]
            out[table.name] = [tuple(r) for r in conn.execute(sa.select(*cols).order_by(*table.primary_key.columns))]
    return out


def _versions(ledger: Ledger, pool: str) -> None:
    with ledger.transaction() as conn:
        for k, at in enumerate((T0 - 10.0, T0 + 86400.0, T0 + 86400.0, T0 + 3600.0)):
            conn.execute(s.policy_versions.insert().values(
                version=f"{pool}-v{k}", pool=pool, tree=f"t{k}", parent=None, author="t", message="m",
                committed_at=at, manifest="{}"))


def _varied_files(tmp_path, rng: random.Random, start_job: int) -> list:
    """Files of the fast-path tests' records (running, pending, cancelled jobs; several
    clusters; odd node lists), one with a record repeated and one with job steps."""
    files, job = [], start_job
    for i in range(4):
        lines = []
        for _ in range(rng.randrange(20, 80)):
            lines.append(_line(rng, job, rng.choice(["c1", "c2"]) if i % 2 else "c1"))
            job += 1
        if i == 2:
            lines.append(lines[3].replace("|j", "|renamed", 1))  # the same job again, a later record
        path = tmp_path / f"varied{start_job}-{i}.txt"
        path.write_text(HEADER + "\n" + "\n".join(lines) + "\n")
        files.append(path)
    return files


def _spy(monkeypatch, steal: bool = False) -> dict:
    """Count the origins copied from the staged rows, and keep each child started; the
    writer parses no file ahead itself (unless ``steal``), so which files the child
    parses does not depend on how fast it is."""
    if not steal:
        monkeypatch.setattr(sacct_staged, "STEAL_AHEAD", 0)
    seen = {"copied": 0, "children": [], "stolen": 0}
    stage = sacct_staged.stage_file

    def staged_here(*a, **k):  # (only the writer's calls: the child has its own module)
        seen["stolen"] += 1
        return stage(*a, **k)

    monkeypatch.setattr(sacct_staged, "stage_file", staged_here)
    copy, init = sacct_staged._copy_origin, sacct_staged.Child.__init__

    def counted(*a, **k):
        seen["copied"] += 1
        return copy(*a, **k)

    def started(self):
        init(self)
        seen["children"].append(self)

    monkeypatch.setattr(sacct_staged, "_copy_origin", counted)
    monkeypatch.setattr(sacct_staged.Child, "__init__", started)
    return seen


def test_child_process_import_equals_one_plain_import_per_file(tmp_path, monkeypatch):
    rng = random.Random(11)
    daily = _files(tmp_path, n_jobs=3000, days=4)
    varied = _varied_files(tmp_path, rng, 100000)
    # the running jobs end later: the same jobs, changed records
    later = tmp_path / "later.txt"
    later.write_text(varied[0].read_text().replace("RUNNING", "COMPLETED").replace("|Unknown|", "|2026-01-05T00:00:00|"))
    runs = [daily[:2], varied + daily[2:], [later] + varied[:2], daily]  # the last two: re-imports
    plain, staged = Ledger(tmp_path / "plain.db"), Ledger(tmp_path / "staged.db")
    for ledger in (plain, staged):
        _versions(ledger, "c1")
    seen = _spy(monkeypatch)
    for files in runs:
        expected = [import_sacct(plain, f) for f in files]
        assert import_sacct_files(staged, files, processes=True) == expected
    assert _tables(staged) == _tables(plain)
    assert seen["copied"] >= 6  # the daily files and new varied origins went the staged way
    assert len(seen["children"]) == len(runs)
    assert all(c.proc.returncode == 0 for c in seen["children"])  # each ended and was reaped


def test_a_bad_file_raises_the_parsers_error_in_its_turn(tmp_path, monkeypatch):
    good, bad, later = _files(tmp_path, n_jobs=600, days=3)
    lines = bad.read_text().splitlines()
    cells = lines[5].split("|")
    cells[21] = "gpu[001-"  # an unreadable NodeList on line 6
    lines[5] = "|".join(cells)
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as plain_error:
        import_sacct(Ledger(tmp_path / "plain.db"), bad)
    seen = _spy(monkeypatch)
    ledger = Ledger(tmp_path / "l.db")
    with pytest.raises(InputError) as error:
        import_sacct_files(ledger, [good, bad, later], processes=True)
    assert str(error.value) == str(plain_error.value)
    assert error.value.line == 6 and error.value.field == "NodeList" and bad.name in str(error.value)
    with ledger.read() as conn:
        assert set(conn.execute(sa.select(s.jobs.c.source)).scalars()) == {str(good)}
    assert seen["children"][0].proc.returncode is not None  # ended and reaped on the error too


def test_a_missing_file_raises_after_the_files_before_it(tmp_path):
    good, _, later = _files(tmp_path, n_jobs=300, days=3)
    ledger = Ledger(tmp_path / "l.db")
    with pytest.raises(OSError):
        import_sacct_files(ledger, [good, later, tmp_path / "missing.txt", good], processes=True)
    with ledger.read() as conn:
        assert set(conn.execute(sa.select(s.jobs.c.source)).scalars()) == {str(good), str(later)}


def test_from_a_thread_the_same_rows(tmp_path, monkeypatch):
    paths = _files(tmp_path, n_jobs=900, days=3)
    plain = Ledger(tmp_path / "plain.db")
    for p in paths:
        import_sacct(plain, p)
    staged = Ledger(tmp_path / "staged.db")
    seen = _spy(monkeypatch)
    out: list = []
    worker = threading.Thread(target=lambda: out.append(import_sacct_files(staged, paths, processes=True)))
    worker.start()
    worker.join(120)
    assert out and sum(r["jobs_added"] for r in out[0]) == 900
    assert seen["copied"] == 2 and seen["children"][0].proc.returncode == 0
    assert _tables(staged) == _tables(plain)


def test_without_a_child_process_the_same_rows(tmp_path, monkeypatch):
    paths = _files(tmp_path, n_jobs=900, days=3)
    plain = Ledger(tmp_path / "plain.db")
    expected = [import_sacct(plain, p) for p in paths]

    def refused(self):
        raise OSError("no processes here")

    monkeypatch.setattr(sacct_staged.Child, "__init__", refused)
    staged = Ledger(tmp_path / "staged.db")
    assert import_sacct_files(staged, paths, processes=True) == expected  # the thread pipeline
    assert _tables(staged) == _tables(plain)


def test_a_child_that_dies_leaves_the_rest_to_the_writer(tmp_path, monkeypatch):
    paths = _files(tmp_path, n_jobs=1200, days=4)
    plain = Ledger(tmp_path / "plain.db")
    expected = [import_sacct(plain, p) for p in paths]
    seen = _spy(monkeypatch)
    result = sacct_staged.Child.result

    def dies_after_one(self):
        out = result(self)
        self.proc.kill()
        return out

    monkeypatch.setattr(sacct_staged.Child, "result", dies_after_one)
    staged = Ledger(tmp_path / "staged.db")
    assert import_sacct_files(staged, paths, processes=True) == expected
    assert _tables(staged) == _tables(plain)
    # the first result, and the second when it was on its way already; the last file not
    assert seen["copied"] in (1, 2) and seen["children"][0].proc.returncode is not None


def test_small_runs_and_other_databases_keep_the_thread(tmp_path, monkeypatch):
    paths = _files(tmp_path, n_jobs=300, days=3)
    seen = _spy(monkeypatch)
    import_sacct_files(Ledger(tmp_path / "l.db"), paths)  # processes=None: far below PROCESS_MIN_BYTES
    assert seen["children"] == []
    assert not sacct_staged.supported(Ledger("postgresql://nobody@127.0.0.1:1/none", engine=sa.create_engine(
        "postgresql+psycopg://nobody@127.0.0.1:1/none")))


def test_files_the_writer_parses_ahead_give_the_same_rows(tmp_path, monkeypatch):
    paths = _files(tmp_path, n_jobs=3000, days=12)
    plain = Ledger(tmp_path / "plain.db")
    expected = [import_sacct(plain, p) for p in paths]
    seen = _spy(monkeypatch, steal=True)
    monkeypatch.setattr(sacct_staged.Child, "ready", lambda self: False)  # as if the child lagged
    staged = Ledger(tmp_path / "staged.db")
    assert import_sacct_files(staged, paths, processes=True) == expected
    assert _tables(staged) == _tables(plain)
    assert seen["stolen"] >= 4 and seen["copied"] >= seen["stolen"] + 2  # both kinds, in order


def test_runs_from_the_size_threshold_on_use_the_child(tmp_path, monkeypatch):
    paths = _files(tmp_path, n_jobs=300, days=3)
    seen = _spy(monkeypatch)
    monkeypatch.setattr(sacct_staged, "PROCESS_MIN_BYTES", sum(p.stat().st_size for p in paths))
    results = import_sacct_files(Ledger(tmp_path / "l.db"), paths)  # processes=None: at the threshold
    assert len(seen["children"]) == 1 and seen["copied"] == 2 and sum(r["jobs_added"] for r in results) == 300
    import_sacct_files(Ledger(tmp_path / "one.db"), paths[:1])  # one file: nothing to overlap
    assert len(seen["children"]) == 1
