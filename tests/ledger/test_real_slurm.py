"""Real Slurm 22.05 with slurmdbd: run jobs, then import what sacct and sshare say about them.

Starts a private cluster (``gpupool.conformance.real_slurm``: munged, slurmctld, four slurmd,
MariaDB and slurmdbd on free ports), runs the jobs of ``real_slurm_jobs.JOBS`` (two accounts,
a failing job, a two-node GPU job, one cancelled while running, one cancelled while pending,
one killed at its time limit), waits until slurmdbd has recorded their ends, and imports
``sacct --parsable2 --allocations --format=ALL``, ``sacct --json`` and ``sshare -P -l``.
Every imported job is checked against what squeue/scontrol showed while Slurm ran it.
Skipped where the Slurm packages are not installed or not root.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
import sqlalchemy as sa

from gpupool.ledger import Ledger
from gpupool.ledger import schema as s
from gpupool.ledger.imports import import_sacct, import_sacct_json, import_sshare
from gpupool.ledger.query import acct_jobs, parse_format, render_acct

from .real_slurm_jobs import JOBS, capture, check_ledger, drive

real_slurm = pytest.importorskip("gpupool.conformance.real_slurm")

pytestmark = pytest.mark.slow

_MISSING = real_slurm.missing_packages("dbd")
_WHY = ("real Slurm with slurmdbd needs the Debian packages " + " ".join(_MISSING) if _MISSING
        else "real Slurm daemons run as root on one host; not root" if os.geteuid() != 0 else "")


@pytest.mark.skipif(bool(_WHY), reason=_WHY or "-")
def test_real_sacct_and_sshare_import(tmp_path):
    # munged wants every directory above its socket searchable by all; pytest's tmp_path is 0700
    where = Path(tempfile.mkdtemp(prefix="gpupool-ledger-slurm-"))
    where.chmod(0o755)
    try:
        cluster = real_slurm.RealSlurm(where / "slurm", accounting="dbd", accounts=("teamA", "teamB"))
        try:
            cluster.start()
        except real_slurm.RealSlurmUnavailable as exc:
            pytest.skip(str(exc))
        try:
            observed = drive(cluster.env, tmp_path / "job-output")
            files = capture(cluster.env, tmp_path / "captured", [o.job_id for o in observed.values()])
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(where, ignore_errors=True)
    assert sorted(observed) == sorted(JOBS)
    name = cluster.cluster

    text = Ledger(tmp_path / "text.db")
    r = import_sacct(text, files["sacct"])
    assert (r["jobs_added"], r["clusters"]) == (len(JOBS), [name])
    check_ledger(text, name, observed)
    # the ledger prints every field of the real --format=ALL output back as Slurm printed it
    assert render_acct(acct_jobs(text), parse_format("ALL"), parsable="|") == files["sacct"].read_text()
    assert import_sacct(text, files["sacct"])["jobs_added"] == 0

    js = Ledger(tmp_path / "json.db")  # Slurm 22.05 has sacct --json (data_parser v0.0.38)
    r = import_sacct_json(js, files["sacct_json"])
    assert r["jobs_added"] == len(JOBS)
    check_ledger(js, name, observed, exit_codes=False)  # 22.05's JSON reads exit code 0 for `exit 3`

    r = import_sshare(text, files["sshare"], cluster=name)
    assert r["shares_added"] == 6  # root, teama, teamb and root's user association in each
    with text.read() as conn:
        pairs = set(conn.execute(sa.select(s.shares.c.account, s.shares.c.user)).all())
    assert {("teama", "root"), ("teamb", "root"), ("teama", ""), ("teamb", "")} <= pairs
