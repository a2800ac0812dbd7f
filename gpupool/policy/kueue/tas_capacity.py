"""TAS capacity (spec kueue.md §8): free resources per lowest-level topology domain.

One ``TasFlavor`` per ResourceFlavor with a ``topologyName``: the Ready, schedulable nodes that
carry the flavor's node labels and every level label of its Topology, grouped into leaf domains
(the tuple of their level label values). A domain's free capacity is the sum of its nodes'
free resources (as Kueue aggregates a leaf domain) minus the TAS usage the snapshot holds on
top of them: admitted workloads whose pods are not bound yet, and, during a cycle, the
workloads admitted in it. Removing a workload (a preemption simulation) subtracts its usage
again, which frees the capacity its bound pods hold on the nodes.

Pod-level filters (the pod's node selector, taints it does not tolerate, the engine's GPU
product) decide which nodes of a leaf count for a given pod set. Only cpu, memory and
``nvidia.com/gpu`` are counted (what the nodes declare); other requests do not limit TAS.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from gpupool.model.resources import CPU, GPU, MEMORY
from gpupool.policy.kueue.flavors import BLOCKING_EFFECTS, tolerates
from gpupool.policy.kueue.tas import Leaf

COUNTED = (CPU, MEMORY, GPU)
#: Pods that fit when a pod set requests none of the counted resources.
UNBOUNDED = 1 << 30


@dataclass(slots=True)
class TasNode:
    """A node of a TAS flavor: its leaf domain, what filters it, and free / allocatable
    ``(cpu, memory, gpu)``. ``index`` is its engine node index when the free resources are read
    live from the engine's lists (``TasFlavor.live``)."""

    name: str
    leaf: Leaf
    labels: dict[str, str]
    taints: tuple[dict, ...]
    gpu_type: str | None
    free: tuple[int, int, int]
    allocatable: tuple[int, int, int]
    index: int = -1


