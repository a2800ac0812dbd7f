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
    #: further sbatch options (``mix="rich"``), e.g. ``("--cpus-per-task=24",)``
    options: tuple[str, ...] = ()
    #: whether the script asks ``--gres=gpu:N`` per node (False: its GPUs come from
    #: ``--gpus-per-task`` in ``options``)
    gres: bool = True
    #: whether the script gives ``--nodes`` (False, ``mix="gpus-walk"``: the job asks only
    #: ``--gpus=X`` in ``options`` and slurmctld picks its node count)
    nodes_given: bool = True

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def shape(self) -> str:
        """The job's shape as a report shows it: nodes x GPUs per node, then any options."""
        return " ".join((f"{self.nodes}x{self.gpus_per_node}",) + self.options)

    @property
    def times_out(self) -> bool:
        """True when the sleep outlasts the limit: Slurm kills it (TIMEOUT)."""
        return self.runtime_s >= self.limit_min * 60


#: the workload mixes ``generate`` draws: ``gpus`` asks only nodes and GPUs per node (CPUs and
#: memory from the pool's defaults); ``rich`` adds the CPU, memory and task options below;
#: ``gpus-job`` asks some multi-node jobs' GPUs for the whole job instead (``--gpus=X``, X from
#: the node count to the shape's GPUs), which select/cons_tres deals out unevenly
#: (``policy/slurm/spread_gpus.py``); ``gpus-walk`` asks some jobs' GPUs as ``--gpus=X`` with no
#: ``--nodes`` at all, so that slurmctld takes nodes until their free GPUs reach X
#: (``policy/slurm/gpu_walk.py``); ``gpus-tasks`` asks some jobs' GPUs as ``--gpus=X`` beside
#: ``--ntasks=T`` and no ``--nodes`` (the MPI script's ``-n 8 --gpus=8``); ``gpus-per-task``
#: asks some as ``--ntasks=T --gpus-per-task=G`` with no ``--nodes`` (``-n 8 --gpus-per-task=1``);
#: ``gres-tasks`` asks some ``--ntasks=T`` beside ``--gres=gpu:G`` and no ``--nodes`` (a script
#: that forgot ``--nodes``), so that slurmctld takes nodes until their CPUs hold the tasks;
#: ``gpus-uneven`` asks some ``--ntasks=T --gpus=X`` with X not a multiple of T; ``gpus-range``
#: asks some ``--nodes=A-B --gpus=X``, so that slurmctld walks A to B nodes for the GPUs;
#: ``gpus-few`` asks some ``--ntasks=T --gpus=X`` with more tasks than GPUs; ``gpus-cpg`` asks
#: some ``--gpus=X`` beside ``--cpus-per-gpu`` or ``--exclusive``; ``gpus-cpg-tasks`` asks some
#: ``--ntasks=T --gpus=X --cpus-per-gpu=C`` with no ``--nodes``; ``parts`` sends some jobs to
#: the pool's partitions with ``-p``, one or two of them in either order, each able to hold the
#: job (its nodes and MaxTime: the harness runs EnforcePartLimits=ALL)
MIXES = ("gpus", "rich", "gpus-job", "gpus-walk", "gpus-tasks", "gpus-per-task", "gres-tasks", "gpus-uneven",
         "gpus-range", "gpus-few", "gpus-cpg", "gpus-cpg-tasks", "parts")


