"""Submit-time rejection: the checks slurmctld makes before it hands out a job id.

A job that names an unknown partition or QOS, an account the user has no association with
(``AccountingStorageEnforce=associations``), a shape no allowed partition can ever hold, or a
time limit over MaxTime under ``EnforcePartLimits`` is refused by sbatch with
"Batch job submission failed: <message>" and never gets an id. The rules live here once:
``SlurmPolicy`` applies them to every pending job (a simulated submission the policy rejects
ends REJECTED), and the live daemon asks :func:`submit_rejection` before accepting a script,
so it refuses exactly what the policy would reject.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from gpupool.engine.nodes import NodeTable
from gpupool.model.pool import Pool
from gpupool.model.slurm import Partition, SlurmConfig
from gpupool.model.workload import Workload
from gpupool.policy.slurm import contiguous_list, job_defaults, limits, part_submit
from gpupool.policy.slurm.config import (
    PartInfo,
    Settings,
    load_settings,
    partition_infos,
)
from gpupool.policy.slurm.jobinfo import (JobReq, account_chain, association_qos, given_node_counts, job_req,
                                          no_count_given, stored_node_counts)
from gpupool.policy.slurm.min_nodes import MSG_GRES, fewer_gpus_than_nodes
from gpupool.policy.slurm.node_filter import MSG_BAD_NODE, MSG_NOT_IN_PARTITION, job_nodes, limits_key
from gpupool.policy.slurm.select import empty_state, place
from gpupool.policy.slurm.node_space import bits
from gpupool.policy.slurm.submit_select import NODE_CONFIG, NOT_AVAIL, OK, PART_CONFIG, PartTest, outcome, walk


def slurm_config(pool: Pool) -> SlurmConfig:
    """The pool's slurm.conf, or (a pool without one) one default partition over every node
    under EnforcePartLimits=ALL: gpupool's choice where nobody wrote a slurm.conf, so that a
    job no node can ever hold is refused at submit, as the real-Slurm harness runs
    (slurmctld's own default, NO, leaves a job asking more nodes than the partition has
    pending for ever: probe p137)."""
    if pool.slurm is not None:
        return pool.slurm
    return SlurmConfig(partitions={"all": Partition("all", tuple(pool.nodes), default=True)},
                       params={"EnforcePartLimits": "ALL"}, raw={"EnforcePartLimits": "ALL"})


def array_refusal(wl: Workload, cfg: SlurmConfig) -> str | None:
    """"Invalid job array specification" where the array's spec reaches MaxArraySize: indices
    run to MaxArraySize - 1 (0 disables arrays), and every task carries the spec's largest
    index, so the whole array is refused. slurmctld tests it first of all
    (``validate_job_create_req``), before it looks at the partitions."""
    last = wl.array_last_task_id
    if last is None:
        return None
    size = cfg.params.get("MaxArraySize")
    if last >= (limits.DEFAULT_MAX_ARRAY_SIZE if size is None else int(size)):  # type: ignore[call-overload]
        return limits.MSG_ARRAY
    return None


def rejection(req: JobReq, wl: Workload, parts: dict[str, PartInfo], nodes: NodeTable, cfg: SlurmConfig,
              s: Settings, fit_memo: dict | None = None,
              stored_time: Callable[[PartInfo], float | None] | None = None,
              listed: bool | None = None, unavailable: list[str] | None = None,
              asked_memory: int = 0) -> str | None:
    """Slurm's message if a job asking ``req`` (derived from ``wl``) is refused at submit, else None.

    ``fit_memo`` caches whether a shape fits an empty partition (the policy keeps one per run);
    ``stored_time`` gives the limit slurmctld stores for a job without ``--time``
    (``SlurmPolicy.time_limit``; without it, the partition's DefaultTime); ``listed``: the job
    was submitted with a list of partitions (slurmctld keeps the list's path where the submit
    rules leave one partition of it); None: read from ``req``. ``unavailable``: where the job is
    accepted and select answered ESLURM_NODE_NOT_AVAIL in a partition (``submit_select.walk``),
    that partition's name is appended (the job's first reason is ReqNodeNotAvail there).
    ``asked_memory``: the memory the job asked as submitted that slurmctld holds against each
    node's RealMemory (``asked_node_memory``), before slurm.conf's defaults filled anything in."""
    acct = cfg.accounting
    if array_refusal(wl, cfg) is not None:
        return limits.MSG_ARRAY
    if wl.licenses:
        # a license the cluster lacks, or more of one than it has (a real 22.05.8 refused
        # -L lic:3 under Licenses=lic:2, and -L other:1)
        have = cfg.params.get("Licenses") or {}
        if any(not 0 < count <= have.get(name, 0) for name, count in wl.licenses):  # type: ignore[union-attr]
            return limits.MSG_LICENSE
    if not req.parts or any(p not in parts for p in req.parts):
        return limits.MSG_PARTITION
    memo = fit_memo if fit_memo is not None else {}
    if acct is not None and s.enforce:
        # the account first, then the QOS (``_job_create``)
        if "associations" in s.enforce and (req.user, req.account) not in _assoc_pairs(acct, memo):
            return limits.MSG_ACCOUNT
        if "qos" in s.enforce and req.qos is not None and (
                req.qos not in acct.qos or req.qos not in _allowed_qos(acct, req.user, req.account, memo)):
            return limits.MSG_QOS
    if acct is not None and limits.has_flag(acct.qos.get(req.qos or ""), "requiresreservation"):
        # a QOS with RequiresReservation takes only jobs that name a reservation, whatever is
        # enforced (``_determine_and_validate_qos``); reservations are not modelled (sbatch's
        # --reservation is kept as not modelled), so no job here names one
        return limits.MSG_QOS
    lim = job_nodes(wl, nodes)
    if lim.problem is not None:
        return lim.problem  # a node or feature the cluster lacks (sbatch's own wording)
    part_bad: list[str] = []  # the message of each partition whose own limits the job breaks
    job_qos = acct.qos.get(req.qos or "") if acct is not None else None
    # the node counts slurmctld tests at submit: those ``--nodes`` gave (a range's largest
    # against MaxNodes, its least against MinNodes), none without it
    most, least = given_node_counts(wl)
    if lim.required and (least is None or least < lim.required_count):
        # sbatch counts a --nodelist as a node count: its nodes, or more where --nodes asks
        # more (probe p140: ``-w gpu04`` in a MinNodes=2 partition refused under ANY and ALL,
        # "Node count specification invalid")
        least = lim.required_count
    enforced = s.enforce_part_limits.upper() != "NO"
    # what the job holds once created: its node counts and its limit (``_valid_job_part``)
    stored_most, stored_least = stored_node_counts(wl, req.nodes, [parts[p].part for p in req.parts])
    stored_limit = _stored_limit(req, parts, acct, s, stored_time)
    tests: list[PartTest] = []  # each partition as the select loop sees it
    for pname in req.parts:
        info = parts[pname]
        part = info.part
        scheduled = info.state in limits.SCHEDULED_STATES
        outside = bool(lim.required and lim.required & ~_mask_of(info))
        why = _access_refusal(req, wl, info, scheduled, outside, most, least, job_qos, enforced)
        if why is not None:
            part_bad.append(_PART_MESSAGE[why])
        # select's test-only answer there: the partition's QOS and accounts and the node
        # counts it leaves (``select_nodes``, ``get_node_cnts``) come before the shape
        if limits.part_policy(part, req.account, req.qos):
            chosen = PART_CONFIG
        elif outside:
            # (select's own answer, before the node counts; under EnforcePartLimits
            # ``_part_access_check`` refused it first, "Requested nodes not in this
            # partition": probe p137)
            chosen = NODE_CONFIG
        elif not _configs_fit(wl, info, nodes, asked_memory):
            # ``_build_node_list``: no node of the partition has the CPUs of one task or the
            # memory per node asked, before the node counts (probe p140: ``-p p,m -N1 -c200``
            # on 128-CPU nodes refused under NO, m's MinNodes=2 aside)
            chosen = NODE_CONFIG
        elif node_counts_conflict(stored_most, stored_least, part, job_qos):
            chosen = PART_CONFIG
        else:
            # select's answer is "node configuration" whatever the shape asks: the CPU and
            # node count messages come from ``_part_access_check`` (above)
            chosen = select_answer(wl, info, nodes, memo) or NODE_CONFIG
        tests.append(PartTest(pname, info.tier, _limits_check(req, wl, info, scheduled, stored_limit, stored_most,
                                                              stored_least, job_qos, enforced), chosen))
    # EnforcePartLimits: ALL refuses a job any of its partitions' limits refuse, YES (= ANY)
    # one all of them refuse (``_valid_job_part``: the last one's message)
    epl = s.enforce_part_limits
    if part_bad and (epl == "ALL" or (epl in ("YES", "ANY") and len(part_bad) == len(req.parts))):
        return part_bad[0] if epl == "ALL" else part_bad[-1]
    # then ``_valid_job_part``'s tests against the widest limits of the job's partitions (its
    # node counts, --time-min, --time); ``gres_job_state_validate`` comes after it and before
    # the accounting policy's (``acct_policy_validate``: DenyOnLimit); the job then exists, and
    # ``_select_nodes_parts`` tests it in its partitions (``submit_select``)
    infos = [parts[p] for p in req.parts]
    return ((_list_limit_refusal(req, wl, most, least, infos, job_qos, "nodes") if enforced else None)
            or _time_min_refusal(req, wl, infos, acct)
            or (_list_limit_refusal(req, wl, most, least, infos, job_qos, "time") if enforced else None)
            or (MSG_GRES if fewer_gpus_than_nodes(cfg, wl) else None)
            or _denied_on_limit(req, parts, acct, s)
            # required nodes among the excluded ones (``_job_create``, after the accounting
            # policy; a ``--contiguous`` list's filled gaps count: a real 22.05.8 refused ``-w
            # gpu01 -x gpu01`` and ``--contiguous -w gpu01,gpu03 -x gpu02``, probe p163b)
            or (MSG_BAD_NODE if lim.required & lim.excluded else None)
            or (limits.MSG_NODES if _tasks_left_over(wl) else None)
            or _loop_outcome(tests, epl, len(req.parts) > 1 if listed is None else listed, enforced, unavailable))


def _tasks_left_over(wl: Workload) -> bool:
    """Whether ``--ntasks-per-node=K`` pods cannot hold the job's tasks on the most nodes it
    may take (``PodSet.per_node_tasks``): no selection ever succeeds, so slurmctld refuses it
    (a real 22.05.8 refused ``-N2 -n10 --ntasks-per-node=4`` and ``-N1-2 -n10
    --ntasks-per-node=4`` on idle nodes, probe p154)."""
    return any(ps.per_node_tasks is not None and ps.count * ps.per_node_tasks[2] < ps.per_node_tasks[1]
               for ps in wl.pod_sets)


def _loop_outcome(tests: list[PartTest], epl: str, listed: bool, enforced: bool,
                  unavailable: list[str] | None) -> str | None:
    """sbatch's answer from the select loop; where the job is queued after select answered
    ESLURM_NODE_NOT_AVAIL, that partition goes to ``unavailable``."""
    answer, name = walk(tests, epl, listed)
    why = outcome(answer, enforced, limits.MSG_PART_CONFIG)
    if why is None and unavailable is not None and name is not None:
        unavailable.append(name)
    return why


def _access_refusal(req: JobReq, wl: Workload, info: PartInfo, scheduled: bool, outside: bool,
                    most: int | None, least: int | None, job_qos, enforced: bool) -> str | None:
    """``_part_access_check`` of the request as submitted in partition ``info``, as a reason
    (its message in ``_PART_MESSAGE``), in its order: the CPUs against the partition's, the
    node count against its nodes, a required node outside it ("NotInPartition"), MinNodes,
    MaxNodes and MaxTime (the size and time tests only where the partition schedules jobs:
    probe p135), then under EnforcePartLimits its accounts and QOS."""
    part = info.part
    if scheduled and enforced and min_cpus(wl) > info.tres_total["cpu"] * 1000:
        return "TooManyCpus"  # (more CPUs than the partition has in all: tested first)
    if scheduled and enforced and least is not None and part.nodes and least > len(part.nodes):
        # (probe p134: ``-p p,q -N3`` with q of two nodes, "Node count specification
        # invalid"; without EnforcePartLimits the select test finds the job fits nowhere there)
        return "PartitionNodeLimit"
    if outside:
        return "NotInPartition"
    why = limits.part_limit(req.time_limit, most, least, part, info.max_time, job_qos) if scheduled else None
    if why is None and enforced:
        why = limits.account_not_allowed(part, req.account) or limits.qos_not_allowed(part, req.qos)
    return why


_PART_MESSAGE = {"PartitionNodeLimit": limits.MSG_NODE_COUNT, "PartitionTimeLimit": limits.MSG_TIME,
                 "AccountNotAllowed": limits.MSG_ACCOUNT, "QOSNotAllowed": limits.MSG_QOS,
                 "NotInPartition": MSG_NOT_IN_PARTITION, "TooManyCpus": limits.MSG_CPUS}


def _limits_check(req: JobReq, wl: Workload, info: PartInfo, scheduled: bool, time_limit: float | None,
                  most: int | None, least: int, job_qos, enforced: bool) -> str | None:
    """``job_limits_check`` of the created job in partition ``info`` (its stored counts and
    limit), where the partition schedules jobs: PartitionConfig for more CPUs than it has, else
    a size or time limit's reason; then PartitionConfig for an account or QOS it refuses under
    EnforcePartLimits; else PartitionDown where it schedules none, else None."""
    part = info.part
    if scheduled:
        if min_cpus(wl) > info.tres_total["cpu"] * 1000:
            return "PartitionConfig"  # (more CPUs than the partition has: tested first)
        why = limits.part_limit(time_limit, most, least, part, info.max_time, job_qos)
        if why is not None:
            return why
    if enforced and (limits.account_not_allowed(part, req.account) or limits.qos_not_allowed(part, req.qos)):
        return "PartitionConfig"
    return None if scheduled else "PartitionDown"


def _stored_limit(req: JobReq, parts: dict[str, PartInfo], acct, s: Settings,
                  stored_time: Callable[[PartInfo], float | None] | None) -> float | None:
    """The limit slurmctld gives the created job: ``--time``, else the first partition's
    DefaultTime, else the first MaxWall of that partition's QOS pair or the association's
    (``SlurmPolicy.time_limit``, which ``stored_time`` is where the policy asks). A real
    22.05.8 under EnforcePartLimits=ALL refused a job without ``--time`` under a QOS of
    MaxWall=120 in a partition of MaxTime=60 without DefaultTime; probe p136 took the
    DefaultTime from the first partition as submitted."""
    if req.time_limit is not None:
        return req.time_limit
    first_info = parts[req.parts[0]]
    if stored_time is not None:
        return stored_time(first_info)
    first = first_info.part
    tl = first.default_time
    if tl is None and acct is not None and s.limits_enforced:
        job_qos = acct.qos.get(req.qos or "")
        assocs = limits.association_limits(acct, req.user, req.account, account_chain(acct, req.account))
        tl = limits.limit_wall(limits.qos_order(job_qos, acct.qos.get(first.qos or "")), assocs)
    return tl


def _list_limit_refusal(req: JobReq, wl: Workload, most: int | None, least: int | None, listed: list[PartInfo],
                        job_qos, which: str) -> str | None:
    """Under EnforcePartLimits, ``_valid_job_part``'s test of the request against the widest
    limits of all its partitions, whatever their state (``which``: "nodes", the least count
    given against the largest MaxNodes and the largest against the least MinNodes; "time",
    a ``--time`` without ``--time-min`` against the largest MaxTime), each lifted by its QOS
    flag. A partition's own test (``_part_access_check``) is stricter where it schedules jobs,
    so this refuses only what a DOWN partition of the list let through: probe p135 (a real
    22.05.8, d DOWN with MaxTime=1 and MaxNodes=1, p UP with MaxTime=3) refused ``-p d -t 5``
    (under ALL and ANY) and ``-p d -N2``, but took ``-p p,d -t 2`` under ALL."""
    if which == "nodes":
        widest = max((math.inf if i.part.max_nodes is None else i.part.max_nodes) for i in listed)
        narrowest = min((i.part.min_nodes or 0) for i in listed)
        if least is not None and least > widest and not limits.has_flag(job_qos, "partitionmaxnodes"):
            return limits.MSG_NODE_COUNT
        if most is not None and most < narrowest and not limits.has_flag(job_qos, "partitionminnodes"):
            return limits.MSG_NODE_COUNT
        return None
    longest = max((math.inf if i.max_time is None else i.max_time) for i in listed)
    if (req.time_limit is not None and wl.time_min is None and req.time_limit > longest
            and not limits.has_flag(job_qos, "partitiontimelimit")):
        return limits.MSG_TIME
    return None


def fits_empty(wl: Workload, info: PartInfo, nodes: NodeTable, memo: dict,
               on: tuple[int, ...] | None = None) -> bool:
    """Whether ``wl``'s shape fits partition ``info`` with every node free (slurmctld's
    test-only selection at submit). Every node of the partition counts whatever its state but
    FUTURE: ``_pick_best_nodes`` judges whether a job could ever run on all of them
    (``total_bitmap``), so a shape only DOWN or DRAINED nodes hold is queued (ESLURM_NODE_NOT_AVAIL,
    reason ReqNodeNotAvail; probe p139 on a real 22.05.8: ``--gres=gpu:8`` with the only 8-GPU
    nodes drained or down was queued, ``-N3 --gres=gpu:8`` with two such nodes refused). The
    answer depends only on the pod sets, the partition and which of its nodes count: memoised
    on exactly that. ``on``: only those nodes of the partition count (the main pass's test on
    its available nodes; None: all but FUTURE ones)."""
    if on is None and any(nodes.future):  # (a FUTURE node that comes up counts from then on)
        future = nodes.future
        on = tuple(i for i in info.nodes if not future[i])
    key = (wl.pod_sets, wl.gang, limits_key(wl), info.name, on)  # (on: None for all the nodes)
    fits = memo.get(key)
    if fits is None:
        placement = place(wl, info.nodes, empty_state(nodes, info), None, list(info.nodes if on is None else on))
        # task pods (no node count given, nor a --nodelist, which sbatch counts as one) may
        # spread over no more nodes than the partition's MaxNodes (probe p140: ``-n200`` on
        # 128-CPU nodes in a MaxNodes=1 partition refused, "Requested node configuration is
        # not available"), and so may --ntasks-per-node's pods (probe p154: ``-p x -n4
        # --ntasks-per-node=2`` refused so under MaxNodes=1); a node count is the limits' own
        most = info.part.max_nodes
        fits = memo[key] = placement is not None and (
            most is None or any(ps.one_per_node and not no_count_given(ps) for ps in wl.pod_sets)
            or job_nodes(wl, nodes).required or len({pod[0] for pod in placement}) <= most)
    return fits


def asked_node_memory(wl: Workload) -> int:
    """The memory ``wl`` asks as submitted that slurmctld holds against each node's RealMemory
    (its pn_min_memory): ``--mem`` per node, or ``--mem-per-cpu``'s amount per CPU; 0 where it
    asks none, or per GPU. Read before slurm.conf's defaults fill the request in, since memory
    left to DefMemPerGPU never filters nodes."""
    asked = [ps.memory_mib for ps in wl.pod_sets if ps.memory_per == "" and not ps.memory_unset and not ps.memory_whole_node]
    # --mem-per-cpu: slurmctld compares the amount per CPU itself with RealMemory (22.05.8
    # ``_build_node_list``: ``pn_min_memory & ~MEM_PER_CPU``; from the source, not probed)
    asked += [ps.memory_mib * 1000 // ps.cpu_m for ps in wl.pod_sets
              if ps.memory_per == "cpu" and not ps.memory_unset and ps.cpu_m]
    return max(asked, default=0)


def _configs_fit(wl: Workload, info: PartInfo, nodes: NodeTable, memory: int) -> bool:
    """Whether some node of partition ``info`` (FUTURE ones aside) has the CPUs of one task of
    every pod set (``--cpus-per-task``: slurmctld's pn_min_cpus) and ``memory`` (the memory per
    node asked, pn_min_memory): ``_build_node_list``'s filter of node configurations."""
    cpus = max((ps.cpus_per_task or 1) * 1000 for ps in wl.pod_sets)
    future, cpu_total, mem_total = nodes.future, nodes.cpu_total, nodes.mem_total
    return any(cpu_total[i] >= cpus and mem_total[i] >= memory for i in info.nodes if not future[i])


