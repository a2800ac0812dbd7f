"""select/cons_tres's node count for ``--gpus=X`` given without a node or task count
(``PodSet.walk_gpus``): the job takes nodes until their free GPUs reach X, one task on each.

Seen on a real 22.05.8 (probes p101 and p102, 2026-12-04: four 8-GPU nodes of 128 CPUs, two
threads per core; ``tests/unit/test_slurm_gpu_walk.py``):

- idle nodes: ``--gpus=16`` ran on gpu01-02 with 8 + 8 GPUs, ``--gpus=12`` 8 + 4, ``--gpus=9``
  8 + 1, each node with one task (a core: 2 CPUs, ``-c4`` 4) and ``--mem`` per node
  (``--mem-per-gpu`` per GPU of each node); ``--gpus=40`` (more than the partition's 32) and
  ``-n1 --gpus=16`` were refused ("Requested node configuration is not available");
- two free GPUs on every node: ``--gpus=4`` ran as 2 + 2 on gpu01-02, ``--gpus=5`` as
  2 + 2 + 1; ``-n1 --gpus=4`` waited (Resources);
- gpu01 with 2 free, gpu03 with 3, gpu02 and gpu04 idle: ``--gpus=12`` ran as 8 + 4 on gpu02
  and gpu04 (not gpu02-03), ``--gpus=20`` as 2 + 8 + 3 + 7 on all four;
- a node with fewer free CPUs among those holding all the GPUs wins: ``--gpus=4`` on gpu02
  (64 CPUs free) before the idle ones.

The rule, read from 22.05's ``_eval_nodes`` with a job-wide GPU count: the nodes where one
task with one GPU fits form runs of consecutive indices of one weight, where a GPU job's
weight already favours nodes offering it more GPUs (``near_gpus``: at most X counted). The
best run is the first of the lowest weight, then at equal weight one whose GPUs hold what is
still needed beats one that does not, between two that do the one with fewer free CPUs, and
between two that do not the one with more. In it, while one node is still to be taken, the
node holding all the GPUs still needed with the fewest free CPUs is taken alone if there is
one; else its nodes go in index order until the GPUs are enough. A run used up without
enough leaves the nodes it gave and the choice is made again. The job's GPUs are then dealt
out over the nodes in index order as for a fixed node count (``spread_gpus``).

With ``-n T`` (T >= 2, still no ``--nodes``; probe p104, 2026-12-05, the same nodes;
``tests/unit/test_slurm_gpu_walk_tasks.py``) the walk is the same, but ``_eval_nodes``' CPUs
still needed are the tasks' (``rem_cpus``: a node taken alone, a run found sufficient and the
last node allowed must hold them too), it takes at most T nodes (slurmctld's max_nodes), and
the tasks are dealt out as cons_tres deals them: each node taken may hold what its free CPUs
hold but no more than the job's CPUs not given to earlier nodes, and the tasks go out in index
order up to that, a task each, the spare CPUs of the cores taken, then a core's worth a round
(``split_tasks.deal_tasks``): on idle nodes ``-n2 --gpus=4``
ran on gpu01 alone, ``-n2 --gpus=12`` as 8 + 4 GPUs with a task on each, ``-n16 --gpus=16`` as
8 + 8 GPUs with 16 + 2 CPUs, ``-n4 --gpus=12 -c8`` with 24 + 8 CPUs; with two GPUs free on each
node ``-n8 --gpus=8`` took all four nodes (6 + 2 + 2 + 2 CPUs) and ``-n2 --gpus=6`` waited;
``-n2 --gpus=24`` was refused at submit; under load (``diff-slurm --mix gpus-tasks`` seed 1)
``-n10 --gpus=10`` took gpu02, offering 6 GPUs, first and ran with 2 + 8 + 2 CPUs on gpu01,
gpu02 and gpu04. ``-n1`` holds the job to one node (not walked).

With GPUs per node instead (``-n T --gres=gpu:G`` or ``--gpus-per-node=G``, T >= 2, no
``--nodes``; probe p105, 2026-12-05, the same nodes; ``tests/unit/test_slurm_gpu_walk_per_node.py``)
there is no job-wide GPU count: ``_eval_nodes`` walks the nodes where G GPUs and a task fit
(its GRES filter drops the others) for the tasks' CPUs alone, at most T nodes, and each node
taken holds G GPUs and its dealt tasks (``_tasks_form``). On idle nodes ``-n8 --gres=gpu:8`` and
``-n4 --gres=gpu:2`` ran on gpu01 alone; with two CPUs free on every node ``-n4 --gres=gpu:2``
took gpu01-02 (2 + 2 GPUs), ``-n8 --gres=gpu:1`` all four nodes, ``-n3 --gres=gpu:2 -c2``
gpu01-03, and ``-n10 --gres=gpu:1`` waited (Resources); with four CPUs free on gpu01 and two on
gpu02, ``-n4 --gres=gpu:2`` took gpu01 alone (the fewest free CPUs that hold the tasks) and
``-n6 --gres=gpu:2`` gpu03; ``-n2 --gres=gpu:8`` skipped gpu01 with four GPUs held;
``-n2 --gres=gpu:16`` was refused at submit. ``--mem=1000`` held 1000 MB on each node,
``--mem-per-gpu=1000`` 2000 MB for a node's two GPUs, ``--mem-per-cpu=500`` 1000 MB for its
two CPUs; a pending job's request was ``cpu=T,node=1,gres/gpu=G``.

With ``--nodes=A-B`` (A < B) beside ``--gpus=X`` and no task count (``PodSet.walk_nodes``;
probes p108-p110, 2026-12-05, the same nodes; ``tests/unit/test_slurm_gpu_walk_range.py``) the
walk takes A to B nodes (no more than X): ``_eval_nodes`` starts with A nodes to take, finds a
run holding enough nodes where it holds those still needed less the range's spare
(``_enough_nodes`` with req_nodes the largest count), and goes on choosing runs until A nodes
are taken. Idle, ``-N2-3 --gpus=8`` ran as 7 + 1, ``-N3-4 --gpus=12`` as 8 + 3 + 1, ``-N1-3
--gpus=12`` as 8 + 4, ``-N2-4 --gpus=2`` as 1 + 1; two GPUs free on each node ``-N3-4 --gpus=4``
as 2 + 1 + 1; gpu01 with 3 free and gpu02 with 1, ``-N2-4 --gpus=3`` as 2 + 1 on gpu01 and
gpu03 (a run of one node suffices to start from) and ``-N3-4 --gpus=10`` as 3 + 6 + 1 on gpu01,
gpu03 and gpu04 (the runs walked on past the first); in a MinNodes=2 partition ``-N1-3
--gpus=2`` ran as 1 + 1.

``--contiguous`` beside any of these walks (probe p167, 2026-12-07, four 16-core 8-GPU nodes;
``tests/unit/test_slurm_contiguous_walks.py``) takes one run of consecutive fitting nodes,
whatever their weights (``walk``): idle, ``--gpus=12 --contiguous`` ran as 8 + 4 on gpu01-02; with
gpu01 and gpu03 at 2 and 3 free GPUs as 2 + 8 + 2 on gpu01-03; with gpu02 and gpu04 held it waited.

The node limits of the job's QOS and associations (MaxTRESPerJob, MaxTRESPerUser,
MaxTRESPerAccount and GrpTRES ``node=``, their values, not what is left of them) cap the nodes
the walk may take (``acct_policy_get_max_nodes``: ``limits.max_nodes``,
``SlurmPolicy._walk_node_cap``; probe p103 with MaxTRESPerJob=node=1 refused ``--gpus=16`` at
submit and kept ``--gpus=4`` waiting where no node had four free).

A walked job's TRES limits are tested again on the nodes the walk gave it
(``..._post_select``: ``Cycle.placed_limit``, docs/differential.md finding 65), and before the
job preempts anyone (``preempt.try_preempt``: over them it preempts nobody); under
assoc_limit_stop a backfill start failing that test is planned later, as any start a limit fails
there (docs/differential.md finding 82). Not modelled: ``-n T`` with GPUs per node in MinNodes partitions (not raised: one node, waiting); a job listing partitions whose
QOS cap it differently gets the largest cap in each; bf_busy_nodes' and least-loaded partitions' orders (``_eval_nodes_busy``,
``_eval_nodes_lln``) — there the walk takes the nodes in the order that walk offers them,
adding each until the GPUs are enough, without the single-node best fit (read from the
source, not probed); ``--exclusive`` beside ``--ntasks`` (walked by ``select._exclusive_gpu_tasks``
instead, whole nodes for the job's GPUs), ``--cpus-per-gpu`` beside a
``--nodelist`` or more tasks than GPUs, ``--cpus-per-gpu`` with memory per CPU, and ``-n1`` keep the
job's shape as submitted
(``sbatch._walks_gpus``), and so do ``-n T`` jobs whose defaults
change their CPUs (DefCpuPerGPU) or that sit in MinNodes partitions (not probed); a job given
a node count at submit by MinNodes (``min_nodes``) keeps that count; ``-n T --gpus=X`` with X
not a multiple of T (T < X) is one pod of the T tasks and X GPUs as submitted (the reader's task
pods would not be identical) and walked the same way: a real 22.05.8 ran ``-n3 --gpus=16`` as
8 + 8 GPUs with 2 + 2 CPUs and ``-n8 --gpus=9`` as 8 + 1 with 8 + 2 (p104), and p107 six more
(``-n3 --gpus=5`` as 2 + 2 + 1 with two GPUs free on each node, ``-n3 --gpus=8`` waiting
there). More tasks than GPUs (T > X, X = 1 too) is that one pod as well, and the walk may then
take up to T nodes, more than X, the first of them getting no GPU (``spread_gpus``; probe
p112: ``-n8 --gpus=3`` on one idle node, and as 0 + 1 + 1 + 1 on four nodes of two free CPUs;
``-n300 --gpus=2`` as 0 + 1 + 1 on three idle nodes). A node range beside ``--ntasks`` is
still refused by the reader; beside a ``--nodelist`` the listed nodes come first (``walk``,
probe p158).

Beside ``--cpus-per-gpu=C`` or ``--exclusive`` (no ``--ntasks``; probe p116, 2026-12-05, the
same nodes; ``tests/unit/test_slurm_gpu_walk_cpg_exclusive.py``) the walk is the same. With
``--cpus-per-gpu`` a node offers the GPUs its free CPUs pay for at C each (``spread_gpus.
gpus_paid``), and ``spread_gpus.spread`` deals the GPUs as ever and the job's C × X CPUs from
its total: idle, ``--gpus=12 --cpus-per-gpu=4`` ran as 8 + 4 GPUs with 32 + 16 CPUs and
``--gpus=16 --cpus-per-gpu=20`` on three nodes as 8 + 7 + 1 with 120 + 120 + 80; gpu01 with 8
CPUs free, ``--gpus=4 --cpus-per-gpu=4`` on gpu02 alone. The CPUs go out in the order the walk
took the nodes (``select._walk_gpus`` keeps it; ``diff-slurm --mix gpus-cpg`` seed 1:
``--gpus=4 --cpus-per-gpu=4`` took gpu03, 3 GPUs free, before gpu01 and ran with 12 + 4 CPUs).
With ``--exclusive`` the fitting nodes are the idle ones, each offering its free GPUs (as many
as its free memory pays for at memory per GPU), and each node taken is held whole with every
GPU: ``--gpus=12 --exclusive`` held two nodes and 16 GPUs, ``--gpus=3 --exclusive`` one node;
with two GPUs free on each node ``--gpus=4 --exclusive`` waited. ``-N1-3`` beside either ran
the same. Pending, both recorded cpu=1,node=1 and the X GPUs (probe p117).

``-n T`` (2 <= T <= X) beside ``--gpus=X --cpus-per-gpu=C`` (``PodSet.walk_tasks``; probes p119
and p120, 2026-12-05, the same nodes; ``tests/unit/test_slurm_gpu_walk_cpg_tasks.py``) walks as
without the tasks, CPUs following the GPUs, but takes no more than T nodes (each holds a task):
idle, ``-n2`` and ``-n4`` beside ``--gpus=12 --cpus-per-gpu=4`` ran as 8 + 4 GPUs with 32 + 16
CPUs, ``-n3 --gpus=12 --cpus-per-gpu=16`` with 128 + 64, ``-n4 --gpus=4 --cpus-per-gpu=8`` on
gpu01 alone; with two GPUs free on each node ``-n8 --gpus=8 --cpus-per-gpu=4`` took all four
nodes and ``-n4 --gpus=6`` three, while ``-n2 --gpus=5 --cpus-per-gpu=4`` waited (Resources);
pending, such a job recorded a CPU a task (``-n4``: cpu=4) and one node's memory. As submitted
(other policies) it is T task pods of X/T GPUs, or one pod of the X GPUs where X is not a
multiple of T (``_cpg_tasks_form`` takes both back to the one pod). ``-n T --exclusive`` beside
``--gpus`` stays task pods, which on idle nodes took the whole nodes a real 22.05.8 gave
(``-n2 --gpus=4 --exclusive`` gpu01, ``-n4 --gpus=12 --exclusive`` gpu01-02; p119), memory per
node split over the pods. More tasks than GPUs beside ``--cpus-per-gpu`` stays refused by the
reader; the real system ran some on one node or two and refused others at submit (probes p120,
p121): idle, ``-n8 --gpus=2`` beside ``--cpus-per-gpu=4`` or ``=2`` on gpu01 with 2 GPUs and 8
CPUs (more than the 4 CPUs per GPU give), ``-n6 --gpus=4 --cpus-per-gpu=4`` with 16; with two
GPUs free on each node ``-n6 --gpus=4 --cpus-per-gpu=4`` on gpu01-02 (8 + 8 CPUs) and ``-n3
--gpus=2 --cpus-per-gpu=8`` on gpu01 (16); ``-n300 --gpus=2 --cpus-per-gpu=4`` and, with
gpu01's CPUs held, ``-n12 --gpus=4 --cpus-per-gpu=1`` refused ("Requested node configuration
is not available", where ``-n300 --gpus=2`` alone runs on three nodes). The rule was not
found: as if a node gave the tasks no more than its GPUs' CPUs counted in whole cores (twice
C per GPU on these nodes of two threads a core) and took none without a GPU.
"""
from __future__ import annotations