@dataclass(slots=True)
class TasFlavor:
    flavor: str
    topology: str
    levels: tuple[str, ...]
    nodes: list[TasNode] = field(default_factory=list)
    #: leaf -> resource -> quantity held beyond what the nodes' free resources show.
    usage: dict[Leaf, dict[str, int]] = field(default_factory=dict)
    #: ``(up, drain, free_cpu, free_mem, free_gpus)`` lists indexed by ``TasNode.index``: the
    #: engine's live node state, read instead of ``TasNode.free`` (None: use ``free``).
    live: tuple | None = None
    #: Pod-filter key -> the nodes passing the static filters (shared between passes).
    memo: dict = field(default_factory=dict)

    def _passing(self, per_pod: dict[str, int], selector, tolerations, gpu_type) -> list[TasNode]:
        key = (tuple(sorted(selector.items())) if selector else (), repr(tolerations),
               gpu_type if per_pod.get(GPU) else None)
        found = self.memo.get(key)
        if found is None:
            found = []
            for n in self.nodes:
                if selector and any(n.labels.get(k) != v for k, v in selector.items()):
                    continue
                if key[2] and n.gpu_type != key[2]:
                    continue
                if any(t.get("effect") in BLOCKING_EFFECTS and not tolerates(tolerations, t) for t in n.taints):
                    continue
                found.append(n)
            self.memo[key] = found
        return found

    def counts(self, per_pod: dict[str, int], selector: dict[str, str] | None = None,
               tolerations=(), gpu_type: str | None = None, empty: bool = False) -> dict[Leaf, int]:
        """Pods of shape ``per_pod`` that fit in each leaf (``empty``: on the empty cluster)."""
        # The hot path of every TAS placement: the division is inlined (no per-leaf list).
        want = [(k, r, per_pod[r]) for k, r in enumerate(COUNTED) if per_pod.get(r, 0) > 0]
        usage = None if empty else self.usage
        out: dict[Leaf, int] = {}
        for leaf, free in self._aggregate(per_pod, selector, tolerations, gpu_type, empty).items():
            held = usage.get(leaf) if usage else None
            if held:
                free = [free[k] - held.get(r, 0) for k, r in enumerate(COUNTED)]
            out[leaf] = min((max(0, free[k]) // v for k, _, v in want), default=UNBOUNDED)
        return out

    def counts_with_leader(self, per_pod: dict[str, int], leader_pod: dict[str, int], selector=None,
                           tolerations=(), gpu_type=None, empty: bool = False) -> dict[Leaf, int]:
        """Pods of shape ``per_pod`` that still fit in each leaf once one ``leader_pod`` is
        there (pod-set groups): the leaf's free resources, as the workers' filters see them,
        minus the leader's request. A leaf where the leader does not fit is left out."""
        out = {}
        for leaf, free in self.free(per_pod, selector, tolerations, gpu_type, empty).items():
            rest = [free[k] - leader_pod.get(r, 0) for k, r in enumerate(COUNTED)]
            if all(v >= 0 for v in rest):
                out[leaf] = _fit(rest, per_pod)
        return out

    def free(self, per_pod: dict[str, int], selector: dict[str, str] | None = None,
             tolerations=(), gpu_type: str | None = None, empty: bool = False) -> dict[Leaf, list[int]]:
        """Free ``(cpu, memory, gpu)`` per leaf over the nodes a pod of shape ``per_pod`` may use."""
        usage = None if empty else self.usage
        out: dict[Leaf, list[int]] = {}
        for leaf, free in self._aggregate(per_pod, selector, tolerations, gpu_type, empty).items():
            held = usage.get(leaf) if usage else None
            if held:
                free = [free[k] - held.get(r, 0) for k, r in enumerate(COUNTED)]
            out[leaf] = free
        return out

    def _aggregate(self, per_pod, selector, tolerations, gpu_type, empty) -> dict[Leaf, list[int]]:
        """Sum of the usable nodes' free (or, ``empty``, allocatable) resources per leaf."""
        agg: dict[Leaf, list[int]] = {}
        live = self.live
        if live is not None:
            up, drain, fc, fm, fg = live
        for n in self._passing(per_pod, selector, tolerations, gpu_type):
            if live is not None:
                i = n.index
                if not up[i] or drain[i]:  # only Ready, schedulable nodes, even when empty
                    continue
                src = n.allocatable if empty else (fc[i], fm[i], fg[i])
            else:
                src = n.allocatable if empty else n.free
            cell = agg.get(n.leaf)
            if cell is None:
                agg[n.leaf] = list(src)
            else:
                cell[0] += src[0]
                cell[1] += src[1]
                cell[2] += src[2]
        return agg

    def add(self, assignment: dict[Leaf, int], per_pod: dict[str, int], sign: int = 1) -> None:
        """Hold (``sign`` 1) or release (-1) ``assignment``'s pods of shape ``per_pod``."""
        for leaf, n in assignment.items():
            cell = self.usage.setdefault(leaf, {})
            for r in COUNTED:
                v = per_pod.get(r, 0)
                if v:
                    cell[r] = cell.get(r, 0) + sign * v * n

    def leaf_of_labels(self, labels: dict[str, str]) -> Leaf | None:
        values = tuple(labels.get(k) for k in self.levels)
        return None if any(v is None for v in values) else values  # type: ignore[return-value]


def _fit(free, per_pod: dict[str, int]) -> int:
    """How many pods of shape ``per_pod`` fit in ``free`` ``(cpu, memory, gpu)``."""
    return min((max(0, free[k]) // per_pod[r] for k, r in enumerate(COUNTED) if per_pod.get(r, 0) > 0),
               default=UNBOUNDED)


@dataclass(slots=True)
class TasSnapshot:
    """The TAS flavors of a cycle's snapshot, by flavor name."""

    flavors: dict[str, TasFlavor] = field(default_factory=dict)

    def get(self, flavor: str) -> TasFlavor | None:
        return self.flavors.get(flavor)

    def usage_snapshot(self) -> dict:
        return {f: {leaf: dict(c) for leaf, c in tf.usage.items()} for f, tf in self.flavors.items()}

    def restore(self, snap: dict) -> None:
        for f, tf in self.flavors.items():
            tf.usage = {leaf: dict(c) for leaf, c in snap.get(f, {}).items()}

    def hold(self, uses, sign: int = 1) -> None:
        """Apply an admitted workload's TAS uses: ``(flavor, assignment, per_pod)`` triples."""
        for flavor, assignment, per_pod in uses:
            tf = self.flavors.get(flavor)
            if tf is not None:
                tf.add(assignment, per_pod, sign)


def tas_flavor_names(kueue) -> list[str]:
    """ResourceFlavors with a ``topologyName`` whose Topology exists."""
    return [name for name, f in kueue.flavors.items() if f.topology_name and f.topology_name in kueue.topologies]


def static_nodes(kueue, nodes, taints=None) -> dict[str, TasFlavor]:
    """Per TAS flavor, the engine's nodes carrying its labels and every level label (whatever
    their state): built once per pool; ``from_node_table`` reuses it on every pass."""
    out = {}
    for fname in tas_flavor_names(kueue):
        flavor = kueue.flavors[fname]
        topo = kueue.topologies[flavor.topology_name]
        tf = TasFlavor(fname, topo.name, tuple(topo.levels))
        for i in range(len(nodes)):
            labels = nodes.labels[i]
            if any(labels.get(k) != v for k, v in flavor.node_labels.items()):
                continue
            leaf = tf.leaf_of_labels(labels)
            if leaf is None:
                continue
            alloc = (nodes.cpu_total[i], nodes.mem_total[i], nodes.gpu_total[i])
            tf.nodes.append(TasNode(nodes.names[i], leaf, labels, tuple(taints[i]) if taints is not None else (),
                                    nodes.gpu_type[i], alloc, alloc, i))
        out[fname] = tf
    return out


def from_node_table(static: dict[str, TasFlavor], nodes) -> TasSnapshot:
    """The snapshot of a simulation pass: ``static_nodes`` read against the engine's live node
    state (Ready and schedulable nodes, their free resources); usage starts empty."""
    live = (nodes.up, nodes.drain, nodes.free_cpu, nodes.free_mem, nodes.free_gpus)
    return TasSnapshot({f: TasFlavor(tf.flavor, tf.topology, tf.levels, tf.nodes, {}, live, tf.memo)
                        for f, tf in static.items()})


def from_pool_nodes(kueue, pool_nodes) -> TasSnapshot:
    """The snapshot of a dump: every listed Node's allocatable is free (pods are not dumped)."""
    snap = TasSnapshot()
    for fname in tas_flavor_names(kueue):
        flavor = kueue.flavors[fname]
        topo = kueue.topologies[flavor.topology_name]
        tf = TasFlavor(fname, topo.name, tuple(topo.levels))
        for n in pool_nodes:
            state = str(n.state).upper()
            if state.startswith(("DOWN", "FAIL", "DRAIN", "FUTURE")):
                continue
            if any(n.labels.get(k) != v for k, v in flavor.node_labels.items()):
                continue
            leaf = tf.leaf_of_labels(n.labels)
            if leaf is None:
                continue
            alloc = (n.cpu_millicores, n.memory_mib, n.gpu_count)
            tf.nodes.append(TasNode(n.name, leaf, dict(n.labels), tuple(n.taints), n.gpu_type, alloc, alloc))
        snap.flavors[fname] = tf
    return snap
