"""Scenario helpers for the Slurm policy tests that replay a real Slurm run: sbatch options
given as one string per job, turned into the same scripts real sbatch was given."""
from __future__ import annotations

from pathlib import Path

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool
from gpupool.formats.sbatch import parse_sbatch_text, sbatch_to_workload


#: the slurm.conf lines the small two-node scenarios share (backfill every 30 s, cons_tres with
#: cores and memory, 100 MB per CPU by default, priority/basic); a test adds its cluster name
#: before them, then the keys it is about, GresTypes, its nodes and partitions
SCENARIO_CONF = """\
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=30
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
PriorityType=priority/basic
"""


#: four-or-fewer 128-CPU, 8-GPU, 1000000 MB nodes as the probes of findings 51 and 52 had them
#: (2 sockets x 32 cores x 2 threads, CR_Core_Memory, DefMemPerGPU=120000); ``{last}``: the
#: last node's number
GPU_NODES_CONF = """ClusterName=t
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerGPU=120000
SchedulerType=sched/backfill
GresTypes=gpu
NodeName=gpu[01-{last:02d}] CPUs=128 Sockets=2 CoresPerSocket=32 ThreadsPerCore=2 RealMemory=1000000 Gres=gpu:8
PartitionName=p Nodes=gpu[01-{last:02d}] Default=YES MaxTime=60 State=UP
"""


#: four 128-CPU, 8-GPU, 1000000 MB nodes under EnforcePartLimits={epl} (DefMemPerGPU=1000,
#: priority/basic), before a test's partitions: the submit-check probes' cluster (p134-p140)
NODES_EPL_CONF = """ClusterName=t
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerGPU=1000
SchedulerType=sched/backfill
PriorityType=priority/basic
GresTypes=gpu
EnforcePartLimits={epl}
NodeName=gpu[01-04] CPUs=128 Sockets=2 CoresPerSocket=32 ThreadsPerCore=2 RealMemory=1000000 Gres=gpu:8
"""


#: slurm.conf lines of the scenarios with slurmdbd limits (multifactor priority, limits
#: enforced, GPUs accounted); a test adds its cluster name and memory keys before them, its
#: nodes and partitions after
DBD_LIMITS_CONF = """\
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=30
PriorityType=priority/multifactor
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageEnforce=associations,limits,qos
AccountingStorageTRES=gres/gpu
GresTypes=gpu
"""


def team_accounts(grp_tres: str) -> str:
    """accounts.cfg with account teamA (limited by ``grp_tres``, root's default) and teamB
    (no limit), root a user of both."""
    return f"""QOS - 'normal':Priority=0
Cluster - 't':Fairshare=1:QOS='normal'
Parent - 'root'
Account - 'teamA':Fairshare=1:GrpTRES={grp_tres}:QOS='normal':DefaultQOS='normal'
Account - 'teamB':Fairshare=1:QOS='normal':DefaultQOS='normal'
Parent - 'teamA'
User - 'root':DefaultAccount='teamA':Fairshare=1
Parent - 'teamB'
User - 'root':DefaultAccount='teamA':Fairshare=1
"""


def split_options(opts: str) -> list[str]:
    """``"-N2 -n2 --gres=gpu:8"`` -> ``["-N2", "-n2", "--gres=gpu:8"]``; an option's value
    written apart (``-t 5``) stays with it, one ``#SBATCH`` line per option."""
    out: list[str] = []
    cur: list[str] = []
    for tok in opts.split():
        if tok.startswith("-") and cur:
            out.append(" ".join(cur))
            cur = []
        cur.append(tok)
    return out + [" ".join(cur)] if cur else out


def script(opts: str, command: str = "sleep 3000") -> str:
    """A batch script with one ``#SBATCH`` line per option (line 1 is the shebang)."""
    return "#!/bin/bash\n" + "".join(f"#SBATCH {o}\n" for o in split_options(opts)) + command + "\n"


def workloads(name: str, opts: str, at: float, first_id: int, runtime: float = 3000.0) -> list:
    """The workloads of one submission (one, or one per array task) from ``first_id`` on."""
    return sbatch_to_workload(parse_sbatch_text(script(opts), f"{name}.sbatch"), id=first_id,
                              submit_time=at, runtime=runtime)


def workload(name: str, opts: str, at: float, jid: int, runtime: float = 3000.0):
    """The one workload of a submission that is not an array."""
    (wl,) = workloads(name, opts, at, jid, runtime)
    return wl


def slurm_pool(directory: Path, conf: str):
    """The pool of the slurm.conf text ``conf``, written into ``directory`` (with the Slurm
    policy registered)."""
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    (directory / "slurm.conf").write_text(conf)
    return load_pool(directory)


def run_spaced(pool, jobs: list[str], gap: float, until: float, runtimes: list[float] | None = None,
               record: bool = False):
    """``jobs`` (sbatch options) submitted ``gap`` seconds apart as j0, j1, … (ids 1, 2, …)
    under the Slurm policy, run up to ``until``: (engine, policy). ``record``: keep every
    backfill plan, as squeue --start needs (``SlurmPolicy.record``), for a test that reads them."""
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    wls = [workload(f"j{k}", opts, gap * k, k + 1, runtime=3000.0 if runtimes is None else float(runtimes[k]))
           for k, opts in enumerate(jobs)]
    pol = make_policy("slurm", pool, {"record": record})
    engine = Engine(pool, wls, pol, until=until)
    engine.run()
    return engine, pol
