"""The live daemon runs sbatch scripts as real processes: environment, srun, output, limits, cancel."""
from __future__ import annotations

import os
import stat
import time

from gpupool.live import proc
from tests.live.conftest import DaemonProc, cancel_all, script, wait_for


def _state(d, jid):
    with d.client() as c:
        return c.job(jid)["state"]


def test_job_gets_slurm_environment_gpus_srun_binding_and_output_pattern(daemon, tmp_path):
    body = (
        'echo "id=$SLURM_JOB_ID name=$SLURM_JOB_NAME nodes=$SLURM_JOB_NODELIST gpus=$SLURM_JOB_GPUS '
        'cvd=$CUDA_VISIBLE_DEVICES ntasks=$SLURM_NTASKS cpt=$SLURM_CPUS_PER_TASK dir=$SLURM_SUBMIT_DIR"\n'
        "srun --gpu-bind=single:1 bash -c 'echo task=$SLURM_PROCID local=$SLURM_LOCALID cvd=$CUDA_VISIBLE_DEVICES' | sort\n"
        "scontrol show hostnames\n"
        'echo "err line" >&2'
    )
    path = tmp_path / "envjob.sbatch"
    path.write_text(script(body, "--job-name=envjob", "--nodes=1", "--ntasks=3", "--cpus-per-task=2",
                           "--gres=gpu:3", "--account=team", "--output=%x-%j.out", "--error=%x-%j.%u.err"))
    r = daemon.cli("submit", str(path))
    jid = int(r.stdout.split()[-1])
    assert r.stdout == f"Submitted batch job {jid}\n"
    wait_for(lambda: _state(daemon, jid) == "COMPLETED")
    out = (tmp_path / f"envjob-{jid}.out").read_text().splitlines()
    assert out[0] == (f"id={jid} name=envjob nodes=host01 gpus=0,1,2 cvd=0,1,2 ntasks=3 cpt=2 "
                      f"dir={daemon.root}")
    assert out[1:4] == ["task=0 local=0 cvd=0", "task=1 local=1 cvd=1", "task=2 local=2 cvd=2"]
    assert out[4] == "host01"
    user = os.environ.get("USER") or __import__("pwd").getpwuid(os.getuid()).pw_name
    assert (tmp_path / f"envjob-{jid}.{user}.err").read_text() == "err line\n"


def test_array_tasks_default_output_names_and_exit_codes(daemon, tmp_path):
    path = tmp_path / "arr.sbatch"
    path.write_text(script('echo "task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID"; exit $SLURM_ARRAY_TASK_ID',
                           "--array=0-2", "--gres=gpu:1"))
    ids = [int(x) for x in daemon.cli("submit", "--parsable", str(path)).stdout.split()]
    assert ids == [ids[0], ids[0] + 1, ids[0] + 2]
    wait_for(lambda: all(_state(daemon, i) in ("COMPLETED", "FAILED") for i in ids))
    assert [_state(daemon, i) for i in ids] == ["COMPLETED", "FAILED", "FAILED"]
    for k in range(3):
        assert (daemon.root / f"slurm-{ids[0]}_{k}.out").read_text() == f"task {k} of {ids[0]}\n"
    acct = daemon.cli("acct", "--db", str(daemon.db), "-P", "-o", "JobID,State,ExitCode", "-M", "live:pool").stdout
    assert f"{ids[0]}_1|FAILED|1:0" in acct and f"{ids[0]}_0|COMPLETED|0:0" in acct


def test_impossible_request_is_refused_with_a_clear_message(daemon, tmp_path):
    path = tmp_path / "big.sbatch"
    path.write_text(script("true", "--gres=gpu:9"))
    r = daemon.cli("submit", str(path), check=False)
    assert r.returncode == 2
    assert "asks for 9 GPU(s)" in r.stderr and "host01" in r.stderr and "has 4" in r.stderr
    bad = tmp_path / "bad.sbatch"
    bad.write_text(script("true", "--frobnicate=1"))
    r = daemon.cli("submit", str(bad), check=False)
    assert r.returncode == 2 and "bad.sbatch:2" in r.stderr


