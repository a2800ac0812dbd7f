"""The TAS step of flavor assignment and preemption (spec kueue.md §8, §4.2 step 1).

Quota is assigned first (``flavors.py``); then every pod set that asks for a topology (or has
one implied: no annotation in a ClusterQueue whose flavors are all TAS flavors) is placed in its
flavor's topology with ``tas.find_assignment``:

* quota Fit but the topology has no room → the workload's mode becomes Preempt (fragmentation:
  evicting workloads can make room) with Kueue's "topology … allows to fit only …" reason;
* Preempt (by quota or by topology) and the pod set does not fit even the empty topology →
  NoFit;
* preemption targets are searched until the topology fits too (``tas_targets``).

Pod sets of one workload are placed in order; each sees the capacity the earlier ones took.
"""
from __future__ import annotations

from gpupool.policy.kueue.preemption import candidate_key, reclaim_allows, within_cq_allows
from gpupool.policy.kueue.records import IN_COHORT_RECLAMATION, IN_CQ, KPodSet, KWorkload, PodSetAssignment, Target
from gpupool.policy.kueue.tas import UNCONSTRAINED, TopologyRequest, find_assignment, not_fit_message

IMPLIED = TopologyRequest(UNCONSTRAINED, None, implied=True)


def tas_request(state, cq_name: str, ps: KPodSet) -> TopologyRequest | None:
    """The pod set's TAS request, explicit or implied; None when it does not use TAS."""
    if state.tas is None:
        return None
    if ps.topology is not None:
        return ps.topology
    return IMPLIED if state.tas_only(cq_name) else None


def tas_mismatch(state, cq_name: str, flavor, ps: KPodSet) -> str | None:
    """Why a pod set cannot use ``flavor`` for TAS reasons (Kueue's wording); None when it can."""
    if state.tas is None:
        return None
    req = tas_request(state, cq_name, ps)
    if req is not None:
        if req.implied:
            return None
        if not flavor.topology_name:
            return f'Flavor "{flavor.name}" does not support TopologyAwareScheduling'
        tf = state.tas.get(flavor.name)
        if tf is None:
            return f'Flavor "{flavor.name}" information missing in TAS cache'
        if req.level is not None and req.level not in tf.levels:
            return f'Flavor "{flavor.name}" does not contain the requested level'
        return None
    if flavor.topology_name:
        return f'Flavor "{flavor.name}" supports only TopologyAwareScheduling'
    return None


def _flavor_of(psa: PodSetAssignment) -> str | None:
    names = set(psa.flavors.values())
    return next(iter(names)) if len(names) == 1 else None


def place(state, wl: KWorkload, pod_sets: list[PodSetAssignment], *, empty: bool = False,
          store: bool = True) -> tuple[int, str] | None:
    """Place every TAS pod set of ``wl`` on the current TAS snapshot (``empty``: on the empty
    topology). With ``store`` the per-leaf counts are written into ``pod_sets``. Returns None
    when all fit, else ``(pod set index, reason)`` of the first that does not."""
    held = []
    try:
        for psi, (ps, psa) in enumerate(zip(wl.pod_sets, pod_sets)):
            req = tas_request(state, wl.cq, ps)
            if req is None:
                continue
            fname = _flavor_of(psa)
            tf = state.tas.get(fname) if fname is not None else None
            if tf is None:
                if fname is None and psa.flavors:
                    return psi, "more than one flavor assigned: " + ", ".join(sorted(set(psa.flavors.values())))
                continue  # implied TAS for a pod set without requests, or not a TAS flavor
            if req.level is not None and req.level not in tf.levels:
                return psi, f'Flavor "{fname}" does not contain the requested level'
            counts = tf.counts(ps.requests, ps.node_selector, ps.tolerations, ps.gpu_type, empty=empty)
            result = find_assignment(tf.levels, counts, psa.count, req)
            if not result.fits:
                return psi, not_fit_message(tf.topology, result.fit_count, psa.count)
            if store:
                psa.topology = result.assignment
                psa.tas_flavor = fname
            if not empty:
                tf.add(result.assignment, ps.requests)
                held.append((tf, result.assignment, ps.requests))
        return None
    finally:
        for tf, assignment, per_pod in held:
            tf.add(assignment, per_pod, -1)


def uses_tas(state, wl: KWorkload) -> bool:
    return state.tas is not None and any(tas_request(state, wl.cq, ps) is not None for ps in wl.pod_sets)


def _remove(state, adms, sign: int = -1) -> None:
    for adm in adms:
        state.tree.cqs[adm.cq].add_usage(adm.usage, sign)
        state.tas.hold(adm.tas_uses(), sign)


def fits_without(state, wl: KWorkload, pod_sets: list[PodSetAssignment], gone) -> bool:
    """Whether the TAS pod sets fit once the workloads in ``gone`` are removed."""
    _remove(state, gone)
    try:
        return place(state, wl, pod_sets, store=False) is None
    finally:
        _remove(state, gone, 1)


def tas_targets(state, wl: KWorkload, pod_sets: list[PodSetAssignment], base: list[Target]) -> list[Target]:
    """Preemption targets that make the topology fit as well: ``base`` (the quota targets),
    then candidates holding TAS capacity in the same flavors, in candidate order, until it fits;
    a final pass drops the added ones not needed (latest first). [] when nothing helps."""
    if fits_without(state, wl, pod_sets, [t.adm for t in base]):
        return base
    flavors = {_flavor_of(psa) for psa in pod_sets} - {None}
    cq = state.cq_models[wl.cq]
    prem = cq.preemption
    taken = {t.adm.wl.key for t in base}
    root = state.tree.cqs[wl.cq].root()
    cands: list[tuple[object, str]] = []
    for adm in state.admitted.values():
        if adm.wl.key in taken or not any(f in flavors for f, _, _ in adm.tas_uses()):
            continue
        if adm.cq == wl.cq:
            if within_cq_allows(prem.within_cluster_queue, wl, adm.wl):
                cands.append((adm, IN_CQ))
        elif state.tree.cqs[adm.cq].root() is root and reclaim_allows(prem.reclaim_within_cohort, wl, adm.wl) \
                and state.tree.cqs[adm.cq].borrowing_any(adm.usage.keys()):
            # Another ClusterQueue of the cohort, reclaimable while it borrows (§5.1).
            cands.append((adm, IN_COHORT_RECLAMATION))
    cands.sort(key=lambda c: candidate_key(c[0], wl.cq, state.afs))
    chosen = list(base)
    gone = [t.adm for t in base]
    ok = False
    for adm, reason in cands:
        chosen.append(Target(adm, reason))
        gone.append(adm)
        if fits_without(state, wl, pod_sets, gone):
            ok = True
            break
    if not ok:
        return []
    for t in reversed(chosen[len(base):-1]):
        trial = [x.adm for x in chosen if x is not t]
        if fits_without(state, wl, pod_sets, trial):
            chosen.remove(t)
    return chosen
