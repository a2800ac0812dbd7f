"""Imports of output captured from a real Slurm 22.05.8 with slurmdbd (fixtures/real_slurm_22.05,
see its README): the parsers are checked against what Slurm really prints, without Slurm."""
from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from gpupool.ledger import schema as s
from gpupool.ledger.imports import import_sacct, import_sacct_json, import_sshare
from gpupool.ledger.query import acct_jobs, parse_format, render_acct
from gpupool.ledger.sacct_fields import SACCT_2205_FIELDS

from .real_slurm_jobs import JOBS, check_ledger, load_observed

FIX = Path(__file__).parent / "fixtures" / "real_slurm_22.05"
SACCT = FIX / "sacct-parsable2-allocations-all.txt"
SACCT_JSON = FIX / "sacct.json"
SSHARE = FIX / "sshare-P-l.txt"


@pytest.fixture(scope="module")
def observed():
    return load_observed(FIX / "observed.json")


def test_fixture_covers_every_scripted_job(observed):
    assert sorted(observed) == sorted(JOBS)
    header = SACCT.read_text().splitlines()[0].split("|")
    assert header == list(SACCT_2205_FIELDS)  # --format=ALL of 22.05.8 is --helpformat, in order


def test_parsable2_import_matches_what_squeue_and_scontrol_said(ledger, observed):
    r = import_sacct(ledger, SACCT)
    assert (r["records"], r["jobs_added"], r["clusters"]) == (6, 6, ["lab"])
    assert r["allocations_added"] == 6  # multi-a holds two nodes; the pending-cancelled job none
    check_ledger(ledger, "lab", observed)
    again = import_sacct(ledger, SACCT)
    assert again["jobs_added"] == again["jobs_updated"] == again["events_added"] == again["allocations_added"] == 0


def test_acct_format_all_prints_the_real_output_back_byte_for_byte(ledger):
    import_sacct(ledger, SACCT)
    printed = render_acct(acct_jobs(ledger, clusters=["lab"]), parse_format("ALL"), parsable="|")
    assert printed == SACCT.read_text()


def test_pending_cancelled_job_never_ran(ledger):
    """Real sacct gives a job cancelled while pending Start = End = the cancel time."""
    import_sacct(ledger, SACCT)
    (job,) = [j for j in acct_jobs(ledger) if j["name"] == "cancel-pend-a"]
    assert job["start"] == job["end"] is not None and job["state"] == "CANCELLED by 0"
    assert job["elapsed"] == 0 and job["gpu_seconds"] == 0
    with ledger.read() as conn:
        kinds = conn.execute(sa.select(s.events.c.kind).where(s.events.c.job_id == job["job_id"])).scalars().all()
    assert "started" not in kinds


def test_json_import_matches_scontrol_too(ledger, observed):
    r = import_sacct_json(ledger, SACCT_JSON)
    assert (r["records"], r["jobs_added"], r["allocations_added"]) == (6, 6, 6)
    check_ledger(ledger, "lab", observed, exit_codes=False)


def test_json_and_text_differ_only_where_22_05_json_cannot_say(tmp_path):
    """What `sacct --json` of 22.05 loses against the text: ``CANCELLED by UID`` (the JSON has
    the user's name elsewhere), the StartRecieved flag (no JSON name), and the job's exit
    code (the JSON reads 0:0 for a job that exited 3)."""
    from gpupool.ledger import Ledger

    text, js = Ledger(tmp_path / "text.db"), Ledger(tmp_path / "json.db")
    import_sacct(text, SACCT)
    import_sacct_json(js, SACCT_JSON)
    fields = parse_format("JobID,JobName,User,Account,Partition,QOS,Submit,Eligible,Start,End,Elapsed,"
                          "Timelimit,State,ExitCode,Flags,AllocCPUS,NNodes,NodeList,ReqTRES,AllocTRES,Cluster")
    a = render_acct(acct_jobs(text), fields, parsable="|").splitlines()
    b = render_acct(acct_jobs(js), fields, parsable="|").splitlines()
    names = [f for f, _ in fields]
    diffs = set()
    for x, y in zip(a[1:], b[1:]):
        for name, u, v in zip(names, x.split("|"), y.split("|")):
            if u != v:
                diffs.add((x.split("|")[1], name, u, v))
    assert diffs == {
        ("fail-b", "ExitCode", "3:0", "0:0"),
        ("cancel-run-b", "State", "CANCELLED by 0", "CANCELLED"),
        ("cancel-pend-a", "State", "CANCELLED by 0", "CANCELLED"),
        ("cancel-pend-a", "Flags", "StartRecieved", ""),
        *{(n, "Flags", "SchedMain,StartRecieved", "SchedMain")
          for n in ("ok-a", "fail-b", "multi-a", "cancel-run-b", "timeout-b")},
    }
    assert len(a) == len(b) == 7


def test_json_after_text_changes_records_but_not_usage(ledger):
    import_sacct(ledger, SACCT)
    with ledger.read() as conn:
        before = sorted(tuple(r) for r in conn.execute(sa.select(s.usage)))
    r = import_sacct_json(ledger, SACCT_JSON)
    assert r["jobs_added"] == 0 and r["allocations_added"] == 0 and r["jobs_updated"] == 6
    with ledger.read() as conn:
        assert sorted(tuple(r) for r in conn.execute(sa.select(s.usage))) == before


def test_sshare_import(ledger):
    r = import_sshare(ledger, SSHARE, cluster="lab", at=1796010600.0)
    assert r["records"] == r["shares_added"] == 6
    with ledger.read() as conn:
        rows = {(x.account, x.user): x for x in conn.execute(sa.select(s.shares))}
    assert sorted(rows) == [("root", ""), ("root", "root"), ("teama", ""), ("teama", "root"),
                            ("teamb", ""), ("teamb", "root")]  # sshare's indentation is not a name
    assert rows[("teamb", "root")].raw_usage == 110.0 and rows[("teamb", "root")].fairshare == 0.333333
    assert rows[("teamb", "")].fairshare is None and rows[("teamb", "")].level_fs == "0.333333"
    assert rows[("root", "root")].level_fs == "inf" and rows[("root", "")].norm_usage is None
    assert rows[("teama", "root")].tres_run_mins.endswith("gres/gpu=0")
    assert import_sshare(ledger, SSHARE, cluster="lab")["shares_added"] == 0
