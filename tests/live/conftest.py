"""A small live pool (one node, 4 fake GPUs, KillWait=2) and a real daemon process serving it."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

#: DefMemPerCPU: without it a job that gives no --mem gets the whole node's memory (as on a real
#: 22.05.8, policy/slurm/job_defaults.py) and the tests' jobs could not share the host
SLURM_CONF = """ClusterName=livetest
KillWait=2
OverTimeLimit=0
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
GresTypes=gpu
PriorityType=priority/multifactor
PreemptType=preempt/qos
PreemptMode=REQUEUE
NodeName=host01 CPUs={cpus} RealMemory=64000 Gres=gpu:4 State=UNKNOWN
PartitionName=main Nodes=host01 Default=YES MaxTime=1-00:00:00 State=UP
"""

ACCOUNTS = """QOS - 'normal':Description='Default QOS':Priority=0
QOS - 'high':Description='Urgent':Priority=100:Preempt='normal':PreemptMode='REQUEUE'
Cluster - 'livetest':Fairshare=1:QOS='normal,high'
Parent - 'root'
User - 'root':DefaultAccount='root':AdminLevel='Administrator':Fairshare=1
Account - 'team':Description='team':Organization='t':Fairshare=1:QOS='normal,high':DefaultQOS='normal'
Parent - 'team'
User - 'alice':DefaultAccount='team':Fairshare=1
User - 'bob':DefaultAccount='team':Fairshare=1
User - 'olga':DefaultAccount='team':AdminLevel='Operator':Fairshare=1
"""


def write_pool(root: Path, cpus: int = 64, grace: int = 0) -> Path:
    pool = root / "pool"
    pool.mkdir(parents=True, exist_ok=True)
    (pool / "slurm.conf").write_text(SLURM_CONF.format(cpus=cpus))
    acc = ACCOUNTS if not grace else ACCOUNTS.replace("PreemptMode='REQUEUE'", f"PreemptMode='REQUEUE':GraceTime={grace}")
    (pool / "accounts.cfg").write_text(acc)
    return pool


class DaemonProc:
    """``gpupool serve`` in a child process; ``kill9`` and ``start`` again for restart tests."""

    def __init__(self, root: Path, *, policy: str = "slurm", tcp: str | None = None, tokens: str | None = None,
                 grace: int = 0, extra: list[str] | None = None, env: dict[str, str] | None = None) -> None:
        self.root = root
        self.extra = list(extra or [])
        self.env = env
        self.pool = write_pool(root, grace=grace)
        self.db = root / "ledger.db"
        self.socket = root / "gpupool.sock"
        self.state = root / "state"
        self.policy = policy
        self.tcp = tcp
        self.tokens = tokens
        self.proc: subprocess.Popen | None = None
        self.log = root / "daemon.log"

    def start(self) -> None:
        cmd = [sys.executable, "-m", "gpupool.cli.main", "serve", str(self.pool), "--db", str(self.db),
               "--state-dir", str(self.state), "--socket", str(self.socket), "--devices", "declared",
               "--policy", self.policy, *self.extra]
        if self.tcp:
            tokfile = self.root / "tokens"
            tokfile.write_text(self.tokens or "")
            cmd += ["--tcp", self.tcp, "--token-file", str(tokfile)]
        before = self.log.read_bytes().count(b"serving pool") if self.log.exists() else 0
        self.proc = subprocess.Popen(cmd, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT, cwd=self.root,
                                     start_new_session=True, env=self.env)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited: {self.log.read_text()}")
            if self.log.read_bytes().count(b"serving pool") > before:
                return
            time.sleep(0.05)
        raise RuntimeError(f"daemon did not start: {self.log.read_text()}")

    def kill9(self) -> None:
        """SIGKILL the daemon only (its jobs run in their own sessions and survive it)."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill9()

    def client(self, **kw):
        from gpupool.live.client import Client

        return Client(self.socket, **kw)

    def cli(self, *args: str, check: bool = True, cwd: Path | None = None) -> subprocess.CompletedProcess:
        env = dict(self.env or os.environ, GPUPOOL_SOCKET=str(self.socket), GPUPOOL_DB=str(self.db))
        r = subprocess.run([sys.executable, "-m", "gpupool.cli.main", *args], capture_output=True, text=True,
                           env=env, cwd=cwd or self.root, timeout=120)
        if check and r.returncode != 0:
            raise AssertionError(f"gpupool {' '.join(args)} failed ({r.returncode}): {r.stderr}{r.stdout}")
        return r


def cancel_all(d: DaemonProc) -> None:
    """Leave no job process behind a test (they live in their own sessions)."""
    try:
        with d.client() as c:
            ids = [r["id"] for r in c.queue()]
            if ids:
                c.cancel(ids)
    except Exception:
        pass


@pytest.fixture
def daemon(tmp_path):
    d = DaemonProc(tmp_path)
    d.start()
    yield d
    cancel_all(d)
    d.stop()


def wait_for(fn, timeout: float = 20.0, interval: float = 0.05):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"condition not met in {timeout}s (last: {last!r})")


def script(body: str, *options: str) -> str:
    head = "".join(f"#SBATCH {o}\n" for o in options)
    return f"#!/bin/bash\n{head}{body}\n"
