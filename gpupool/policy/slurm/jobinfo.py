"""What the scheduler derives once from a workload: partitions, association, QOS, TRES request."""
from __future__ import annotations

from dataclasses import dataclass, replace

from gpupool.errors import InputError
from gpupool.formats.hostlist import expand_hostlist
from gpupool.model.slurm import Accounting, qos_name
from gpupool.model.workload import GANG_MIN


@dataclass(slots=True)
class JobReq:
    parts: tuple[str, ...]  # partitions as submitted (names, may include unknown ones)
    user: str
    account: str
    qos: str | None
    nodes: int  # min nodes
    cpus: int  # requested CPUs, whole job
    gpus: int
    mem: int  # MiB, whole job
    tres: dict[str, int]  # requested TRES for limits: cpu, mem, gres/gpu, node
    time_limit: float | None  # as submitted (seconds)
    #: the TRES the job's record shows as requested (ReqTRES; priority's TRES factors of a
    #: pending job): ``tres`` with the CPUs and memory counted at submit
    #: (``Workload.req_cpu_mem``), or ``tres`` itself where they are the same
    submit_tres: dict[str, int] | None = None

    @property
    def req_tres(self) -> dict[str, int]:
        return self.tres if self.submit_tres is None else self.submit_tres

    @property
    def assoc(self) -> tuple[str, str]:
        return (self.account, self.user)


def gpu_tres(gpu_type: str) -> str:
    """The TRES of a GPU type, ``gres/gpu:<type>``, lower-case: Slurm matches TRES names
    case-insensitively (``formats.slurm_conf.tres_name``)."""
    return "gres/gpu:" + gpu_type.lower()


def requested_partitions(wl) -> tuple[str, ...]:
    """The partitions ``-p`` names, in order (empty: the default partition)."""
    return tuple(p.strip() for p in (wl.partition or "").split(",") if p.strip())


def account_chain(acct, account: str) -> tuple[str, ...]:
    """``account`` and the accounts above it, up to the root (an unknown one: empty)."""
    out: list[str] = []
    a = account
    while acct is not None and a in acct.accounts and a not in out:
        out.append(a)
        a = acct.accounts[a].parent or ""
    return tuple(out)


def association_qos(acct: Accounting, user: str, account: str) -> tuple[tuple[str, ...], str | None]:
    """(QOS list, DefaultQOS) of ``user``'s association under ``account``, as slurmdbd fills
    them when it adds one: each is the association's own, else the nearest account's up the
    tree that sets it (``get_parent_limits``; an account without a parent hangs off root, the
    cluster line's QOS is the root account's, and a root without one has ``normal``, which
    slurmdbd gives a new cluster). Names are spelt as the dump defines the QOS: sacctmgr and
    slurmctld match them in any case."""
    ua = next((a for a in acct.user_associations if a.user == user and a.account == account), None)
    chain = account_chain(acct, account)
    if chain and chain[-1] != "root" and "root" in acct.accounts:
        chain += ("root",)
    levels = ([] if ua is None else [ua]) + [acct.accounts[a] for a in chain]
    qos = next((lv.qos for lv in levels if lv.qos), None)
    if qos is None:
        root = acct.accounts.get("root")
        qos = root.qos if root is not None and root.qos else ("normal",)
    default = next((lv.default_qos for lv in levels if lv.default_qos), None)
    return tuple(qos_name(acct.qos, q) for q in qos), None if default is None else qos_name(acct.qos, default)


def default_qos(acct: Accounting, user: str, account: str) -> str:
    """The QOS slurmctld gives a job that names none (``assoc_mgr_get_default_qos_info``): the
    association's DefaultQOS (own or inherited) where its QOS list holds it (slurmctld drops one
    it does not: "doesn't have access to it's default qos"), else the one QOS of a list of one,
    else the root association's DefaultQOS, else ``normal``."""
    qos, default = association_qos(acct, user, account)
    if default is not None and default in qos:
        return default
    if len(qos) == 1:
        return qos[0]
    root = acct.accounts.get("root")
    if root is not None and root.default_qos:
        return qos_name(acct.qos, root.default_qos)
    return "normal"


