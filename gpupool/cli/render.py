"""Turning loaded objects into JSON-ready data and rich tables for the CLI.

Kept apart from the command definitions so ``--json`` and the tables show the same facts.
"""
from __future__ import annotations

from gpupool.formats.quantity import format_cpu, format_memory
from gpupool.formats.slurm_time import format_duration
from gpupool.model.pool import Pool
from gpupool.model.resources import CPU, MEMORY


def quantity_text(resource: str, value: int | None) -> str | None:
    if value is None:
        return None
    if resource == CPU:
        return format_cpu(value)
    if resource == MEMORY:
        return format_memory(value)
    return str(value)


def pool_facts(pool: Pool) -> dict:
    """Everything ``gpupool validate`` reports about a pool."""
    from gpupool.formats.hostlist import compress_hostlist

    facts: dict = {
        "pool": pool.name,
        "nodes": len(pool.nodes),
        "gpus": pool.gpu_count,
        "gpu_types": pool.gpu_types(),
        "topology_levels": list(pool.topology_levels),
        "node_list": [
            {"name": n.name, "cpus": n.cpus, "memory_mib": n.memory_mib, "gpus": n.gpu_count,
             "gpu_type": n.gpu_type, "mig_devices": sum(1 for g in n.gpus if g.mig_profile),
             "state": n.state, "labels": dict(sorted(n.labels.items()))}
            for n in pool.nodes.values()
        ],
        "partitions": [],
        "accounts": [],
        "users": [],
        "qos": [],
        "cluster_queues": [],
        "cohorts": [],
        "local_queues": [],
        "resource_flavors": [],
        "priority_classes": [],
        "default_workload": pool.default_workload,
        "not_modelled": [{"source": s, "key": k} for s, k in pool.not_modelled],
        "notes": list(pool.notes),
        "sources": list(pool.sources),
    }
    if pool.slurm is not None:
        for part in pool.slurm.partitions.values():
            facts["partitions"].append({
                "name": part.name, "nodes": compress_hostlist(list(part.nodes)), "default": part.default,
                "max_time": format_duration(part.max_time), "default_time": None if part.default_time is None else format_duration(part.default_time),
                "priority_tier": part.priority_tier, "priority_job_factor": part.priority_job_factor,
                "oversubscribe": part.oversubscribe, "preempt_mode": part.preempt_mode, "state": part.state,
            })
        acct = pool.slurm.accounting
        if acct is not None:
            facts["accounts"] = [
                {"name": a.account, "parent": a.parent, "fairshare": a.fairshare,
                 "grp_tres": a.grp_tres, "qos": list(a.qos)}
                for a in acct.accounts.values()
            ]
            facts["users"] = [
                {"name": u.user, "account": u.account, "fairshare": u.fairshare}
                for u in acct.user_associations
            ]
            facts["qos"] = [
                {"name": q.name, "priority": q.priority, "preempt": list(q.preempt), "preempt_mode": q.preempt_mode,
                 "grp_tres": q.grp_tres, "grp_jobs": q.grp_jobs, "max_tres_per_user": q.max_tres_per_user,
                 "max_tres_per_account": q.max_tres_per_account, "max_tres_per_job": q.max_tres_per_job,
                 "min_tres_per_job": q.min_tres_per_job, "max_jobs_per_user": q.max_jobs_per_user,
                 "max_jobs_per_account": q.max_jobs_per_account, "max_submit_jobs_per_user": q.max_submit_jobs_per_user,
                 "grp_submit_jobs": q.grp_submit_jobs, "max_submit_jobs_per_account": q.max_submit_jobs_per_account,
                 "max_wall": None if q.max_wall is None else format_duration(q.max_wall), "usage_factor": q.usage_factor,
                 "flags": list(q.flags)}
                for q in acct.qos.values()
            ]
    if pool.kueue is not None:
        kq = pool.kueue
        for cq in kq.cluster_queues.values():
            quotas = {}
            for rg in cq.resource_groups:
                for fq in rg.flavors:
                    quotas[fq.flavor] = {
                        res: {"nominalQuota": quantity_text(res, q.nominal),
                              "borrowingLimit": quantity_text(res, q.borrowing_limit),
                              "lendingLimit": quantity_text(res, q.lending_limit)}
                        for res, q in fq.resources.items()
                    }
            facts["cluster_queues"].append({
                "name": cq.name, "cohort": cq.cohort, "queueing_strategy": cq.queueing_strategy,
                "quotas": quotas,
                "preemption": {"reclaimWithinCohort": cq.preemption.reclaim_within_cohort,
                               "withinClusterQueue": cq.preemption.within_cluster_queue,
                               "borrowWithinCohort": cq.preemption.borrow_within_cohort_policy},
            })
        facts["cohorts"] = [{"name": c.name, "parent": c.parent, "implicit": c.implicit} for c in kq.cohorts.values()]
        facts["local_queues"] = [
            {"namespace": lq.namespace, "name": lq.name, "cluster_queue": lq.cluster_queue}
            for lq in kq.local_queues.values()
        ]
        facts["resource_flavors"] = [
            {"name": f.name, "node_labels": f.node_labels, "topology": f.topology_name} for f in kq.flavors.values()
        ]
        facts["priority_classes"] = [{"name": p.name, "value": p.value} for p in kq.priority_classes.values()]
    return facts


