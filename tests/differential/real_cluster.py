"""What every real-Slurm differential test needs: skip where Slurm cannot run, start a cluster
(skipping when it cannot come up), and read a job back with ``scontrol``."""
from __future__ import annotations

import os
import re
from datetime import datetime

import pytest

from gpupool.conformance.real_slurm import RealSlurm, RealSlurmUnavailable, missing_packages


def need(accounting: str = "none") -> None:
    """Skip unless the Debian packages (with slurmdbd and MariaDB for ``dbd``) are installed and
    this process may start daemons as root."""
    missing = missing_packages(accounting, speedup=10)
    if missing:
        pytest.skip(f"real Slurm not installed (missing Debian packages: {' '.join(missing)})")
    if os.geteuid() != 0:
        pytest.skip("real Slurm on one host needs root")


def started(rs: RealSlurm) -> RealSlurm:
    """``rs`` started, or the test skipped when the cluster cannot come up here."""
    try:
        return rs.start()
    except RealSlurmUnavailable as exc:  # pragma: no cover - ``need`` checks the usual causes
        pytest.skip(str(exc))


def sacctmgr(rs: RealSlurm, *commands: list[str]) -> None:
    """Run ``sacctmgr -i`` commands (QOS and association changes) in order."""
    for args in commands:
        rs.run(["sacctmgr", "-i", *args])


def show_job(rs: RealSlurm, jid: int, keys: tuple[str, ...]) -> dict[str, str]:
    """Fields ``keys`` of ``scontrol show job JID`` (e.g. JobState, TimeLimit, StartTime)."""
    text = rs.run(["scontrol", "show", "job", str(jid)]).stdout
    return dict(re.findall(rf"({'|'.join(keys)})=(\S+)", text))


def show_jobs(rs: RealSlurm, ids: list[int | str], keys: tuple[str, ...]) -> list[dict[str, str] | tuple[str, str]]:
    """Per entry of ``submit_each``'s list: ``show_job``'s fields ``keys``, or ("REFUSED",
    sbatch's message) for a submission sbatch refused."""
    return [("REFUSED", jid) if isinstance(jid, str) else show_job(rs, jid, keys) for jid in ids]


def epoch(stamp: str) -> float:
    """A Slurm timestamp (``2026-12-02T05:49:03``) as epoch seconds."""
    return datetime.fromisoformat(stamp).timestamp()


def gpu_cluster(directory, nodes: int, scheduler_parameters: str, partitions: dict[str, tuple[int, ...]],
                features: list[tuple[str, ...]] | None = None) -> RealSlurm:
    """A started cluster of ``nodes`` nodes with 8 GPUs and 16 cores each (CR_Core_Memory,
    priority/basic, x10 clock, log at debug), its partitions given as node positions (the
    first one is the default, MaxTime 60 minutes) and optional node features."""
    rs = RealSlurm(directory, nodes=nodes, gpus_per_node=8, cpus_per_node=16, memory_mb=64000, speedup=10,
                   overrides={"SelectTypeParameters": "CR_Core_Memory", "DefMemPerCPU": "100",
                              "PriorityType": "priority/basic"},
                   scheduler_parameters=scheduler_parameters, slurmctld_debug="debug")
    from gpupool.model.slurm import Partition

    names = rs.node_names
    for node, feats in zip(rs._nodes, features or []):
        node.features = feats
    rs._config.partitions = {
        part: Partition(name=part, nodes=tuple(names[i] for i in idx), default=(k == 0), max_time=60 * 60)
        for k, (part, idx) in enumerate(partitions.items())}
    return started(rs)


def submit_plan(rs: RealSlurm, plan) -> tuple[dict[str, int], float]:
    """Submit ``plan`` ((name, seconds from now, sbatch options) in time order) on ``rs``'s
    clock, each a ``sleep 3000`` batch job named after it; returns (job id by name, the last
    submission's time)."""
    ids: dict[str, int] = {}
    last = 0.0
    for name, at, opts in plan:
        if at > last:
            rs.sleep(at - last)
            last = at
        ids[name] = rs.sbatch(["-o", str(rs.out_dir / "%j.out"), "-J", name, *opts.split(), "--wrap", "sleep 3000"])
    return ids, last


REFUSED = "Batch job submission failed: "


def two_partitions(directory, nodes: int, overrides: dict, q_extra: dict, *, memory_mb: int = 64000) -> RealSlurm:
    """A started cluster of ``nodes`` 16-core 8-GPU nodes (x10 clock, priority/basic,
    CR_Core_Memory unless ``overrides`` says otherwise) with partition p (the default) and
    partition q (``q_extra``: its slurm.conf keys) over all of them, MaxTime 60 minutes."""
    from gpupool.model.slurm import Partition

    rs = RealSlurm(directory, nodes=nodes, gpus_per_node=8, cpus_per_node=16, memory_mb=memory_mb, speedup=10,
                   overrides={"SelectTypeParameters": "CR_Core_Memory", "PriorityType": "priority/basic", **overrides},
                   scheduler_parameters="bf_interval=30")
    names = tuple(rs.node_names)
    rs._config.partitions = {
        "p": Partition(name="p", nodes=names, default=True, max_time=3600),
        "q": Partition(name="q", nodes=names, max_time=3600, extra=dict(q_extra)),
    }
    return started(rs)


def submit_each(rs: RealSlurm, jobs: list[str], gap: float, sleeps: list[float] | None = None) -> list[int | str]:
    """Submit ``jobs`` (sbatch options) ``gap`` seconds apart on ``rs``'s clock, each a batch
    job sleeping 3000 s (or its ``sleeps`` entry); per job its id, or sbatch's refusal message."""
    out: list[int | str] = []
    for k, opts in enumerate(jobs):
        if k:
            rs.sleep(gap)
        sleep = 3000 if sleeps is None else sleeps[k]
        got = rs.run(["sbatch", "--parsable", "-o", "/dev/null", "-J", f"j{k}", *opts.split(),
                      "--wrap", f"sleep {sleep:g}"], check=False)
        out.append(int(got.stdout.split(";")[0]) if got.returncode == 0 else got.stderr.split(REFUSED)[-1].strip())
    return out


def replay(conf, jobs: list[str], gap: float, until: float, runtimes: list[float] | None = None,
           record: bool = False):
    """gpupool's Slurm policy on the pool in ``conf`` with the same submissions: (engine, policy)
    after ``until`` seconds (``record``: see ``run_spaced``)."""
    from gpupool.formats.pool_dir import load_pool

    from tests.unit.sbatch_plans import run_spaced

    return run_spaced(load_pool(conf), jobs, gap, until, runtimes, record)