def select_answer(wl: Workload, info: PartInfo, nodes: NodeTable, memo: dict) -> str | None:
    """Select's test-only answer for ``wl``'s shape in partition ``info`` at submit: OK where it
    fits the nodes up and not drained, all free; NOT_AVAIL where it fits only counting DOWN or
    DRAINED nodes, or a node it requires is one of them (ESLURM_NODE_NOT_AVAIL: queued); None
    where it fits nowhere."""
    if not fits_empty(wl, info, nodes, memo):
        return None
    required = job_nodes(wl, nodes).required
    if required:  # (select answers ESLURM_NODE_NOT_AVAIL at once where a required node is out)
        up, drain = nodes.up, nodes.drain
        return OK if all(up[i] and not drain[i] for i in bits(required)) else NOT_AVAIL
    return OK if fits_available(wl, info, nodes, memo) else NOT_AVAIL


def fits_available(wl: Workload, info: PartInfo, nodes: NodeTable, memo: dict,
                   withheld: set[int] | frozenset[int] = frozenset()) -> bool:
    """Whether ``wl``'s shape fits partition ``info``'s available nodes, all free
    (``_pick_best_nodes``' "runable avail"): those up, not drained and not ``withheld`` (a main
    pass's failed partitions and required nodes); else select answers ESLURM_NODE_NOT_AVAIL
    unless a node is busy. At submit nothing is withheld."""
    up, drain, future = nodes.up, nodes.drain, nodes.future
    if not withheld and all(up) and not any(drain):
        return True  # (every node available: the common case, tested in C)
    if all(up[i] and not drain[i] and i not in withheld for i in info.nodes if not future[i]):
        return True  # (every node of the partition available: the shape fits them, it was accepted)
    return fits_empty(wl, info, nodes, memo, available_nodes(info, nodes, withheld))


