"""slurm-bridge (``--policy bridge``): see ``docs/policies/bridge.md``.

Modules: mapping (which workloads are Kubernetes', pod grouping, slurmjob annotations),
view (a composed policy's private node table and job dicts, shared with the operator) and
policy (the decide loop, registration).
"""
from gpupool.policy.bridge.policy import BridgePolicy  # noqa: F401  (registers "bridge")
