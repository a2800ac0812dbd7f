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
A sliced pod set is placed in whole slices (``tas.find_assignment``); a pod-set group
(``podset-group-name``) is placed as one unit when its first member comes up
(``tas_group.find_group_assignment``), after ``flavors.py`` gave both members one flavor.
"""
from __future__ import annotations

from gpupool.policy.kueue.preemption import candidate_key, reclaim_allows, within_cq_allows
from gpupool.policy.kueue.records import IN_COHORT_RECLAMATION, IN_CQ, KPodSet, KWorkload, PodSetAssignment, Target
from gpupool.policy.kueue.tas import UNCONSTRAINED, TopologyRequest, find_assignment, not_fit_message
from gpupool.policy.kueue.tas_group import find_group_assignment

IMPLIED = TopologyRequest(UNCONSTRAINED, None, implied=True)


def pod_set_groups(wl: KWorkload) -> dict[int, tuple[int, ...]]:
    """Pod-set groups (``podset-group-name``, §8): the first member's index -> every member's
    index, for groups of two or more pod sets; later members map to the same tuple."""
    by_name: dict[str, list[int]] = {}
    for psi, ps in enumerate(wl.pod_sets):
        if ps.topology is not None and ps.topology.group:
            by_name.setdefault(ps.topology.group, []).append(psi)
    out: dict[int, tuple[int, ...]] = {}
    for members in by_name.values():
        if len(members) > 1:
            out[members[0]] = tuple(members)
    return out


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
        for level in (req.level, req.slice_level):
            if level is not None and level not in tf.levels:
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
    when all fit, else ``(pod set index, reason)`` of the first that does not. A pod-set group
    is placed as one unit when its first member comes up."""
    held: list = []
    grouped = pod_set_groups(wl)
    done: set[int] = set()
    try:
        for psi, (ps, psa) in enumerate(zip(wl.pod_sets, pod_sets)):
            if psi in done:
                continue
            req = tas_request(state, wl.cq, ps)
            if req is None:
                continue
            fname = _flavor_of(psa)
            tf = state.tas.get(fname) if fname is not None else None
            if tf is None:
                if fname is None and psa.flavors:
                    return psi, "more than one flavor assigned: " + ", ".join(sorted(set(psa.flavors.values())))
                continue  # implied TAS for a pod set without requests, or not a TAS flavor
            why = _level_problem(fname, tf, req, psa.count)
            if why:
                return psi, why
            members = grouped.get(psi)
            if members is not None:
                done.update(members)
                failure = _place_group(state, wl, pod_sets, members, req, tf, empty, store, held)
                if failure is not None:
                    return failure
                continue
            counts = tf.counts(ps.requests, ps.node_selector, ps.tolerations, ps.gpu_type, empty=empty)
            result = find_assignment(tf.levels, counts, psa.count, req)
            if not result.fits:
                return psi, not_fit_message(tf.topology, result.fit_count, result.needed, result.unit)
            _keep(psa, result.assignment, fname, tf, ps.requests, empty, store, held)
        return None
    finally:
        for tf, assignment, per_pod in held:
            tf.add(assignment, per_pod, -1)


def _level_problem(fname: str, tf, req: TopologyRequest, count: int) -> str | None:
    """Why ``req`` cannot be placed in flavor ``fname``'s topology at all (Kueue's wording)."""
    for level in (req.level, req.slice_level):
        if level is not None and level not in tf.levels:
            return f'Flavor "{fname}" does not contain the requested level'
    if req.slice_level is not None:
        top = tf.levels.index(req.level) if req.level is not None else 0
        if tf.levels.index(req.slice_level) < top:
            return f"podset slice topology {req.slice_level} is above the podset topology {req.level}"
        if count % req.unit:  # a reduced count (partial admission) that breaks the slices
            return f"slice size {req.unit} does not divide the pod count {count}"
    return None


def _keep(psa: PodSetAssignment, assignment: dict, fname: str, tf, per_pod: dict, empty: bool, store: bool,
          held: list) -> None:
    """Record a placement in the pod set's assignment and hold its capacity for later pod sets."""
    if store:
        psa.topology = assignment
        psa.tas_flavor = fname
    if not empty:
        tf.add(assignment, per_pod)
        held.append((tf, assignment, per_pod))


def _place_group(state, wl: KWorkload, pod_sets: list[PodSetAssignment], members: tuple[int, ...],
                 req: TopologyRequest, tf, empty: bool, store: bool, held: list) -> tuple[int, str] | None:
    """Place a pod-set group (leader with a single pod + workers) in one go (``tas_group``)."""
    if len(members) != 2:
        return members[0], f"pod-set group {req.group!r} has {len(members)} pod sets; Kueue groups exactly 2"
    if len({_flavor_of(pod_sets[m]) for m in members}) != 1:
        return members[0], f"pod-set group {req.group!r} got different flavors for its pod sets"
    a, b = members
    lead, work = (a, b) if pod_sets[a].count == 1 else (b, a)
    if pod_sets[lead].count != 1:
        return a, (f"pod-set group {req.group!r}: one pod set must have a single pod, got "
                   f"{pod_sets[a].count} and {pod_sets[b].count}")
    lps, wps = wl.pod_sets[lead], wl.pod_sets[work]
    wreq = tas_request(state, wl.cq, wps) or req
    workers = tf.counts(wps.requests, wps.node_selector, wps.tolerations, wps.gpu_type, empty=empty)
    leader = tf.counts(lps.requests, lps.node_selector, lps.tolerations, lps.gpu_type, empty=empty)
    with_leader = tf.counts_with_leader(wps.requests, lps.requests, wps.node_selector, wps.tolerations,
                                        wps.gpu_type, empty=empty)
    result = find_group_assignment(tf.levels, workers, leader, with_leader, pod_sets[work].count, wreq)
    if not result.fits:
        return work, not_fit_message(tf.topology, result.fit_count, result.needed)
    fname = _flavor_of(pod_sets[lead])
    _keep(pod_sets[lead], {result.leader: 1}, fname, tf, lps.requests, empty, store, held)
    _keep(pod_sets[work], result.workers, fname, tf, wps.requests, empty, store, held)
    return None


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
