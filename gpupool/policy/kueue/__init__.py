"""Kueue: quota with hierarchical cohorts, queues, the scheduling cycle, flavor assignment,
classic and fair-sharing preemption, waitForPodsReady, and kube-scheduler placement.

Importing this package registers ``--policy kueue`` and ``--policy kueue-gang``.
"""
from gpupool.policy.kueue import policy as _policy  # noqa: F401  (runs @register)
