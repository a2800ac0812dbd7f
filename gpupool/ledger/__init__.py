"""The ledger: durable accounting, imports from real Slurm and Kueue, policy history, audit.

    >>> from gpupool.ledger import Ledger, record_run
    >>> ledger = Ledger("ledger.db")                # or "postgresql+psycopg://…", or None
    >>> record_run(ledger, gpupool.simulate("examples/seed-pool"), "examples/seed-pool", None, "fifo")

See ``docs/ledger.md``.
"""
from gpupool.ledger.db import LedgerError, open_engine, resolve_url
from gpupool.ledger.record import SIM_EPOCH, record_run
from gpupool.ledger.store import Ledger, as_ledger

__all__ = ["Ledger", "LedgerError", "SIM_EPOCH", "as_ledger", "open_engine", "record_run", "resolve_url"]
