"""Jobs submitted one after another on one node whose GPUs are bound to cores (gres.conf
``Cores=``): which cores and GPUs each gets, from a real Slurm and from gpupool's Slurm policy.

Why a probe of its own: the differential workload runs on nodes without ``Cores=``, where GPUs
go by lowest free index; this one exercises cons_tres's socket steering
(policy/slurm/affinity.py). A sequence is a list of sbatch argument strings, submitted
``GAP_S`` apart, each a sleep of ``LONG_S`` unless it ends in ``@SECONDS``.
"""
from __future__ import annotations

import re
from pathlib import Path

from gpupool.formats.gres_conf import parse_core_list
from gpupool.formats.pool_dir import load_pool

GAP_S = 10.0
LONG_S = 2000.0

#: 2-socket nodes of 8 cores each and 8 GPUs (``threads`` per core)
SLURM_CONF = """ClusterName=affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
GresTypes=gpu
NodeName=gpu[01-{last:02d}] CPUs={cpus} Sockets=2 CoresPerSocket=8 ThreadsPerCore={threads} RealMemory=64000 Gres=gpu:8
PartitionName=train Nodes=gpu[01-{last:02d}] Default=YES MaxTime=60 State=UP
"""


def write_pool(directory: Path, layout: dict[tuple[int, int], str], *, threads: int = 1, nodes: int = 1) -> Path:
    """A pool folder (slurm.conf, gres.conf) of ``nodes`` nodes, each with GPUs ``lo..hi``
    bound to the given cores (``layout``)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "slurm.conf").write_text(SLURM_CONF.format(last=nodes, cpus=16 * threads, threads=threads))
    cores = {}
    for (lo, hi), text in layout.items():
        for g in range(lo, hi + 1):
            cores[g] = text
    lines = [f"NodeName=gpu{n:02d} Name=gpu File=/dev/nvidia{g}" + (f" Cores={cores[g]}" if g in cores else "")
             for n in range(1, nodes + 1) for g in range(8)]
    (directory / "gres.conf").write_text("\n".join(lines) + "\n")
    return directory


def split(entry: str) -> tuple[list[str], float]:
    """sbatch arguments and run time of one sequence entry (``"-N1 --gres=gpu:1 @30"``)."""
    args = entry.split()
    if args and args[-1].startswith("@"):
        return args[:-1], float(args[-1][1:])
    return args, LONG_S


def parse_alloc(text: str, threads: int = 1) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(cores, GPU indices) from ``scontrol -d show job``'s first per-node line (its CPU ids
    are threads: core ``c`` holds CPUs ``c·threads …``)."""
    cpu = re.search(r"CPU_IDs=(\S+)", text)
    gres = re.search(r"GRES=\S*?\(IDX:([^)]*)\)", text)
    cores = sorted({c // threads for c in parse_core_list(cpu.group(1))}) if cpu else ()
    gpus = parse_core_list(gres.group(1)) if gres and gres.group(1) else ()
    return tuple(cores), tuple(gpus)


def simulate(pool_dir: Path, sequence: list[str]) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(cores, GPUs) per job of ``sequence`` under gpupool's Slurm policy."""
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)
    from gpupool.engine.core import Engine
    from gpupool.engine.nodes import mask_indices
    from gpupool.engine.policy_api import make_policy
    from gpupool.formats.sbatch import parse_sbatch, sbatch_to_workload

    pool = load_pool(pool_dir)
    scripts = pool_dir / "scripts"
    scripts.mkdir(exist_ok=True)
    wls = []
    for k, entry in enumerate(sequence):
        args, run_s = split(entry)
        path = scripts / f"job{k}.sh"
        path.write_text("#!/bin/bash\n" + "".join(f"#SBATCH {a}\n" for a in args) + f"sleep {int(run_s)}\n")
        wls += sbatch_to_workload(parse_sbatch(path), id=k + 1, submit_time=GAP_S * k, runtime=run_s)
    policy = make_policy("slurm", pool, {"record": True})
    out = Engine(pool, wls, policy, check=True).run()
    log = policy.cores.log if policy.cores is not None else {}
    result = []
    for job in sorted(out.jobs, key=lambda j: j.id):
        node, mask, _cpu, _mem = job.placement[0]
        result.append((log.get(job.id, {}).get(node, ()), tuple(mask_indices(mask))))
    return result


def run_real(rs, sequence: list[str], threads: int = 1) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(cores, GPUs) per job of ``sequence`` on the started real cluster ``rs``
    (``gpupool.conformance.real_slurm.RealSlurm`` of a ``write_pool`` folder), read with
    ``scontrol -d show job`` a few seconds after each submission; the jobs are cancelled at the
    end and the cluster left idle. A job still pending reads as ((), ())."""
    ids = []
    out = []
    for entry in sequence:
        args, run_s = split(entry)
        ids.append(rs.sbatch(["-o", str(rs.out_dir / "%j.out"), *args, "--wrap", f"sleep {int(run_s)}"]))
        rs.sleep(GAP_S * 0.8)
        text = rs.run(["scontrol", "-d", "show", "job", str(ids[-1])]).stdout
        out.append(parse_alloc(text, threads))
        rs.sleep(GAP_S * 0.2)
    rs.run(["scancel", *(str(i) for i in ids)], check=False)
    rs.wait_idle(timeout=120)
    return out
