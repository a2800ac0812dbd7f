"""``--policy operator``: slurm-operator, Slurm running inside the Kubernetes pool.

A NodeSet lends nodes to Slurm (spec fleet_and_bridge §2.2): slurmd runs in pods there, and
Slurm schedules native jobs on exactly those nodes; every other node is the Kubernetes fleet,
where Kueue admits workloads and service replicas. This policy composes the two unmodified
policies over private views of the pool (``gpupool.policy.bridge.view``): Slurm sees only the
NodeSet's nodes and the Slurm jobs, Kueue only the fleet's nodes and the Kubernetes workloads.
Nodes of the other side look fully used to each, so neither places work there and neither
judges a job impossible because a node is lent out for a while.

Which node is on which side is the capacity controller's business (``.controller``): it
tags nodes, drains before scale-in and hands nodes back; the policy only reads the tags.
"""
from __future__ import annotations

from gpupool.engine.decisions import WakeAt
from gpupool.engine.job import Job
from gpupool.engine.policy_api import check_options, register
from gpupool.engine.snapshot import CHANGED_TICK, Snapshot
from gpupool.errors import GpupoolError, PolicyNotApplicable
from gpupool.formats.slinky import initial_members, pool_nodesets
from gpupool.model.pool import Pool
from gpupool.policy.bridge.mapping import KUBERNETES_RULES, is_kubernetes
from gpupool.policy.bridge.view import NodeView, sub_snapshot
from gpupool.policy.kueue.policy import KueuePolicy
from gpupool.policy.operator.membership import slurm_side
from gpupool.policy.slurm.policy import SlurmPolicy

_OPTIONS = {"nodesets", "kubernetes", "gang", "controller"}


class OperatorPolicy:
    """Slurm on the NodeSet's nodes, Kueue on the fleet's."""

    name = "operator"

    def __init__(self, pool: Pool, options: dict) -> None:
        check_options("operator", options, _OPTIONS)
        self.pool = pool
        self.nodesets = pool_nodesets(pool, options.get("nodesets"))
        if not self.nodesets:
            raise PolicyNotApplicable(
                f"policy operator: pool {pool.name} declares no NodeSet (put slinky.slurm.net NodeSet "
                f"YAML in {pool.path or '<pool>'}/slurm-operator/ or pass the option nodesets=PATH)")
        lent: dict[str, str] = {}
        for ns in self.nodesets:
            for name in initial_members(ns, pool):
                if name in lent:
                    raise GpupoolError(f"policy operator: node {name} is in NodeSets {lent[name]} and {ns.name}")
                lent[name] = ns.name
        self.initial = lent
        self.rule = str(options.get("kubernetes", "auto"))
        if self.rule not in KUBERNETES_RULES:
            raise ValueError(f"policy operator: option kubernetes expects one of {', '.join(KUBERNETES_RULES)}")
        self.with_controller = str(options.get("controller", "true")).lower() not in ("false", "no", "0", "off")
        self.slurm = SlurmPolicy(pool, {})
        gang = str(options.get("gang", "false")).lower() in ("true", "yes", "1", "on")
        self.kueue = KueuePolicy(pool, {}, gang=gang, name="kueue-gang" if gang else "kueue")
        self.tick_interval = self.slurm.tick_interval
        # Time limits are Slurm's (Kueue sets none beyond the workload's own).
        self.over_time_limit = self.slurm.over_time_limit
        self.over_time_limit_of = self.slurm.over_time_limit_of  # a partition's OverTimeLimit
        self.time_limit_check_interval = self.slurm.time_limit_check_interval
        self._src = None
        self._views: tuple[NodeView, NodeView] | None = None
        self._kube: dict[int, tuple[object, bool]] = {}
        self._lent_idx: frozenset[int] | None = None
        self._kwakes: set[float] = set()  # times Kueue asked to be called again

    def controllers(self) -> list:
        """The engine controllers this policy needs (the NodeSet capacity controller)."""
        if not self.with_controller:
            return []
        from gpupool.policy.operator.controller import CapacityController

        return [CapacityController(self.pool, ns, self) for ns in self.nodesets]

    def summary_figures(self, output) -> dict:
        """What only this policy costs: drains and the GPU-hours NodeSet nodes spent draining."""
        from gpupool.policy.operator.draining import draining_figures

        return {"draining": draining_figures(output)}

    def is_kubernetes(self, job: Job) -> bool:
        found = self._kube.get(job.id)
        if found is None or found[0] is not job.wl:
            found = self._kube[job.id] = (job.wl, is_kubernetes(job.wl, self.rule))
        return found[1]

    def slurm_nodes(self, nodes) -> list[bool]:
        """Per node index: does Slurm own it now?"""
        if self._lent_idx is None:
            self._lent_idx = frozenset(nodes.index[n] for n in self.initial)
        lent = self._lent_idx
        return [slurm_side(o, i in lent) for i, o in enumerate(nodes.owner)]

    def resolve_request(self, wl, *, recovered: bool = False):
        """Jobs submitted to its Slurm get slurm.conf's job defaults and submit checks as under
        ``--policy slurm`` (``SlurmPolicy.resolve_request``); Kubernetes workloads go to Kueue
        and pass unchanged."""
        if is_kubernetes(wl, self.rule):
            return wl
        return self.slurm.resolve_request(wl, recovered=recovered)

    def decide(self, snap: Snapshot) -> list:
        if self._views is None or self._src is not snap.nodes:
            self._views = (NodeView(snap.pool), NodeView(snap.pool))
            self._src = snap.nodes
            self._lent_idx = None
        sview, kview = self._views
        on_slurm = self.slurm_nodes(snap.nodes)
        sview.refresh(snap.nodes, [i for i, s in enumerate(on_slurm) if not s])
        kview.refresh(snap.nodes, [i for i, s in enumerate(on_slurm) if s])
        sp: dict[int, Job] = {}
        kp: dict[int, Job] = {}
        for job in snap.pending.values():
            (kp if self.is_kubernetes(job) else sp)[job.id] = job
        sa: dict[int, Job] = {}
        ka: dict[int, Job] = {}
        for job in snap.active.values():
            (ka if self.is_kubernetes(job) else sa)[job.id] = job
        out: list = []
        if sp or sa:
            out.extend(self.slurm.decide(sub_snapshot(snap, sview, sp, sa, snap.jobs)))
        # Kueue runs on events and its own timers, never on Slurm's periodic tick alone.
        now = snap.now
        due = snap.trigger != "tick" or (snap.changed & ~CHANGED_TICK) or any(w <= now for w in self._kwakes)
        if due and (kp or ka or snap.reserved):
            reserved = {i: j for i, j in snap.reserved.items() if self.is_kubernetes(j)}
            kout = self.kueue.decide(sub_snapshot(snap, kview, kp, ka, snap.jobs, reserved))
            self._kwakes = {w for w in self._kwakes if w > now}
            self._kwakes.update(d.time for d in kout if type(d) is WakeAt)
            out.extend(kout)
        return out


@register("operator", "slurm-operator: Slurm on a NodeSet's nodes (drain before scale-in), Kueue on the fleet")
def _operator(pool: Pool, options: dict) -> OperatorPolicy:
    return OperatorPolicy(pool, options)
