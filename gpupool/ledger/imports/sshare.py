"""``sshare -P -l`` (Slurm 22.05, Fair Tree columns) → one snapshot of share rows.

A snapshot is keyed by the content hash of the output, so importing the same text again
adds nothing. ``taken_at`` is ``at`` or the time of the first import.
"""
from __future__ import annotations

import hashlib
import time
from pathlib import Path

from gpupool.errors import InputError
from gpupool.ledger import schema as s
from gpupool.ledger.store import WriteStats, as_ledger, insert_ignore

_COLUMNS = {"Account": "account", "User": "user", "RawShares": "raw_shares", "NormShares": "norm_shares",
            "RawUsage": "raw_usage", "NormUsage": "norm_usage", "EffectvUsage": "effectv_usage",
            "FairShare": "fairshare", "LevelFS": "level_fs", "GrpTRESMins": "grp_tres_mins",
            "TRESRunMins": "tres_run_mins"}
_FLOATS = {"norm_shares", "raw_usage", "norm_usage", "effectv_usage", "fairshare"}


def parse_sshare(text: str, source: str) -> list[dict]:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines or "Account" not in lines[0].split("|"):
        raise InputError(source, "expected `sshare -P -l` output with its header line (Account|User|RawShares|…)",
                         line=1)
    header = lines[0].split("|")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        cells = line.split("|")
        if len(cells) != len(header):
            raise InputError(source, f"expected {len(header)} |-separated fields, got {len(cells)}", line=number)
        row: dict = {}
        for name, cell in zip(header, cells):
            col = _COLUMNS.get(name)
            if col is None:
                continue
            cell = cell.strip() if col != "account" else cell.strip()
            if col in _FLOATS:
                try:
                    row[col] = float(cell) if cell else None
                except ValueError:
                    raise InputError(source, f"{name}: expected a number, got {cell!r}", line=number) from None
            else:
                row[col] = cell
        row.setdefault("user", "")
        row.setdefault("raw_shares", "")
        row.setdefault("level_fs", "")
        rows.append(row)
    return rows


def import_sshare(db, path: str | Path, *, cluster: str = "cluster", at: float | None = None) -> dict:
    ledger = as_ledger(db)
    data = Path(path).read_bytes()
    rows = parse_sshare(data.decode("utf-8", errors="replace"), str(path))
    snapshot = hashlib.sha256(data).hexdigest()
    taken = time.time() if at is None else at
    for r in rows:
        r.update(origin=cluster, snapshot=snapshot, taken_at=taken)
    stats = WriteStats()
    with ledger.transaction() as conn:
        stats.other["shares_added"] = insert_ignore(conn, s.shares, rows, ("origin", "snapshot", "account", "user"))
        ledger.record_import(conn, "sshare", snapshot, cluster, str(path), len(rows))
    return {"source": str(path), "records": len(rows), "snapshot": snapshot[:12], **stats.as_dict()}
