"""CPU sharing without gang scheduling, on a real Slurm 22.05 and in gpupool, side by side.

One real cluster of seven 16-CPU 8-GPU nodes, PreemptMode OFF, one partition per scenario
(OverSubscribe=FORCE:N or YES:N on its own node). Each scenario is a variant of gpupool's cases
``share-gp-001`` to ``share-gp-003``: its jobs are submitted 10 s apart (as the cases' submit
times say), and once the last was submitted and a backfill cycle has passed, every job's state
(RUNNING with its GPU indices, or PENDING with its reason) must be what the case expects; the
conformance suite checks gpupool against the same expectations, and this test runs the variant
in gpupool too. The jobs sleep as long as the cases' ``run_s``: at ``LATE_T`` (after the first
jobs ended and the waiting ones took their places) each job's state must be the one gpupool's
run of the variant has then. Skipped where Slurm is not installed. Run alone with
``python -m pytest tests/differential/test_real_slurm_oversubscribe.py -o addopts=""``.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpupool.conformance.real_slurm import RealSlurm
from gpupool.conformance.slurm_cases import (_apply_overrides, build_pool, build_workloads, load_case, run_case,
                                             variants_of)
from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.model.slurm import Partition

from tests.differential.real_cluster import need, started

pytestmark = [pytest.mark.slurm_real, pytest.mark.slow]

CASES = Path(__file__).resolve().parents[1] / "conformance" / "slurm"
CASE_1 = CASES / "share-gp-001-oversubscribe-without-gang.yaml"
CASE_2 = CASES / "share-gp-002-oversubscribe-gpus-never-shared.yaml"
CASE_3 = CASES / "share-gp-003-backfill-coallocates.yaml"
#: (partition, case, variant): each runs on its own node
SCENARIOS = [
    ("force", CASE_1, "base"),
    ("rows", CASE_1, "rows hold CPU counts - 8, 16 and 8 CPUs share two rows, the 4-CPU job waits"),
    ("idle", CASE_1, "idle CPUs first - two 8-CPU jobs fill the node, then 12 and 4 CPUs share it, the next 4 waits"),
    ("yes", CASE_1, "YES:2, both ask --oversubscribe - they share; the next, not asking, waits"),
    ("yesnew", CASE_1, "YES:2, only the newcomer asks - it waits"),
    ("gpus", CASE_2, "base"),
    ("bf", CASE_3, "base"),
]
#: Slurm seconds after the last submission before the states are read: past a backfill cycle
SETTLE_S = 45.0
#: the instant of a case at which its expectations are read (before any job ends)
CASE_T = 50.0
#: Slurm seconds after the first submission when both systems' states are compared again:
#: 70-100 s after the ends and starts at 600-630 that the cases derive
LATE_T = 700.0


def _variant(path: Path, name: str) -> dict:
    case = load_case(path)
    over = next(o for n, o, _exp in variants_of(case) if n == name)
    return _apply_overrides(case, over)


def _expected(path: Path, name: str) -> dict[str, tuple]:
    """Each case job's state at ``CASE_T`` as the variant's expectations give it."""
    case = load_case(path)
    exp = next(e for n, _o, e in variants_of(case) if n == name)
    base = case.get("expected") or {}
    out: dict[str, tuple] = {}
    starts = exp.get("start", base.get("start") if name == "base" else {}) or {}
    gpus = exp.get("gpu_indices", base.get("gpu_indices") if name == "base" else {}) or {}
    for k, t in starts.items():
        if float(t) <= CASE_T:
            out[str(k)] = ("RUNNING", tuple(gpus.get(k, ())) if k in gpus else None)
    for item in exp.get("reason_at", base.get("reason_at") if name == "base" else []) or []:
        if float(item["t"]) <= CASE_T:
            out[str(item["job"])] = ("PENDING", item["reason"])
    return out


def _sbatch_args(job: dict, part: str) -> list[str]:
    args = ["-p", part, "-N", str(job.get("nodes") or 1), "-n", str(job["cpus"]),
            "-t", str(job["time_limit_min"])]
    if job.get("gpus"):
        args.append(f"--gpus={job['gpus']}")
    if job.get("oversubscribe"):
        args.append("--oversubscribe")
    return args


def _gpupool_states_at(case: dict, t: float) -> dict[str, str]:
    """Each job's state at ``t`` in gpupool's run of ``case``."""
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    pool, _ = build_pool(case)
    wls, ids = build_workloads(case)
    out = Engine(pool, wls, make_policy("slurm", pool), check=True).run()
    name = {v: k for k, v in ids.items()}
    states = {}
    for job in out.jobs:
        if job.start is None or job.start > t:
            states[name[job.id]] = "PENDING"
        elif job.end <= t:
            states[name[job.id]] = job.final_state
        else:
            states[name[job.id]] = "RUNNING"
    return states


def _real_states(rs: RealSlurm, ids: dict[tuple[str, str], int]) -> dict[tuple[str, str], tuple]:
    out = {}
    for key, jid in ids.items():
        text = rs.run(["scontrol", "-d", "show", "job", str(jid)]).stdout
        state = re.search(r"JobState=(\S+)", text).group(1)
        if state == "RUNNING":
            idx = re.search(r"GRES=gpu[^ ]*\(IDX:([0-9,-]+)\)", text)
            out[key] = ("RUNNING", _indices(idx.group(1)) if idx else ())
        else:
            out[key] = (state, re.search(r"Reason=(\S+)", text).group(1))
    return out


def _indices(text: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += range(int(a), int(b or a) + 1)
    return tuple(out)


def test_sharing_without_gang_matches_real_slurm(tmp_path):
    need("none")
    rs = RealSlurm(tmp_path / "share", nodes=len(SCENARIOS), gpus_per_node=8, cpus_per_node=16, memory_mb=64000,
                   speedup=10, overrides={"SelectTypeParameters": "CR_Core_Memory", "DefMemPerCPU": "100"},
                   scheduler_parameters="bf_interval=30,sched_interval=60")
    cases = {part: _variant(path, name) for part, path, name in SCENARIOS}
    rs._config.partitions = {
        part: Partition(name=part, nodes=(node,), default=(i == 0), max_time=60 * 60,
                        oversubscribe=str(cases[part]["cluster"]["partitions"][0].get("oversubscribe") or "NO"))
        for i, ((part, _p, _n), node) in enumerate(zip(SCENARIOS, rs.node_names))}
    started(rs)
    ids: dict[tuple[str, str], int] = {}
    try:
        out = ["-o", str(rs.out_dir / "%j.out")]
        by_time: dict[float, list[tuple[str, dict]]] = {}
        for part, case in cases.items():
            for job in case["jobs"]:
                by_time.setdefault(float(job["submit"]), []).append((part, job))
        last = 0.0
        for t in sorted(by_time):
            if t > last:
                rs.sleep(t - last)
                last = t
            for part, job in by_time[t]:
                if not ids:
                    t0 = rs.now()
                ids[(part, str(job["id"]))] = rs.sbatch(
                    [*out, *_sbatch_args(job, part), "--wrap", f"sleep {int(job['run_s'])}"])
        rs.sleep(SETTLE_S)
        real = _real_states(rs, ids)
        log = (rs.log_dir / "slurmctld.log").read_text()
        rs.sleep(max(0.0, t0 + LATE_T - rs.now()))
        late = {key: state for key, (state, _x) in _real_states(rs, ids).items()}
    finally:
        rs.stop()
    mismatches = []
    for part, path, name in SCENARIOS:
        for k, want in _expected(path, name).items():
            got = real[(part, k)]
            if want[0] == "RUNNING" and want[1] is None:
                got = (got[0], None)
            if got != want:
                mismatches.append((part, k, want, got))
    assert not mismatches
    for part, case in cases.items():
        for k, state in _gpupool_states_at(case, LATE_T).items():
            if late[(part, k)] != state:
                mismatches.append((part, k, "late", state, late[(part, k)]))
    assert not mismatches
    # the co-allocated short job of the backfill scenario was started by the backfill cycle
    assert re.search(rf"sched/backfill: _start_job: Started JobId={ids[('bf', '3')]} ", log)
    # and gpupool passes the same variants
    for part, path, name in SCENARIOS:
        res = next(r for r in run_case(path) if r.variant == name)
        assert res.ok, (part, name, res.failures)