def test_cancel_kills_the_whole_process_group(daemon, tmp_path):
    path = tmp_path / "tree.sbatch"
    path.write_text(script("sleep 300 &\necho $! > child.pid\nsleep 300", "--gres=gpu:1"))
    jid = int(daemon.cli("submit", "--parsable", str(path)).stdout)
    wait_for(lambda: (tmp_path.parent / "child.pid").exists() or (daemon.root / "child.pid").exists())
    child = int((daemon.root / "child.pid").read_text())
    with daemon.client() as c:
        leader = c.job(jid)["pid"]
    assert leader and os.getpgid(child) == leader
    daemon.cli("cancel", str(jid))
    wait_for(lambda: _state(daemon, jid) == "CANCELLED")
    wait_for(lambda: not proc.group_members(leader), timeout=10)
    q = daemon.cli("queue").stdout
    assert str(jid) not in q.split()


def test_queue_shows_running_and_pending_like_squeue(daemon, tmp_path):
    path = tmp_path / "hold.sbatch"
    path.write_text(script("sleep 300", "--gres=gpu:4", "--job-name=hold"))
    a = int(daemon.cli("submit", "--parsable", str(path)).stdout)
    b = int(daemon.cli("submit", "--parsable", str(path)).stdout)
    wait_for(lambda: _state(daemon, a) == "RUNNING")
    lines = daemon.cli("queue").stdout.splitlines()
    assert lines[0].split() == ["JOBID", "PARTITION", "NAME", "USER", "ST", "TIME", "NODES", "NODELIST(REASON)"]
    rows = {ln.split()[0]: ln.split() for ln in lines[1:]}
    assert rows[str(a)][4] == "R" and rows[str(a)][-1] == "host01"
    assert rows[str(b)][4] == "PD" and rows[str(b)][-1].startswith("(")


def test_time_limit_sigterm_then_timeout_and_signal_before_limit(tmp_path):
    d = DaemonProc(tmp_path, policy="fifo")  # fifo takes --time in seconds; slurm rounds up to minutes
    d.start()
    try:
        body = ("trap 'echo got-usr1 >> sig.log' USR1\ntrap 'echo got-term >> sig.log; exit 143' TERM\n"
                "for i in $(seq 100); do sleep 0.1; done")
        path = tmp_path / "limited.sbatch"
        path.write_text(script(body, "--time=0:03", "--signal=B:USR1@2", "--gres=gpu:1"))
        t0 = time.time()
        jid = int(d.cli("submit", "--parsable", str(path)).stdout)
        wait_for(lambda: _state(d, jid) == "TIMEOUT", timeout=20)
        assert 2.5 < time.time() - t0 < 10
        assert (tmp_path / "sig.log").read_text().splitlines() == ["got-usr1", "got-term"]
    finally:
        cancel_all(d)
        d.stop()


def test_socket_is_private_and_api_serves_openapi_and_metrics(daemon, tmp_path):
    mode = stat.S_IMODE(os.stat(daemon.socket).st_mode)
    assert mode == 0o600 and os.stat(daemon.socket).st_uid == os.getuid()
    path = tmp_path / "m.sbatch"
    path.write_text(script("sleep 300", "--gres=gpu:2", "--account=team"))
    jid = int(daemon.cli("submit", "--parsable", str(path)).stdout)
    wait_for(lambda: _state(daemon, jid) == "RUNNING")
    with daemon.client() as c:
        spec = c.http.get("/openapi.json").json()
        assert "/v1/jobs" in spec["paths"] and "/metrics" in spec["paths"]
        text = c.metrics()
    assert 'gpupool_running_jobs{pool="pool"} 1' in text
    assert 'gpupool_gpus_allocated{pool="pool"} 2' in text
    assert 'gpupool_gpus{pool="pool"} 4' in text
    assert 'gpupool_queue_depth{pool="pool"} 0' in text
    assert 'gpupool_account_gpu_seconds_total{pool="pool",account="team"}' in text


