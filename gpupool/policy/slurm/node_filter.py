"""A job's own node limits: ``--nodelist`` (required nodes), ``--exclude`` and ``--constraint``
(node features), as slurmctld applies them.

Every placement reads them through :func:`job_nodes`, so the main pass, backfill's will-run,
preemption and the submit check all see the same limits. What a real 22.05.8 did
(``tests/differential/test_real_slurm_node_filter.py``):

* ``-N3 -w gpu02`` ran on three nodes including gpu02 (all of a three-node partition):
  required nodes are a subset the job must hold, the rest is chosen as ``_eval_nodes`` walks on
  from them (``eval_nodes.pick_nodes``; on four idle nodes ``-N2 -w gpu02`` ran on gpu02-03);
  ``-n3 -w gpu01,gpu02`` ran its three tasks on those two nodes; ``-x gpu01`` never used gpu01.
* A job whose required nodes were busy waited (Resources) without blocking its partition: lower
  jobs started at once on other nodes (slurmctld withholds only the required nodes when they
  are at least the job's node count).
* sbatch refused an unknown node ("Invalid node name specified"), a node outside the partition
  ("Requested nodes not in this partition") and a feature no node has ("Invalid feature
  specification").
"""
from __future__ import annotations

from gpupool.engine.nodes import NodeTable
from gpupool.errors import InputError
from gpupool.formats.hostlist import expand_hostlist
from gpupool.formats.slurm_features import parse_constraint

MSG_BAD_NODE = "Invalid node name specified"
MSG_NOT_IN_PARTITION = "Requested nodes not in this partition"
MSG_BAD_FEATURE = "Invalid feature specification"


class NodeLimits:
    """One job's limits on a node table: ``allowed`` (bit set of nodes it may use, None = any),
    ``required`` (bit set of nodes it must hold, 0 = none), ``problem`` (sbatch's message when
    the limits name a node or feature the cluster lacks, else None), ``excluded`` (the bit set
    ``--exclude`` names: slurmctld refuses a job whose required nodes are among them)."""

    __slots__ = ("allowed", "excluded", "problem", "required", "required_count")

    def __init__(self, allowed: int | None, required: int, problem: str | None, excluded: int = 0) -> None:
        self.allowed = allowed
        self.required = required
        self.required_count = required.bit_count()
        self.problem = problem
        self.excluded = excluded


_NONE = NodeLimits(None, 0, None)
_MEMO: dict[tuple, tuple[NodeTable, NodeLimits]] = {}


def limits_key(wl) -> tuple | None:
    """What the limits of ``wl`` depend on (None when it has none): part of the key of every
    memo that caches a placement answer per job shape."""
    if wl.nodelist is None and wl.exclude is None and wl.constraint is None:
        return None
    return (wl.nodelist, wl.exclude, wl.constraint)


def job_nodes(wl, nodes: NodeTable) -> NodeLimits:
    """The limits of ``wl`` on ``nodes`` (memoised per table and limits)."""
    key = limits_key(wl)
    if key is None:
        return _NONE
    memo_key = (id(nodes),) + key
    hit = _MEMO.get(memo_key)
    if hit is not None and hit[0] is nodes:
        return hit[1]
    if len(_MEMO) > 256:  # it holds node tables: kept small for long-lived processes
        _MEMO.clear()
    got = _compute(wl.nodelist, wl.exclude, wl.constraint, nodes)
    _MEMO[memo_key] = (nodes, got)
    return got


def _compute(nodelist: str | None, exclude: str | None, constraint: str | None, nodes: NodeTable) -> NodeLimits:
    every = (1 << len(nodes.names)) - 1
    allowed = every
    required = excluded = 0
    problem = None
    index = nodes.index
    for text, is_required in ((nodelist, True), (exclude, False)):
        if not text:
            continue
        mask = 0
        try:
            names = expand_hostlist(text)
        except (InputError, ValueError):  # a workload not read from sbatch (which checks it)
            problem = problem or MSG_BAD_NODE
            continue
        for name in names:
            i = index.get(name)
            if i is None:
                problem = problem or MSG_BAD_NODE
                continue
            mask |= 1 << i
        if is_required:
            required = mask
        else:
            excluded = mask
            allowed &= ~mask
    if constraint:
        ok = features_mask(constraint, nodes)
        if ok is None:
            problem = problem or MSG_BAD_FEATURE
            ok = 0
        allowed &= ok
    return NodeLimits(None if allowed == every else allowed, required, problem, excluded)


def features_mask(constraint: str, nodes: NodeTable) -> int | None:
    """The nodes whose features satisfy ``constraint``; None when it names a feature no node
    has (sbatch's "Invalid feature specification")."""
    op, names = parse_constraint(constraint)
    feats = nodes.features
    known = set().union(*feats) if feats else set()
    if any(n not in known for n in names):
        return None
    mask = 0
    for i, have in enumerate(feats):
        if (all if op == "&" else any)(n in have for n in names):
            mask |= 1 << i
    return mask
