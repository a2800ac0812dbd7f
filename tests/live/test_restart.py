"""kill -9 the daemon under a burst of submissions, start it again: queued jobs still queued,
running processes re-adopted (same pid and start time), ends that happened meanwhile recorded,
nothing run twice, no acknowledged submission lost; and the Slurm policy's fair-share usage and
the queued jobs' age carried over as slurmctld carries them."""
from __future__ import annotations

import math
import os
import signal
import socket
import threading
import time
from collections import Counter

import pytest
import sqlalchemy as sa

from gpupool.formats.pool_dir import load_pool
from gpupool.ledger import schema as s
from gpupool.ledger.store import Ledger
from gpupool.live import proc
from gpupool.live.client import Client
from gpupool.live.fairshare import META_KEY, SavedUsage
from gpupool.policy.slurm.decay import decay_factor, segment_usage, usage_end
from gpupool.policy.slurm.fairshare import build_tree, fair_tree
from gpupool.policy.slurm.part_submit import MSG_PART_NOT_AVAIL
from tests.live.conftest import SLURM_CONF, DaemonProc, cancel_all, script, wait_for

RUN_LOG = 'echo "$SLURM_JOB_ID $$" >> {log}\n'


def _burst(d: DaemonProc, scripts: list[str], acked: list[int], stop_at: int | None, batch: int, workers: int = 4):
    """Submit ``scripts`` in batches from several threads; record acknowledged ids. With
    ``stop_at``, the daemon is SIGKILLed once that many are acknowledged (requests in flight
    then fail, and are not acknowledged)."""
    lock = threading.Lock()
    chunks = [scripts[i:i + batch] for i in range(0, len(scripts), batch)]
    killed = threading.Event()

    def worker(k: int) -> None:
        with d.client(timeout=120) as c:
            for chunk in chunks[k::workers]:
                if killed.is_set():
                    return
                try:
                    ids = c.submit([(text, "burst.sbatch") for text in chunk], cwd=str(d.root), env={"PATH": os.defpath})
                except Exception:
                    return
                with lock:
                    acked.extend(ids)
                    if stop_at is not None and len(acked) >= stop_at and not killed.is_set():
                        killed.set()
                        d.kill9()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _live_rows(d: DaemonProc) -> dict[int, dict]:
    led = Ledger(str(d.db))
    try:
        with led.read() as conn:
            return {r["job_id"]: dict(r) for r in conn.execute(sa.select(s.live_jobs)).mappings()}
    finally:
        led.close()


def _all_completed(d: DaemonProc, job_ids: list[int]) -> bool:
    """Whether every job of ``job_ids`` is COMPLETED in the daemon's ledger, from one read of
    its rows (a read per job made each poll of a 10,000-job burst quadratic)."""
    rows = _live_rows(d)
    return all(rows[j]["state"] == "COMPLETED" for j in job_ids)


