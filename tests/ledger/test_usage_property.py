"""Property: however sacct records arrive (new jobs, running jobs that end later, records that
change account, the same job twice in one file, files imported again), the usage roll-up kept
up to date import by import equals one rebuilt from scratch. The fast path adds new jobs as a
delta and recomputes only hours touched by changed records, so this guards both paths."""
from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpupool.ledger import Ledger
from gpupool.ledger.store import usage_hours
from gpupool.ledger.imports.sacct import import_sacct
from gpupool.ledger.timefmt import format_ts

HEADER = ("JobID|JobIDRaw|JobName|User|Account|Partition|QOS|Cluster|Submit|Eligible|Start|End|ElapsedRaw|"
          "Timelimit|State|ExitCode|Reason|AllocCPUS|NNodes|NodeList|AllocTRES")
T0 = 1767225600  # 2026-01-01T00:00:00Z

record = st.fixed_dictionaries({
    "job": st.integers(1, 8),
    "user": st.sampled_from(["ann", "bob"]),
    "account": st.sampled_from(["a", "b"]),
    "start": st.integers(0, 30 * 3600),
    "elapsed": st.integers(0, 6 * 3600),
    "running": st.booleans(),
    "nodes": st.sampled_from(["gpu01", "gpu[01-02]", "None assigned"]),
    "gpus": st.sampled_from([0, 2, 4]),
    "gpu_type": st.sampled_from(["", "h100"]),
})


def _line(r: dict) -> str:
    start = T0 + r["start"]
    end = "Unknown" if r["running"] else format_ts(start + r["elapsed"])
    state = "RUNNING" if r["running"] else "COMPLETED"
    nnodes = 2 if r["nodes"].startswith("gpu[") else 1
    typed = f"gres/gpu:{r['gpu_type']}={r['gpus']}," if r["gpu_type"] and r["gpus"] else ""
    tres = f"billing={r['gpus'] * 3 or 1},cpu=4,{typed}gres/gpu={r['gpus']},node={nnodes}" if r["gpus"] else "cpu=4"
    if r["nodes"] == "None assigned":
        tres = ""
    return "|".join(map(str, (r["job"], r["job"], f"j{r['job']}", r["user"], r["account"], "gpu", "normal", "c1",
                              format_ts(T0), format_ts(T0), format_ts(start), end, r["elapsed"], "08:00:00", state,
                              "0:0", "None", 4, nnodes, r["nodes"], tres)))


def _usage(ledger: Ledger) -> list[tuple]:
    with ledger.read() as conn:
        return sorted(usage_hours(conn))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=st.lists(st.lists(record, min_size=1, max_size=6), min_size=1, max_size=4),
       repeat=st.booleans())
def test_incremental_usage_equals_a_full_rebuild(files, repeat):
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger(Path(tmp) / "l.db")
        paths = []
        for i, recs in enumerate(files):
            path = Path(tmp) / f"sacct{i}.txt"
            path.write_text(HEADER + "\n" + "\n".join(_line(r) for r in recs) + "\n")
            paths.append(path)
        for path in paths + (paths[:1] if repeat else []):
            import_sacct(ledger, path)
        incremental = _usage(ledger)
        with ledger.transaction() as conn:
            ledger.rebuild_usage(conn, "c1")
        assert _usage(ledger) == incremental
        ledger.close()