from dataclasses import replace

from gpupool.model.workload import GANG_MIN, Workload
from gpupool.policy.slurm import jobinfo
from gpupool.policy.slurm.eval_nodes import beats, consec_runs
from gpupool.policy.slurm.min_nodes import per_node_pods, pod_tasks


def walk_form(wl: Workload) -> Workload:
    """``wl`` in the Slurm policy's form where it asks ``--gpus`` without a node count
    (``PodSet.walk_gpus``), else ``wl``: one pod of X GPUs as ``--nodes=1-X`` of one GPU a node
    would give it (``min_nodes.per_node_pods``); T task pods (``-n T``) as a node range of 1 to
    T nodes (no more than X: each takes a GPU) of one task and one GPU each, the T tasks to be
    dealt out over the nodes the walk takes (``PodSet.split_tasks``; ``job_defaults`` fills
    in the pods' defaults before it marks them split), and so one pod of T tasks and X GPUs
    (``-n T --gpus=X`` with X not a multiple of T); one pod of T tasks and G GPUs per
    node (``-n T --gres=gpu:G``) as ``_tasks_form`` gives it; ``--nodes=A-B --gpus=X``
    (``PodSet.walk_nodes``) as a node range of A to B nodes (no more than X) of one GPU each."""
    if len(wl.pod_sets) != 1:
        return wl
    ps = wl.pod_sets[0]
    if ps.walk_gpus and not ps.one_per_node and ps.count == 1 and not ps.gpus_per_job:
        return _tasks_form(wl, ps)
    if not ps.walk_gpus or ps.one_per_node or not ps.gpus_per_job:
        return wl
    if ps.walk_tasks:
        return _cpg_tasks_form(wl, ps)
    cpt = ps.cpus_per_task
    if ps.count == 1:
        tasks = pod_tasks(ps)
        if tasks > 1:  # ``-n T --gpus=X``, X not a multiple of T: one pod of the T tasks as submitted
            if ps.exclusive:
                return wl
            if ps.memory_per == "gpu":
                memory = ps.memory_mib // ps.gpus  # per GPU: for the pod's one GPU
            elif ps.memory_per == "":
                memory = ps.memory_mib  # --mem, per node
            else:
                memory = ps.memory_mib // tasks  # per CPU: one task's
            return _split_walk_form(wl, ps, tasks, cpt, memory, walk_least(wl))
        # (``per_node_pods`` spreads ``--cpus-per-gpu`` as over a fixed count: the GPUs dealt out
        # as without it, the job's CPUs from its total, ``spread_gpus._cpus_dealt``; probe p116:
        # ``--gpus=12 --cpus-per-gpu=4`` ran as 8 + 4 GPUs with 32 + 16 CPUs)
        nodes = per_node_pods(ps, ps.gpus_per_job)
        if nodes is not None and ps.exclusive:
            # idle nodes are walked until their GPUs reach X, and each is held whole, every GPU
            # with it (``--gpus=12 --exclusive`` held two nodes and 16 GPUs, ``--gpus=3
            # --exclusive`` one node and 8)
            nodes = replace(nodes, spread_gpus=True)
        if nodes is None or not nodes.spread:
            return wl
        # (a --nodelist's hosts are the least: its nodes come first, ``walk``)
        least, most = ps.walk_nodes or (min(walk_least(wl), nodes.count), nodes.count)
        return replace(wl, pod_sets=(replace(nodes, count=min(most, nodes.count), min_count=least),), gang=GANG_MIN)
    if cpt is None or ps.exclusive or ps.gpus_per_job % ps.count:
        return wl
    if ps.memory_per == "gpu":
        memory = ps.memory_mib // ps.gpus  # per GPU: for the pod's one GPU
    elif ps.memory_per == "":
        memory = _node_memory(ps)
    else:
        memory = ps.memory_mib  # per CPU: one task's, as each pod is
    return _split_walk_form(wl, ps, ps.count, cpt, memory, walk_least(wl))


