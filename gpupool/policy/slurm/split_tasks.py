"""select/cons_tres's node choice for ``--nodes=N --ntasks=T`` (T > N, no ``--ntasks-per-node``)
and for a node range ``--nodes=A-B --ntasks=T``: the tasks are not spread evenly, each node
gets as many as it can while every later node keeps one.

Seen on a real 22.05.8 (four 16-core nodes, CR_Core_Memory; docs/differential.md finding 47):

- on idle nodes ``-N2 -n6`` ran as 5 + 1 CPUs, ``-N3 -n4`` 2 + 1 + 1, ``-N2 -n20`` 16 + 4;
  ``--mem-per-cpu`` followed the CPUs (5000 + 1000), ``--mem`` stayed per node;
- nodes are taken in index order inside the chosen run of consecutive usable nodes, but the
  last node must hold all that is left: with gpu01-02 at 2 free CPUs, ``-N2 -n6`` took
  gpu01 (2) and gpu03 (4), ``-N2 -n3`` gpu01 (2) and gpu02 (1);
- when that fails, nodes with the fewest free CPUs are dropped one at a time and the choice
  is made again: ``-N2 -n20`` there ran on gpu03-04 (16 + 4); with gpu01 at 1 free, on gpu02
  (16) and gpu04 (4), gpu03 having 3; with 1, 1, 4, 4 free, ``-N3 -n8`` dropped gpu01 alone
  and ran on gpu02-04 (1 + 4 + 3);
- a node's share is capped by its free memory where memory is per CPU: gpu01 with 1000 MB
  free took 2 tasks of ``--mem-per-cpu=500``, and 10 of ``-N4 -n20`` at DefMemPerCPU=100;
- ``--nodelist`` nodes come first; their run competes with the others and, when chosen, the
  nodes above them go next, then those below: ``-N2 -n6 -w gpu02`` ran as gpu02 5 + gpu03 1,
  ``-N2 -n20 -w gpu04`` gpu03 4 + gpu04 16, but with gpu04 the tighter run ``-N2 -n6 -w gpu01``
  as gpu01 5 + gpu04 1;
- in an LLN partition the least loaded nodes come first, in the same way: with 16, 12 and 8
  free of 16 each, ``-N2 -n20`` ran as 16 + 4 and ``-N3 -n6`` as 4 + 1 + 1 (on nodes of
  unequal sizes, the largest share of CPUs free: ``eval_nodes.least_loaded_order``);
- with ``--gpus-per-task`` the GPUs follow the tasks and cap them (``-N2 -n6
  --gpus-per-task=1`` 5 + 1 GPUs, ``-N2 -n10`` 8 + 2 on 8-GPU nodes); nodes offering the job
  fewer GPUs weigh more (``near_gpus``, finding 52): with 2 free on gpu01, ``-N2 -n6
  --gpus-per-task=1`` ran on gpu02-03, with 1 free on gpu01-02 ``-N2 -n3`` on gpu03-04
  (2 + 1); a node needs one task's GPUs, not the even share's, as was thought before (finding
  55: on four 128-CPU nodes with two threads per core, DefMemPerGPU=120000, gpu01 idle, gpu02-03
  without a free GPU and gpu04 with 2, ``-N2 -n8`` ran as 6 + 2, gpu04 keeping a core's worth).

With a node range ``--nodes=A-B`` (A < B once sbatch lowered B to the tasks; CPU tasks only;
probes p143 and p144, docs/differential.md finding 89) the walk is the same with B nodes to
take, but a node leaves a task for each node still to come up to A only (``_cpus_to_use``
counts slurmctld's min_rem_nodes), a node taken once the tasks are placed offers one task,
the last node the range allows must hold what is left, and the walk may end with A nodes or
more once the runs are used up; the tasks are then dealt out over what the nodes offer
(``deal_cyclic``). On idle nodes ``-N1-2 -n8`` ran as 7 + 1, ``-N2-3 -n8`` 6 + 1 + 1,
``-N2-4 -n40`` 16 + 15 + 8 + 1, ``-N1-2 -n20`` 16 + 4; with gpu01-02 at 2 free CPUs,
``-N1-2 -n6`` as gpu01 2 + gpu03 4; with eight free on each node ``-N1-2 -n20`` waited.
With ``--exclusive`` each node taken is whole and gives all its CPUs: on idle nodes
``-N1-2 -n8 --exclusive`` took two whole nodes, with only gpu04 idle it ran there and
``-N1-2 -n20 --exclusive`` waited.

Counted in whole tasks (a task is ``cpus_per_task`` CPUs: ``-N2 -n3 -c2`` ran as 4 + 2).
Node weights are taken lowest first, as for other multi-node requests.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from gpupool.engine.nodes import lowest_bits
from gpupool.model.workload import PodSet
from gpupool.policy.slurm.eval_nodes import pick_nodes, walk_order


def even(ps: PodSet, nodes: int | None = None) -> PodSet:
    """``ps`` with its tasks spread evenly over ``nodes`` nodes (default its count: ⌈T/N⌉ per
    node, as submitted): what the lockstep comparison adopts real starts with, not knowing
    real Slurm's CPUs per node (a node range gives the nodes real Slurm took)."""
    per_node = -(-ps.split_tasks // (nodes or ps.count))
    mem = ps.memory_mib * per_node if ps.memory_per == "task" else ps.memory_mib
    gpus = ps.gpus * per_node if ps.split_gpus else ps.gpus
    return replace(ps, cpu_m=ps.cpu_m * per_node, memory_mib=mem, gpus=gpus, split_tasks=0, split_gpus=False)


def split_nodes(ps: PodSet, pool: list[int], free, weight, required: list[int], busy: int | None = None,
                least_loaded: bool = False) -> list | None:
    """The pods of split pod set ``ps`` (one per node, each with its tasks' CPUs and memory)
    on nodes of ``pool`` (``required``: the ``--nodelist`` nodes among them, each taking a pod),
    or None when they do not fit; ``free`` is not changed. ``busy`` (bf_busy_nodes' nodes
    busy now, for a later start) and ``least_loaded`` (an LLN partition) order the nodes as
    for other jobs (``eval_nodes.walk_order``): within each weight the busy nodes
    first, or the least loaded first (``eval_nodes.least_loaded_order``; a real 22.05.8 in an LLN partition ran
    ``-N3 -n30`` on nodes with 16, 12 and 8 free CPUs as 16 + 12 + 2)."""
    if ps.exclusive:
        # (an LLN partition's order too: idle nodes, so by weight, then index; found by a review)
        return _whole_nodes(ps, pool, free, weight, required, walk_order(weight, busy, least_loaded, free))
    if ps.split_min_cpus and not free.nodes.threaded:
        return split_cpus(ps, pool, free, weight, required, walk_order(weight, busy, least_loaded, free))
    offers = _offers(ps, pool, free, required, weight, busy, least_loaded)
    if offers is None:
        return None
    tasks, order, keep = offers
    nodes, walk = _range_walk(ps)
    # (``--contiguous``: one run holds the nodes, as for any shape; a real 22.05.8 left ``-N2
    # -n20 --contiguous`` waiting with gpu02 and gpu04 of four 16-CPU nodes held; probe p163)
    got = pick_nodes(tasks, nodes, ps.split_tasks, weight, required, order, keep, contiguous=ps.contiguous, **walk)
    if got is None:
        got = retry(ps, free, tasks, weight, required, order, keep)
    if got is None:
        return None
    if ps.min_count is not None and sum(n for _i, n in got) > ps.split_tasks:
        # a node range: nodes taken once the tasks were placed offer one task each, and the
        # tasks are dealt out over what the nodes offer (``_ranged``)
        dealt = _ranged(got, ps, free.nodes)
        if dealt is None:
            return None
        got = dealt
    return _pods_of(ps, got, free)


def walk_listed(ps: PodSet, fitting: list[int], free, weight, required: list[int], busy: int | None,
                least_loaded: bool) -> list | None:
    """``-n T`` with GPUs per node beside a ``--nodelist`` (the walk form of ``gpu_walk``, no
    ``--nodes``) on the ``fitting`` nodes (where one pod fits, its free memory need included):
    sbatch's node count is the list's, so select takes the listed nodes first, each holding all
    the tasks it can but one for each listed node still to come, then more nodes while tasks
    are left, up the run of a listed node, then down, each with G free GPUs (``pick_nodes``
    with ``spill``: a real 22.05.8 ran ``-n4 --gres=gpu:1 -w gpu01`` on gpu01 alone, ``-n20 -w
    gpu02`` as 16 + 4 on gpu02-03, ``-n4 -w gpu01,gpu02`` as 3 + 1, and with gpu01 busy ``-n20
    -w gpu03`` on gpu03-04; probe p153)."""
    if len(required) > ps.count:
        return None  # more listed nodes than the job may take (MaxNodes capped it)
    offers = _offers(ps, fitting, free, required, weight, busy, least_loaded)
    if offers is None:
        return None
    tasks, order, keep = offers
    got = pick_nodes(tasks, max(len(required), ps.min_count or 1), ps.split_tasks, weight, required, order, keep,
                     spill=True, most=ps.count)
    return None if got is None else _pods_of(ps, got, free)


def _offers(ps: PodSet, pool: list[int], free, required: list[int], weight, busy: int | None,
            least_loaded: bool) -> tuple[dict[int, int], object, dict[int, int] | None] | None:
    """The tasks each node of ``pool`` holds now, the order other nodes are offered in and the
    tasks a node keeps for each later one (``pick_nodes``' ``tasks``, ``order`` and ``keep``);
    None where a required node holds none."""
    tasks = {i: n for i in pool if (n := tasks_fit(free, i, ps))}
    if any(i not in tasks for i in required):
        return None
    return tasks, walk_order(weight, busy, least_loaded, free), kept_per_node(ps, tasks, free.nodes)


def _pods_of(ps: PodSet, got: list[tuple[int, int]], free) -> list:
    """The pods of split pod set ``ps`` for ``got`` ((node, tasks)): each node's tasks' CPUs,
    their memory (per task) or the node's, and its lowest free GPUs (per task or per node)."""
    cpu_m, per_task = ps.cpu_m, ps.memory_per == "task"
    out = []
    for i, n in sorted(got):
        mask = lowest_bits(_gpus(free, i, ps), n * ps.gpus if ps.split_gpus else ps.gpus) if ps.gpus else 0
        out.append((i, mask, n * cpu_m, n * ps.memory_mib if per_task else ps.memory_mib))
    return out


def _range_walk(ps: PodSet) -> tuple[int, dict]:
    """``pick_nodes``' node count and keyword arguments for ``ps``: its count for a fixed one;
    for a node range (``--nodes=A-B``, ``min_count`` A) B nodes to take, A at least; with
    GPUs per task, whose count is the job's (slurmctld's gres_per_job starts ``_eval_nodes``
    with A nodes to take), A, more while the tasks are not placed, B at most (a real 22.05.8
    ran ``-N1-2 -n8 --gpus-per-task=1`` on one idle node, ``-N1-2 -n12 --gpus-per-task=1`` as
    8 + 4 and ``-N2-3 -n6 --gpus-per-task=1`` as 5 + 1; probe p145)."""
    if ps.min_count is None:
        return ps.count, {}
    if ps.split_gpus:
        return ps.min_count, {"spill": True, "most": ps.count}
    return ps.count, {"least": ps.min_count}


def split_cpus(ps: PodSet, pool: list[int], free, weight, required: list[int], order) -> list | None:
    """The pods of a split pod set whose CPUs per task MaxMemPerCPU raised
    (``PodSet.split_min_cpus``), counted in CPUs as cons_tres counts them: the walk of
    ``split_nodes`` over the nodes' free CPUs (those their free memory pays for), each node
    leaving a CPU for each node still to come, then the tasks dealt
    one to each node, even to a node offering fewer CPUs than a task has, and round after
    round to the nodes whose offer holds one more; a node holds its tasks' CPUs, no more than
    it offered. A real 22.05.8 at MaxMemPerCPU=4000 (16-core nodes, probe p148): ``-N2 -n6
    --mem-per-cpu=8000`` (2 CPUs a task) as 10 + 1 CPUs, ``-N2 -n3 --mem-per-cpu=9000`` (3 a
    task) 6 + 1, ``-N2-3 -n8 --mem-per-cpu=8000`` 12 + 1 + 1, ``-N1-2 -n12 --mem-per-cpu=8000``
    16 + 8. From the source (``can_job_run_on_node``, ``_cpus_to_use``): a node needs one raised
    task's CPUs free and offers whole raised tasks', and a node offers the CPUs per task as
    asked at least (pn_min_cpus: ``-N2 -n3 -c2`` raised to 4 a task gives 8 + 2). Nodes of
    several threads per core take the task walk instead (``split_nodes``)."""
    cpt = ps.cpu_m // 1000
    per_cpu = ps.memory_mib // max(1, cpt)
    cpus = {}
    for i in pool:
        c = (free.cpu[i] if free.cap is None else min(free.cpu[i], free.cap[i])) // 1000
        if c < cpt:
            continue  # (``can_job_run_on_node``: the CPUs of one raised task at least)
        n = min(c, free.mem[i] // per_cpu) if per_cpu else c
        n -= n % cpt  # whole raised tasks (memory per CPU)
        if n:
            cpus[i] = n
    if any(i not in cpus for i in required):
        return None
    nodes, walk = _range_walk(ps)
    total = ps.split_tasks * cpt
    got = pick_nodes(cpus, nodes, total, weight, required, order, floor=ps.split_min_cpus, contiguous=ps.contiguous,
                     **walk)
    if got is None:
        got = retry(ps, free, cpus, weight, required, order, total=total, floor=ps.split_min_cpus)
    if got is None:
        return None
    avail = dict(got)
    order_i = sorted(avail)
    tasks = dict.fromkeys(order_i, 1)  # a task on every node taken, whatever it offers
    left = ps.split_tasks - len(order_i)
    while left > 0:
        before = left
        for i in order_i:
            if left and avail[i] - tasks[i] * cpt >= cpt:
                tasks[i] += 1
                left -= 1
        if left == before:
            return None
    out = []
    for i in order_i:
        held = min(tasks[i] * cpt, avail[i])
        out.append((i, 0, held * 1000, held * per_cpu))
    return out


def _whole_nodes(ps: PodSet, pool: list[int], free, weight, required: list[int], order) -> list | None:
    """The whole nodes of an exclusive split pod set (``--nodes=A-B --ntasks=T --exclusive``):
    idle nodes that hold a task, each giving all its CPUs, taken as ``pick_nodes`` walks them
    until B are taken or, the runs used up, A at least whose CPUs hold the T tasks; each is
    held whole (``select.pod_fits``). A real 22.05.8 on idle 16-core nodes ran ``-N1-2 -n8
    --exclusive`` and ``-N1-2 -n20 --exclusive`` on two whole nodes, ``-N1-3 -n20 --exclusive``
    on three; with gpu01 and gpu03 busy, ``-N1-3 -n20`` on gpu02 and gpu04; with only gpu04
    idle ``-N1-2 -n8 --exclusive`` ran there and ``-N1-2 -n20`` waited (probe p144)."""
    from gpupool.policy.slurm.select import pod_fits  # (select imports this module)

    cpt = max(1, ps.cpu_m // 1000)
    pods = {i: pod for i in pool if (pod := pod_fits(free, i, ps)) is not None}
    if any(i not in pods for i in required):
        return None
    tasks = {i: pod[2] // 1000 // cpt for i, pod in pods.items()}
    got = pick_nodes(tasks, ps.count, ps.split_tasks, weight, required, order, least=ps.min_count, whole=True,
                     contiguous=ps.contiguous)
    if got is None:
        got = retry(ps, free, tasks, weight, required, order, whole=True)
    return None if got is None else [pods[i] for i, _n in sorted(got)]


def _ranged(got: list[tuple[int, int]], ps: PodSet, nodes_table) -> list[tuple[int, int]] | None:
    """(node, tasks) for a node range's walk ``got`` ((node, tasks it offers), more than the
    job's in all): the tasks dealt out as ``dist_tasks_compute_c_b`` deals them
    (``deal_cyclic``). A real 22.05.8 on idle 16-core nodes ran ``-N2-3 -n8`` as 6 + 1 + 1
    (the walk offering 7 + 1 + 1) and ``-N2-4 -n40`` as 16 + 15 + 8 + 1 (offered 16 + 16 + 8
    + 1; probe p143)."""
    cpt = max(1, ps.cpu_m // 1000)
    tasks = deal_cyclic({i: n * cpt for i, n in got}, ps.split_tasks, cpt, nodes_table)
    return None if tasks is None else [(i, n) for i, n in tasks.items() if n]


def deal_tasks(ps: PodSet, nodes: list[int], free) -> list | None:
    """The pods of split pod set ``ps`` on ``nodes``, chosen already by the GPU walk
    (``gpu_walk``) and in the order it took them, each with its tasks' CPUs and memory; None
    when the tasks do not all fit. As cons_tres takes them:

    - each node, in the order taken, may hold the tasks its free CPUs hold, but no more CPUs
      than the job's not yet given to earlier nodes, and one task at least (``_eval_nodes``'
      ``_cpus_to_use`` with ``rem_max_cpus``);
    - the tasks are then dealt out in index order (``dist_tasks_compute_c_b``): one to each
      node; then, where a node's CPUs end inside a core, one more task a spare CPU of it holds;
      then round after round each node as many tasks as a core holds (ThreadsPerCore / CPUs
      per task, one at least), each up to what it may hold.

    A real 22.05.8 on 8-GPU nodes of 128 CPUs, two threads per core, CPUs per node: idle,
    ``-n16 --gpus=16`` 16 + 2, ``-n4 --gpus=12`` 4 + 2, ``-n4 --gpus=12 -c8`` 24 + 8 (probe
    p104); with two GPUs free on each node ``-n8 --gpus=8`` 6 + 2 + 2 + 2; under load
    (``diff-slurm --mix gpus-tasks`` seed 1, job 21) ``-n10 --gpus=10`` took gpu02, which offered
    6 GPUs, before gpu01 and gpu04 and ran with 2 + 8 + 2 CPUs; with 12, 8 and 10 CPUs free on
    three nodes of one GPU each (``--mix gpus-few`` seed 1, job 20) ``-n5 --gpus=3 -c4`` ran as
    2 + 2 + 1 tasks (8 + 8 + 4 CPUs); with 4, 4, 126 and 126 CPUs free and one GPU on each
    node (probe p115) ``-n8 --gpus=4`` ran with 4 + 2 + 2 + 2 CPUs (4 + 2 + 1 + 1 tasks: the
    core rounds deal two at a time), ``-n12 --gpus=4`` with 8 free on gpu01-02 6 + 4 + 2 + 2,
    ``-n6 --gpus=4 -c2`` 4 + 4 + 2 + 2. The CPUs counted here are the tasks' (the engine
    rounds them up to whole cores); the job's environment laid its tasks out its own way
    (SLURM_TASKS_PER_NODE), which no allocation here reads."""
    cpt = ps.cpu_m // 1000
    avail = cpus_to_use([(i, tasks_fit(free, i, ps) * cpt) for i in nodes], ps.split_tasks * cpt, cpt)
    if avail is None:
        return None
    tasks = deal_cyclic(avail, ps.split_tasks, cpt, free.nodes)
    if tasks is None:
        return None  # (more tasks than the nodes hold: the walk prevents it)
    per_task = ps.memory_per == "task"
    out = []
    for i in nodes:
        n = tasks[i]
        mask = lowest_bits(_gpus(free, i, ps), ps.gpus) if ps.gpus else 0
        out.append((i, mask, n * ps.cpu_m, n * ps.memory_mib if per_task else ps.memory_mib))
    return out


def cpus_to_use(nodes: list[tuple[int, int]], rem_max: int, cpt: int, floor: int = 0) -> dict[int, int] | None:
    """cons_tres's ``_eval_nodes`` with ``_cpus_to_use`` over ``nodes`` ((node, CPUs it holds
    for the job), in the order taken): a node offering more than the job's CPUs not yet given
    to earlier nodes (``rem_max``) offers those, but one task's (``cpt``) and ``floor``
    (slurmctld's pn_min_cpus, unrounded) at least. Node -> CPUs offered; None when a node
    offers less than one task's."""
    avail = {}
    for i, cpus in nodes:
        if cpus > rem_max:
            cpus = max(rem_max, cpt, floor)
        if cpus < cpt:
            return None
        avail[i] = cpus
        rem_max -= cpus
    return avail


def deal_cyclic(avail: dict[int, int], total: int, cpt: int, nodes_table) -> dict[int, int] | None:
    """``total`` tasks of ``cpt`` CPUs dealt over the nodes of ``avail`` (node -> CPUs it
    offers) in index order as ``dist_tasks_compute_c_b`` deals them: one to each node; then,
    where a node's CPUs end inside a core, one more task a spare CPU of it holds; then round
    after round each node as many tasks as a core holds (ThreadsPerCore / CPUs per task, one
    at least), each up to what it offers. Node -> tasks; None when they do not all fit."""
    order = sorted(avail)
    vpus = {i: max(1, nodes_table.core_cpus[i] // 1000) for i in order}
    tasks = dict.fromkeys(order, 0)
    left = total

    def deal(i: int, most: int) -> None:
        nonlocal left
        for _ in range(most):
            if not left or avail[i] - tasks[i] * cpt < cpt:
                return
            tasks[i] += 1
            left -= 1

    for i in order:  # one task a node
        deal(i, 1)
    for i in order:  # the spare CPUs of the cores already taken
        deal(i, (tasks[i] * cpt % vpus[i]) // cpt)
    while left:
        before = left
        for i in order:
            deal(i, max(vpus[i] // cpt, 1))
        if left == before:
            return None
    return tasks


def kept_per_node(ps: PodSet, nodes, nodes_table) -> dict[int, int] | None:
    """Per node of ``nodes`` whose core is more than one task of ``ps``, the tasks it leaves
    for each later node: a core's worth (⌈CPUs per core / CPUs per task⌉); None when every
    node leaves one task. A real 22.05.8 with two threads per core ran ``-N2 -n6`` as 4 + 2
    CPUs, ``-N3 -n7`` as 4 + 2 + 2 and ``-N3 -n4`` as 2 + 2 + 2 (at least one task each), but
    ``-N3 -n6 -c2`` as 8 + 2 + 2 and, with one thread per core, ``-N3 -n5 -c2`` as 6 + 2 + 2;
    under CR_CPU_Memory too (``-N2 -n6`` 4 + 2 tasks, docs/differential.md, finding 49)."""
    if not nodes_table.threaded:
        return None
    cpt = max(1000, ps.cpu_m)
    core = nodes_table.core_cpus
    keep = {i: -(-core[i] // cpt) for i in nodes if core[i] > cpt}
    return keep or None


def retry(ps: PodSet, free, tasks: dict[int, int], weight, required: list[int], order,
          keep: dict[int, int] | None = None, whole: bool = False, total: int | None = None, floor: int = 1,
          walk: tuple[int, dict] | None = None, fewest: int | None = None):
    """cons_tres's second chance (``choose_nodes``): for count = 1, 2, … the nodes whose free
    resources (CPUs, plus free GPUs for a GPU job) are at most count are dropped one at a
    time in index order, never a required one and never below the job's node count, and the
    choice is made again after each round that dropped one (and after the first). With
    gpu01-04 at 1, 1, 4 and 4 free CPUs a real 22.05.8 dropped gpu01 alone and ran ``-N3
    -n8`` as gpu02 1, gpu03 4, gpu04 3. A node's resources are its free CPUs as a whole (not
    capped by its free GPUs: ``_free_resources``): on 16-core nodes at 2, 15 and 15 free CPUs
    with 8, 3 and 7 free GPUs, ``-N2 -n10 --gpus-per-task=1`` dropped gpu01 (2 + 8) and ran as
    gpu02 3 + gpu03 7 (finding 56). A node range drops nodes down to its least count.
    ``whole``, ``total`` and ``floor`` go to ``pick_nodes`` (whole nodes; the total and the
    least take in CPUs, for ``split_cpus``). ``walk`` (``pick_nodes``' node count and keyword
    arguments) and ``fewest`` (choose_nodes' min_nodes) default to the split form's
    (``_range_walk``; task pods give their own, ``select._spread_tasks``)."""
    if fewest is None:
        fewest = ps.count if ps.min_count is None else ps.min_count  # (choose_nodes' min_nodes)
    nodes, walk_args = _range_walk(ps) if walk is None else walk
    total = ps.split_tasks if total is None else total
    return second_try(ps, free, list(tasks), fewest, required, lambda kept: pick_nodes(
        {i: tasks[i] for i in kept}, nodes, total, weight, required, order, keep, whole=whole, floor=floor,
        contiguous=ps.contiguous, **walk_args))


def second_try(ps: PodSet, free, nodes: list[int], fewest: int, required, attempt):
    """``choose_nodes``' second chance for any walk: ``attempt(kept)`` over each node set of
    ``drop_rounds`` in turn; its first answer that is not None, else None."""
    for kept in drop_rounds(ps, free, nodes, fewest, required):
        got = attempt(kept)
        if got is not None:
            return got
    return None


def drop_rounds(ps: PodSet, free, nodes: list[int], fewest: int, required) -> Iterator[list[int]]:
    """The node sets ``choose_nodes`` asks ``_eval_nodes`` again with, in turn (index order):
    for count = 1, 2, … below the most free resources of a node (``_free_resources``), the
    ``nodes`` left once those with at most count are dropped, one at a time in index order,
    never a required one and never below ``fewest`` (the job's least node count); a set after
    each round that dropped one, and after the first round whatever it dropped."""
    res = {i: _free_resources(free, i, ps) for i in nodes}
    left = sorted(nodes)
    for count in range(1, max(res.values(), default=0)):
        if len(left) <= fewest:
            break
        kept: list[int] = []
        dropped = False
        for k, i in enumerate(left):
            if len(left) - (k - len(kept)) <= fewest:
                kept.extend(left[k:])
                break
            if res[i] <= count and i not in required:
                dropped = True
            else:
                kept.append(i)
        left = kept
        if dropped or count == 1:
            yield left


def _free_resources(free, i: int, ps: PodSet) -> int:
    """cons_tres's ``avail_res_cnt`` of node ``i`` for ``ps``: its free CPUs (where memory is
    per CPU, those it pays for, in whole tasks' CPUs), plus its free GPUs of the job's type, fewer
    where memory per GPU runs out first (GPU jobs only). Not modelled: the first node walk
    (``_cpus_to_use``) may already have lowered the CPUs of the nodes it took."""
    cpu = free.cpu[i]
    if free.cap is not None:
        cpu = min(cpu, free.cap[i])
    if ps.memory_per_cpu and ps.memory_per != "gpu":
        # memory per CPU (asked, or DefMemPerCPU's): the CPUs it pays for, then whole tasks'
        # CPUs (that rounding is in the same branch of 22.05.8's can_job_run_on_node; other
        # memory leaves the CPUs whole; the default's case found by a review)
        step = max(free.nodes.cpu_step[i], 1000)
        cpu = min(cpu, free.mem[i] // ps.memory_per_cpu * 1000 // step * step)
        cpu -= cpu % ((ps.cpus_per_task or 1) * 1000)  # (whole tasks of -c, not whole pods: a review)
    cpus = cpu // 1000
    if not ps.gpus:
        return cpus
    gpus = _gpus(free, i, ps).bit_count()
    if ps.mem_per_gpu:
        gpus = min(gpus, free.mem[i] // ps.mem_per_gpu)
    return cpus + gpus


def tasks_memory(n: int, ps: PodSet, step: int, per_cpu: int) -> int:
    """The memory ``n`` pods (or tasks) of ``ps`` hold on a node whose CPUs come in ``step``
    millicores: their own, and ``per_cpu`` MB for each CPU the rounding to whole cores adds."""
    return n * ps.memory_mib + (-n * ps.cpu_m % step) // 1000 * per_cpu


def _gpus(free, i: int, ps: PodSet) -> int:
    """The free GPU bits of node ``i`` a pod of ``ps`` may take (of its type, if it names one)."""
    if not ps.gpu_type:
        return free.mask[i]
    typed = free.nodes.typed_mask(i, ps.gpu_type)
    return 0 if typed is None else free.mask[i] & typed


def tasks_fit(free, i: int, ps: PodSet) -> int:
    """How many tasks of ``ps`` node ``i`` can take now (0: not one): its free CPUs (and its
    partition's MaxCPUsPerNode allowance) in whole tasks, capped by free memory where memory
    follows the tasks and by free GPUs where GPUs do; the node needs one pod's GPUs free
    and a per-node amount of memory whole."""
    if ps.gpus:
        gpus = _gpus(free, i, ps).bit_count()
        if gpus < ps.gpus:
            return 0
    cpu = free.cpu[i]
    if free.cap is not None:
        cpu = min(cpu, free.cap[i])
    n = cpu // ps.cpu_m
    if ps.split_gpus and ps.gpus:
        n = min(n, gpus // ps.gpus)
    if ps.memory_per == "task":
        if ps.memory_mib:
            n = min(n, free.mem[i] // ps.memory_mib)
            step = free.nodes.cpu_step[i]
            if ps.memory_per_cpu and step > 1000:
                # the CPUs rounded up to whole cores bring their memory too (``whole_cores``)
                while n and tasks_memory(n, ps, step, ps.memory_per_cpu) > free.mem[i]:
                    n -= 1
    elif free.mem[i] < ps.memory_mib:
        return 0
    return max(n, 0)
