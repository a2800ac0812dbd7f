"""A pool as a flat map of named objects and their fields, in each system's own words.

``policy diff`` compares two of these maps. Slurm objects use sacctmgr/slurm.conf field
names (``Preempt``, ``GrpTRES``, ``MaxTime``), Kueue objects the YAML field names
(``nominalQuota``, ``borrowingLimit``, ``reclaimWithinCohort``). List-like fields are
frozensets so a diff can say ``+= normal``; quantities are shown as users write them.
"""
from __future__ import annotations

from gpupool.formats.hostlist import compress_hostlist
from gpupool.formats.quantity import format_cpu, format_memory
from gpupool.formats.slurm_time import format_duration
from gpupool.model.pool import Pool

Value = object


def _tres(tres: dict[str, int]) -> str | None:
    if not tres:
        return None
    from gpupool.formats.sacctmgr import format_tres

    return format_tres(dict(sorted(tres.items())))


def _dur(seconds) -> str | None:
    return None if seconds is None else format_duration(seconds)


def _set(values) -> frozenset:
    return frozenset(str(v) for v in (values or ()))


def _quantity(resource: str, value) -> str | None:
    if value is None:
        return None
    if resource == "cpu":
        return format_cpu(value)
    if resource == "memory":
        return format_memory(value)
    return str(value)