def _restart_scenario(tmp_path, total: int, batch: int) -> None:
    # first-fit: CPU-only jobs start past the waiting GPU jobs, so jobs start and end during
    # the burst (Slurm's backfill would hold them behind the GPU jobs' reservations).
    d = DaemonProc(tmp_path, policy="first-fit")
    d.start()
    log = tmp_path / "runs.log"
    try:
        # Four long GPU jobs hold every GPU; one of them will end while the daemon is down.
        with d.client() as c:
            long_ids = c.submit([(script(RUN_LOG.format(log=log) + "sleep 600", "--gres=gpu:1"), "long.sbatch")] * 2
                                + [(script(RUN_LOG.format(log=log) + "sleep 4", "--gres=gpu:1"), "short.sbatch")]
                                + [(script(RUN_LOG.format(log=log) + "sleep 600", "--gres=gpu:1", "--no-requeue"),
                                    "norequeue.sbatch")], cwd=str(tmp_path), env={"PATH": os.defpath})
            wait_for(lambda: all(c.job(j)["state"] == "RUNNING" for j in long_ids))
            before = {j: c.job(j)["pid"] for j in long_ids}
        # The burst: mostly GPU jobs that must wait, every 25th a CPU-only job that runs at once.
        quick = script(RUN_LOG.format(log=log), "--ntasks=1")
        waiting = script(RUN_LOG.format(log=log) + "sleep 600", "--gres=gpu:1")
        scripts = [quick if i % 25 == 0 else waiting for i in range(total)]
        acked: list[int] = []
        _burst(d, scripts[: total // 2 + batch * 4], acked, stop_at=total // 2, batch=batch)
        assert d.proc.poll() is not None  # killed mid-burst
        # While it is down: the short job ends by itself; a long job's processes are killed.
        wait_for(lambda: proc.read_exit_status(d.state / "spool" / "pool" / str(long_ids[2]) / "rc.0") == 0, timeout=15)
        os.killpg(before[long_ids[1]], signal.SIGKILL)
        os.killpg(before[long_ids[3]], signal.SIGKILL)
        d.start()
        with d.client() as c:
            health = c.health()
        assert health["recovered"]["adopted"] >= 1
        assert health["recovered"]["ended_while_down"] >= 1
        with d.client() as c:
            assert c.job(long_ids[0])["pid"] == before[long_ids[0]]  # re-adopted, not restarted
            assert c.job(long_ids[0])["state"] == "RUNNING"
            assert c.job(long_ids[2])["state"] == "COMPLETED"  # its end was recorded from its status file
            gone = c.job(long_ids[1])
            assert gone["requeues"] == 1 and gone["state"] in ("PENDING", "RUNNING")  # requeued (default)
            assert c.job(long_ids[3])["state"] == "NODE_FAIL"  # --no-requeue
        # The rest of the burst, to the daemon started again.
        rest: list[int] = []
        _burst(d, scripts[len(acked):], rest, stop_at=None, batch=batch)
        acked += rest
        assert len(acked) >= total - batch * 8
        # No acknowledged submission lost; every one still queued, running or done.
        rows = _live_rows(d)
        missing = [j for j in acked if j not in rows]
        assert not missing, f"{len(missing)} acknowledged jobs lost, e.g. {missing[:5]}"
        quick_ids = [j for j in acked if rows[j]["script"] == quick]
        wait_for(lambda: _all_completed(d, quick_ids), timeout=300, interval=0.5)
        rows = _live_rows(d)
        states = Counter(rows[j]["state"] for j in acked)
        assert set(states) <= {"PENDING", "RUNNING", "COMPLETED"}, states
        assert states["RUNNING"] <= 4
        # Nothing ran twice: each job id appears once in the run log (the requeued job once per run).
        runs = Counter(line.split()[0] for line in log.read_text().splitlines())
        twice = {j: n for j, n in runs.items() if n > 1 and int(j) != long_ids[1]}
        assert not twice, twice
        assert runs[str(long_ids[1])] <= 2
        assert all(runs[str(j)] == 1 for j in quick_ids)
        # The ledger's accounting has every acknowledged job too (acct reads it).
        led = Ledger(str(d.db))
        with led.read() as conn:
            n = conn.execute(sa.select(sa.func.count()).select_from(s.jobs).where(s.jobs.c.origin == "live:pool")).scalar()
        led.close()
        assert n >= len(acked) + len(long_ids)
    finally:
        cancel_all(d)
        d.stop()


def test_kill9_restart_under_a_burst(tmp_path):
    _restart_scenario(tmp_path, total=400, batch=20)


@pytest.mark.slow
def test_kill9_restart_under_a_burst_of_10000(tmp_path):
    _restart_scenario(tmp_path, total=10_000, batch=100)


# ------------------------------------------------------------------ fair share across a kill -9
#: Decay passes every 2 s with a 40 s half-life, so a short test sees decay; usage is charged at
#: job end (limits); age counts over 10 minutes; the queue is looked at every 2 s.
FS_CONF = """PriorityWeightFairshare=10000
PriorityWeightAge=1000
PriorityMaxAge=0:10:00
PriorityCalcPeriod=0:02
PriorityDecayHalfLife=0:40
AccountingStorageEnforce=limits
SchedulerParameters=sched_interval=2,bf_interval=2
"""
P = 2.0
DF = decay_factor(40)


def _saved_usage(d: DaemonProc) -> SavedUsage:
    led = Ledger(str(d.db))
    try:
        with led.read() as conn:
            m = s.live_meta.c
            text = conn.execute(sa.select(m.value).where(m.daemon == "live:pool", m.key == META_KEY)).scalar()
    finally:
        led.close()
    return SavedUsage.from_json(text)


def test_fair_share_usage_and_age_survive_kill9(tmp_path):
    """alice's 16-CPU job ends before the crash, bob's 2-CPU job runs across it, alice's
    4-GPU job waits throughout. After a kill -9 and a few seconds down, the restarted daemon's
    usage is alice's exactly as an uninterrupted daemon would have it (ended jobs only decay)
    and bob's as slurmctld's first pass after a start charges it (the saved usage decayed for
    the time down, plus one piece for that time); FairShare and the waiting job's priority,
    its age counted from its real submission, follow."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    d = DaemonProc(tmp_path, tcp=f"127.0.0.1:{port}", tokens="alice tok-a\nbob tok-b\n")
    (d.pool / "slurm.conf").write_text(FS_CONF + SLURM_CONF.format(cpus=64))
    url = f"http://127.0.0.1:{port}"
    d.start()
    try:
        with Client(url=url, token="tok-a") as alice, Client(url=url, token="tok-b") as bob:
            env = {"PATH": os.defpath}
            (j1,) = alice.submit([(script("sleep 2", "--cpus-per-task=16"), "j1.sbatch")], cwd=str(tmp_path), env=env)
            (j2,) = bob.submit([(script("sleep 600", "--cpus-per-task=2", "--gres=gpu:1"), "j2.sbatch")],
                               cwd=str(tmp_path), env=env)
            (j3,) = alice.submit([(script("sleep 600", "--gres=gpu:4"), "j3.sbatch")], cwd=str(tmp_path), env=env)
            wait_for(lambda: alice.job(j1)["state"] == "COMPLETED", timeout=30)
            end1 = alice.job(j1)["end"]
            # a decay pass after alice's job ended: her usage is in the saved figure
            before = wait_for(lambda: (v := alice.share())["as_of"] > end1 + P and v, timeout=30)
            assert {r["user"]: r["raw_usage"] for r in before["associations"] if r["user"]}["alice"] > 0
            waiting = alice.job(j3)
            assert waiting["state"] == "PENDING"
        d.kill9()
        saved = _saved_usage(d)
        e1 = saved.epoch
        assert e1 == before["t0"]
        time.sleep(3.0)  # down for more than a decay period
        d.start()
        with Client(url=url, token="tok-a") as alice:
            health = alice.health()
            assert health["fairshare"]["restored"] is True and health["recovered"]["adopted"] == 1
            after = alice.share()
            f1, f2, f3 = alice.job(j1), alice.job(j2), alice.job(j3)
        # Once more, from a ledger an older gpupool left (no saved usage): rebuilt from the runs
        d.kill9()
        _forget_saved_usage(d)
        d.start()
        with Client(url=url, token="tok-a") as alice:
            from_records = alice.health()["fairshare"]
            rebuilt = alice.share()
    finally:
        cancel_all(d)
        d.stop()
    assert f2["state"] == "RUNNING" and f3["state"] == "PENDING"
    W = after["as_of"]  # the restarted daemon's last decay pass (epoch seconds)
    e2 = after["t0"]
    T2 = W - e2
    assert W - e1 > saved.t_ref + P  # the pass is on the new daemon's clock, after the time down
    # bob's open segment was saved (alice's ended one was closed at its end, not left open)
    s2 = math.floor(f2["start"] - e1)  # the policy counts from whole seconds of its clock
    assert [(st, key, w) for st, key, w in saved.running] == [(s2, ("team", "bob"), 2.0)]
    usage = {r["user"]: r["raw_usage"] for r in after["associations"] if r["user"]}
    # alice: uninterrupted, her job's usage at the first pass after it ended, decayed since
    # (to the whole second of its end too, kept before a pass in that second: finding 54)
    s1, end = math.floor(f1["start"] - e1), usage_end(f1["end"] - e1, 0.0, P)
    first_pass = math.ceil(end / P) * P
    alice_expected = segment_usage(s1, end, first_pass, P, DF, 16.0, True) * DF ** (W - e1 - first_pass)
    assert usage["alice"] == pytest.approx(alice_expected, rel=1e-6)
    # bob: the saved pass's usage decayed to the restart, one piece for the time since that pass,
    # both decayed to the new pass, plus what the new daemon charged since its t=0
    T, x0 = saved.t_ref, e2 - e1
    at_restart = (segment_usage(s2, math.inf, T, P, DF, 2.0, True) * DF ** (x0 - T)
                  + 2.0 * (x0 - max(T, s2)) * DF ** (x0 - max(T, s2)))
    bob_expected = at_restart * DF ** T2 + segment_usage(0.0, math.inf, T2, P, DF, 2.0, True)
    assert usage["bob"] == pytest.approx(bob_expected, rel=1e-6)
    assert usage["root"] == usage["olga"] == 0.0
    # FairShare (Fair Tree) of those figures, as the policy ranks it
    root, _ = build_tree(load_pool(d.pool).slurm.accounting,
                         {("team", "alice"): alice_expected, ("team", "bob"): bob_expected})
    expected_fs = fair_tree(root)
    got_fs = {f"{r['account']}/{r['user']}": r["fairshare"] for r in after["associations"] if r["user"]}
    assert got_fs == expected_fs
    # the waiting job kept its submit and eligible times: its age runs from its submission
    assert (f3["submit"], f3["eligible"]) == pytest.approx((waiting["submit"], waiting["eligible"]), abs=1e-6)
    (row,) = [r for r in after["jobs"] if r["job_id"] == j3]
    age = (W - waiting["eligible"]) / 600.0
    assert row["factors"]["age"] == pytest.approx(age, rel=1e-6)
    assert row["factors"]["fairshare"] == expected_fs["team/alice"]
    assert row["priority"] == int(10000 * expected_fs["team/alice"] + 1000 * age)
    # rebuilt from alice's recorded run, charged on the third daemon's pass grid (the first's is
    # not recorded) from its exact start (the first counted from a whole second of its clock):
    # the same figure for runs much longer than a period, here (a 2 s job) only the same order
    assert from_records["restored"] is True and from_records["from"] == "job records"
    W3, e3 = rebuilt["as_of"], rebuilt["t0"]
    alice_rebuilt = {r["user"]: r["raw_usage"] for r in rebuilt["associations"] if r["user"]}["alice"]
    charged = segment_usage(f1["start"] - e3, f1["end"] - e3, 0.0, P, DF, 16.0, True) * DF ** (W3 - e3)
    assert alice_rebuilt == pytest.approx(charged, rel=1e-6)
    uninterrupted = segment_usage(s1, end, first_pass, P, DF, 16.0, True) * DF ** (W3 - e1 - first_pass)
    assert 0.5 < alice_rebuilt / uninterrupted < 1.5


def _forget_saved_usage(d: DaemonProc) -> None:
    led = Ledger(str(d.db))
    try:
        with led.transaction() as conn:
            m = s.live_meta.c
            conn.execute(s.live_meta.delete().where(m.daemon == "live:pool", m.key == META_KEY))
    finally:
        led.close()


def _hold_the_gpus(c, tmp_path, *options: str) -> int:
    """Submit a job holding the node's four GPUs for ten minutes and wait until it runs."""
    (jid,) = c.submit([(script("sleep 600", *options, "--gres=gpu:4"), "hold.sbatch")], cwd=str(tmp_path),
                      env={"PATH": os.defpath})
    wait_for(lambda: c.job(jid)["state"] == "RUNNING")
    return jid


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _partitions_conf(spare: str, hold: str) -> str:
    """The live pool's slurm.conf with two more partitions on its one node: ``spare`` and
    ``hold`` (a DRAIN hold sends its jobs to spare, its Alternate)."""
    return SLURM_CONF.format(cpus=64) + (f"PartitionName=spare Nodes=host01 MaxTime=1-00:00:00 State={spare}\n"
                                         f"PartitionName=hold Nodes=host01 MaxTime=1-00:00:00 State={hold} "
                                         "Alternate=spare\n")


def test_queued_jobs_keep_their_partitions_across_a_restart(tmp_path):
    """slurmctld keeps a queued job's partitions across a restart whatever slurm.conf now says
    of them (DRAIN only stops new submissions: finding 83). A job queued in spare, and one sent
    to spare as hold's Alternate, stay queued there after a restart that drains spare and
    opens hold, and start there once the GPUs free; a new job for spare is then refused.
    (Before: the restart applied the submit rules again and refused both queued jobs.)"""
    d = DaemonProc(tmp_path)
    (d.pool / "slurm.conf").write_text(_partitions_conf("UP", "DRAIN"))
    d.start()
    try:
        with d.client() as c:
            env = {"PATH": os.defpath}
            j1 = _hold_the_gpus(c, tmp_path)
            (j2,) = c.submit([(script("sleep 600", "-p spare", "--gres=gpu:1"), "j2.sbatch")], cwd=str(tmp_path),
                             env=env)
            (j3,) = c.submit([(script("sleep 600", "-p hold", "--gres=gpu:1"), "j3.sbatch")], cwd=str(tmp_path),
                             env=env)
            before = {r["id"]: r["partition"] for r in c.queue()}
        assert before == {j1: "main", j2: "spare", j3: "spare"}
        rows = _live_rows(d)
        assert (rows[j2]["job_partitions"], rows[j3]["job_partitions"]) == ("spare", "spare")
        led = Ledger(str(d.db))
        try:
            with led.read() as conn:
                acct = dict(conn.execute(sa.select(s.jobs.c.job_id, s.jobs.c.partition)
                                         .where(s.jobs.c.job_id.in_([str(j2), str(j3)]))).all())
        finally:
            led.close()
        assert acct == {str(j2): "spare", str(j3): "spare"}  # the partition it landed in, not hold
        d.kill9()
        (d.pool / "slurm.conf").write_text(_partitions_conf("DRAIN", "UP"))
        d.start()
        with d.client() as c:
            assert c.health()["recovered"]["queued"] == 2
            after = {r["id"]: (r["partition"], r["state"]) for r in c.queue()}
            assert after == {j1: ("main", "RUNNING"), j2: ("spare", "PENDING"), j3: ("spare", "PENDING")}
            c.cancel([j1])
            wait_for(lambda: c.job(j2)["state"] == "RUNNING" and c.job(j3)["state"] == "RUNNING")
            ran = {r["id"]: r["partition"] for r in c.queue()}
            assert ran == {j2: "spare", j3: "spare"}
        new = tmp_path / "new.sbatch"
        new.write_text(script("true", "-p spare", "--gres=gpu:1"))
        r = d.cli("submit", str(new), check=False)
        assert r.returncode == 2 and f"Batch job submission failed: {MSG_PART_NOT_AVAIL}" in r.stderr
    finally:
        cancel_all(d)
        d.stop()


_WEB = """apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: server
        command: ["sleep", "600"]
        resources:
          limits: {nvidia.com/gpu: 1, cpu: "1", memory: 1Gi}
"""


def _main_with_alternate(state: str) -> str:
    """The live pool's slurm.conf with its default partition main in ``state``, Alternate=spare."""
    return (SLURM_CONF.format(cpus=64).replace("Default=YES MaxTime=1-00:00:00 State=UP",
                                                f"Default=YES MaxTime=1-00:00:00 State={state} Alternate=spare")
            + "PartitionName=spare Nodes=host01 MaxTime=1-00:00:00 State=UP\n")


def test_a_queued_service_replica_keeps_its_partition_across_a_restart(tmp_path):
    """A Deployment's replica sent to spare (the DRAIN default's Alternate) stays there after a
    restart that makes the default INACTIVE, and runs once the GPUs free."""
    d = DaemonProc(tmp_path)
    (d.pool / "slurm.conf").write_text(_main_with_alternate("DRAIN"))
    d.start()
    try:
        with d.client() as c:
            env = {"PATH": os.defpath}
            j1 = _hold_the_gpus(c, tmp_path, "-p spare")
            (web,) = c.submit([(_WEB, "web.yaml")], cwd=str(tmp_path), env=env)
            assert {r["id"]: r["partition"] for r in c.queue()} == {j1: "spare", web: "spare"}
        assert _live_rows(d)[web]["job_partitions"] == "spare"
        d.kill9()
        (d.pool / "slurm.conf").write_text(_main_with_alternate("INACTIVE"))
        d.start()
        with d.client() as c:
            assert {r["id"]: (r["partition"], r["state"]) for r in c.queue()} == {
                j1: ("spare", "RUNNING"), web: ("spare", "PENDING")}
            c.cancel([j1])
            wait_for(lambda: c.job(web)["state"] == "RUNNING")
    finally:
        cancel_all(d)
        d.stop()


def test_jobs_of_a_partition_gone_from_slurm_conf_end_node_fail_at_restart(tmp_path):
    """slurmctld ends a job one of whose partitions slurm.conf no longer has as it starts
    (NODE_FAIL; a running one killed): here the default partition is renamed, ending a running
    job and one queued without ``-p`` (recorded as queued in main)."""
    d = DaemonProc(tmp_path)
    d.start()
    try:
        with d.client() as c:
            env = {"PATH": os.defpath}
            j1 = _hold_the_gpus(c, tmp_path)
            pid = c.job(j1)["pid"]
            (j2,) = c.submit([(script("sleep 600", "--gres=gpu:1"), "j2.sbatch")], cwd=str(tmp_path), env=env)
        assert _live_rows(d)[j2]["job_partitions"] == "main"
        d.kill9()
        (d.pool / "slurm.conf").write_text(SLURM_CONF.format(cpus=64).replace("PartitionName=main", "PartitionName=gpu"))
        d.start()
        with d.client() as c:
            assert c.health()["recovered"]["node_fail"] == 2
            assert c.queue() == []
            assert c.job(j1)["state"] == c.job(j2)["state"] == "NODE_FAIL"
        wait_for(lambda: _gone(pid))  # killed
        rows = _live_rows(d)
        assert rows[j2]["reason"] == "Invalid partition (main) after daemon restart"
    finally:
        cancel_all(d)
        d.stop()
