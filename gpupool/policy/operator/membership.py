"""Which side of the pool each node serves under slurm-operator, read from the node table.

The capacity controller tags nodes with ``Engine.set_node_owner``; the tags are data in the
snapshot (``nodes.owner``), so the policy stays a pure function of what it is shown:

* ``slurm``: a slurmd pod of the NodeSet runs there; Slurm schedules it;
* ``slurm-draining``: scale-in chose it; Slurm keeps it (drained: running jobs finish or hit
  their limit, nothing new starts) until it is empty and goes back to the fleet;
* ``slurm-joining``: scale-out chose a fleet node that still runs pods; it is cordoned and
  joins the NodeSet when they are gone;
* ``fleet`` (or no tag before the controller first runs, for nodes outside the NodeSet's
  initial replicas): Kubernetes workloads under Kueue.
"""
from __future__ import annotations

SLURM = "slurm"
DRAINING = "slurm-draining"
JOINING = "slurm-joining"
FLEET = "fleet"
SLURM_SIDE = frozenset({SLURM, DRAINING})
#: Prefix of drain reasons the operator sets (the real operator prefixes its own reasons the
#: same way and never touches drains without it).
REASON_PREFIX = "slurm-operator: "


def slurm_side(owner: str | None, initially_lent: bool) -> bool:
    """Whether a node with tag ``owner`` belongs to Slurm now."""
    if owner is None:
        return initially_lent
    return owner in SLURM_SIDE
