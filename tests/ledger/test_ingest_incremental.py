"""The fast ingest paths give exactly what the plain ones gave: policy versions read once per
import (``VersionLookup``) and the usage roll-up recomputed only for the hours an import
touched (``update_usage``) equal ``version_in_force`` per event and a full ``rebuild_usage``."""
from __future__ import annotations

import sys

import sqlalchemy as sa

from gpupool.ledger import schema as s
from gpupool.ledger.store import usage_hours
from gpupool.ledger.imports.sacct import import_sacct
from gpupool.ledger.policy import commit
from tests.ledger.conftest import REPO, SEED_POOL

HEADER = ("JobID|JobIDRaw|JobName|User|Account|Partition|QOS|Cluster|Submit|Eligible|Start|End|ElapsedRaw|"
          "Timelimit|State|ExitCode|Reason|AllocCPUS|NNodes|NodeList|AllocTRES")


def _line(job, user, acct, start, end, elapsed, state, nodes="gpu[001-002]", gpus=4):
    return (f"{job}|{job}|j{job}|{user}|{acct}|gpu|normal|c1|2026-01-05T00:10:00|2026-01-05T00:10:00|{start}|{end}|"
            f"{elapsed}|08:00:00|{state}|0:0|None|8|2|{nodes}|billing=8,cpu=8,gres/gpu:h100={gpus},gres/gpu={gpus},node=2")


def _usage(ledger):
    with ledger.read() as conn:
        return sorted(usage_hours(conn))


def test_incremental_usage_equals_full_rebuild(ledger, tmp_path):
    files = [
        [_line(1, "ann", "a", "2026-01-05T00:30:00", "2026-01-05T03:15:00", 9900, "COMPLETED"),
         _line(2, "bob", "b", "2026-01-05T01:00:00", "Unknown", 1800, "RUNNING")],
        # job 2 finishes (its open allocation closes), job 3 starts a day later
        [_line(2, "bob", "b", "2026-01-05T01:00:00", "2026-01-05T05:00:00", 14400, "COMPLETED"),
         _line(3, "cat", "a", "2026-01-06T10:00:00", "2026-01-06T10:20:00", 1200, "FAILED", nodes="gpu003", gpus=2)],
        # job 1's record changes its account: its old hours must be recomputed too
        [_line(1, "ann", "c", "2026-01-05T00:30:00", "2026-01-05T03:15:00", 9900, "COMPLETED"),
         _line(4, "dan", "d", "2026-01-07T23:59:00", "2026-01-08T00:01:30", 150, "COMPLETED", nodes="gpu004", gpus=1)],
    ]
    for i, lines in enumerate(files):
        path = tmp_path / f"sacct{i}.txt"
        path.write_text(HEADER + "\n" + "\n".join(lines) + "\n")
        import_sacct(ledger, path)
    incremental = _usage(ledger)
    assert any(r[2] == "c" for r in incremental) and not any(r[2] == "a" and r[1] < 1767657600
                                                             for r in incremental)
    with ledger.transaction() as conn:
        ledger.rebuild_usage(conn, "c1")
    assert _usage(ledger) == incremental


def test_version_lookup_equals_version_in_force(ledger):
    for i, at in enumerate((1000.0, 2000.0, 2000.0, 3000.0)):
        commit(ledger, SEED_POOL, f"v{i}", at=at, author="t")
    with ledger.read() as conn:
        pool = conn.execute(sa.select(s.policy_versions.c.pool)).scalars().first()
        lookup = ledger.versions_in_force(conn, pool)
        for at in (None, 0.0, 999.9, 1000.0, 1500.0, 2000.0, 2500.0, 3000.0, 1e12):
            expected = None if at is None else ledger.version_in_force(conn, pool, at)
            assert lookup(at) == expected
        assert ledger.versions_in_force(conn, "no-such-pool")(5000.0) is None


def test_bench_ledger_smoke(tmp_path):
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import bench_ledger
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    report = bench_ledger.run(300, 3, tmp_path)
    assert report["jobs_added"] == 300 and report["files"] == 3
    assert report["rows"]["acct"] == report["rows"]["acct_rows"]
    assert report["rows"]["audit"] >= report["rows"]["audit_rows"]
    assert set(report["ratio"]) == {"ingest", "ingest_cpu", "usage", "acct_window", "audit_gpus"}
    assert report["ingest_cpu_s"] > 0