def _cpg_tasks_form(wl: Workload, ps) -> Workload:
    """``-n T --gpus=X --cpus-per-gpu=C`` (``PodSet.walk_tasks``) in the walk's form: that of
    ``--gpus=X --cpus-per-gpu=C`` (the X GPUs and their C × X CPUs spread over a node range,
    ``min_nodes.per_node_pods``) over at most T nodes. As submitted with X a multiple of T the
    job is T task pods of X/T GPUs, taken back here as the one pod of X GPUs (memory per node
    whole, per GPU for the X). A real 22.05.8 (probe p119, 2026-12-05, the seed pool's four
    nodes) ran ``-n2`` and ``-n4`` beside ``--gpus=12 --cpus-per-gpu=4`` as 8 + 4 GPUs with
    32 + 16 CPUs, ``-n3 --gpus=12 --cpus-per-gpu=16`` with 128 + 64, and with two GPUs free on
    each node ``-n8 --gpus=8 --cpus-per-gpu=4`` on all four nodes while ``-n2 --gpus=5
    --cpus-per-gpu=4`` waited (two nodes hold four)."""
    tasks = ps.walk_tasks
    if ps.count > 1:
        memory = _node_memory(ps) if ps.memory_per == "" else ps.memory_mib * ps.count
        ps = replace(ps, count=1, gpus=ps.gpus_per_job, cpu_m=ps.cpu_m * ps.count, memory_mib=memory,
                     node_memory_mib=0)
    nodes = per_node_pods(ps, ps.gpus_per_job)
    if nodes is None or not nodes.spread:
        return wl
    return replace(wl, pod_sets=(replace(nodes, count=min(tasks, nodes.count), min_count=1),), gang=GANG_MIN)


