"""The texts Kueue writes into a pending Workload's ``QuotaReserved=False`` condition.

gpupool's flavor assigner (``policy/kueue/flavors.py``) decides; this module words the
decision the way Kueue's flavor assigner does (``flavorassigner.go``, v0.19/v0.20), so explain
prints the message a user sees in ``kubectl describe workload``:

* per examined flavor and resource: ``insufficient unused quota for R in flavor F, N more needed``
  or ``insufficient quota for R in flavor F, previously considered podsets requests (A) + current
  podset request (B) > maximum capacity (C)``, ``flavor F doesn't match node affinity``,
  ``untolerated taint K=V:Effect in flavor F``, ``resource R unavailable in ClusterQueue``;
* TAS (§8): ``Flavor "F" does not support TopologyAwareScheduling`` (and its siblings) per
  flavor, and ``topology "T" allows to fit only N out of M pod(s)`` /
  ``topology "T" doesn't allow to fit any of M pod(s)`` when the topology has no room;
* the reasons of one pod set sorted and joined with ``, ``, prefixed ``couldn't assign flavors to
  pod set P: ``; pod sets joined with ``; ``.

It walks the same flavors the assigner examined (from the first flavor up to the index the
assignment records as its last one) on the quota tree as it was when the cycle started.
"""
from __future__ import annotations

from gpupool.formats.kueue_objects import format_quantity
from gpupool.policy.kueue.flavors import BLOCKING_EFFECTS, tolerates
from gpupool.policy.kueue.records import Assignment, KWorkload
from gpupool.policy.kueue.state import KueueState
from gpupool.policy.kueue.tas_assign import tas_mismatch

SKIPPED_NO_LONGER_FITS = "Workload no longer fits after processing another workload"
SKIPPED_OVERLAP = "Workload has overlapping preemption targets with another workload"
BLOCKED_PODS_READY = "Waiting for all admitted workloads to be in PodsReady condition"

#: Preempted-condition reasons as Kueue spells them out in the condition message.
HUMAN_REASONS = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
    "InCohortFairSharing": "Fair Sharing within the cohort",
}


def qty(resource: str, value: int) -> str:
    """A canonical int as Kubernetes writes the quantity (``2``, ``500m``, ``64Gi``)."""
    return str(format_quantity(resource, value))


def pending_message(state: KueueState, wl: KWorkload, a: Assignment | None) -> str:
    """``couldn't assign flavors to pod set …`` for a workload whose assignment is not Fit."""
    cq = state.cq_models.get(wl.cq)
    if cq is None:
        return f"ClusterQueue {wl.cq} doesn't exist"
    node = state.tree.cqs[wl.cq]
    counts = a.counts if a is not None and len(a.pod_sets) == len(wl.pod_sets) else [ps.count for ps in wl.pod_sets]
    last = a.last_index if a is not None else {}
    groups = cq.resource_groups
    group_of = {res: i for i, rg in enumerate(groups) for res in rg.covered_resources}
    assumed: dict = {}  # (flavor, resource) -> usage of earlier pod sets
    parts: list[str] = []
    for psi, ps in enumerate(wl.pod_sets):
        n = counts[psi]
        req = {r: v * n for r, v in ps.requests.items() if v}
        reasons: list[str] = []
        failed = False
        touched: dict[int, dict[str, int]] = {}
        for r, v in req.items():
            g = group_of.get(r)
            if g is None:
                reasons.append(f"resource {r} unavailable in ClusterQueue")
                failed = True
                break
            touched.setdefault(g, {})[r] = v
        if not failed:
            for g in sorted(touched):
                chosen = a.pod_sets[psi].flavors if a is not None and psi < len(a.pod_sets) else {}
                ok, group_reasons = _group_reasons(state, node, groups[g], ps, touched[g], assumed,
                                                   last.get((psi, g), -1), chosen, wl.cq)
                reasons.extend(group_reasons)
                if not ok:
                    failed = True
                    break
                fl = next((chosen[r] for r in touched[g] if r in chosen), None)
                if fl is not None:
                    for r, v in touched[g].items():
                        assumed[(fl, r)] = assumed.get((fl, r), 0) + v
        if a is not None and a.tas_failure is not None and a.tas_failure[0] == psi:
            # TAS (§8): the quota fits (or not), the topology has no room for the pod set.
            reasons.append(a.tas_failure[1])
            failed = True
        if reasons:
            parts.append(f"couldn't assign flavors to pod set {ps.name}: {', '.join(sorted(reasons))}")
        if failed:
            break
    return "; ".join(parts)


def _group_reasons(state, node, group, ps, greq: dict, assumed: dict, last: int, chosen: dict,
                   cq_name: str = "") -> tuple[bool, list[str]]:
    """Reasons for one resource group of one pod set; False when no flavor could be chosen."""
    flavors = group.flavors
    end = len(flavors) - 1 if last < 0 else min(last, len(flavors) - 1)
    reasons: list[str] = []
    chosen_fit = False
    picked = next((chosen[r] for r in greq if r in chosen), None)
    for i in range(end + 1):
        fq = flavors[i]
        flavor = state.flavors.get(fq.flavor)
        if flavor is None:
            reasons.append(f"flavor {fq.flavor} not found")
            continue
        why = _flavor_mismatch(flavor, ps) or (tas_mismatch(state, cq_name, flavor, ps) if cq_name else None)
        if why:
            reasons.append(why)
            continue
        all_fit = True
        for r, v in greq.items():
            fr = (fq.flavor, r)
            before = assumed.get(fr, 0)
            val = before + v
            cap = node.potential_available(fr)
            if val > cap:
                reasons.append(f"insufficient quota for {r} in flavor {fq.flavor}, previously considered podsets "
                               f"requests ({qty(r, before)}) + current podset request ({qty(r, v)}) > maximum "
                               f"capacity ({qty(r, cap)})")
                all_fit = False
                break
            avail = node.available(fr)
            if val > avail:
                reasons.append(f"insufficient unused quota for {r} in flavor {fq.flavor}, "
                               f"{qty(r, val - avail)} more needed")
                all_fit = False
        if fq.flavor == picked and all_fit:
            chosen_fit = True
    if picked is None:
        return False, reasons
    # Kueue drops the reasons of a resource group whose chosen flavor fits.
    return True, ([] if chosen_fit else reasons)


def _flavor_mismatch(flavor, ps) -> str | None:
    tolerations = tuple(ps.tolerations) + tuple(flavor.tolerations)
    for taint in flavor.node_taints:
        if taint.get("effect") in BLOCKING_EFFECTS and not tolerates(tolerations, taint):
            text = taint.get("key", "")
            if taint.get("value"):
                text += f"={taint['value']}"
            return f"untolerated taint {text}:{taint.get('effect')} in flavor {flavor.name}"
    for key, value in flavor.node_labels.items():
        want = ps.node_selector.get(key)
        if want is not None and want != value:
            return f"flavor {flavor.name} doesn't match node affinity"
    return None


def preempted_message(reason: str, preemptor_uid: str, preemptor_job_uid: str) -> str:
    """The Preempted / Evicted condition message Kueue writes on a victim."""
    human = HUMAN_REASONS.get(reason, reason)
    return (f"Preempted to accommodate a workload (UID: {preemptor_uid}, JobUID: {preemptor_job_uid or 'UNKNOWN'}) "
            f"due to {human}")
