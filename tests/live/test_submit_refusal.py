"""Jobs the Slurm policy would reject at submit are refused by the live daemon, as sbatch
refuses them: Slurm's message, a non-zero exit, no job id and nothing recorded."""
from __future__ import annotations

import os
import pwd
import sqlite3
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.model.pool import Gpu, Node, Pool
from gpupool.model.slurm import Accounting, Association, Partition, SlurmConfig, User
from gpupool.model.workload import PodSet, Workload
from gpupool.policy.slurm.limits import MSG_ACCOUNT, MSG_SUBMIT_LIMIT, MSG_TIME
from gpupool.policy.slurm.submit_check import submit_rejection
from tests.live.conftest import DaemonProc, cancel_all, script, wait_for

STRICT = "AccountingStorageEnforce=associations\nEnforcePartLimits=ALL\n"
SOLO = """Parent - 'root'
Account - 'solo':Description='solo':Organization='s':Fairshare=1
Parent - 'solo'
User - '{me}':DefaultAccount='{default}':Fairshare=1
"""


@pytest.fixture
def strict(tmp_path):
    """The live test pool with association checks and partition limits enforced at submit."""
    d = DaemonProc(tmp_path)
    conf = d.pool / "slurm.conf"
    conf.write_text(STRICT + conf.read_text())
    # whoever runs the tests (the socket's peer) gets one association, with account "solo"
    me = pwd.getpwuid(os.getuid()).pw_name
    accounts = d.pool / "accounts.cfg"
    accounts.write_text(accounts.read_text() + SOLO.format(me=me, default="root" if me == "root" else "solo"))
    d.start()
    yield d
    cancel_all(d)
    d.stop()


def _jobs_in_ledger(d: DaemonProc) -> int:
    with sqlite3.connect(d.db) as con:
        tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
        return sum(con.execute(f"select count(*) from {t}").fetchone()[0] for t in tables if "job" in t)


def test_account_without_association_is_refused_with_slurms_message(strict, tmp_path):
    # the submitter's associations are with "solo" (and "root" when the tests run as root)
    bad = tmp_path / "bad.sbatch"
    bad.write_text(script("true", "--account=team", "--gres=gpu:1"))
    before = _jobs_in_ledger(strict)
    r = strict.cli("submit", str(bad), check=False)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"Batch job submission failed: {MSG_ACCOUNT}" in r.stderr and "bad.sbatch" in r.stderr
    assert "Submitted" not in r.stdout and r.stdout == ""
    assert strict.client().queue() == []
    assert _jobs_in_ledger(strict) == before
    # the next accepted job gets the first id: the refused one consumed none
    ok = tmp_path / "ok.sbatch"
    ok.write_text(script("echo hi", "--account=solo", "--gres=gpu:1"))
    r = strict.cli("submit", str(ok))
    assert r.returncode == 0 and r.stdout == "Submitted batch job 1\n"
    wait_for(lambda: (tmp_path / "slurm-1.out").exists() and (tmp_path / "slurm-1.out").read_text() == "hi\n")


def test_time_limit_over_maxtime_is_refused_under_enforce_part_limits(strict, tmp_path):
    long = tmp_path / "long.sbatch"
    long.write_text(script("true", "--time=2-00:00:00"))
    r = strict.cli("submit", str(long), check=False)
    assert r.returncode == 2 and f"Batch job submission failed: {MSG_TIME}" in r.stderr


def test_one_refused_script_refuses_the_whole_request(strict, tmp_path):
    good = tmp_path / "good.sbatch"
    good.write_text(script("true", "--time=1"))
    bad = tmp_path / "bad.sbatch"
    bad.write_text(script("true", "--account=nosuch"))
    r = strict.cli("submit", str(good), str(bad), check=False)
    assert r.returncode == 2 and MSG_ACCOUNT in r.stderr and "bad.sbatch" in r.stderr
    assert strict.client().queue() == []
    with strict.client() as c:
        assert c.submit([(good.read_text(), str(good))], cwd=str(tmp_path)) == [1]


