"""What every real-Slurm differential test needs: skip where Slurm cannot run, start a cluster
(skipping when it cannot come up), and read a job back with ``scontrol``."""
from __future__ import annotations

import os
import re
from datetime import datetime

import pytest

from gpupool.conformance.real_slurm import RealSlurm, RealSlurmUnavailable, missing_packages


def need(accounting: str = "none") -> None:
    """Skip unless the Debian packages (with slurmdbd and MariaDB for ``dbd``) are installed and
    this process may start daemons as root."""
    missing = missing_packages(accounting, speedup=10)
    if missing:
        pytest.skip(f"real Slurm not installed (missing Debian packages: {' '.join(missing)})")
    if os.geteuid() != 0:
        pytest.skip("real Slurm on one host needs root")


def started(rs: RealSlurm) -> RealSlurm:
    """``rs`` started, or the test skipped when the cluster cannot come up here."""
    try:
        return rs.start()
    except RealSlurmUnavailable as exc:  # pragma: no cover - ``need`` checks the usual causes
        pytest.skip(str(exc))


def sacctmgr(rs: RealSlurm, *commands: list[str]) -> None:
    """Run ``sacctmgr -i`` commands (QOS and association changes) in order."""
    for args in commands:
        rs.run(["sacctmgr", "-i", *args])


def show_job(rs: RealSlurm, jid: int, keys: tuple[str, ...]) -> dict[str, str]:
    """Fields ``keys`` of ``scontrol show job JID`` (e.g. JobState, TimeLimit, StartTime)."""
    text = rs.run(["scontrol", "show", "job", str(jid)]).stdout
    return dict(re.findall(rf"({'|'.join(keys)})=(\S+)", text))


def epoch(stamp: str) -> float:
    """A Slurm timestamp (``2026-12-02T05:49:03``) as epoch seconds."""
    return datetime.fromisoformat(stamp).timestamp()