def _node_memory(ps) -> int:
    """Task pods' ``--mem`` (per node) whole: the task pods shared it out (rounded up), the
    reader kept it whole (``PodSet.node_memory_mib``; their sum where it did not)."""
    return ps.node_memory_mib or ps.memory_mib * ps.count


def _split_walk_form(wl: Workload, ps, tasks: int, cpt: int, memory: int, least: int = 1) -> Workload:
    """The walk's form of ``-n T --gpus=X``: a node range of 1 to T nodes of one task of ``cpt``
    CPUs and one GPU each (``memory`` a pod), the T tasks dealt out over the nodes the walk
    takes (``PodSet.split_tasks``). With more tasks than GPUs the walk may take more nodes than
    GPUs, and the first nodes then get none (``spread_gpus.spread``: a real 22.05.8 ran ``-n300
    --gpus=2`` on three idle nodes, 0 + 1 + 1 GPUs, probe p112). ``least``: a nodelist's hosts
    (a real 22.05.8 ran ``-n2 --gpus=12 -w gpu01`` as 8 + 4 with a task on each, probe p159)."""
    form = replace(ps, count=tasks, min_count=min(least, tasks), one_per_node=True, gpus=1,
                   cpu_m=cpt * 1000, memory_mib=memory, split_tasks=tasks, split_gpus=False, slurm_tasks=None)
    return replace(wl, pod_sets=(form,), gang=GANG_MIN)