def available_nodes(info: PartInfo, nodes: NodeTable, withheld: set[int] | frozenset[int] = frozenset()) -> tuple:
    """Partition ``info``'s nodes up, not drained and not ``withheld``, in its order."""
    up, drain = nodes.up, nodes.drain
    return tuple(i for i in info.nodes if up[i] and not drain[i] and i not in withheld)


def node_counts_conflict(most: int | None, least: int, part: Partition, job_qos) -> bool:
    """Whether select's node counts for a job stored with ``least`` (and ``most``, None where
    it gave none) nodes in ``part`` leave no count (``get_node_cnts``: the least raised to
    MinNodes, the largest, else MaxNodes, lowered to MaxNodes, each unless the QOS flag lifts
    it)."""
    pmax = math.inf if part.max_nodes is None else part.max_nodes
    low = least if limits.has_flag(job_qos, "partitionminnodes") else max(least, part.min_nodes or 0)
    if most is None:
        high = pmax
    else:
        high = most if limits.has_flag(job_qos, "partitionmaxnodes") else min(most, pmax)
    return high < low


def _denied_on_limit(req: JobReq, parts: dict[str, PartInfo], acct, s: Settings) -> str | None:
    """MSG_SUBMIT_LIMIT where, in one of the job's partitions, a QOS with DenyOnLimit makes
    slurmctld hold the request alone against its limits and one is broken
    (``limits.deny_on_limit``; each partition is validated, with the partition's QOS)."""
    if acct is None or not s.limits_enforced or not any(
            limits.has_flag(q, "denyonlimit") for q in acct.qos.values()):
        return None
    chain = account_chain(acct, req.account)
    assocs = limits.association_limits(acct, req.user, req.account, chain)
    asked = replace(req, tres=req.req_tres)  # validated as recorded at submit (ReqTRES)
    for pname in req.parts:
        info = parts[pname]
        pair = limits.qos_order(acct.qos.get(req.qos or ""), acct.qos.get(info.part.qos or ""))
        # the limit it is validated with: --time, else the first partition's DefaultTime (set
        # once, before the check, ``_valid_job_part``), in whole minutes; none at all takes the
        # limit's own value, which never breaks it
        tl = req.time_limit if req.time_limit is not None else parts[req.parts[0]].part.default_time
        if tl is not None and tl != math.inf:
            tl = math.ceil(tl / 60) * 60
        if limits.deny_on_limit(asked, tl, pair, assocs) is not None:
            return limits.MSG_SUBMIT_LIMIT
    return None


