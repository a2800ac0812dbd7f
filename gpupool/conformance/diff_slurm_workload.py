"""The randomized GPU workload of the differential test, as real sbatch scripts.

Why scripts: both sides read the same text. Real Slurm gets the file through ``sbatch``;
gpupool reads it with its own sbatch parser (``formats/sbatch.py``), so the parser is part of
what the differential checks. Each job is a sleep whose script records
``scontrol -d show job`` while it runs, because a finished job no longer shows its GPU
indices (README of tools/real-slurm, gotcha 9).
"""
from __future__ import annotations

import random
from dataclasses import dataclass

#: (weight, nodes, GPUs per node) of the job shapes drawn: mostly single-node jobs of
#: 1–8 GPUs, some two- and four-node jobs, as a training pool sees them.
SHAPES: tuple[tuple[int, int, int], ...] = (
    (14, 1, 1), (12, 1, 2), (12, 1, 4), (10, 1, 8), (5, 1, 3), (6, 2, 8), (5, 2, 4), (3, 2, 2),
    (2, 4, 8),
)


@dataclass(frozen=True, slots=True)
class DiffJob:
    """One job of the differential workload. Times are seconds from the first arrival."""

    index: int
    name: str
    arrival: float
    nodes: int
    gpus_per_node: int
    limit_min: int
    runtime_s: int
    account: str

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def times_out(self) -> bool:
        """True when the sleep outlasts the limit: Slurm kills it (TIMEOUT)."""
        return self.runtime_s >= self.limit_min * 60


def generate(seed: int, jobs: int, accounts: list[str], *, max_nodes: int, gpus_per_node: int,
             max_limit_min: int = 5, mean_gap_s: float = 6.0, timeout_share: float = 0.1,
             gpu_caps: dict[str, int] | None = None) -> list[DiffJob]:
    """``jobs`` jobs drawn from ``seed``: shapes from :data:`SHAPES` that fit the pool, whole-minute
    limits 1..``max_limit_min``, runtimes mostly 20 % of the limit to 15 s before it and ``timeout_share`` of
    them longer than it, exponential gaps between arrivals (whole seconds), accounts uniform.
    ``gpu_caps`` (account -> GPUs) drops shapes an account's GrpTRES could never admit: such a
    job pends forever (AssocGrpGRES) on both sides and only stalls the run.
    """
    if not accounts:
        raise ValueError("the differential workload needs at least one account")
    rng = random.Random(seed)
    shapes = [(w, n, g) for (w, n, g) in SHAPES if n <= max_nodes and g <= gpus_per_node]
    out: list[DiffJob] = []
    t = 0.0
    for i in range(jobs):
        if i:
            t += round(rng.expovariate(1.0 / mean_gap_s))
        account = rng.choice(accounts)
        cap = (gpu_caps or {}).get(account)
        fit = [(w, n, g) for (w, n, g) in shapes if cap is None or n * g <= cap]
        _, n, g = rng.choices(fit, [w for w, _, _ in fit])[0]
        limit = rng.randint(1, max_limit_min)
        if rng.random() < timeout_share:
            run = limit * 60 + rng.randint(5, 40)
        else:
            # keep 15 s clear of the limit: job start-up costs fake seconds under a sped-up clock
            run = max(5, min(limit * 60 - 15, int(limit * 60 * rng.uniform(0.2, 1.0))))
        out.append(DiffJob(i, f"d{i:03d}", t, n, g, limit, run, account))
    return out


def sbatch_script(job: DiffJob, output: str) -> str:
    """The batch script of ``job``; ``output`` is sbatch's ``--output`` pattern.

    The sleep starts first and ``scontrol`` runs beside it, so the job's run time is the
    sleep alone (a client call costs seconds of fake time under a sped-up clock).
    """
    return "\n".join([
        "#!/bin/bash",
        f"#SBATCH --job-name={job.name}",
        f"#SBATCH --account={job.account}",
        f"#SBATCH --nodes={job.nodes}",
        f"#SBATCH --gres=gpu:{job.gpus_per_node}",
        f"#SBATCH --time={job.limit_min}",
        f"#SBATCH --output={output}",
        f"#GPUPOOL runtime={job.runtime_s}",
        f"sleep {job.runtime_s} &",
        'scontrol -d show job "$SLURM_JOB_ID"',
        "wait",
        "",
    ])