def walk_least(wl: Workload) -> int:
    """The least node count a walk of ``wl`` starts from: its ``--nodelist``'s hosts
    (``jobinfo.listed_count``, the least node count sbatch then sends), 1 without one."""
    return max(1, jobinfo.listed_count(wl))


def tasks_walk(ps) -> bool:
    """Whether ``ps`` is in ``_tasks_form``'s walk form (``-n T`` with GPUs per node: the split
    form, no job-wide GPU count), whose least count is a ``--nodelist``'s (``walk_least``)."""
    return ps.walked and bool(ps.split_tasks) and not ps.gpus_per_job and ps.walk_nodes is None


def _tasks_form(wl: Workload, ps) -> Workload:
    """``-n T`` with GPUs per node (``sbatch._walks_tasks``: as submitted one pod of the T tasks
    and the G GPUs) in the Slurm policy's form: a node range of 1 to T nodes of one task and G
    GPUs each (a ``--nodelist``'s count of them at least: ``split_tasks.walk_listed``), the tasks
    dealt out over the nodes the walk takes (``PodSet.split_tasks``), with memory per node as
    asked (``--mem``, ``--mem-per-gpu`` for the node's G GPUs) or one task's (``--mem-per-cpu``)."""
    tasks = pod_tasks(ps)
    if tasks < 2:
        return wl
    memory = ps.memory_mib // tasks if ps.memory_per == "cpu" else ps.memory_mib
    form = replace(ps, count=tasks, min_count=min(walk_least(wl), tasks), one_per_node=True,
                   cpu_m=ps.cpus_per_task * 1000, memory_mib=memory, split_tasks=tasks, split_gpus=False,
                   slurm_tasks=None)
    return replace(wl, pod_sets=(form,), gang=GANG_MIN)