def _time_min_refusal(req: JobReq, wl: Workload, listed: list[PartInfo], acct) -> str | None:
    """slurmctld's refusal of a ``--time-min`` over the largest MaxTime of the job's partitions
    or over the job's own limit (``--time``, else the first partition's DefaultTime), unless
    the QOS has the flag PartitionTimeLimit (``_valid_job_part``); ``--time-min=0`` is
    UNLIMITED, so it is refused unless both are too."""
    if wl.time_min is None:
        return None
    qos = acct.qos.get(req.qos or "") if acct is not None else None
    if limits.has_flag(qos, "partitiontimelimit"):
        return None
    limit = req.time_limit if req.time_limit is not None else listed[0].part.default_time
    longest = max((math.inf if i.max_time is None else i.max_time) for i in listed)
    if wl.time_min > longest or (limit is not None and wl.time_min > limit):
        return limits.MSG_TIME_MIN
    return None


def min_cpus(wl: Workload) -> int:
    """The least CPUs (millicores) the job asks in all, as slurmctld holds them against a
    partition's CPUs (``min_cpus``): sbatch's count, so a pod set the policy spread over a
    partition's MinNodes counts the tasks it was submitted with (probe p140: ``-c200`` in a
    two-node MinNodes=2 partition of 128-CPU nodes was not refused for its CPUs)."""
    cpus = 0
    for ps in wl.pod_sets:
        if ps.cpus_per_task is None:
            # --cpus-per-gpu without -c: sbatch sends a CPU a task (22.05.8 ``slurm_opt.c``'s
            # min_cpus; from the source, not probed)
            cpus += (ps.nodes_raised or ((ps.min_count or ps.count) if ps.one_per_node else ps.count)) * 1000
            continue
        if ps.per_node_tasks is not None and ps.cpu_m % (ps.per_node_tasks[2] * 1000) == 0:
            # --ntasks-per-node: the tasks, at the CPUs of each (MaxMemPerCPU may raise them)
            cpus += ps.per_node_tasks[1] * ps.cpu_m // ps.per_node_tasks[2]
            continue
        if ps.nodes_raised:
            cpus += ps.nodes_raised * ps.cpus_per_task * 1000
            continue
        if (ps.one_per_node and ps.min_count is not None and ps.cpus_per_task and not ps.split_tasks
                and ps.cpu_m == ps.cpus_per_task * 1000):
            # a --nodes range without --ntasks (a task a pod, not the split form of a range
            # with --ntasks): sbatch sets no task count, and the job asks one task's CPUs
            # (probe p141: ``-p q -N2-4 -c129`` on two 128-CPU nodes was not "More processors
            # requested than permitted"; ``jobinfo.request_totals`` counts it so too)
            cpus += ps.cpu_m
            continue
        count = (ps.min_count or ps.count) if ps.one_per_node else ps.count
        cpus += ps.cpus_total * 1000 if ps.split else count * ps.cpu_m
    return cpus