def job_req(wl, default_part: str | None, acct: Accounting | None, qos_names,
            typed_gpu_tres: frozenset[str] = frozenset(), gpu_tracked: bool = True,
            untyped_as: str | None = None, qos_enforced: bool = True) -> JobReq:
    """What ``wl`` asks, as slurmctld's limits count it. A GPU request counts for ``gres/gpu``
    where AccountingStorageTRES tracks it (``gpu_tracked``) and, naming a type it tracks
    (``typed_gpu_tres``), for ``gres/gpu:<type>`` too; an untyped request counts for
    ``gres/gpu`` only, so no typed limit holds it (``gres_ctld.c``'s ``_set_type_tres_cnt``;
    what it then runs on is charged per type, ``SlurmPolicy.alloc_tres``). Where only types
    are tracked, an untyped request counts for the first of them instead (``untyped_as``:
    slurmctld picks "some valid type to get some accounting").

    A QOS the dump does not define is the job's where AccountingStorageEnforce has ``qos``
    (``qos_enforced``; the submit check refuses it), else dropped: slurmctld then runs the job
    with no QOS (``assoc_mgr_fill_in_qos`` finds none and does not fail)."""
    parts = requested_partitions(wl)
    if not parts and default_part:
        parts = (default_part,)
    user = wl.user or "root"
    account = wl.account
    qos = wl.qos
    if acct is not None:
        u = acct.users.get(user)
        if account is None and u is not None:
            account = u.default_account
        if account is None:
            for ua in acct.user_associations:
                if ua.user == user:
                    account = ua.account
                    break
        if qos is None:
            qos = default_qos(acct, user, account or "")
            if qos not in qos_names:  # (``normal`` where the dump defines no such QOS)
                qos = None
    if qos is not None and qos_names and qos not in qos_names:
        # QOS names match in any case (``assoc_mgr_fill_in_qos``: a real 22.05.8 ran
        # ``--qos=Serving`` as serving)
        qos = qos_name(qos_names, qos)
        if qos not in qos_names and not qos_enforced:
            qos = None
    nodes = 0
    cpus = gpus = mem = 0
    typed: dict[str, int] = {}
    ranged = wl.gang == GANG_MIN
    listed = listed_count(wl) if len(wl.pod_sets) == 1 else 0
    for ps in wl.pod_sets:
        ps_nodes, ps_cpus, ps_mem, ps_gpus = request_totals(ps, ranged)
        if listed:
            ps_nodes, ps_cpus, ps_mem = raised_by_list(ps, listed, ps_nodes, ps_cpus, ps_mem)
        nodes += ps_nodes
        cpus += ps_cpus
        gpus += ps_gpus
        mem += ps_mem
        if ps.gpu_type and typed_gpu_tres:
            key = gpu_tres(ps.gpu_type)
            if key in typed_gpu_tres:
                typed[key] = typed.get(key, 0) + ps_gpus
        elif untyped_as is not None and not ps.gpu_type and ps_gpus:  # (None where gres/gpu is tracked)
            typed[untyped_as] = typed.get(untyped_as, 0) + ps_gpus
    nodes = max(1, nodes)
    tres = {"cpu": cpus, "mem": mem, "gres/gpu": gpus, "node": nodes} if gpu_tracked else \
        {"cpu": cpus, "mem": mem, "node": nodes}
    if typed:
        tres.update(typed)
    submit = None
    if wl.req_cpu_mem is not None:
        submit = {**tres, "cpu": wl.req_cpu_mem[0], "mem": wl.req_cpu_mem[1]}
    return JobReq(parts, user, account or "", qos, nodes, cpus, gpus, mem, tres, wl.time_limit, submit)


