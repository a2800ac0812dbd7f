"""Run Kueue scenario cases (``../shared/spec/cases/kueue/*.yaml``) against gpupool's Kueue core.

A case describes ClusterQueues, cohorts, flavors, admitted and pending workloads in a neutral
format (see the cases' README). The runner builds the Kueue state, runs what the case's
``kind`` names (one ``cycle``, the ``preemption`` target selection, ``flavorassigner``, or a
multi-cycle ``integration`` run) and compares with ``expected``. Expected fields the runner
does not know are listed as *not checked*, never passed silently.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gpupool.formats.quantity import kube_resource
from gpupool.model.kueue import (
    ClusterQueue,
    Cohort,
    FlavorQuotas,
    KueueConfig,
    Preemption,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
)
from gpupool.policy.kueue.cycle import ACTIVE, INADMISSIBLE, run_cycle
from gpupool.policy.kueue.flavors import assign_flavors
from gpupool.policy.kueue.preemption import get_targets
from gpupool.policy.kueue.records import (
    MODE_NAMES,
    Admitted,
    KPodSet,
    KWorkload,
    PodSetAssignment,
)
from gpupool.policy.kueue.state import KueueState

KINDS = ("cycle", "preemption", "flavorassigner", "integration")
CHECKED = {"admitted", "preempted", "stillPending", "queueState", "skippedPreemptions", "assignment"}

#: Input fields the runner reads, per place in a case file. A field outside these is reported as
#: *not checked* (the case may depend on something the runner does not model), never ignored
#: silently: unseen cases of the same format may use fields the spec's cases do not.
_WL_FIELDS = {"name", "clusterQueue", "priority", "creationTime", "quotaReservedTime", "podSets", "flavors",
              "uid", "evicted"}
INPUT_FIELDS: dict[str, set[str]] = {
    "": {"name", "kind", "source", "description", "flavors", "cohorts", "clusterQueues", "admitted", "pending",
         "expected", "config", "assumedAssignment"},
    "flavors[]": {"name", "nodeLabels", "nodeTaints", "tolerations", "topologyName"},
    "cohorts[]": {"name", "parent", "parentName", "resourceGroups", "fairWeight", "fairSharing"},
    "clusterQueues[]": {"name", "cohort", "cohortName", "resourceGroups", "queueingStrategy", "preemption",
                        "flavorFungibility", "fairWeight", "fairSharing", "stopPolicy"},
    "clusterQueues[].preemption": {"withinClusterQueue", "reclaimWithinCohort", "borrowWithinCohort"},
    "admitted[]": _WL_FIELDS,
    "pending[]": _WL_FIELDS - {"quotaReservedTime", "flavors", "evicted"},
    "admitted[].podSets[]": {"name", "count", "requests", "minCount", "nodeSelector", "tolerations"},
    "pending[].podSets[]": {"name", "count", "requests", "minCount", "nodeSelector", "tolerations"},
    "config": {"fairSharing", "featureGates"},
}


@dataclass
class CaseResult:
    name: str
    kind: str
    path: str
    mismatches: list[str] = field(default_factory=list)
    not_checked: list[str] = field(default_factory=list)
    observed: dict = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.mismatches

    def summary(self) -> str:
        status = "PASS" if self.passed else "FAIL"
        lines = [f"{status} {self.name} ({self.kind})"]
        lines += [f"  mismatch: {m}" for m in self.mismatches]
        lines += [f"  not checked: {n}" for n in self.not_checked]
        return "\n".join(lines)


class CaseError(ValueError):
    """A case file the runner cannot read; the message names the file and field."""


# ----------------------------------------------------------------------------- building


def _q(resource: str, value) -> int | None:
    if value is None:
        return None
    return kube_resource(resource, value)


def _groups(raw, where: str) -> list[ResourceGroup]:
    groups = []
    for gi, g in enumerate(raw or []):
        covered = tuple(g.get("coveredResources") or ())
        flavors = []
        for f in g.get("flavors") or []:
            res = f.get("resources") or {}
            if isinstance(res, list):  # Kubernetes list form
                res = {r["name"]: {"nominal": r.get("nominalQuota"), "borrowingLimit": r.get("borrowingLimit"),
                                   "lendingLimit": r.get("lendingLimit")} for r in res}
            quotas = {}
            for name, q in res.items():
                if not isinstance(q, dict):
                    q = {"nominal": q}
                nominal = q.get("nominal", q.get("nominalQuota"))
                if nominal is None:
                    raise CaseError(f"{where}: resourceGroups[{gi}] flavor {f.get('name')} resource {name}: no nominal")
                quotas[name] = ResourceQuota(_q(name, nominal), _q(name, q.get("borrowingLimit")),
                                             _q(name, q.get("lendingLimit")))
            flavors.append(FlavorQuotas(f["name"], quotas))
        groups.append(ResourceGroup(covered, flavors))
    return groups


def build_config(case: dict) -> KueueConfig:
    cfg = KueueConfig()
    for f in case.get("flavors") or []:
        cfg.flavors[f["name"]] = ResourceFlavor(
            f["name"], dict(f.get("nodeLabels") or {}), tuple(f.get("nodeTaints") or ()),
            tuple(f.get("tolerations") or ()), f.get("topologyName"))
    for c in case.get("cohorts") or []:
        cfg.cohorts[c["name"]] = Cohort(c["name"], c.get("parent") or c.get("parentName"), _groups(c.get("resourceGroups"), f"cohort {c['name']}"),
                                        float(c.get("fairWeight", (c.get("fairSharing") or {}).get("weight", 1))))
    for q in case.get("clusterQueues") or []:
        p = q.get("preemption") or {}
        bwc = p.get("borrowWithinCohort") or {}
        fung = q.get("flavorFungibility") or {}
        cq = ClusterQueue(
            name=q["name"], cohort=q.get("cohort") or q.get("cohortName") or None,
            resource_groups=_groups(q.get("resourceGroups"), f"clusterQueue {q['name']}"),
            queueing_strategy=q.get("queueingStrategy") or "BestEffortFIFO",
            namespace_selector={},
            preemption=Preemption(p.get("reclaimWithinCohort") or "Never", bwc.get("policy") or "Never",
                                  bwc.get("maxPriorityThreshold"), p.get("withinClusterQueue") or "Never"),
            flavor_fungibility_when_can_borrow=fung.get("whenCanBorrow") or "MayStopSearch",
            flavor_fungibility_when_can_preempt=fung.get("whenCanPreempt") or "TryNextFlavor",
            flavor_fungibility_preference=fung.get("preference") or "BorrowingOverPreemption",
            fair_weight=float(q.get("fairWeight", (q.get("fairSharing") or {}).get("weight", 1))),
            stop_policy=q.get("stopPolicy") or "None",
        )
        cfg.cluster_queues[cq.name] = cq
        if cq.cohort and cq.cohort not in cfg.cohorts:
            cfg.cohorts[cq.cohort] = Cohort(cq.cohort, implicit=True)
    for c in list(cfg.cohorts.values()):
        if c.parent and c.parent not in cfg.cohorts:
            cfg.cohorts[c.parent] = Cohort(c.parent, implicit=True)
    config = case.get("config") or {}
    cfg.feature_gates = dict(config.get("featureGates") or {})
    cfg.configuration = {k: v for k, v in config.items() if k != "featureGates"}
    return cfg


def _workload(raw: dict) -> KWorkload:
    pod_sets = []
    for ps in raw.get("podSets") or [{"name": "main", "count": 1}]:
        requests = {r: kube_resource(r, v) for r, v in (ps.get("requests") or {}).items()}
        pod_sets.append(KPodSet(ps.get("name", "main"), int(ps.get("count", 1)),
                                {r: v for r, v in requests.items() if v}, ps.get("minCount"),
                                dict(ps.get("nodeSelector") or {}), tuple(ps.get("tolerations") or ())))
    name = raw["name"]
    uid = str(raw.get("uid", name))
    return KWorkload(name, name, raw.get("clusterQueue", ""), int(raw.get("priority") or 0),
                     float(raw.get("creationTime") or 0), (uid,), pod_sets)


def _admitted(raw: dict, cfg: KueueConfig) -> Admitted:
    wl = _workload(raw)
    flavors = raw.get("flavors") or {}
    per_ps = any(isinstance(v, dict) for v in flavors.values())
    usage: dict = {}
    assignments = []
    for ps in wl.pod_sets:
        fl = flavors.get(ps.name, {}) if per_ps else flavors
        psa = PodSetAssignment(ps.name, ps.count, {}, {})
        for r, v in ps.requests.items():
            f = fl.get(r)
            if f is None:
                raise CaseError(f"admitted workload {wl.name}: no flavor for resource {r} of pod set {ps.name}")
            psa.flavors[r] = f
            psa.usage[r] = v * ps.count
            usage[(f, r)] = usage.get((f, r), 0) + v * ps.count
        assignments.append(psa)
    return Admitted(wl, wl.cq, usage, float(raw.get("quotaReservedTime") or 0), assignments,
                    evicted=bool(raw.get("evicted", False)))


def build_state(case: dict) -> tuple[KueueState, list[KWorkload]]:
    cfg = build_config(case)
    state = KueueState(cfg)
    for raw in case.get("admitted") or []:
        state.admit(_admitted(raw, cfg))
    pending = [_workload(raw) for raw in case.get("pending") or []]
    return state, pending


def heap_key(wl: KWorkload) -> tuple:
    return (-wl.priority, wl.created, wl.uid)


def heads_of(pending: list[KWorkload], skip: set = frozenset(), stopped: set = frozenset()) -> list[KWorkload]:
    """One head per ClusterQueue: its first active workload in heap order. A stopped
    ClusterQueue (``stopPolicy`` Hold/HoldAndDrain) is inactive and gives no head (§3.3)."""
    heads: dict[str, KWorkload] = {}
    for wl in sorted(pending, key=heap_key):
        if wl.key in skip or wl.cq in stopped:
            continue
        heads.setdefault(wl.cq, wl)
    return list(heads.values())


# ----------------------------------------------------------------------------- running


def load_case(path: str | Path) -> dict:
    path = Path(path)
    try:
        case = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise CaseError(f"{path}: YAML error: {exc}") from exc
    if not isinstance(case, dict) or case.get("kind") not in KINDS:
        raise CaseError(f"{path}: kind must be one of {', '.join(KINDS)}")
    return case


def _stopped(state: KueueState) -> set[str]:
    return {name for name, cq in state.cq_models.items() if cq.stop_policy not in ("None", "", None)}


def unread_fields(case: dict) -> list[str]:
    """Input fields of ``case`` the runner does not read (see ``INPUT_FIELDS``)."""
    out: list[str] = []

    def visit(obj, where: str, shown: str) -> None:
        known = INPUT_FIELDS.get(where)
        if known is None or not isinstance(obj, dict):
            return
        for key, value in obj.items():
            if key not in known:
                out.append(f"{shown}.{key}".lstrip("."))
                continue
            sub = f"{where}.{key}".lstrip(".")
            if isinstance(value, list):
                for i, item in enumerate(value):
                    visit(item, sub + "[]", f"{shown}.{key}[{i}]")
            else:
                visit(value, sub, f"{shown}.{key}")

    visit(case, "", "")
    return out


def run_case(path: str | Path) -> CaseResult:
    case = load_case(path)
    result = CaseResult(case.get("name") or Path(path).stem, case["kind"], str(path))
    for f in unread_fields(case):
        result.not_checked.append(f"input {f}: the runner does not read it")
    expected = case.get("expected") or {}
    for key in expected:
        if key not in CHECKED:
            result.not_checked.append(f"expected.{key}: the runner does not model it yet")
    runner = {"cycle": _run_cycle_case, "preemption": _run_preemption_case,
              "flavorassigner": _run_flavor_case, "integration": _run_integration_case}[case["kind"]]
    observed = runner(case, result)
    result.observed = observed
    _compare(case, expected, observed, result)
    return result


def _observe_admitted(entries) -> dict:
    out = {}
    for e in entries:
        out[e.wl.name] = {"clusterQueue": e.wl.cq,
                          "podSets": {p.name: {"count": p.count, "flavors": dict(p.flavors), "usage": dict(p.usage)}
                                      for p in e.assignment.pod_sets}}
    return out


def _run_cycle_case(case: dict, result: CaseResult) -> dict:
    state, pending = build_state(case)
    heads = heads_of(pending, stopped=_stopped(state))
    cycle = run_cycle(state, heads)
    admitted = {e.wl.name for e in cycle.admitted}
    queue = {wl.name: ACTIVE for wl in pending}
    for e in cycle.entries:
        if e.result != "admitted":
            queue[e.wl.name] = e.queue_state
    return {
        "admitted": _observe_admitted(cycle.admitted),
        "preempted": {t.adm.wl.name: t.reason for t, _ in cycle.preempted},
        "stillPending": sorted(wl.name for wl in pending if wl.name not in admitted),
        "queueState": {k: v for k, v in queue.items() if k not in admitted},
        "skippedPreemptions": dict(cycle.skipped_preemptions),
        "messages": {e.wl.name: f"{e.result}: {e.message}" for e in cycle.entries},
    }


def _run_preemption_case(case: dict, result: CaseResult) -> dict:
    state, pending = build_state(case)
    if len(pending) != 1:
        raise CaseError(f"{result.path}: a preemption case has exactly one pending workload")
    wl = pending[0]
    assumed = (case.get("assumedAssignment") or {}).get(wl.name) or {}
    request: dict = {}
    frs = set()
    for ps in wl.pod_sets:
        for r, v in ps.requests.items():
            spec = assumed.get(r)
            if spec is None:
                raise CaseError(f"{result.path}: assumedAssignment.{wl.name} has no flavor for {r}")
            fr = (spec["flavor"], r)
            request[fr] = request.get(fr, 0) + v * ps.count
            if spec.get("mode", "Preempt") == "Preempt":
                frs.add(fr)
    targets = get_targets(state, wl, wl.cq, request, frs)
    return {"admitted": {}, "preempted": {t.adm.wl.name: t.reason for t in targets},
            "stillPending": [wl.name], "queueState": {}, "skippedPreemptions": {}}


def _run_flavor_case(case: dict, result: CaseResult) -> dict:
    state, pending = build_state(case)
    assignments = {}
    for wl in pending:
        a = assign_flavors(state, wl)
        assignments[wl.name] = {
            "mode": MODE_NAMES[a.mode], "borrowing": a.borrowing,
            "podSets": {p.name: {"count": p.count, "flavors": dict(p.flavors), "usage": dict(p.usage)}
                        for p in a.pod_sets},
            "message": a.message,
        }
    return {"assignment": assignments, "admitted": {}, "preempted": {},
            "stillPending": sorted(wl.name for wl in pending), "queueState": {}, "skippedPreemptions": {}}


def _run_integration_case(case: dict, result: CaseResult, max_cycles: int = 100) -> dict:
    """Cycles until nothing changes: preempted workloads are evicted at once and requeued
    (keeping their creation time); inadmissible ones wait for a capacity change."""
    state, pending = build_state(case)
    waiting = {wl.key: wl for wl in pending}
    inadmissible: set = set()
    admitted_names: dict[str, object] = {}
    preempted: dict[str, str] = {}
    queue: dict[str, str] = {}
    quiet = 0
    now = 0.0
    for _ in range(max_cycles):
        now += 1.0
        heads = heads_of(list(waiting.values()), inadmissible, _stopped(state))
        if not heads:
            break
        cycle = run_cycle(state, heads)
        changed = False
        for e in cycle.admitted:
            waiting.pop(e.wl.key, None)
            state.admitted[e.wl.key].reserved_at = now
            admitted_names[e.wl.name] = e
            changed = True
        for t, _ in cycle.preempted:
            state.evict(t.adm)
            preempted[t.adm.wl.name] = t.reason
            admitted_names.pop(t.adm.wl.name, None)
            waiting[t.adm.wl.key] = t.adm.wl
            inadmissible.clear()  # a capacity change requeues every parked workload
            changed = True
        for e in cycle.entries:
            if e.result != "admitted":
                queue[e.wl.name] = e.queue_state
                if e.queue_state == INADMISSIBLE:
                    inadmissible.add(e.wl.key)
        quiet = 0 if changed else quiet + 1
        if quiet >= 3:
            break
    for wl in waiting.values():
        queue.setdefault(wl.name, ACTIVE)
    return {
        "admitted": _observe_admitted(admitted_names.values()),
        "preempted": preempted,
        "stillPending": sorted(wl.name for wl in waiting.values()),
        "queueState": {wl.name: queue[wl.name] for wl in waiting.values()},
        "skippedPreemptions": dict(state.skipped_preemptions),
    }


# ----------------------------------------------------------------------------- comparing


def _compare(case: dict, expected: dict, observed: dict, result: CaseResult) -> None:
    mism = result.mismatches
    if "admitted" in expected:
        want = {a["name"]: a for a in expected.get("admitted") or []}
        got = observed["admitted"]
        if set(want) != set(got):
            mism.append(f"admitted: expected {sorted(want)}, got {sorted(got)}")
        for name, exp in want.items():
            if name in got:
                _compare_admission(name, exp, got[name], mism)
    if "preempted" in expected:
        want = {p["name"]: p.get("reason") for p in expected.get("preempted") or []}
        got = observed["preempted"]
        if set(want) != set(got):
            mism.append(f"preempted: expected {sorted(want)}, got {sorted(got)}")
        for name, reason in want.items():
            if name in got and reason is not None and got[name] != reason:
                mism.append(f"preempted {name}: expected reason {reason}, got {got[name]}")
    if "stillPending" in expected:
        want = sorted(expected.get("stillPending") or [])
        if want != observed["stillPending"]:
            mism.append(f"stillPending: expected {want}, got {observed['stillPending']}")
    if "queueState" in expected:
        if case["kind"] in ("preemption", "flavorassigner"):
            result.not_checked.append("expected.queueState: not defined for this kind")
        else:
            for name, state in (expected.get("queueState") or {}).items():
                got = observed["queueState"].get(name)
                if got != state:
                    mism.append(f"queueState {name}: expected {state}, got {got}")
    if "skippedPreemptions" in expected:
        if case["kind"] != "cycle":
            result.not_checked.append("expected.skippedPreemptions: only counted for kind cycle")
        else:
            for cq, n in (expected.get("skippedPreemptions") or {}).items():
                got = observed["skippedPreemptions"].get(cq, 0)
                if got != n:
                    mism.append(f"skippedPreemptions {cq}: expected {n}, got {got}")
    if "assignment" in expected:
        got_all = observed.get("assignment")
        if got_all is None:
            result.not_checked.append("expected.assignment: only produced for kind flavorassigner")
        else:
            for name, exp in (expected.get("assignment") or {}).items():
                got = got_all.get(name)
                if got is None:
                    mism.append(f"assignment {name}: no such pending workload")
                    continue
                if "mode" in exp and exp["mode"] != got["mode"]:
                    mism.append(f"assignment {name}: expected mode {exp['mode']}, got {got['mode']}")
                if "borrowing" in exp and int(exp["borrowing"]) != got["borrowing"]:
                    mism.append(f"assignment {name}: expected borrowing {exp['borrowing']}, got {got['borrowing']}")
                _compare_admission(name, exp, got, mism)
                for key in exp:
                    if key not in ("mode", "borrowing", "flavors", "podSets", "clusterQueue", "name"):
                        result.not_checked.append(f"expected.assignment.{name}.{key}")


def _compare_admission(name: str, exp: dict, got: dict, mism: list[str]) -> None:
    if exp.get("clusterQueue") and got.get("clusterQueue") and exp["clusterQueue"] != got["clusterQueue"]:
        mism.append(f"admitted {name}: expected ClusterQueue {exp['clusterQueue']}, got {got['clusterQueue']}")
    pod_sets = got["podSets"]
    if "flavors" in exp:
        for ps_name, ps in pod_sets.items():
            for r, f in (exp["flavors"] or {}).items():
                if r in ps["flavors"] and ps["flavors"][r] != f:
                    mism.append(f"admitted {name} pod set {ps_name}: {r} expected flavor {f}, got {ps['flavors'][r]}")
            for r in ps["flavors"]:
                if r not in (exp["flavors"] or {}):
                    mism.append(f"admitted {name} pod set {ps_name}: flavor for {r} not expected")
    for ps_name, ps_exp in (exp.get("podSets") or {}).items():
        ps = pod_sets.get(ps_name)
        if ps is None:
            mism.append(f"admitted {name}: no pod set {ps_name}")
            continue
        if "count" in ps_exp and int(ps_exp["count"]) != ps["count"]:
            mism.append(f"admitted {name} pod set {ps_name}: expected count {ps_exp['count']}, got {ps['count']}")
        for r, f in (ps_exp.get("flavors") or {}).items():
            if ps["flavors"].get(r) != f:
                mism.append(f"admitted {name} pod set {ps_name}: {r} expected flavor {f}, got {ps['flavors'].get(r)}")
        for r, v in (ps_exp.get("usage") or {}).items():
            if ps["usage"].get(r) != kube_resource(r, v):
                mism.append(f"admitted {name} pod set {ps_name}: {r} expected usage {v}, got {ps['usage'].get(r)}")


def run_dir(directory: str | Path) -> list[CaseResult]:
    return [run_case(p) for p in sorted(Path(directory).glob("*.yaml"))]


if __name__ == "__main__":  # pragma: no cover
    import sys

    for r in run_dir(sys.argv[1] if len(sys.argv) > 1 else "../shared/spec/cases/kueue"):
        print(r.summary())
