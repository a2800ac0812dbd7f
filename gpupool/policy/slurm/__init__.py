"""The Slurm policy (``--policy slurm``): see ``docs/policies/slurm.md``.

Modules: config (settings from pool.slurm), jobinfo (what a job asks), priority
(multifactor), fairshare (Fair Tree, classic), decay (usage with half-life decay), queue
(build and sort), main_sched (main scheduler pass), backfill (time map and planning), select
(cons_tres nodes and GPUs), limits (partition/QOS/association limits, reasons, rejection),
preempt (preempt/qos, preempt/partition_prio) and policy (the decide loop, registration).
"""
from gpupool.policy.slurm.policy import SlurmPolicy  # noqa: F401  (registers "slurm")
