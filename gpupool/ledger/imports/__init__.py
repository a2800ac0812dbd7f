"""Idempotent imports from real systems: sacct (parsable and JSON), sshare, Kueue Workloads."""
from gpupool.ledger.imports.kueue import import_kueue_workloads
from gpupool.ledger.imports.sacct import import_sacct, import_sacct_files
from gpupool.ledger.imports.sacct_json import import_sacct_json
from gpupool.ledger.imports.sshare import import_sshare

__all__ = ["import_kueue_workloads", "import_sacct", "import_sacct_files", "import_sacct_json", "import_sshare"]