def generate(seed: int, jobs: int, accounts: list[str], *, max_nodes: int, gpus_per_node: int,
             max_limit_min: int = 5, mean_gap_s: float = 6.0, timeout_share: float = 0.1,
             gpu_caps: dict[str, int] | None = None, mix: str = "gpus",
             partitions: list[tuple[str, int, int | None]] | None = None) -> list[DiffJob]:
    """``jobs`` jobs drawn from ``seed``: shapes from :data:`SHAPES` that fit the pool, whole-minute
    limits 1..``max_limit_min``, runtimes mostly 20 % of the limit to 15 s before it and ``timeout_share`` of
    them longer than it, exponential gaps between arrivals (whole seconds), accounts uniform.
    ``gpu_caps`` (account -> GPUs) drops shapes an account's GrpTRES could never admit: such a
    job pends forever (AssocGrpGRES) on both sides and only stalls the run.

    ``mix="rich"`` keeps every draw above (the same seed gives the same arrivals, shapes,
    limits and accounts as ``mix="gpus"``) and adds, from a second stream, the CPU, memory and
    task options of :func:`rich_options`, so that CPUs and memory bind as well as GPUs;
    ``mix="gpus-job"`` likewise keeps them and, from a third stream, asks 60 % of the multi-node
    jobs' GPUs as ``--gpus=X`` for the whole job; ``mix="gpus-walk"``, from a fourth, asks 60 %
    of the jobs of two GPUs or more ``--gpus=X`` (X from 2 to the shape's GPUs) with no
    ``--nodes`` (shown as one node of X GPUs); ``mix="gpus-tasks"``, from a fifth, asks 60 % of
    them ``--ntasks=T --gpus=X`` with no ``--nodes``: X from 2 to the shape's GPUs, T = X (one
    GPU a task) half of the time, else a divisor of X whose share X/T fits one node;
    ``mix="gpus-per-task"``, from a sixth, asks 60 % of them ``--ntasks=T --gpus-per-task=G``
    with no ``--nodes`` (G = 1 half of the time, else a divisor of X up to a node's GPUs; T = X/G);
    ``mix="gres-tasks"``, from a seventh, keeps the shape's ``--gres=gpu:G`` per node and drops
    ``--nodes`` from 60 % of the jobs, asking ``--ntasks=T`` instead: for one node 2 to 8 tasks
    of one CPU, for N nodes N tasks of 96 CPUs or 2N - 1 of 64, so that idle nodes hold the
    tasks on N nodes (shown as one node of G GPUs: the walk decides the node count);
    ``mix="gpus-uneven"``, from an eighth, asks 60 % of the jobs of three GPUs or more
    ``--ntasks=T --gpus=X`` with no ``--nodes``: X from 3 to the shape's GPUs, T from 2 to X - 1
    and no divisor of X (shown as one node of X GPUs); ``mix="gpus-range"``, from a ninth, asks
    60 % of the jobs of two GPUs or more ``--nodes=A-B --gpus=X``: X from 2 to the shape's GPUs,
    A from 1 to X (below the pool's nodes), B above A up to the pool's nodes, with B nodes
    enough for X (shown as one node of X GPUs); ``mix="gpus-few"``, from a tenth, asks 60 % of
    the GPU jobs ``--ntasks=T --gpus=X`` with more tasks than GPUs: X from 1 to the shape's GPUs
    (at most a node's), T from X + 1 to X + 8, CPUs per task 1, 4, 16 or 48 where the tasks fit
    on X + 1 idle nodes (shown as one node of X GPUs); ``mix="gpus-cpg"``, from an eleventh,
    asks 60 % of the jobs of two GPUs or more ``--gpus=X`` (X from 2 to the shape's GPUs)
    beside ``--cpus-per-gpu=C`` (C from 1 to 16) or, a quarter of them, ``--exclusive``: a
    third over the shape's fixed node count (``--cpus-per-gpu`` only, X from the node count up;
    shown as ⌈X/N⌉ GPUs a node),
    a third with ``--nodes=A-B`` as ``gpus-range`` draws it, the rest with no ``--nodes`` (both
    shown as one node of X GPUs); ``mix="gpus-cpg-tasks"``, from a twelfth, asks 60 % of the
    jobs of two GPUs or more ``--ntasks=T --gpus=X --cpus-per-gpu=C`` with no ``--nodes``: X
    from 2 to the shape's GPUs, T from 2 to X, C from 1 to 16, and a third of them
    ``--mem-per-gpu`` (shown as one node of X GPUs); ``mix="parts"``, from a thirteenth, sends
    60 % of the jobs to one or two of ``partitions`` ((name, nodes, MaxTime in minutes or None),
    the default first) with ``-p``, in a random order, each of them holding the job's nodes
    and limit; the others go to the default partition (to one that holds them where it does
    not).
    """
    if not accounts:
        raise ValueError("the differential workload needs at least one account")
    if mix not in MIXES:
        raise ValueError(f"unknown workload mix {mix!r}: expected one of {', '.join(MIXES)}")
    rng = random.Random(seed)
    rich = random.Random(seed * 1_000_003 + 17) if mix == "rich" else None
    per_job = random.Random(seed * 1_000_003 + 29) if mix == "gpus-job" else None
    walked = random.Random(seed * 1_000_003 + 41) if mix == "gpus-walk" else None
    tasked = random.Random(seed * 1_000_003 + 53) if mix == "gpus-tasks" else None
    per_task = random.Random(seed * 1_000_003 + 67) if mix == "gpus-per-task" else None
    gres_tasks = random.Random(seed * 1_000_003 + 79) if mix == "gres-tasks" else None
    uneven = random.Random(seed * 1_000_003 + 97) if mix == "gpus-uneven" else None
    ranged = random.Random(seed * 1_000_003 + 101) if mix == "gpus-range" else None
    few = random.Random(seed * 1_000_003 + 103) if mix == "gpus-few" else None
    per_gpu = random.Random(seed * 1_000_003 + 107) if mix == "gpus-cpg" else None
    cpg_tasks = random.Random(seed * 1_000_003 + 109) if mix == "gpus-cpg-tasks" else None
    parted = random.Random(seed * 1_000_003 + 113) if mix == "parts" else None
    if parted is not None and not partitions:
        raise ValueError("the parts mix needs the pool's partitions")
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
        options: tuple[str, ...] = ()
        gres = True
        given = True  # whether the script gives --nodes (else shown as one node of its GPUs)
        if rich is not None:
            options, gres = rich_options(rich, n, g)
        elif per_job is not None and n >= 2 and per_job.random() < 0.6:
            options, gres = (f"--gpus={per_job.randint(n, n * g)}",), False
        elif walked is not None and n * g >= 2 and walked.random() < 0.6:
            x = walked.randint(2, n * g)
            given, g_shown, gres, options = False, x, False, (f"--gpus={x}",)
        elif tasked is not None and n * g >= 2 and tasked.random() < 0.6:
            x = tasked.randint(2, n * g)
            tasks = x if tasked.random() < 0.5 else tasked.choice(
                [d for d in range(1, x + 1) if x % d == 0 and x // d <= gpus_per_node])
            given, g_shown, gres, options = False, x, False, (f"--ntasks={tasks}", f"--gpus={x}")
        elif per_task is not None and n * g >= 2 and per_task.random() < 0.6:
            x = per_task.randint(2, n * g)
            each = 1 if per_task.random() < 0.5 else per_task.choice(
                [d for d in range(1, min(x, gpus_per_node) + 1) if x % d == 0])
            given, g_shown, gres, options = False, x, False, (f"--ntasks={x // each}", f"--gpus-per-task={each}")
        elif gres_tasks is not None and gres_tasks.random() < 0.6:
            given, g_shown, options = False, g, _gres_tasks(gres_tasks, n)
        elif uneven is not None and n * g >= 3 and uneven.random() < 0.6:
            x = uneven.randint(3, n * g)
            tasks = uneven.choice([d for d in range(2, x) if x % d])
            given, g_shown, gres, options = False, x, False, (f"--ntasks={tasks}", f"--gpus={x}")
        elif ranged is not None and n * g >= 2 and max_nodes >= 2 and ranged.random() < 0.6:
            x = ranged.randint(2, n * g)
            least, most = _node_range(ranged, x, max_nodes, gpus_per_node)
            given, g_shown, gres, options = False, x, False, (f"--nodes={least}-{most}", f"--gpus={x}")
        elif few is not None and few.random() < 0.6:
            x = few.randint(1, min(n * g, gpus_per_node))
            tasks = few.randint(x + 1, x + 8)
            cpt = few.choice([c for c in (1, 4, 16, 48) if tasks <= min(x + 1, max_nodes) * (FEW_NODE_CPUS // c)])
            given, g_shown, gres = False, x, False
            options = (f"--ntasks={tasks}", f"--gpus={x}") + ((f"--cpus-per-task={cpt}",) if cpt > 1 else ())
        elif per_gpu is not None and n * g >= 2 and per_gpu.random() < 0.6:
            exclusive = per_gpu.random() < 0.25
            beside = ("--exclusive",) if exclusive else (f"--cpus-per-gpu={per_gpu.choice((1, 2, 4, 8, 12, 16))}",)
            form = per_gpu.randrange(3)
            if form == 0 and n >= 2 and not exclusive:  # spread over the fixed count
                x = per_gpu.randint(n, n * g)
                g, options, gres = -(-x // n), (f"--gpus={x}",) + beside, False  # shown as a script reads back
            else:
                x = per_gpu.randint(2, n * g)
                ranged_now = form == 1 and max_nodes >= 2
                least, most = _node_range(per_gpu, x, max_nodes, gpus_per_node) if ranged_now else (1, 0)
                nodes = (f"--nodes={least}-{most}",) if most else ()
                if exclusive and cap is not None and max(least, -(-x // gpus_per_node)) * gpus_per_node > cap:
                    beside = ("--cpus-per-gpu=4",)  # whole nodes the account's GrpTRES never admits
                given, g_shown, gres, options = False, x, False, nodes + (f"--gpus={x}",) + beside
        elif cpg_tasks is not None and n * g >= 2 and cpg_tasks.random() < 0.6:
            x = cpg_tasks.randint(2, n * g)
            tasks = cpg_tasks.randint(2, x)
            options = (f"--ntasks={tasks}", f"--gpus={x}", f"--cpus-per-gpu={cpg_tasks.choice((1, 2, 4, 8, 12, 16))}")
            if cpg_tasks.random() < 1 / 3:
                options += (f"--mem-per-gpu={cpg_tasks.choice((1000, 20000, 100000))}",)
            given, g_shown, gres = False, x, False
        if parted is not None:
            options = _partition_option(parted, partitions or [], n, limit)
        if given:
            out.append(DiffJob(i, f"d{i:03d}", t, n, g, limit, run, account, options, gres))
        else:  # the walk decides the node count
            out.append(DiffJob(i, f"d{i:03d}", t, 1, g_shown, limit, run, account, options, gres, False))
    return out


def _partition_option(rng: random.Random, partitions: list[tuple[str, int, int | None]], nodes: int,
                      limit_min: int) -> tuple[str, ...]:
    """``-p`` for ``mix="parts"``: one or two of the partitions that hold ``nodes`` nodes for
    ``limit_min`` minutes, in a random order (60 %), else none where the default partition
    (the first) holds the job, else one that does."""
    fit = [name for name, count, max_min in partitions if nodes <= count and (max_min is None or limit_min <= max_min)]
    if not fit:
        return ()
    if rng.random() < 0.6 or fit[0] != partitions[0][0]:
        chosen = rng.sample(fit, 2 if len(fit) >= 2 and rng.random() < 0.5 else 1)
        return (f"--partition={','.join(chosen)}",)
    return ()


def _node_range(rng: random.Random, gpus: int, max_nodes: int, gpus_per_node: int) -> tuple[int, int]:
    """The least and most nodes of ``--nodes=A-B`` for a job of ``gpus`` GPUs: A from 1 to the
    GPUs (below the pool's nodes), B above A up to the pool's nodes, with B nodes enough for
    the GPUs."""
    least = rng.randint(1, min(gpus, max_nodes - 1))
    most = rng.randint(max(least + 1, -(-gpus // gpus_per_node)), max_nodes)
    return least, most


#: the CPUs of a node ``mix="gpus-few"`` sizes its tasks for (the seed pool's)
FEW_NODE_CPUS = 128


def _gres_tasks(rng: random.Random, nodes: int) -> tuple[str, ...]:
    """``--ntasks`` (and CPUs per task) for a job of ``nodes`` nodes asking GPUs per node with
    no ``--nodes`` (``mix="gres-tasks"``): on idle 128-CPU nodes the tasks need ``nodes`` nodes."""
    if nodes == 1:
        return (f"--ntasks={rng.randint(2, 8)}",)
    if rng.random() < 0.5:
        return (f"--ntasks={nodes}", "--cpus-per-task=96")
    return (f"--ntasks={2 * nodes - 1}", "--cpus-per-task=64")


#: the smallest node the rich options always fit on alone (CPUs, MB): the seed pool's
RICH_NODE = (128, 1_000_000)


def rich_fits(pool) -> None:
    """Refuse ``mix="rich"`` on a pool with a node smaller than :data:`RICH_NODE`: its CPU and
    memory options (up to 96 CPUs per task, 700000 MB) could never run there, and sbatch's
    refusal would stop the real run partway."""
    from gpupool.errors import InputError

    small = [n.name for n in pool.nodes.values() if n.cpus < RICH_NODE[0] or n.memory_mib < RICH_NODE[1]]
    if small:
        raise InputError(pool.name, f"--mix rich needs nodes of at least {RICH_NODE[0]} CPUs and "
                         f"{RICH_NODE[1]} MB (its options go up to 96 CPUs and 700000 MB); "
                         f"smaller: {', '.join(small[:5])}{' …' if len(small) > 5 else ''}")


def rich_options(rng: random.Random, nodes: int, gpus_per_node: int) -> tuple[tuple[str, ...], bool]:
    """Options beside ``--nodes`` and the GPUs that a training pool's scripts carry, drawn for
    a job of ``nodes`` x ``gpus_per_node``: (the options, whether ``--gres`` stays).

    Each kind makes a different resource bind: CPUs per task up to most of a node, memory per
    node or per CPU, several tasks per node, tasks spread unevenly over the nodes (``--ntasks``
    above ``--nodes``, with ``--gres`` or with ``--gpus-per-task``), whole nodes
    (``--exclusive``) and CPUs per GPU. The total of GPUs stays ``nodes * gpus_per_node``
    (``--ntasks`` equals it with ``--gpus-per-task=1``), so accounts' GPU caps read the same.
    """
    kinds = ["plain", "cpus", "mem", "tasks", "mem_per_cpu", "gpus_per_task"]
    weights = [4, 3, 2, 1, 1, 1]
    if nodes >= 2:
        kinds.append("split")
        weights.append(2)
    else:
        kinds += ["exclusive", "cpus_per_gpu"]
        weights += [1, 1]
    kind = rng.choices(kinds, weights)[0]
    if kind == "cpus":
        return (f"--cpus-per-task={rng.choice((8, 24, 48, 96))}",), True
    if kind == "mem":
        return (f"--mem={rng.choice((100000, 400000, 700000))}",), True
    if kind == "tasks":
        return (f"--ntasks-per-node={rng.choice((2, 4))}", f"--cpus-per-task={rng.choice((4, 16))}"), True
    if kind == "mem_per_cpu":
        return (f"--cpus-per-task={rng.choice((4, 16))}", f"--mem-per-cpu={rng.choice((8000, 30000))}"), True
    if kind == "gpus_per_task":
        return (f"--ntasks={nodes * gpus_per_node}", "--gpus-per-task=1"), False
    if kind == "split":
        tasks = nodes + rng.randint(1, 4 * nodes)
        return (f"--ntasks={tasks}",) + ((f"--cpus-per-task={rng.choice((2, 8))}",) if rng.random() < 0.5 else ()), True
    if kind == "exclusive":
        return ("--exclusive",), True
    if kind == "cpus_per_gpu":
        return (f"--cpus-per-gpu={rng.choice((4, 12))}",), True
    return (), True


def sbatch_script(job: DiffJob, output: str) -> str:
    """The batch script of ``job``; ``output`` is sbatch's ``--output`` pattern.

    The sleep starts first and ``scontrol`` runs beside it, so the job's run time is the
    sleep alone (a client call costs seconds of fake time under a sped-up clock).
    """
    return "\n".join([
        "#!/bin/bash",
        f"#SBATCH --job-name={job.name}",
        f"#SBATCH --account={job.account}",
        *([f"#SBATCH --nodes={job.nodes}"] if job.nodes_given else []),
        *([f"#SBATCH --gres=gpu:{job.gpus_per_node}"] if job.gres else []),
        *(f"#SBATCH {opt}" for opt in job.options),
        f"#SBATCH --time={job.limit_min}",
        f"#SBATCH --output={output}",
        f"#GPUPOOL runtime={job.runtime_s}",
        f"sleep {job.runtime_s} &",
        'scontrol -d show job "$SLURM_JOB_ID"',
        "wait",
        "",
    ])
