"""The live pool: the engine on a wall clock, executing jobs as real processes on this host.

``devices`` finds the GPUs (NVML, or the pool's declared devices), ``host`` turns a pool
directory into the one-node pool this host serves, ``jobenv``/``proc`` start and watch job
process groups, ``executor`` is the engine's live Executor, ``state`` keeps the daemon's
state in the ledger, ``daemon`` runs it all, ``api``/``client`` are its HTTP API over a Unix
socket. See docs/live.md.
"""