def request_totals(ps, ranged: bool) -> tuple[int, int, int, int]:
    """(nodes, CPUs, MB, GPUs) of pod set ``ps`` as slurmctld's request counts them
    (``job_set_req_tres``: min_nodes, min_cpus, memory and GPUs for those; ReqTRES and the
    limits of a pending job). ``ranged``: the job's gang rule honours node ranges.

    A node range counts its least nodes, and the pods' totals on them; beside no ``--ntasks``
    one task's CPUs (and memory per CPU for those); the tasks of a split pod set as submitted
    count as given, not as the even share's pods. A real 22.05.8 (probe p146, every node held)
    recorded pending ``-N1-3 -c2`` as cpu=2,mem=200M,node=1 (DefMemPerCPU=100), ``-N2-4 -c2``
    cpu=2,node=2, ``-N1-2 -n20`` cpu=20,node=1, ``-N2-4 -n8 --mem=100`` cpu=8,mem=200M,node=2,
    ``-N1-3 --ntasks-per-node=2`` cpu=2,node=1, ``-N3 -n8`` cpu=8 (not the even share's 9)
    and ``-N2 -c2`` cpu=4,node=2. A walked pod set counts one node's until the walk places it
    (``PodSet.counted_pods``)."""
    if not ps.one_per_node or ps.walked:
        return (ps.counted_pods if ps.one_per_node else 1), ps.cpus_total, ps.memory_total, ps.total_gpus
    if ps.per_node_tasks is not None and ps.cpus_per_task and not ps.split_tasks \
            and ps.cpu_m % (ps.per_node_tasks[2] * 1000) == 0:
        return _per_node_request(ps)
    nodes = ps.min_count if ranged and ps.min_count is not None else ps.count
    pods = ps if nodes == ps.count else replace(ps, count=nodes, min_count=None)
    cpus, mem, gpus = pods.cpus_total, pods.memory_total, pods.total_gpus
    cpt = ps.cpus_per_task
    per_cpu = ps.memory_per == "cpu" or bool(ps.memory_per_cpu)  # memory follows the CPUs
    if ps.split_tasks and cpt and not ps.split:  # as submitted: the even share's pods
        tasks = -(-ps.cpu_m // (cpt * 1000))
        cpus = ps.split_tasks * cpt
        if per_cpu:
            mem = ps.memory_mib // (tasks * cpt) * cpus
        if ps.split_gpus:
            gpus = ps.gpus // tasks * ps.split_tasks
    elif nodes != ps.count and not ps.split_tasks and cpt and ps.cpu_m == cpt * 1000:
        cpus = cpt  # a range without --ntasks: one task's
        if per_cpu:
            mem = ps.memory_mib
    if ps.exclusive and ps.gpus_per_job and not ps.split:
        # the job's X, not whole nodes' pods of the share (``sbatch._whole_nodes_share``), and
        # memory per GPU for those (``job_get_tres_mem`` without an allocation: mem_per_gres ×
        # gres_per_job; from the source)
        if ps.memory_unit is not None and ps.memory_unit[0] == "gpu":
            mem = ps.memory_unit[1] * ps.gpus_per_job
        elif ps.memory_per == "gpu" and ps.gpus:
            mem = ps.memory_mib // ps.gpus * ps.gpus_per_job
        gpus = ps.gpus_per_job
    return nodes, cpus, mem, gpus


def raised_by_list(ps, listed: int, nodes: int, cpus: int, mem: int) -> tuple[int, int, int]:
    """(nodes, CPUs, MB) of ``request_totals`` for a job whose ``--nodelist`` names ``listed``
    hosts: slurmctld raises min_nodes and min_cpus to them before it counts the request
    (22.05.8 ``_job_create``), and memory per CPU follows the CPUs. A real 22.05.8 recorded
    pending ``-N1-3 -w gpu[01-02]`` as cpu=2,mem=200M,node=2 (DefMemPerCPU=100) and ``-n3 -w
    gpu01,gpu02`` as cpu=3,node=2 (probe p157)."""
    if listed > cpus:
        if ps.memory_per == "cpu" or ps.memory_per_cpu:
            mem = mem * listed // max(1, cpus)
        cpus = listed
    if not ps.one_per_node and ps.node_memory_mib and not ps.memory_unset:
        mem = ps.node_memory_mib * max(nodes, listed)  # --mem per node, for each least node
    elif (not ps.one_per_node and ps.count == 1 and not ps.memory_unset and ps.memory_per == ""
          and not ps.memory_per_cpu and not ps.memory_whole_node and listed > nodes):
        mem = mem * listed // max(1, nodes)  # (one pod of several tasks: its --mem is a node's)
    return max(nodes, listed), cpus, mem


def _per_node_request(ps) -> tuple[int, int, int, int]:
    """``request_totals`` of ``--ntasks-per-node=K`` (``PodSet.per_node_tasks``): the least
    nodes stored (1 where the job gave none) and the tasks as stored, not the K tasks of each
    pod select will take: CPUs for the tasks, memory per CPU or per GPU for those, per node
    for those nodes, GPUs per task for the tasks (``gpus_per_job``), per node for the nodes
    (``job_set_req_tres``; probe p150: ``-n10 --ntasks-per-node=4 -c2`` cpu=20,mem=2000M,node=1
    with DefMemPerCPU=100, ``-n10 --ntasks-per-node=4 --mem=1000`` cpu=10,mem=1000M,node=1)."""
    least, tasks, pod_tasks = ps.per_node_tasks
    nodes = least or 1
    pod_cpus = ps.cpu_m // 1000
    cpus = tasks * (pod_cpus // pod_tasks)  # (CPUs per task as MaxMemPerCPU may have raised them)
    gpus = ps.gpus_per_job or ps.gpus * nodes
    if ps.memory_per == "cpu" or ps.memory_per_cpu:
        mem = ps.memory_mib * cpus // pod_cpus
    elif ps.memory_per == "gpu" and ps.gpus:
        mem = ps.memory_mib * gpus // ps.gpus
    else:
        mem = ps.memory_mib * nodes
    return nodes, cpus, mem, gpus


def given_node_counts(wl) -> tuple[int | None, int | None]:
    """(largest, least) node counts a job gave with ``--nodes``, as slurmctld holds them
    against MaxNodes and MinNodes at submit;
    (None, None) for a job that gave none. "Gave ``--nodes``" is read from the shape: one pod
    per node, not given by the policy (``PodSet.nodes_raised``, ``PodSet.walk_gpus``) nor by
    a nodelist alone (``PodSet.list_count_only``: the submit check takes the list's count as
    the least, ``submit_check.rejection``), or a
    walked ``--nodes=A-B`` (``PodSet.walk_nodes``: its A, and its B lowered to the job's GPUs,
    as sbatch's own ``gres_job_state_validate`` does before the job is sent: probe p140 under
    EnforcePartLimits=ALL took ``-N1-3 --gpus=1`` in a MaxNodes=1 partition)."""
    for ps in wl.pod_sets:
        if ps.walk_nodes is not None:
            least, most = ps.walk_nodes
            return (min(most, ps.gpus_per_job) if ps.gpus_per_job else most), least
        if ps.list_trimmed:  # the tasks as both counts (the list sbatch cut down to them)
            return (n := max(1, listed_count(wl))), n
    if not any(ps.one_per_node and not ps.nodes_raised and not ps.walk_gpus and not no_count_given(ps)
               and not ps.list_count_only for ps in wl.pod_sets):
        return None, None
    # (a range's largest count: ``job_req`` counts its least, as slurmctld's request does)
    return max(1, sum((ps.nodes_asked or ps.counted_pods) if ps.one_per_node else 1 for ps in wl.pod_sets)), \
        least_nodes(wl)


def no_count_given(ps) -> bool:
    """``--ntasks-per-node`` with no ``--nodes`` or nodelist (``PodSet.per_node_tasks``): sbatch
    sends no node count, so slurmctld tests none against MaxNodes or MinNodes (a real 22.05.8
    refused ``-p a,m -n10 --ntasks-per-node=4``, a two-node partition and a MinNodes=2 one,
    "Requested partition configuration not available now", and ``-p x -n4
    --ntasks-per-node=2`` under MaxNodes=1 "Requested node configuration is not available";
    probe p154)."""
    return ps.per_node_tasks is not None and not ps.per_node_tasks[0]


def list_above_max_nodes(wl, listed: int, max_nodes: int | None) -> bool:
    """Whether a job that holds no largest node count (no ``--nodes``: a ``--nodelist``'s
    ``listed`` hosts are its least, ``jobinfo.stored_node_counts``) names more nodes than the
    partition's MaxNodes: ``job_limits_check`` passes it (no max_nodes to test), but
    ``get_node_cnts`` then takes MaxNodes as the largest whatever the QOS flags, the counts
    conflict, and ``select_nodes`` fails with PartitionNodeLimit after the limits tested
    before it, while backfill passes over the job ("node count too high"). A real 22.05.8
    under EnforcePartLimits=NO left ``-p x -n2 -w gpu01,gpu02`` and ``-p x -w gpu01,gpu02
    --gres=gpu:1`` pending with PartitionNodeLimit on idle nodes, x of MaxNodes=1 (probe
    p157); a listed walk (``gpu_walk.walk_least``) is the same case."""
    return max_nodes is not None and listed > max_nodes and given_node_counts(wl)[0] is None


def stored_node_counts(wl, nodes: int, parts) -> tuple[int | None, int]:
    """(largest, least) node counts of a job as slurmctld stores them once it exists, which
    ``job_limits_check`` holds against each partition's MaxNodes and MinNodes
    (``_get_job_parts``): a job that gave ``--nodes`` keeps its range, its least count raised to
    the least MinNodes of its partitions where its largest reaches that (a walked range's
    largest then lowered to its GPUs, ``gres_job_state_validate``); one that gave none has
    no largest, and its count (``nodes``) is kept. Where all its partitions set MinNodes the
    job was given their least at submit (``min_nodes.raise_node_count``) and arrives here with
    that node count; one it does not raise (``min_nodes``' docstring lists which) waits
    (docs/policies/slurm.md, Known differences)."""
    most, least = given_node_counts(wl)
    if most is None:
        return None, max(nodes, listed_count(wl))
    floor = min(((p.min_nodes or 1) for p in parts), default=1)
    least = raised_least(max(least, listed_count(wl)), most, floor)
    for ps in wl.pod_sets:
        if ps.walk_nodes is not None:
            most = min(most, ps.gpus_per_job)
    return most, least


def listed_count(wl) -> int:
    """The distinct hosts of the job's ``--nodelist`` as sbatch sent it (0 without one, or
    where it does not parse: the node filter reports that). slurmctld raises the job's least
    node count to them before any partition test (22.05.8 ``_job_create``): ``-p x -n2 -w
    gpu01,gpu02`` in a MaxNodes=1 partition x of two nodes waits there with PartitionNodeLimit,
    and under EnforcePartLimits=ALL beside another partition it is refused (probe p141)."""
    if not wl.nodelist:
        return 0
    try:
        return len(set(expand_hostlist(wl.nodelist)))
    except (ValueError, InputError):
        return 0


def raised_least(least: int, most: int, min_nodes: int | None) -> int:
    """A node range's least count as slurmctld stores it: raised to ``min_nodes`` (the least
    MinNodes of the job's partitions) where its largest count reaches that (``_get_job_parts``),
    so a ``-N1-2`` job of a MinNodes=2 partition starts on two nodes or waits."""
    return min_nodes if min_nodes is not None and least < min_nodes <= most else least


def least_nodes(wl) -> int:
    """The fewest nodes ``wl`` may start on: a node range's least count (``--nodes=MIN-MAX``),
    else its node count as ``job_req`` counts it."""
    ranged = wl.gang == GANG_MIN  # a range counts only under that gang rule
    nodes = 0
    for ps in wl.pod_sets:
        if ps.one_per_node:
            nodes += ps.min_count if ranged and ps.min_count is not None else ps.count
        else:
            nodes += 1
    return max(1, nodes)


def contiguous(wl) -> bool:
    """Whether ``wl`` asks ``--contiguous`` (a pod set marked ``PodSet.contiguous``)."""
    return any(ps.contiguous for ps in wl.pod_sets)


def walks_gpus_per_node(ps) -> bool:
    """Whether ``ps`` is a walk for GPUs per node (``-n T --gres=gpu:G``, no node count): its
    GPUs on the request are G times the nodes of its last full selection
    (``SlurmPolicy.walk_gres``, which the limits test of every selection leaves behind)."""
    return ps.walked and bool(ps.gpus) and not ps.gpus_per_job