def walk(ps, fitting: list[int], offer: dict[int, int], cpus: dict[int, int], weight,
         need_cpus: int = 0, required: tuple[int, ...] = ()) -> list[int] | None:
    """The nodes cons_tres gives walked pod set ``ps``, in the order it takes them, from the
    ``fitting`` ones (where one pod fits, in index order), each offering ``offer[i]`` GPUs with
    ``cpus[i]`` CPUs free, at most ``ps.count`` of them; None when their GPUs fall short of
    ``ps.gpus_per_job`` or their CPUs of ``need_cpus`` (the job's tasks' CPUs: ``_eval_nodes``'
    ``rem_cpus``, which a node alone, a run that suffices and the last node allowed must hold
    too). The ``required`` nodes (``--nodelist``, each fitting) come first, all of them; then
    runs as ``eval_nodes.consec_runs`` builds them, a run marked by a required node preferred
    and walked from it upwards, then downwards (a real 22.05.8 ran ``-N1-3 --gpus=12 -w gpu03``
    as 8 + 4 on gpu03-04 and ``-N1-2 --gpus=12 -w gpu04`` on gpu03-04; with three GPUs free on
    gpu02, whose weight then differs, ``-N1-3 --gpus=8 -w gpu02`` took gpu01, and ``--gpus=12``
    gpu03-04; probe p158).

    ``--contiguous`` (``ps.contiguous``): runs end only at nodes that do not fit, each weighing
    what its last node weighs (``eval_nodes.consec_runs``); beside required nodes only the
    run holding them counts, and they must lie in one; a run that holds what is left replaces
    the best so far where that one does not, and the walk ends, taking nothing more, where the
    best run does not hold what is left (``_eval_nodes``). So one run gives all the nodes: a
    real 22.05.8 ran ``--gpus=12 --contiguous`` with gpu01 and gpu03 at 2 and 3 free GPUs as
    2 + 8 + 2 on gpu01-03 (``--gpus=12`` went to gpu02 and gpu04, whose GPUs weigh them
    lighter), and left it waiting with gpu02 and gpu04 held (probe p167)."""
    need = ps.gpus_per_job
    most = ps.count
    taken: list[int] = []
    least = nodes_left = ps.min_count or 1
    for i in required:
        if i not in offer:
            return None
        taken.append(i)
        need -= offer[i]
        need_cpus -= cpus[i]
        nodes_left -= 1
        most -= 1
    if most < 0:
        return None
    contiguous = ps.contiguous
    runs = consec_runs(fitting, weight, set(required), contiguous)
    # a run has nodes enough where it holds the nodes still needed less the range's spare
    # (``_enough_nodes`` with req_nodes the most nodes: a ``--nodes=A-B`` walk's first node may
    # come from a run of one; probe p110, ``-N2-4 --gpus=3`` on gpu01 and gpu03)
    spare = max(0, ps.count - least)
    while runs and most > 0 and (need > 0 or need_cpus > 0 or nodes_left > 0):
        best = None
        best_key: tuple = ()
        best_anchored = False
        for k, (run, anchor, w) in enumerate(runs):
            if contiguous and required and anchor is None:
                continue  # (not the run of the required nodes)
            run_cpus = sum(cpus[i] for i in run)
            key = (w, sum(offer[i] for i in run) >= need and len(run) >= nodes_left - spare
                   and run_cpus >= need_cpus, run_cpus)
            if best is None or (anchor is not None and not best_anchored) or beats(*key, *best_key) \
                    or (contiguous and key[1] and not best_key[1]):
                best, best_key, best_anchored = k, key, anchor is not None
        if contiguous and (best is None or not best_key[1]
                           or (required and sum(anchor is not None for _run, anchor, _w in runs) > 1)):
            return None  # no run holds what is left, or the required nodes lie in several
        run, anchor, _w = runs.pop(best)
        if anchor is not None:
            # from the required node up, then down (no node is passed over for its CPUs)
            for i in [i for i in run if i > anchor] + [i for i in run if i < anchor][::-1]:
                if most == 0 or (nodes_left <= 0 and need <= 0 and need_cpus <= 0):
                    break
                taken.append(i)
                need -= offer[i]
                need_cpus -= cpus[i]
                nodes_left -= 1
                most -= 1
            continue
        if nodes_left <= 1:
            alone = [i for i in run if offer[i] >= need and cpus[i] >= need_cpus]
            if alone:
                run = [min(alone, key=lambda i: (cpus[i], i))]
        for i in run:
            if most == 0 or (nodes_left <= 0 and need <= 0 and need_cpus <= 0):
                break
            if most == 1 and cpus[i] < need_cpus:
                continue  # the last node the job may take must hold the CPUs still needed
            taken.append(i)
            need -= offer[i]
            need_cpus -= cpus[i]
            nodes_left -= 1
            most -= 1
    if need > 0 or need_cpus > 0 or nodes_left > 0:
        return None
    return taken


def walk_ordered(ps, order: list[int], offer: dict[int, int], cpus: dict[int, int],
                 need_cpus: int = 0, required: tuple[int, ...] = ()) -> list[int] | None:
    """The nodes a walk taking the fitting nodes in ``order`` (bf_busy_nodes' or a
    least-loaded partition's) gives ``ps``, in that order: each in turn until their GPUs (and
    CPUs) are enough, the ``required`` ones first (read from the source, not probed)."""
    need = ps.gpus_per_job
    least = ps.min_count or 1
    if any(i not in offer for i in required) or len(required) > ps.count:
        return None
    taken = list(required)
    for i in required:
        need -= offer[i]
        need_cpus -= cpus[i]
    for i in order:
        if i in required:
            continue
        if (need <= 0 and need_cpus <= 0 and len(taken) >= least) or len(taken) == ps.count:
            break
        taken.append(i)
        need -= offer[i]
        need_cpus -= cpus[i]
    return taken if need <= 0 and need_cpus <= 0 and len(taken) >= least else None