def _assoc_pairs(acct, memo: dict) -> frozenset:
    """(user, account) of every user association of ``acct``, kept in ``memo`` (a run's jobs
    are checked one by one against the same accounting data)."""
    hit = memo.get(_ASSOC)
    if hit is None or hit[0] is not acct:
        hit = memo[_ASSOC] = (acct, frozenset((ua.user, ua.account) for ua in acct.user_associations))
    return hit[1]


_ASSOC = ("user associations",)


def _allowed_qos(acct, user: str, account: str, memo: dict):
    """The QOS a job of ``user`` under ``account`` may name where AccountingStorageEnforce has
    ``qos`` (``_determine_and_validate_qos``: the association's QOS list, own or inherited),
    kept in ``memo``."""
    key = ("association QOS", user, account)
    hit = memo.get(key)
    if hit is None or hit[0] is not acct:
        hit = memo[key] = (acct, frozenset(association_qos(acct, user, account)[0]))
    return hit[1]


class _PoolView:
    """What the checks read from a pool, derived once per pool object (pools are not mutated)."""

    __slots__ = ("cfg", "default_part", "fit_memo", "job_defaults", "node_memory", "nodes", "parts", "s", "typed_nodes")

    def __init__(self, pool: Pool) -> None:
        self.cfg = slurm_config(pool)
        self.s = load_settings(self.cfg)
        self.nodes = NodeTable(pool)
        self.parts = partition_infos(self.cfg, self.nodes, pool)
        default = self.cfg.default_partition()
        self.default_part = default.name if default is not None else None
        self.fit_memo: dict = {}
        self.node_memory = {name: node.memory_mib for name, node in pool.nodes.items()}
        self.typed_nodes = job_defaults.typed_gpu_nodes(pool.nodes)
        self.job_defaults: dict = {}  # partition name -> job_defaults.Defaults


