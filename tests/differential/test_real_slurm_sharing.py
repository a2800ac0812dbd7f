"""CPU sharing under gang scheduling, on a real Slurm 22.05 and in gpupool, side by side.

Two jobs of one 16-CPU node, the second submitted 10 s after the first: real Slurm either
allocates the second on the first one's CPUs (it is suspended at once, then the two alternate
every SchedulerTimeSlice) or leaves it pending with reason Resources. Each scenario is also a
variant of one of gpupool's own cases (``tests/conformance/slurm/preempt-gp-004``, ``gang-gp-006``),
whose expected times the conformance suite checks; here both systems must agree on *which* of
the two happens. Skipped where Slurm is not installed. Run alone with
``python -m pytest tests/differential/test_real_slurm_sharing.py -o addopts=""``.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.conformance.real_slurm import RealSlurm, RealSlurmUnavailable
from gpupool.conformance.slurm_cases import _apply_overrides, build_pool, build_workloads, load_case, variants_of
from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy

from tests.differential.real_cluster import need

pytestmark = [pytest.mark.slurm_real, pytest.mark.slow]

CASES = Path(__file__).resolve().parents[1] / "conformance" / "slurm"
QOS_CASE = CASES / "preempt-gp-004-qos-suspend-timeslices.yaml"
YES_CASE = CASES / "gang-gp-006-oversubscribe-yes.yaml"
#: Slurm seconds watched after the second submission: past two time slices
WATCH_S = 100.0


def _cluster(tmp_path: Path, name: str, oversubscribe: str, accounting: str, overrides: dict) -> RealSlurm:
    need(accounting)
    over = {"SchedulerTimeSlice": "30", "SelectTypeParameters": "CR_Core_Memory", "DefMemPerCPU": "100", **overrides}
    rs = RealSlurm(tmp_path / name, nodes=1, gpus_per_node=8, cpus_per_node=16, memory_mb=64000,
                   accounting=accounting, speedup=10, overrides=over,
                   scheduler_parameters="bf_interval=30,sched_interval=60")
    rs._config.partitions["train"].oversubscribe = oversubscribe
    return rs


def _real_outcome(rs: RealSlurm, first: list[str], second: list[str]) -> str:
    """'shares' (the second job was seen SUSPENDED and later RUNNING while the first was
    SUSPENDED) or 'waits' (the second stayed PENDING, reason Resources, all along)."""
    out = ["-o", str(rs.out_dir / "%j.out")]
    a = rs.sbatch(["-t", "10", *out, *first, "--wrap", "sleep 600"])
    rs.sleep(10)
    b = rs.sbatch(["-t", "10", *out, *second, "--wrap", "sleep 600"])
    t0 = rs.now()
    seen: list[tuple[str, str, str]] = []
    while rs.now() - t0 < WATCH_S:
        rows = rs.run(["squeue", "-h", "-o", "%i %T %r"]).stdout.split("\n")
        state = {int(r.split()[0]): (r.split()[1], r.split()[2]) for r in rows if r.strip()}
        seen.append((state[a][0], state[b][0], state[b][1]))
        rs.sleep(2)
    rs.run(["scancel", str(a), str(b)])
    rs.wait_idle(timeout=120)
    if ("RUNNING", "SUSPENDED", "None") in seen and ("SUSPENDED", "RUNNING", "None") in seen:
        return "shares"
    if all(s[1] == "PENDING" for s in seen) and seen[-1][2] == "Resources":
        return "waits"
    return f"neither: {sorted(set(seen))}"


def _gpupool_outcome(case_path: Path, variant: str) -> str:
    """The same question asked of gpupool's run of the case variant."""
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    case = load_case(case_path)
    over = next(o for name, o, _exp in variants_of(case) if name == variant)
    case = _apply_overrides(case, over)
    pool, _ = build_pool(case)
    wls, _ids = build_workloads(case)
    out = Engine(pool, wls, make_policy("slurm", pool), check=True).run()
    first, second = sorted(out.jobs, key=lambda j: j.wl.submit_time)
    if second.start < first.end and first.suspended_s > 0 and second.suspended_s > 0:
        return "shares"
    if second.start >= first.end and first.suspended_s == second.suspended_s == 0:
        return "waits"
    return "neither"


def test_qos_suspend_shares_cpus_but_never_gpus(tmp_path):
    """preempt/qos, PreemptMode=SUSPEND,GANG, OverSubscribe=FORCE:1: a high-QOS job is put on a
    low-QOS job's CPUs and they time-slice; with GPUs the low job holds, it waits."""
    rs = _cluster(tmp_path, "qos", "FORCE:1", "dbd", {"PreemptType": "preempt/qos", "PreemptMode": "SUSPEND,GANG"})
    try:
        rs.start()
    except RealSlurmUnavailable as exc:  # pragma: no cover - checked above
        pytest.skip(str(exc))
    try:
        for args in (["add", "qos", "low"], ["add", "qos", "high"],
                     ["modify", "qos", "high", "set", "Priority=100", "Preempt=low", "PreemptMode=SUSPEND"],
                     ["modify", "user", "root", "set", "QOS+=low,high"]):
            rs.run(["sacctmgr", "-i", *args])
        acct = ["-A", "teamA"]
        cpu = _real_outcome(rs, [*acct, "--qos=low", "-n16"], [*acct, "--qos=high", "-n16"])
        gpu = _real_outcome(rs, [*acct, "--qos=low", "-n1", "--gpus=8"], [*acct, "--qos=high", "-n1", "--gpus=8"])
    finally:
        rs.stop()
    assert (cpu, gpu) == ("shares", "waits")
    assert _gpupool_outcome(QOS_CASE, "base") == cpu
    assert _gpupool_outcome(QOS_CASE, "both jobs hold GPUs the other needs - no suspension, H waits for L") == gpu


def test_oversubscribe_yes_under_gang(tmp_path):
    """OverSubscribe=YES:2 with PreemptMode=GANG: two jobs share whatever they ask, but a job
    asking --oversubscribe is not put beside one that did not."""
    rs = _cluster(tmp_path, "yes", "YES:2", "none", {"PreemptMode": "GANG"})
    try:
        rs.start()
    except RealSlurmUnavailable as exc:  # pragma: no cover - checked above
        pytest.skip(str(exc))
    try:
        neither = _real_outcome(rs, ["-n16"], ["-n16"])
        newcomer = _real_outcome(rs, ["-n16"], ["-n16", "--oversubscribe"])
    finally:
        rs.stop()
    assert (neither, newcomer) == ("shares", "waits")
    assert _gpupool_outcome(YES_CASE, "base") == neither
    assert _gpupool_outcome(YES_CASE, "only the newcomer asks - it waits for the node to empty") == newcomer
