"""slurm-operator (``--policy operator``): see ``docs/policies/operator.md``.

Modules: membership (node tags: which side serves a node), policy (Slurm on NodeSet nodes,
Kueue on the fleet, registration), controller (the capacity controller: schedule or demand,
drain before scale-in, scale to zero) and draining (GPU-hours spent draining, from a run).
"""
from gpupool.policy.operator.policy import OperatorPolicy  # noqa: F401  (registers "operator")