def test_max_submit_jobs_is_refused_at_submit_counting_the_daemons_jobs(tmp_path):
    """MaxSubmitJobs=2 on the submitter's association: a second job beside a pending or
    running one is taken, a third, and a two-task array beside one, are refused with
    Slurm's message and consume no id (a real 22.05.8 did the same,
    tests/unit/test_slurm_submit_limits.py)."""
    d = DaemonProc(tmp_path)
    conf = d.pool / "slurm.conf"
    conf.write_text("AccountingStorageEnforce=associations,limits\n" + conf.read_text())
    me = pwd.getpwuid(os.getuid()).pw_name
    accounts = d.pool / "accounts.cfg"
    default = "root" if me == "root" else "solo"
    accounts.write_text(accounts.read_text() + SOLO.format(me=me, default=default).replace(
        f"DefaultAccount='{default}':Fairshare=1", f"DefaultAccount='{default}':Fairshare=1:MaxSubmitJobs=2"))
    d.start()
    try:
        one = tmp_path / "one.sbatch"
        one.write_text(script("sleep 60", "--account=solo", "--time=5"))
        arr = tmp_path / "arr.sbatch"
        arr.write_text(script("sleep 60", "--account=solo", "--time=5", "--array=0-1"))
        assert d.cli("submit", str(one)).stdout == "Submitted batch job 1\n"
        r = d.cli("submit", str(arr), check=False)
        assert r.returncode == 2 and f"Batch job submission failed: {MSG_SUBMIT_LIMIT}" in r.stderr
        r = d.cli("submit", str(one), str(one), check=False)  # two scripts of one request count both
        assert r.returncode == 2 and MSG_SUBMIT_LIMIT in r.stderr
        assert d.cli("submit", str(one)).stdout == "Submitted batch job 2\n"
        r = d.cli("submit", str(one), check=False)
        assert r.returncode == 2 and MSG_SUBMIT_LIMIT in r.stderr
        assert sorted(j["job_id"] for j in d.client().queue()) == ["1", "2"]
    finally:
        cancel_all(d)
        d.stop()


def test_policy_without_a_submit_check_accepts_as_before(tmp_path):
    d = DaemonProc(tmp_path, policy="fifo")
    conf = d.pool / "slurm.conf"
    conf.write_text(STRICT + conf.read_text())
    d.start()
    try:
        path = tmp_path / "acct.sbatch"
        path.write_text(script("true", "--account=team"))
        r = d.cli("submit", str(path))
        assert r.stdout == "Submitted batch job 1\n"
    finally:
        cancel_all(d)
        d.stop()


# ---------------------------------------------------------------- the check is the policy's
def _pool(epl: str) -> Pool:
    nodes = {n: Node(n, 8, 64000, tuple(Gpu(k) for k in range(4)), state="IDLE") for n in ("a1", "a2")}
    acct = Accounting()
    acct.accounts = {"root": Association("root"), "team": Association("team", parent="root"),
                     "lab": Association("lab", parent="root")}
    acct.user_associations = [Association("team", user="alice"), Association("lab", user="bob")]
    acct.users = {"alice": User("alice", "team"), "bob": User("bob", "lab")}
    cfg = SlurmConfig(params={"AccountingStorageEnforce": ("associations",), "EnforcePartLimits": epl},
                      accounting=acct)
    cfg.partitions["short"] = Partition("short", ("a1",), default=True, max_time=3600)
    cfg.partitions["long"] = Partition("long", ("a1", "a2"), max_time=86400, allow_accounts=("lab",))
    return Pool("t", nodes=nodes, slurm=cfg)


_POOLS = {epl: _pool(epl) for epl in ("NO", "YES", "ALL")}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(epl=st.sampled_from(sorted(_POOLS)), user=st.sampled_from(["alice", "bob", "carol"]),
       account=st.sampled_from([None, "team", "lab", "nosuch"]),
       partition=st.sampled_from([None, "short", "long", "short,long", "gone"]),
       gpus=st.integers(0, 6), cpus=st.integers(1, 10), nodes=st.integers(1, 3),
       minutes=st.sampled_from([None, 10, 60, 61, 600, 2000]))
def test_daemon_check_agrees_with_the_simulated_policy(epl, user, account, partition, gpus, cpus, nodes, minutes):
    """Whatever ``submit_rejection`` says is exactly what the policy does to the job in a run:
    REJECTED with that message, or not rejected."""
    pool = _POOLS[epl]
    ps = PodSet(count=nodes, cpu_m=cpus * 1000, gpus=gpus, one_per_node=True)
    wl = Workload(1, "j", (ps,), submit_time=0.0, runtime=10.0, account=account, partition=partition,
                  time_limit=None if minutes is None else minutes * 60.0)
    why = submit_rejection(pool, wl, user)
    job = Engine(pool, [replace(wl, user=user)], make_policy("slurm", pool), check=True).run().jobs[0]
    if why is None:
        assert job.state != "REJECTED", job.reason
    else:
        assert job.state == "REJECTED" and job.reason == why

