"""priority/multifactor (spec §3): factors, weights, normalisation and the final integer.

``priority = Σ W·F − nice``, floored at 1, truncated to uint32. Factors are in [0, 1]:
age = min(1, (t − accrue)/PriorityMaxAge); fair share from Fair Tree or classic; job size
over the whole cluster's nodes and CPUs (favor large, or PriorityFavorSmall; per minute of time
limit under SMALL_RELATIVE_TO_TIME); partition = PriorityJobFactor / max; QOS = Priority / max;
association = its Priority / the largest of any association; TRES = requested count / partition
total. PriorityFlags=NO_NORMAL_ASSOC/PART/QOS/TRES (or NO_NORMAL_ALL) leave those unnormalised.
"""
from __future__ import annotations

UINT32_MAX = 4294967295


def job_size_factor(nodes: int, cpus: int, nodes_total: int, cpus_total: int, favor_small: bool,
                    relative_limit_min: float | None = None) -> float:
    """The job size factor over the whole cluster's nodes and CPUs. ``relative_limit_min``:
    PriorityFlags=SMALL_RELATIVE_TO_TIME with the job's time limit in minutes: its size in CPUs
    (at least its nodes' average share of the cluster's CPUs) per minute of limit, over the
    cluster's CPUs (a real 22.05.8 gave a one-node job of 512 CPUs on four nodes with ``-t 10``
    0.025, one with ``-t 2-00:00:00 -n64`` 0.0000868); 1 minus that favouring small jobs."""
    if relative_limit_min is not None:
        size = max(nodes * cpus_total / nodes_total if nodes_total else 0.0, float(cpus))
        js = size / max(relative_limit_min, 1.0) / cpus_total if cpus_total else 0.0
        js = 1.0 - js if favor_small else js
    elif favor_small:
        js = (nodes_total - nodes) / nodes_total if nodes_total else 0.0
        if cpus_total and cpus:
            js = (js + (cpus_total - cpus) / cpus_total) / 2
    else:
        js = nodes / nodes_total if nodes_total else 0.0
        if cpus_total and cpus:
            js = (js + cpus / cpus_total) / 2
    return min(1.0, max(0.0, js))


def age_factor(age_s: float, max_age: float) -> float:
    if age_s <= 0:
        return 0.0
    return 1.0 if not max_age else min(1.0, age_s / max_age)


def factors(*, age_s: float, max_age: float, fs: float, nodes: int, cpus: int, nodes_total: int,
            cpus_total: int, favor_small: bool, part_factor: int, max_part_factor: int,
            qos_priority: int, max_qos_priority: int, tres_req: dict[str, int],
            tres_total: dict[str, int], tres_weights: dict[str, float], assoc_priority: int = 0,
            max_assoc_priority: int = 0, raw: frozenset[str] = frozenset(),
            relative_limit_min: float | None = None) -> dict:
    """The factors of one job in one partition. ``raw``: the factors PriorityFlags=NO_NORMAL_*
    leave unnormalised ("assoc", "partition", "qos", "tres": the association's and QOS's
    Priority, the PriorityJobFactor and the TRES counts as they stand);
    ``relative_limit_min``: see ``job_size_factor``."""
    out = {
        "age": age_factor(age_s, max_age),
        "fairshare": fs,
        "job_size": job_size_factor(nodes, cpus, nodes_total, cpus_total, favor_small, relative_limit_min),
        "partition": (float(part_factor) if "partition" in raw
                      else part_factor / max_part_factor if max_part_factor else 0.0),
        "qos": (float(qos_priority) if "qos" in raw
                else qos_priority / max_qos_priority if max_qos_priority else 0.0),
        "assoc": (float(assoc_priority) if "assoc" in raw
                  else assoc_priority / max_assoc_priority if max_assoc_priority else 0.0),
        "tres": {t: (float(tres_req.get(t, 0)) if "tres" in raw
                     else tres_req.get(t, 0) / tres_total[t] if tres_total.get(t) else 0.0) for t in tres_weights},
    }
    return out


def combine(f: dict, weights: dict[str, int], tres_weights: dict[str, float], nice: int, site: int = 0) -> int:
    value = (site + weights.get("age", 0) * f["age"] + weights.get("assoc", 0) * f["assoc"]
             + weights.get("fairshare", 0) * f["fairshare"] + weights.get("job_size", 0) * f["job_size"]
             + weights.get("partition", 0) * f["partition"] + weights.get("qos", 0) * f["qos"])
    for t, w in tres_weights.items():
        value += w * f["tres"].get(t, 0.0)
    value -= nice
    if value < 1:
        return 1
    return min(UINT32_MAX, int(value))


#: priority/basic's first priority (slurmctld's TOP_PRIORITY, 0xffff0000); each submission
#: since a fresh start gets one less
BASIC_TOP = 0xFFFF0000


def basic_priority(job_id: int, nice: int = 0) -> int:
    """priority/basic: each job one below the job submitted before it, less its nice, at least
    1. Job ids count submissions from 1 here, as on a freshly started slurmctld, so the values
    are the ones ``squeue -o %Q`` shows there (a real 22.05.8 gave its third job 4294901757);
    thresholds such as bf_min_prio_reserve then read the same in both."""
    return max(1, BASIC_TOP - job_id - nice)