def _flat(prefix: str, value, out: dict) -> None:
    """Nested configuration dicts → ``a.b.c`` keys."""
    if isinstance(value, dict):
        for k, v in value.items():
            _flat(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(value, list):
        if all(not isinstance(v, (dict, list)) for v in value):
            out[prefix] = frozenset(str(v) for v in value)
        else:
            for i, v in enumerate(value):
                _flat(f"{prefix}[{i}]", v, out)
    else:
        out[prefix] = value


def pool_objects(pool: Pool) -> dict[str, dict[str, Value]]:
    objs: dict[str, dict[str, Value]] = {}
    settings = {"defaultWorkload": pool.default_workload}
    objs["PoolSettings"] = settings
    for node in pool.nodes.values():
        objs[f"Node {node.name}"] = {
            "CPUs": node.cpus, "RealMemory": node.memory_mib, "GPUs": node.gpu_count,
            "GPU type": node.gpu_type, "Weight": node.weight, "Features": _set(node.features),
            "State": node.state, "Taints": _set(f"{t.get('key')}={t.get('value', '')}:{t.get('effect')}"
                                                for t in node.taints),
        }
    if pool.slurm is not None:
        conf = pool.slurm
        raw = {k: v for k, v in conf.raw.items() if not k.lower().startswith(("nodename", "partitionname"))}
        objs["slurm.conf"] = {k: str(v) for k, v in raw.items()}
        for p in conf.partitions.values():
            fields = {
                "Nodes": compress_hostlist(list(p.nodes)), "Default": p.default, "MaxTime": _dur(p.max_time),
                "DefaultTime": _dur(p.default_time), "PriorityTier": p.priority_tier,
                "PriorityJobFactor": p.priority_job_factor, "OverSubscribe": p.oversubscribe,
                "AllowAccounts": "ALL" if p.allow_accounts is None else ",".join(sorted(p.allow_accounts)),
                "AllowQos": "ALL" if p.allow_qos is None else ",".join(sorted(p.allow_qos)),
                "DenyAccounts": _set(p.deny_accounts), "DenyQos": _set(p.deny_qos), "PreemptMode": p.preempt_mode,
                "State": p.state, "MaxNodes": p.max_nodes, "MinNodes": p.min_nodes, "QOS": p.qos,
            }
            fields.update({k: str(v) for k, v in p.extra.items()})
            objs[f"Partition {p.name}"] = fields
        acct = conf.accounting
        if acct is not None:
            for q in acct.qos.values():
                fields = {
                    "Priority": q.priority, "Preempt": _set(q.preempt), "PreemptMode": q.preempt_mode,
                    "GrpTRES": _tres(q.grp_tres), "MaxTRESPerUser": _tres(q.max_tres_per_user),
                    "MaxTRESPerJob": _tres(q.max_tres_per_job), "MaxJobsPU": q.max_jobs_per_user,
                    "MaxSubmitJobsPU": q.max_submit_jobs_per_user, "MaxWall": _dur(q.max_wall),
                    "GrpJobs": q.grp_jobs, "MaxJobsPA": q.max_jobs_per_account,
                    "GrpSubmitJobs": q.grp_submit_jobs, "MaxSubmitJobsPA": q.max_submit_jobs_per_account,
                    "MaxTRESPerAccount": _tres(q.max_tres_per_account), "MinTRESPerJob": _tres(q.min_tres_per_job),
                    "UsageFactor": q.usage_factor, "GraceTime": q.grace_time, "Flags": _set(q.flags),
                    "PreemptExemptTime": _dur(q.preempt_exempt_time),
                    "Description": q.description or None,
                }
                fields.update({k: str(v) for k, v in q.extra.items()})
                objs[f"QOS {q.name}"] = fields
            for a in acct.accounts.values():
                objs[f"Account {a.account}"] = _assoc(a) | {"Parent": a.parent,
                                                           "Organization": a.organization or None,
                                                           "Description": a.description or None}
            for u in acct.user_associations:
                user = acct.users.get(u.user)
                fields = _assoc(u)
                if user is not None:
                    fields |= {"DefaultAccount": user.default_account, "AdminLevel": user.admin_level}
                objs[f"User {u.user}@{u.account}"] = fields
    if pool.kueue is not None:
        k = pool.kueue
        cfg: dict = {}
        _flat("", k.configuration, cfg)
        cfg.pop("apiVersion", None)
        cfg.pop("kind", None)
        for gate, on in k.feature_gates.items():
            cfg[f"featureGates.{gate}"] = on
        if cfg:
            objs["Kueue Configuration"] = cfg
        for f in k.flavors.values():
            objs[f"ResourceFlavor {f.name}"] = {
                "nodeLabels": _set(f"{a}={b}" for a, b in f.node_labels.items()),
                "nodeTaints": _set(str(t) for t in f.node_taints), "tolerations": _set(str(t) for t in f.tolerations),
                "topologyName": f.topology_name}
        for t in k.topologies.values():
            objs[f"Topology {t.name}"] = {"levels": " > ".join(t.levels)}
        for c in k.cohorts.values():
            fields = {"parentName": c.parent, "fairSharing.weight": c.fair_weight}
            fields.update(_quota_fields(c.resource_groups))
            objs[f"Cohort {c.name}"] = fields
        for cq in k.cluster_queues.values():
            pre = cq.preemption
            fields = {
                "cohortName": cq.cohort, "queueingStrategy": cq.queueing_strategy,
                "namespaceSelector": None if cq.namespace_selector is None else str(cq.namespace_selector),
                "preemption.reclaimWithinCohort": pre.reclaim_within_cohort,
                "preemption.withinClusterQueue": pre.within_cluster_queue,
                "preemption.borrowWithinCohort.policy": pre.borrow_within_cohort_policy,
                "preemption.borrowWithinCohort.maxPriorityThreshold": pre.borrow_within_cohort_max_priority_threshold,
                "flavorFungibility.whenCanBorrow": cq.flavor_fungibility_when_can_borrow,
                "flavorFungibility.whenCanPreempt": cq.flavor_fungibility_when_can_preempt,
                "fairSharing.weight": cq.fair_weight, "stopPolicy": cq.stop_policy,
                "admissionChecks": _set(cq.admission_checks), "admissionScope.admissionMode": cq.admission_mode,
            }
            fields.update(_quota_fields(cq.resource_groups))
            objs[f"ClusterQueue {cq.name}"] = fields
        for lq in k.local_queues.values():
            objs[f"LocalQueue {lq.namespace}/{lq.name}"] = {"clusterQueue": lq.cluster_queue,
                                                             "stopPolicy": lq.stop_policy,
                                                             "fairSharing.weight": lq.fair_weight}
        for pc in k.priority_classes.values():
            objs[f"WorkloadPriorityClass {pc.name}"] = {"value": pc.value, "description": pc.description or None}
    return objs


def _assoc(a) -> dict:
    return {
        "Fairshare": a.fairshare, "QOS": _set(a.qos), "DefaultQOS": a.default_qos, "GrpTRES": _tres(a.grp_tres),
        "GrpJobs": a.grp_jobs, "MaxJobs": a.max_jobs, "MaxSubmitJobs": a.max_submit_jobs,
        "GrpSubmitJobs": a.grp_submit_jobs,
        "MaxTRESPerJob": _tres(a.max_tres_per_job), "MaxWall": _dur(a.max_wall),
    } | {k: str(v) for k, v in a.extra.items()}


def _quota_fields(groups) -> dict:
    """``nvidia.com/gpu nominalQuota`` per resource; the flavor is named only when a queue
    has several flavors for that resource."""
    per_resource: dict[str, list[str]] = {}
    for rg in groups:
        for fq in rg.flavors:
            for res in fq.resources:
                per_resource.setdefault(res, []).append(fq.flavor)
    out: dict = {}
    for rg in groups:
        for fq in rg.flavors:
            for res, q in fq.resources.items():
                label = res if len(per_resource[res]) == 1 else f"{fq.flavor} {res}"
                out[f"{label} nominalQuota"] = _quantity(res, q.nominal)
                out[f"{label} borrowingLimit"] = _quantity(res, q.borrowing_limit)
                out[f"{label} lendingLimit"] = _quantity(res, q.lending_limit)
        out.setdefault("coveredResources", frozenset())
        out["coveredResources"] = out["coveredResources"] | _set(rg.covered_resources)
    return out
