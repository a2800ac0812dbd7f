"""Workloads and services: what users ask the pool to run.

A Workload is the input, immutable once loaded: pod sets, a gang rule, limits and the
simulated truth (its actual runtime and how it ends). The engine keeps per-run state in its
own ``Job`` records, so one workload list can be replayed under many policies.
"""
from __future__ import annotations

from dataclasses import dataclass, field

#: Gang rules: every pod must be placed before any runs ("all"), at least ``min_count``
#: ("min"), or each pod runs on its own ("none").
GANG_ALL = "all"
GANG_MIN = "min"
GANG_NONE = "none"
GANG_RULES = (GANG_ALL, GANG_MIN, GANG_NONE)

#: How a workload ends when it runs its whole runtime (TIMEOUT, PREEMPTED and NODE_FAIL
#: come from the run, not from the workload).
OUTCOMES = ("COMPLETED", "FAILED", "CANCELLED")

KIND_BATCH = "batch"
KIND_SERVICE = "service"


@dataclass(frozen=True, slots=True)
class PodSet:
    """``count`` identical pods (Slurm: nodes or tasks; Kubernetes: pods) with per-pod requests.

    Requests are canonical ints: millicores, MiB, device counts. ``one_per_node`` is Slurm's
    ``--nodes``: each pod needs a node of its own. ``exclusive`` takes whole nodes.
    """

    name: str = "main"
    count: int = 1
    cpu_m: int = 1000
    memory_mib: int = 0
    gpus: int = 0
    gpu_type: str | None = None
    extra: tuple[tuple[str, int], ...] = ()
    min_count: int | None = None
    one_per_node: bool = False
    exclusive: bool = False
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[tuple[tuple[str, str], ...], ...] = ()
    topology_required: str | None = None
    topology_preferred: str | None = None
    topology_unconstrained: bool = False
    #: Kueue TAS slices (§8): ``topology_slice_size`` pods form a slice, each slice lies in one
    #: domain of ``topology_slice_level``. None = no slices (every pod is its own slice).
    topology_slice_level: str | None = None
    topology_slice_size: int | None = None
    #: Kueue ``podset-group-name``: pod sets sharing it get one flavor and one topology domain.
    topology_group: str | None = None
    #: Slurm, a per-node GPU request (``--gres=gpu:N``/``--gpus-per-node``) with a node count:
    #: (least tasks, most tasks or 0 for no maximum, CPUs per task) on each node, as
    #: select/cons_tres counts them when it steers cores and GPUs by gres.conf ``Cores=``
    #: (policy/slurm/affinity.py). None: GPUs by lowest free index.
    slurm_tasks: tuple[int, int, int] | None = None
    #: Slurm, requests the submission left to the cluster's defaults: ``cpu_unset`` when it gave
    #: no ``--cpus-per-task``/``--cpus-per-gpu`` (DefCpuPerGPU may apply), ``memory_unset`` when
    #: it gave no ``--mem*`` (DefMemPerGPU/CPU/Node apply, else, where memory is a consumable,
    #: the whole node's memory). The Slurm policy fills them in at submit
    #: (``policy/slurm/job_defaults.py``) and clears the flags; other policies read the
    #: requests as they stand.
    cpu_unset: bool = False
    memory_unset: bool = False
    #: Slurm ``--mem=0``: all the memory of each node the job gets (filled in with the rest)
    memory_whole_node: bool = False
    #: Slurm, what ``memory_mib`` was asked per: "" a node (``--mem``; split over task pods that
    #: may share a node), "cpu" (``--mem-per-cpu`` × the pod's CPUs, so it follows CPUs filled
    #: in later), "gpu" (``--mem-per-gpu`` × its GPUs), "task" (the Slurm policy's form of a
    #: split pod set, ``split_tasks``: one task's memory, a node holding it for each of its tasks)
    memory_per: str = ""
    #: Slurm, the CPUs of one task where the submission fixes them (``--cpus-per-task``, else 1
    #: when it gives no CPU option), so a pod holding several tasks is cut in whole tasks;
    #: None: not known (the pod counts as one task)
    cpus_per_task: int | None = None
    #: Slurm, an exclusive pod whose memory is asked per CPU or per GPU (``--mem-per-cpu``,
    #: ``--mem-per-gpu``, DefMemPerCPU, DefMemPerGPU), once the policy filled it in: ("cpu" or
    #: "gpu", MB each). Such a pod holds that much for every CPU or GPU of the node it takes,
    #: not only for those it asked (a real 22.05.8: ``--exclusive -c2 --mem-per-cpu=500`` on
    #: a 16-core node, 8000M); None: ``memory_mib`` as it stands
    memory_unit: tuple[str, int] | None = None
    #: Slurm, the free memory a node needs for one pod when that is more than ``memory_mib``
    #: (0: ``memory_mib``): a GPU pod that gave its memory per node or per CPU under
    #: DefMemPerGPU needs that default × its GPUs free, though it holds only its own memory (a
    #: real 22.05.8 with DefMemPerGPU=20000 left ``--gres=gpu:1 --mem=6000`` pending on a node
    #: with 14000 MB free and ran it where 25000 were free, holding 6000M)
    memory_fit: int = 0
    #: Slurm, MB per allocated CPU where the pod's memory follows its CPUs (``--mem-per-cpu``,
    #: DefMemPerCPU), once the policy filled it in: a node where the CPUs are rounded up to
    #: whole cores holds this much more for each CPU added (a real 22.05.8 with two threads
    #: per core gave ``-n1 --mem-per-cpu=1000`` 2 CPUs and 2000M); 0: not per CPU
    memory_per_cpu: int = 0
    #: Slurm, ``--nodes=N --ntasks=T`` with no ``--ntasks-per-node`` (T > N): the job's T tasks,
    #: which select/cons_tres spreads unevenly over its N nodes (a real 22.05.8 ran ``-N2 -n6``
    #: as 5 + 1 CPUs on idle nodes). As submitted, ``cpu_m`` and ``memory_mib`` are the even
    #: share, ⌈T/N⌉ tasks (what other policies place); the Slurm policy turns the pod into one
    #: task, the least a node takes, and gives each node its tasks when it places the job
    #: (``policy/slurm/split_tasks.py``). Also ``--nodes=A-B --ntasks=T``: B pods, ``min_count``
    #: A, ⌈T/A⌉ tasks each as submitted; select takes up to B nodes and deals the tasks out
    #: (``-N1-2 -n8`` ran as 7 + 1 CPUs), with ``--exclusive`` whole nodes, with GPUs per task
    #: from A nodes up. 0: the pods are as given.
    split_tasks: int = 0
    #: Slurm, a split pod set's GPUs are per task (``--gpus-per-task``): in the split form
    #: ``gpus`` is one task's and a node's GPUs follow its tasks (a real 22.05.8 gave ``-N2 -n6
    #: --gpus-per-task=1`` 5 + 1 GPUs)
    split_gpus: bool = False
    #: Slurm, a split pod set whose CPUs per task MaxMemPerCPU raised (``--mem-per-cpu`` above
    #: it): the CPUs per task as asked, the least a node takes (slurmctld's pn_min_cpus stays
    #: there while cpus_per_task is raised; ``split_tasks.split_cpus``); 0: not raised
    split_min_cpus: int = 0
    #: Slurm, the job's GPUs where they were asked for the whole job (``--gpus``, or
    #: ``--gpus-per-task`` × ``--ntasks``), not per node: select/cons_tres counts up to that many
    #: on a node when it orders nodes by the GPUs they offer (``policy/slurm/near_gpus.py``);
    #: 0: asked per node, or no GPUs
    gpus_per_job: int = 0
    #: Slurm, MB per GPU by which select/cons_tres divides a node's free memory to cap the GPUs
    #: it counts there (``--mem-per-gpu``, else DefMemPerGPU, where memory is a consumable), once
    #: the policy filled it in; 0: no cap
    mem_per_gpu: int = 0
    #: Slurm, ``--gpus=X`` over a fixed node count of two or more (``gpus_per_job`` = X): each
    #: pod asks one GPU, the least a node takes, and select/cons_tres gives the nodes in index
    #: order as many as they have free while every later node keeps one (a real 22.05.8 ran
    #: ``-N2 --gpus=4`` as 3 + 1, ``-N3 --gpus=6`` as 4 + 1 + 1; ``policy/slurm/spread_gpus.py``).
    #: As submitted each pod holds ⌈X/N⌉ (what other policies place); the Slurm policy's form
    #: holds one GPU a pod, with memory per GPU (``memory_per`` "gpu") and CPUs per GPU
    #: (``cpus_per_task`` None) for one GPU, and counts them for the job's X (``total_gpus``,
    #: ``memory_total``, ``cpus_total``). Also set on a task pod set asking ``--gpus`` (not
    #: ``--gpus-per-task``), where it means nothing until the Slurm policy gives the job a node
    #: count (``policy/slurm/min_nodes.py``).
    spread_gpus: bool = False
    #: Slurm, a pod set the policy gave a node count at submit (a job without ``--nodes`` in
    #: partitions that all set MinNodes, ``policy/slurm/min_nodes.py``): slurmctld tested the
    #: partitions' node limits at submit before it raised the count, so the submit checks
    #: read it as having given none, and its CPUs as the tasks it was submitted with: their
    #: count (0: not raised)
    nodes_raised: int = 0
    #: Slurm, ``--gpus=X`` (X ≥ 2) with no node count (no ``--nodes``, ``--ntasks-per-node``,
    #: ``--nodelist``) and no ``--ntasks`` (or two or more): slurmctld gives the job as many nodes as its GPUs
    #: need, walking nodes until their free GPUs reach X, one task on each (a real 22.05.8 ran
    #: ``--gpus=16`` on two idle 8-GPU nodes, ``--gpus=12`` as 8 + 4; ``policy/slurm/gpu_walk.py``).
    #: As submitted the pod set is one pod of X GPUs (what other policies place); the Slurm
    #: policy's form is the ``spread_gpus`` form over a node range of 1 to X nodes
    #: (``min_count`` 1), whose node count the walk decides when the job is placed. Also set
    #: with ``--ntasks=T`` (T >= 2): as submitted T task pods of X/T GPUs (X a multiple of T;
    #: else one pod of the T tasks and the X GPUs), in the Slurm policy's form a node
    #: range of 1 to T nodes in both the spread and the split form (one task and one GPU a pod),
    #: the tasks and GPUs dealt out once the walk took the nodes.
    #: Also set with ``--ntasks=T`` (T >= 2) beside GPUs per node (``--gres=gpu:G``,
    #: ``gpus_per_job`` 0): as submitted one pod of the T tasks and G GPUs, in the Slurm policy's
    #: form a node range of 1 to T nodes in the split form (one task and G GPUs a pod), which
    #: nodes holding G free GPUs join until their CPUs hold the tasks.
    #: Also set with ``--nodes=A-B`` (A < B) beside ``--gpus=X`` and no task count: as submitted
    #: one pod of X GPUs, in the Slurm policy's form a node range of A to B nodes (``walk_nodes``).
    walk_gpus: bool = False
    #: Slurm, ``--mem`` exactly as asked for each node where the pods are task pods that share
    #: it out (⌈mem/T⌉ each): every node the Slurm policy gives them holds it whole (a real
    #: 22.05.8 ran ``-n4 --mem=1000`` on two nodes with 1000 MB on each, probe p123;
    #: ``select.task_node_memory``), and so does each node of a walk's form; 0 otherwise
    node_memory_mib: int = 0
    #: Slurm, ``--nodes=A-B`` beside ``--gpus=X`` (``walk_gpus``, A < B, A <= X): the least and
    #: most nodes the walk may take (as submitted one pod of X GPUs; a real 22.05.8 ran
    #: ``-N2-3 --gpus=8`` as 7 + 1 GPUs on idle nodes, ``-N1-3 --gpus=12`` as 8 + 4); None: 1 to X
    walk_nodes: tuple[int, int] | None = None
    #: Slurm, a node range's largest count as submitted where a QOS or association node limit
    #: lowered ``count`` (the nodes select may take): slurmctld keeps the job's max_nodes and
    #: holds it against MaxNodes and MinNodes (``jobinfo.given_node_counts``); 0: ``count``
    nodes_asked: int = 0
    #: Slurm, ``--ntasks-per-node=K`` (``count`` pods of K tasks: select gives each node it
    #: takes K tasks' CPUs, ⌈T/K⌉ nodes at least, however few tasks the last one holds; a real
    #: 22.05.8 ran ``-n10 --ntasks-per-node=4`` as 4 + 4 + 4 CPUs, probe p149): (least nodes,
    #: tasks) as slurmctld stores them and its request counts them (min_nodes: ``--nodes``' least
    #: or a nodelist's count, 0 where the job gave neither, so that it holds no node count and
    #: its partitions' MinNodes raise it, ``min_nodes.raise_node_count``; num_tasks: T, else the
    #: least nodes × K). A real 22.05.8 recorded pending ``-n6 --ntasks-per-node=4`` as
    #: cpu=6,node=1 and ``-N3 -n10 --ntasks-per-node=4`` as cpu=10,node=3 (probe p150); then
    #: each pod's tasks (K, or 1 for a job of one task: ``-n1 --ntasks-per-node=2`` ran on 1
    #: CPU, probe p155). A job whose pods hold fewer tasks than T is refused at submit
    #: (``-N2 -n10 --ntasks-per-node=4``, probe p154). None: not that request
    per_node_tasks: tuple[int, int, int] | None = None
    #: Slurm, CPUs per GPU asked with ``--cpus-per-gpu`` (not from DefCpuPerGPU): select/cons_tres
    #: gives the job no more CPUs on a node than that many for each GPU the node's free CPUs pay
    #: for (a real 22.05.8 ran ``--gpus=12 --cpus-per-gpu=4`` with 32 + 16 CPUs on idle nodes,
    #: but under DefCpuPerGPU=4 ``--gpus=12`` with 44 + 4; probes p116, p117,
    #: ``policy/slurm/spread_gpus.py``)
    cpus_per_gpu_cap: bool = False
    #: Slurm, ``--cpus-per-gpu`` as asked (0: not asked): an exclusive job needs that many CPUs
    #: for every GPU (of the type asked) of a node it takes (``select.holds_exclusive``)
    cpus_per_gpu: int = 0
    #: Slurm, ``--ntasks=T`` (T >= 2) beside ``--gpus=X`` (T <= X) and ``--cpus-per-gpu`` with no
    #: node count (``walk_gpus`` set): the T tasks, which cap the nodes the walk may take (each
    #: node holds a task), while the CPUs follow the GPUs as without them (a real 22.05.8 ran
    #: ``-n2 --gpus=12 --cpus-per-gpu=4`` as 8 + 4 GPUs with 32 + 16 CPUs, and with two GPUs
    #: free on each node left ``-n2 --gpus=5 --cpus-per-gpu=4`` waiting; probe p119). As
    #: submitted T task pods of X/T GPUs (X a multiple of T), else one pod of the X GPUs; 0:
    #: not that request
    walk_tasks: int = 0
    #: Slurm, task pods holding memory per node (``node_memory_mib``) under MaxMemPerCPU: the
    #: CPUs every node they take must give the job, whatever share of the tasks it holds
    #: (slurmctld's ``pn_min_cpus``, ⌈memory per node / MaxMemPerCPU⌉ cut to whole tasks; a
    #: real 22.05.8 at 8000 ran ``-n4 --mem=100000`` on 14 CPUs, 13 in whole cores, probe
    #: p125); 0: none
    node_min_cpus: int = 0
    #: Slurm, the same minimum as slurmctld stores it, not cut to whole tasks (⌈memory per node
    #: / MaxMemPerCPU⌉): what the CPUs of such a job over several nodes count, dealt in whole
    #: tasks (a real 22.05.8 ran ``-n40 -c2 --mem=500000`` under 8000 on two nodes of 70 free
    #: CPUs as 64 + 62, 2 × 63 CPUs dealt; probe p130, ``select._dealt_over_minimum``); 0: none
    node_min_cpus_asked: int = 0
    #: Slurm, the node's whole memory (``--mem=0``, or no memory asked where no default
    #: applies) in a partition whose nodes differ in RealMemory: only a node with none of its
    #: memory allocated takes the job, and holds all of its own (cons_common's
    #: ``_verify_node_state`` and ``_job_test``, from the source); ``memory_mib`` is then the
    #: smallest node's, a lower bound. Where the nodes are alike, ``memory_mib`` says it all
    memory_all: bool = False
    #: Slurm, one pod per node whose count came from ``--nodelist`` alone (no ``--nodes``):
    #: sbatch sends the list's count as the least node count and no largest, so slurmctld's
    #: submit tests hold no largest count against MaxNodes (a real 22.05.8 refused ``-p x
    #: --gpus=3 -t 4 -w gpu01,gpu02`` in a MaxNodes=1, MaxTime=1 partition with the time
    #: message, not the node count's; probe p141, ``jobinfo.given_node_counts``)
    list_count_only: bool = False
    #: Slurm, a ``--nodelist`` sbatch cut down to fewer ``--ntasks`` than its hosts (no
    #: ``--nodes``): sbatch then sends the tasks as both node counts, so the job holds a largest
    #: count, which MaxNodes and MinNodes test (``_opt_verify``; from the source, found by a
    #: review: ``-p x -n2 -w gpu[01-03]`` in a MaxNodes=1 partition waits with
    #: PartitionNodeLimit, unless its QOS has PartitionMaxNodes; ``jobinfo.given_node_counts``)
    list_trimmed: bool = False
    #: Slurm, ``--contiguous``: cons_tres takes the nodes from one run of consecutive usable
    #: nodes, whatever their weights, for pod-a-node shapes, task pods (exclusive ones too),
    #: split forms and GPU walks alike (``eval_nodes.pick_nodes``, ``gpu_walk.walk``,
    #: ``sbatch._contiguous``); a list of several hosts has its gaps filled at submit
    #: (``contiguous_list``)
    contiguous: bool = False
    #: Slurm, task pods (``-n T`` with no ``--nodes``): the most nodes a QOS or association
    #: node limit lets select take (slurmctld's max_nodes from ``acct_policy_get_max_nodes``,
    #: as a partition's MaxNodes caps them; a real 22.05.8 under MaxTRESPerJob=node=2 ran
    #: ``-n20`` with gpu01-02 at 8 free CPUs as gpu01 8 + gpu03 12, probe p176); None: no limit
    task_node_cap: int | None = None

    @property
    def split(self) -> bool:
        """Whether the pods are one task each with ``split_tasks`` to spread (the Slurm
        policy's form): a split pod set as submitted holds ⌈T/N⌉ > 1 tasks per pod."""
        return bool(self.split_tasks) and self.cpu_m == (self.cpus_per_task or 0) * 1000

    @property
    def spread(self) -> bool:
        """Whether the pods are in the Slurm policy's form of ``spread_gpus``: one GPU a pod, the
        job's ``gpus_per_job`` dealt out when placed (as submitted each holds ⌈X/N⌉; with X = N
        the two forms are the same)."""
        return self.spread_gpus and self.one_per_node and self.gpus == 1

    @property
    def walked(self) -> bool:
        """Whether the pods are in the Slurm policy's form of ``walk_gpus``: a node range whose
        count the GPU walk decides when the job is placed (as submitted: one pod of X GPUs)."""
        return self.walk_gpus and self.one_per_node

    @property
    def counted_pods(self) -> int:
        """The pods the totals count: in the walked form the least nodes asked until the walk
        gives the job its nodes (slurmctld's request: ``node=1``, one node's CPUs and memory;
        ``--nodes=A-B``, A nodes')."""
        return (self.min_count or 1) if self.walked else self.count

    @property
    def cpus_total(self) -> int:
        """The CPUs of all pods together: tasks × CPUs per task in the split form, else count
        × each pod's whole CPUs."""
        if self.split:
            return self.split_tasks * (self.cpus_per_task or 1)
        if self.cpus_per_task is None and self.spread:
            return self.gpus_per_job * -(-self.cpu_m // 1000)  # CPUs per GPU, for the job's GPUs
        return self.counted_pods * -(-self.cpu_m // 1000)

    @property
    def memory_total(self) -> int:
        """The memory of all pods together (in the split form, memory per task follows the
        tasks; memory per node is each node's)."""
        if self.split and self.memory_per == "task":
            return self.split_tasks * self.memory_mib
        if self.memory_per == "gpu" and self.spread:
            return self.gpus_per_job * self.memory_mib  # memory per GPU, for the job's GPUs
        if self.memory_per == "cpu" and self.cpus_per_task is None and self.spread:
            return self.gpus_per_job * self.memory_mib  # per CPU of CPUs per GPU: one GPU's a pod
        return self.counted_pods * self.memory_mib

    @property
    def memory_to_fit(self) -> int:
        """The free memory a node needs for one pod (``memory_fit`` where set, else what the
        pod holds)."""
        return self.memory_fit or self.memory_mib

    @property
    def total_gpus(self) -> int:
        if self.spread:  # the Slurm policy's form
            return self.gpus_per_job
        if self.split_gpus and self.split:
            return self.split_tasks * self.gpus
        return self.counted_pods * self.gpus  # (walked: one node's until the walk gives it nodes)

    def requests(self) -> dict[str, int]:
        """Per-pod requests as a resource map (Kubernetes names)."""
        from gpupool.model.resources import CPU, GPU, MEMORY

        out = {CPU: self.cpu_m, MEMORY: self.memory_mib}
        if self.gpus:
            out[GPU] = self.gpus
        out.update(dict(self.extra))
        return out


@dataclass(slots=True)
class Workload:
    """One job as submitted. Times are float seconds from the start of the run."""

    id: int
    name: str
    pod_sets: tuple[PodSet, ...]
    submit_time: float = 0.0
    runtime: float = 0.0
    time_limit: float | None = None
    outcome: str = "COMPLETED"
    gang: str = GANG_ALL
    checkpoint_interval: float | None = None
    kind: str = KIND_BATCH
    # Slurm side
    user: str | None = None
    account: str | None = None
    qos: str | None = None
    partition: str | None = None
    nice: int = 0
    dependency: str | None = None
    begin_time: float | None = None
    requeue: bool = True
    #: ``--oversubscribe``: the job lets others be allocated its CPUs in an OverSubscribe=YES
    #: partition (FORCE shares whatever the job asks).
    oversubscribe: bool = False
    #: A preempted instance ends (PREEMPTED) instead of going back to the queue: Kubernetes
    #: deletes an evicted plain pod, and its ReplicaSet makes a new one (a new workload).
    ends_on_eviction: bool = False
    signal: str | None = None
    array_job_id: int | None = None
    array_task_id: int | None = None
    #: ``--array=…%N``: at most N tasks of the array run at once.
    array_max_running: int | None = None
    #: The largest task index of the array's spec: slurmctld refuses the whole array at submit
    #: when it reaches MaxArraySize (None: not an array, or not known).
    array_last_task_id: int | None = None
    output: str | None = None
    #: ``--time-min``: backfill may start the job with a limit cut down to this.
    time_min: float | None = None
    #: ``--constraint`` (node features), ``--nodelist`` and ``--exclude``, as Slurm text.
    constraint: str | None = None
    nodelist: str | None = None
    exclude: str | None = None
    #: Slurm ``--licenses``: (name, count) pairs of slurm.conf ``Licenses=`` the job holds while
    #: it runs (none: ``()``).
    licenses: tuple[tuple[str, int], ...] = ()
    #: Slurm, (CPUs, MB) as the job's ReqTRES records them at submit, where that differs from
    #: the pod sets once the Slurm policy filled in the defaults: slurmctld counts the CPUs as
    #: asked (no DefCpuPerGPU) and the memory before any allocation (no DefMemPerGPU; the
    #: partition's first node's whole memory where no ``--mem*``, DefMemPerCPU or DefMemPerNode
    #: gives any). Priority's TRES factors, sacct's ReqTRES and its billing read it
    #: (``policy/slurm/job_defaults.submitted_request``). None: the pod sets' own.
    req_cpu_mem: tuple[int, int] | None = None
    # Kubernetes side
    namespace: str | None = None
    queue_name: str | None = None
    priority_class: str | None = None
    priority: int | None = None
    labels: dict[str, str] = field(default_factory=dict)
    #: Where it came from (file, file:line, trace row) for messages.
    source: str = ""

    @property
    def memory_to_fit(self) -> int:
        """The free memory a node needs for one pod (``memory_fit`` where set, else what the
        pod holds)."""
        return self.memory_fit or self.memory_mib

    @property
    def total_gpus(self) -> int:
        return sum(ps.total_gpus for ps in self.pod_sets)

    @property
    def pod_count(self) -> int:
        return sum(ps.count for ps in self.pod_sets)

    @property
    def queue(self) -> str | None:
        """The queue it waits in: a LocalQueue for Kubernetes workloads, else the partition."""
        return self.queue_name or self.partition


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """Kubernetes' CrashLoopBackOff for a replica whose container keeps dying.

    After a crash the container restarts ``initial_backoff_s`` later, doubling per consecutive
    crash up to ``max_backoff_s``; a container that ran ``reset_after_s`` without crashing
    starts the count over (kubelet: 10 s, 5 min, 10 min).
    """

    initial_backoff_s: float = 10.0
    max_backoff_s: float = 300.0
    reset_after_s: float = 600.0

    def backoff(self, consecutive_crashes: int) -> float:
        """Delay before the restart that follows the ``consecutive_crashes``-th crash in a row."""
        if consecutive_crashes <= 0:
            return 0.0
        return min(self.max_backoff_s, self.initial_backoff_s * 2.0 ** (consecutive_crashes - 1))


@dataclass(frozen=True, slots=True)
class ScalingPolicy:
    """One HPA ``behavior`` policy: change by ``value`` pods or percent per ``period_s``."""

    type: str  # "Pods" or "Percent"
    value: int
    period_s: float


@dataclass(frozen=True, slots=True)
class ScalingRules:
    """HPA ``behavior.scaleUp`` / ``scaleDown``: stabilisation window, rate policies, how to pick."""

    stabilization_s: float
    policies: tuple[ScalingPolicy, ...]
    select: str = "Max"  # Max, Min or Disabled
    tolerance: float | None = None  # per-direction tolerance (HPAConfigurableTolerance)


#: HPA defaults (autoscaling/v2): scale up by max(100 %, 4 pods) per 15 s at once; scale down
#: 100 % per 15 s after the 300 s stabilisation window.
HPA_SCALE_UP = ScalingRules(0.0, (ScalingPolicy("Percent", 100, 15.0), ScalingPolicy("Pods", 4, 15.0)), "Max")
HPA_SCALE_DOWN = ScalingRules(300.0, (ScalingPolicy("Percent", 100, 15.0),), "Max")

AUTOSCALERS = ("hpa", "kpa", "fixed", "replay")


@dataclass(frozen=True, slots=True)
class Autoscaling:
    """Which autoscaler sizes a service and its knobs (defaults are the real systems' defaults).

    The metric is requests per second per replica; its target is ``target_utilisation`` of a
    replica's capacity (HPA: a Pods/AverageValue target; KPA: RPS mode with
    ``container-concurrency-target-percentage``).
    """

    kind: str = "hpa"
    target_utilisation: float = 0.7
    # HPA
    sync_period_s: float = 15.0
    tolerance: float = 0.1
    metric_window_s: float = 60.0
    scale_up: ScalingRules = HPA_SCALE_UP
    scale_down: ScalingRules = HPA_SCALE_DOWN
    # KPA
    tick_s: float = 2.0
    stable_window_s: float = 60.0
    panic_window_pct: float = 10.0
    panic_threshold_pct: float = 200.0
    max_scale_up_rate: float = 1000.0
    max_scale_down_rate: float = 2.0
    scale_to_zero_grace_s: float = 30.0

    @property
    def period_s(self) -> float:
        """How often the autoscaler decides (fixed replicas: the HPA sync period, for restarts)."""
        return self.tick_s if self.kind == "kpa" else self.sync_period_s


@dataclass(slots=True)
class Service:
    """An indefinite, traffic-driven service: between ``min_replicas`` and ``max_replicas``
    copies of one pod, sized by an autoscaler from its traffic.

    ``capacity_rps`` is what one ready replica serves at its latency target; demand above the
    ready capacity is dropped. A replica is ready ``startup_time`` after it starts (image pull,
    model load). ``mtbf_s`` injects crashes (exponential, seeded); restarts follow ``restart``.
    ``traffic`` names a traffic source (``gpupool.fleet.traffic``).
    """

    name: str
    pod: PodSet
    replicas: int = 1
    min_replicas: int | None = None
    max_replicas: int | None = None
    start_time: float = 0.0
    end_time: float | None = None
    startup_time: float = 0.0
    namespace: str | None = None
    queue_name: str | None = None
    priority_class: str | None = None
    priority: int | None = None
    user: str | None = None
    account: str | None = None
    qos: str | None = None
    partition: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    source: str = ""
    capacity_rps: float = 1.0
    autoscaling: Autoscaling = field(default_factory=Autoscaling)
    restart: RestartPolicy = field(default_factory=RestartPolicy)
    mtbf_s: float | None = None
    traffic: str | None = None
    seed: int = 0

    @property
    def lo(self) -> int:
        """Effective minimum replicas (``replicas`` when no range is given)."""
        return self.replicas if self.min_replicas is None else self.min_replicas

    @property
    def hi(self) -> int:
        """Effective maximum replicas."""
        return max(self.lo, self.replicas if self.max_replicas is None else self.max_replicas)