#: Columns of the comparison table: (summary path, header, format).
COMPARE_COLUMNS = [
    ("policy", "policy", "{}"),
    ("jobs", "jobs", "{}"),
    ("never_started", "never started", "{}"),
    ("utilisation_while_submitting", "GPU alloc % (arrivals)", "{:.1%}"),
    ("utilisation", "GPU alloc %", "{:.1%}"),
    ("busy_utilisation", "GPU busy %", "{:.1%}"),
    ("wait.mean", "wait mean", "dur"),
    ("wait.p50", "wait p50", "dur"),
    ("wait.p95", "wait p95", "dur"),
    ("bounded_slowdown.mean", "slowdown mean", "{:.2f}"),
    ("makespan_s", "makespan", "dur"),
    ("gpu_hours_lost_to_preemption", "GPU-h lost", "{:.1f}"),
    ("gpu_hours_idle_in_incomplete_gangs", "GPU-h idle gangs", "{:.1f}"),
]

#: Service and quota columns, shown when any compared run had services (gpupool.fleet).
SERVICE_COLUMNS = [
    ("services.overall.slo_attainment", "SLO met %", "{:.1%}"),
    ("services.overall.served_fraction", "requests served %", "{:.1%}"),
    ("services.overall.requests_dropped", "requests dropped", "{:,.0f}"),
    ("services.overall.minutes_under_provisioned", "min under-prov.", "{}"),
    ("services.overall.replica_seconds_waiting_for_gpus", "replica-s waiting", "{:,.0f}"),
    ("services.overall.restarts", "restarts", "{}"),
    ("services.overall.gpu_hours", "service GPU-h", "{:.1f}"),
    ("quota.gpu_hours_borrowed.training", "GPU-h borrowed (training)", "{:.1f}"),
    ("quota.reclaimed.gpus", "GPUs reclaimed", "{}"),
    ("quota.reclaimed.gpu_hours", "GPU-h reclaimed", "{:.1f}"),
    ("quota.training_gpu_hours_lost_to_preemption", "training GPU-h lost", "{:.1f}"),
]


def compare_columns(summaries: list[dict]) -> list[tuple[str, str, str]]:
    """The comparison's columns: the training ones, plus service ones when a run had services."""
    if any("services" in s for s in summaries):
        return COMPARE_COLUMNS + SERVICE_COLUMNS
    return COMPARE_COLUMNS


def summary_value(summary: dict, path: str):
    value = summary
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def format_cell(value, fmt: str) -> str:
    if value is None:
        return "-"
    if fmt == "dur":
        return format_duration(value)
    return fmt.format(value)