_VIEWS: dict[int, tuple[Pool, _PoolView]] = {}


def _view(pool: Pool) -> _PoolView:
    hit = _VIEWS.get(id(pool))
    if hit is not None and hit[0] is pool:
        return hit[1]
    if len(_VIEWS) >= 16:
        _VIEWS.clear()
    view = _PoolView(pool)
    _VIEWS[id(pool)] = (pool, view)  # holds the pool, so its id cannot be reused while cached
    return view


def submit_rejection(pool: Pool, wl: Workload, user: str | None = None, node_cap=None) -> str | None:
    """Slurm's message if ``user`` submitting ``wl`` to ``pool`` is refused at submit, else None.

    The pool's nodes count with the states the pool declares (all up unless it says DOWN/DRAIN).
    ``user`` replaces ``wl.user`` (the live daemon knows the submitter from the socket).
    ``node_cap`` (the Slurm policy's; it changes nothing where limits are not enforced) caps
    the filled request's nodes by the QOS and association node limits, as the policy's own
    submission does
    (``SlurmPolicy._walk_node_cap``; found by a review: under MaxTRESPerJob=node=2 the live
    check accepted ``-n40``, which a real 22.05.8 refused, probe p176)."""
    view = _view(pool)
    if user is not None:
        wl = replace(wl, user=user)
    acct = view.cfg.accounting
    # a ``--contiguous`` list's gaps filled first (``_job_create``, before the partitions;
    # MaxArraySize is tested before it), as ``SlurmPolicy.resolve_request`` does
    wl, refused = contiguous_list.fill_gaps(wl, tuple(view.nodes.names), view.nodes.index)
    if refused is not None:
        return array_refusal(wl, view.cfg) or refused
    # the partitions the job lands in first (DRAIN or INACTIVE ones give way to their
    # Alternate, or are dropped), then the request with slurm.conf's defaults filled in
    landed, refused = part_submit.submit_partitions(wl.partition, view.cfg.partitions, view.default_part)
    if refused is not None:
        return array_refusal(wl, view.cfg) or refused
    listed = "," in (wl.partition or "")  # as submitted (``submit_select.walk``)
    if landed != wl.partition:
        wl = replace(wl, partition=landed)
    asked_memory = asked_node_memory(wl)
    wl, refused = job_defaults.resolve(view.cfg, view.node_memory, wl, view.job_defaults, view.typed_nodes)
    if node_cap is not None and refused is None:
        wl = node_cap(wl)
    req = job_req(wl, view.default_part, acct, acct.qos if acct is not None else {}, view.s.typed_gpu_tres,
                  view.s.gpu_tracked, view.s.untyped_gpu_as, view.s.qos_enforced)
    if refused in job_defaults.OWN_REFUSALS:
        return refused  # gpupool's: slurmctld's checks would read a shape it does not give
    return rejection(req, wl, view.parts, view.nodes, view.cfg, view.s, view.fit_memo, listed=listed,
                     asked_memory=asked_memory) or refused


def _mask_of(info: PartInfo) -> int:
    """The partition's nodes as a bit set."""
    mask = 0
    for i in info.nodes:
        mask |= 1 << i
    return mask