def test_tcp_bearer_tokens_and_who_may_cancel(tmp_path):
    import socket as so

    s = so.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    d = DaemonProc(tmp_path, tcp=f"127.0.0.1:{port}", tokens="alice tok-a\nbob tok-b\nolga tok-o\n")
    d.start()
    from gpupool.live.client import Client, DaemonError

    url = f"http://127.0.0.1:{port}"
    try:
        with Client(url=url) as anon:
            try:
                anon.queue()
                raise AssertionError("no token accepted")
            except DaemonError as exc:
                assert "bearer token" in str(exc)
        job = script("sleep 300", "--gres=gpu:1")
        with Client(url=url, token="tok-a") as alice, Client(url=url, token="tok-b") as bob, \
                Client(url=url, token="tok-o") as olga:
            a1, a2 = alice.submit([(job, "a.sbatch"), (job, "a.sbatch")], cwd=str(tmp_path), env={})
            assert {r["user"] for r in alice.queue()} == {"alice"}
            try:
                bob.cancel([a1])
                raise AssertionError("bob cancelled alice's job")
            except DaemonError as exc:
                assert "permission denied" in str(exc) and "alice" in str(exc)
            assert alice.cancel([a1])["cancelled"] == [a1]
            assert olga.cancel([a2])["cancelled"] == [a2]  # an operator (AdminLevel=Operator)
            wait_for(lambda: {alice.job(a1)["state"], alice.job(a2)["state"]} == {"CANCELLED"})
    finally:
        cancel_all(d)
        d.stop()


def test_preemption_with_grace_sends_sigterm_then_requeues(tmp_path):
    d = DaemonProc(tmp_path, grace=2)
    d.start()
    try:
        victim = tmp_path / "victim.sbatch"
        victim.write_text(script("trap 'echo checkpoint >> ckpt.log; sleep 30' TERM\nsleep 300 & wait",
                                 "--gres=gpu:4", "--qos=normal", "--account=team"))
        urgent = tmp_path / "urgent.sbatch"
        urgent.write_text(script("echo urgent ran", "--gres=gpu:4", "--qos=high", "--account=team"))
        v = int(d.cli("submit", "--parsable", str(victim)).stdout)
        wait_for(lambda: _state(d, v) == "RUNNING")
        u = int(d.cli("submit", "--parsable", str(urgent)).stdout)
        wait_for(lambda: (tmp_path / "ckpt.log").exists(), timeout=90)
        wait_for(lambda: _state(d, u) == "COMPLETED", timeout=90)
        with d.client() as c:
            facts = c.job(v)
        assert facts["requeues"] == 1 and facts["state"] in ("PENDING", "RUNNING")
    finally:
        cancel_all(d)
        d.stop()


def test_records_show_the_account_and_qos_the_job_got(tmp_path):
    # a job naming no account or QOS is recorded with the user's default account and the
    # association's default QOS, as sacct shows them (and fair share charges them), runs with
    # them in SLURM_JOB_ACCOUNT and SLURM_JOB_QOS, and its GPU-seconds count for that account;
    # a QOS named in another case is recorded by its name
    d = DaemonProc(tmp_path)
    me = __import__("pwd").getpwuid(os.getuid()).pw_name  # the socket's peer
    default = "root" if me == "root" else "team"
    if me != "root":
        accounts = d.pool / "accounts.cfg"
        accounts.write_text(accounts.read_text() + f"User - '{me}':DefaultAccount='team':Fairshare=1\n")
    d.start()
    try:
        plain, named = tmp_path / "plain.sbatch", tmp_path / "named.sbatch"
        plain.write_text(script('echo "acct=$SLURM_JOB_ACCOUNT qos=$SLURM_JOB_QOS"; sleep 1', "--gres=gpu:1"))
        named.write_text(script("true", "--gres=gpu:1", "--account=team", "--qos=High"))
        ids = [int(d.cli("submit", "--parsable", str(p)).stdout.split()[0]) for p in (plain, named)]
        wait_for(lambda: all(_state(d, i) == "COMPLETED" for i in ids))
        acct = d.cli("acct", "--db", str(d.db), "-P", "-o", "JobID,Account,QOS", "-M", "live:pool").stdout
        assert f"{ids[0]}|{default}|normal" in acct.splitlines()
        assert f"{ids[1]}|team|high" in acct.splitlines()
        assert (d.root / f"slurm-{ids[0]}.out").read_text() == f"acct={default} qos=normal\n"
        with d.client() as c:
            assert f'gpupool_account_gpu_seconds_total{{pool="pool",account="{default}"}}' in c.metrics()
    finally:
        cancel_all(d)
        d.stop()
