"""The engine's live Executor: a started job becomes a real process group on this host.

``launch`` starts the job's script and returns ``(inf, "")``: the end is not known in
advance, it is reported through ``Engine.finish`` when the process exits (``poll``). The
executor also enforces what slurmd enforces on the node: the time limit (SIGTERM, then
SIGKILL after KillWait), ``--signal`` before the limit, the SIGTERM of a preemption with
GraceTime, and the kill of a cancelled or preempted job's whole process group.
"""
from __future__ import annotations

import heapq
import json
import math
import os
import signal
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from gpupool.engine.job import Job
from gpupool.engine.nodes import mask_indices
from gpupool.formats.sbatch import SbatchJob
from gpupool.live import proc
from gpupool.live.host import LiveHost
from gpupool.live.jobenv import JobFacts, install_shims, job_environment, output_paths
from gpupool.live.services import probe_ready

COMPLETED, FAILED, TIMEOUT = "COMPLETED", "FAILED", "TIMEOUT"


@dataclass
class Submission:
    """What a user handed in for one job (one array task): the parsed script and its context."""

    job_id: int
    sbatch: SbatchJob
    script: str
    user: str
    uid: int
    gid: int
    cwd: str
    env: dict[str, str]
    submit_host: str = field(default_factory=socket.gethostname)
    array_task_ids: tuple[int, ...] = ()
    #: A service replica: the service and the replica's index (None for batch jobs).
    service: object | None = None
    replica: int = 0


@dataclass
class Running:
    """A job process this executor watches (started here or re-adopted after a restart)."""

    job_id: int
    pid: proc.ProcId
    start: float  # engine time the process started
    popen: subprocess.Popen | None = None
    rc_file: Path | None = None
    cgroup: str | None = None
    timed_out: bool = False
    stopping: bool = False  # ended by the engine (cancel, preemption): its exit is not news
    term_sent: bool = False  # SIGTERM already sent (preemption grace): the stop is a SIGKILL
    token: int = 0
    # service replicas only
    job: Job | None = None
    ready: bool = False
    next_probe: float = 0.0
    restarts: int = 0
    crashes: int = 0  # consecutive crashes (CrashLoopBackOff)


class LiveExecutor:
    """Runs jobs as process groups; see the module docstring.

    ``now`` is the daemon's engine clock (seconds since the daemon's epoch); ``wall(t)`` turns
    an engine time into epoch seconds for files and environment.
    """

    def __init__(self, host: LiveHost, spool: Path, *, now: Callable[[], float], wall: Callable[[float], float],
                 kill_wait: float = 30.0, over_time_limit: float = 0.0, check_interval: float = 0.0,
                 over_time_limit_of: Callable[[Job], float] | None = None,
                 account_qos: Callable | None = None) -> None:
        self.host = host
        #: the account and QOS a workload got (``ledger.record.JobTres.account_qos``), for
        #: SLURM_JOB_ACCOUNT and SLURM_JOB_QOS; without it, what the job named
        self.account_qos = account_qos
        self.spool = Path(spool)
        self.now = now
        self.wall = wall
        self.kill_wait = kill_wait
        self.over_time_limit = over_time_limit
        #: one job's allowance where the policy has one per job (a partition's OverTimeLimit)
        self.over_time_limit_of = over_time_limit_of
        self.check_interval = check_interval
        self.submissions: dict[int, Submission] = {}
        self.running: dict[int, Running] = {}
        self.dying: list[Running] = []  # stopped by the engine, waiting for the group to exit
        self._timers: list[tuple[float, int, int, int, str]] = []  # (t, seq, job, token, action)
        self._seq = 0
        self._adopting: dict[int, Running] = {}
        self.restarting: dict[int, Running] = {}  # service replicas waiting out their back-off
        self.launched: list[int] = []  # jobs started since the daemon last looked
        self.shim_dir = install_shims(self.spool / "bin")
        self.cluster = host.pool.slurm.cluster_name if host.pool.slurm is not None else host.pool.name

    # ------------------------------------------------------------------ engine interface
    def launch(self, job: Job, now: float) -> tuple[float, str]:
        adopted = self._adopting.pop(job.id, None)
        if adopted is not None:  # a process that outlived the previous daemon: watch it again
            adopted.job = job
            sub = self.submissions.get(job.id)
            adopted.ready = sub is not None and sub.service is not None and sub.service.probe is None
            self.running[job.id] = adopted
            self._arm(job, adopted)
            return math.inf, ""
        run = self._spawn(job, self.submissions[job.id], now)
        self.launched.append(job.id)
        self._arm(job, run)
        return math.inf, ""

    def _spawn(self, job: Job, sub: Submission, now: float, restarts: int = 0, crashes: int = 0) -> Running:
        """Start the job's process group now (a batch script, or a service replica's command)."""
        old = self.running.pop(job.id, None)
        if old is not None:  # never two processes of one job
            proc.signal_group(old.pid, signal.SIGKILL)
        jobdir = self.spool / str(job.id)
        jobdir.mkdir(parents=True, exist_ok=True)
        script = jobdir / "script"
        service = sub.service
        script.write_text(service.script(sub.replica) if service is not None else sub.script)
        script.chmod(0o755)
        # One status file per run of the job: a requeued job's earlier status never reads as this run's.
        rc_file = jobdir / f"rc.{job.requeues}"
        rc_file.unlink(missing_ok=True)
        if os.geteuid() == 0 and sub.uid != 0:
            for path in (jobdir, script):
                os.chown(path, sub.uid, sub.gid)
        facts = self.facts(job, sub, now)
        # Written before the process starts: a daemon restarted before it recorded this start
        # still knows which devices the process holds.
        (jobdir / "placement").write_text(json.dumps({
            "placement": [list(p) for p in job.placement], "start": self.wall(now), "requeues": job.requeues}))
        env = job_environment(sub.env, facts, self.shim_dir)
        if service is not None:
            out, err, append = jobdir / "service.log", None, True
        else:
            (out, err), append = output_paths(sub.sbatch.output, sub.sbatch.error, facts), False
        cg = proc.make_cgroup(f"job_{job.id}", facts.cpus, facts.memory_mib or None)
        popen, pid = proc.launch(script, cwd=sub.cwd, env=env, stdout=out, stderr=err, rc_file=rc_file,
                                 uid=sub.uid, gid=sub.gid, cgroup=cg, append=append)
        run = Running(job.id, pid, now, popen=popen, rc_file=rc_file, cgroup=str(cg) if cg else None, job=job,
                      restarts=restarts, crashes=crashes)
        if service is not None and service.probe is not None:
            run.next_probe = now + service.probe.initial_delay
        elif service is not None:
            run.ready = True  # no readiness probe: ready once running, as Kubernetes assumes
        self.running[job.id] = run
        return run

    def stop(self, job: Job, now: float, reason: str) -> None:
        """The engine took the job's resources (cancel, preemption, node failure): end its
        process group. After a preemption's grace SIGTERM the end is a SIGKILL; otherwise
        SIGCONT+SIGTERM now and SIGKILL after KillWait, as slurmd kills a job."""
        run = self.running.pop(job.id, None)
        self.restarting.pop(job.id, None)
        if run is None:
            return
        run.stopping = True
        run.token += 1
        if run.term_sent:
            proc.signal_group(run.pid, signal.SIGKILL)
        else:
            proc.signal_group(run.pid, signal.SIGCONT)
            proc.signal_group(run.pid, signal.SIGTERM)
            self._push(now + self.kill_wait, job.id, run.token, "kill-dying")
        self.dying.append(run)

    # ------------------------------------------------------------------ daemon interface
    def preempting(self, job_id: int) -> None:
        """A preemption with GraceTime began: SIGCONT+SIGTERM now so the job can checkpoint."""
        run = self.running.get(job_id)
        if run is not None and not run.term_sent:
            run.term_sent = True
            proc.signal_group(run.pid, signal.SIGCONT)
            proc.signal_group(run.pid, signal.SIGTERM)

    def adopt(self, job_id: int, pid: proc.ProcId, start: float, rc_file: Path) -> None:
        """The next ``launch`` of ``job_id`` re-attaches to this live process instead of starting one."""
        self._adopting[job_id] = Running(job_id, pid, start, rc_file=rc_file)

    def facts(self, job: Job, sub: Submission, now: float) -> JobFacts:
        node = self.host.node
        gpus: list[int] = []
        cpu_m = mem = 0
        for pod in job.placement:
            gpus.extend(mask_indices(pod[1]))
            cpu_m += pod[2]
            mem += pod[3]
        devices = self.host.devices
        wl = job.wl
        sb = sub.sbatch
        ntasks = sb.ntasks or (sb.ntasks_per_node or 1)
        account, qos = self.account_qos(wl) if self.account_qos is not None else (wl.account or "", wl.qos or "")
        return JobFacts(
            job_id=job.id, name=wl.name, user=sub.user, uid=sub.uid, gid=sub.gid, node=node.name,
            cluster=self.cluster, submit_dir=sub.cwd, submit_host=sub.submit_host, gpus=gpus,
            visible=[devices[g].visible for g in gpus], ntasks=ntasks, cpus_per_task=sb.cpus_per_task,
            cpus=max(1, math.ceil(cpu_m / 1000)), memory_mib=mem, account=account,
            partition=job.partition or wl.partition or "", qos=qos, array_job_id=wl.array_job_id,
            array_task_id=wl.array_task_id, array_task_ids=sub.array_task_ids,
            time_limit=job.time_limit, start_time=self.wall(now), restart_count=job.requeues,
        )

    def _push(self, t: float, job_id: int, token: int, action: str) -> None:
        self._seq += 1
        heapq.heappush(self._timers, (t, self._seq, job_id, token, action))

    def _arm(self, job: Job, run: Running) -> None:
        """Timers for the time limit (checked every ``check_interval`` on the daemon clock, as
        slurmctld does every 30 s) and for ``--signal``."""
        limit = job.time_limit
        if limit is None or limit == math.inf:
            return
        allowance = self.over_time_limit if self.over_time_limit_of is None else self.over_time_limit_of(job)
        if allowance != math.inf:  # OverTimeLimit=UNLIMITED: the job is never killed for its limit
            kill = run.start + limit + allowance
            if self.check_interval > 0:
                kill = math.ceil(kill / self.check_interval) * self.check_interval
            self._push(kill, job.id, run.token, "timeout")
        sub = self.submissions.get(job.id)
        if sub is not None and sub.sbatch.signal is not None:
            self._push(run.start + limit - sub.sbatch.signal.seconds, job.id, run.token, "signal")

    def next_due(self) -> float | None:
        return self._timers[0][0] if self._timers else None

    def poll(self, now: float) -> list[tuple[int, str, str]]:
        """Fire due timers and collect exits: ``(job id, final state, exit code)`` for each job
        whose process ended on its own (or by its time limit)."""
        timers = self._timers
        while timers and timers[0][0] <= now:
            _, _, job_id, token, action = heapq.heappop(timers)
            self._fire(job_id, token, action, now)
        ended: list[tuple[int, str, str]] = []
        for job_id, run in list(self.running.items()):
            status = self._exit_status(run)
            if status is None:
                continue
            del self.running[job_id]
            proc.remove_cgroup(run.cgroup)
            code = _exit_code(status)
            sub = self.submissions.get(job_id)
            if sub is not None and sub.service is not None and not run.timed_out:
                self._crashed(run, sub, now)
                continue
            if run.timed_out:
                state = TIMEOUT
            else:
                state = COMPLETED if status == 0 else FAILED
            ended.append((job_id, state, code))
        self._probe(now)
        if self.dying:
            still = []
            for run in self.dying:
                if self._exit_status(run) is None or proc.group_members(run.pid.pid):
                    still.append(run)
                else:
                    proc.remove_cgroup(run.cgroup)
            self.dying = still
        return ended

    def _crashed(self, run: Running, sub: Submission, now: float) -> None:
        """A replica's container exited: restart it in place after CrashLoopBackOff."""
        policy = sub.service.restart
        crashes = 1 if now - run.start >= policy.reset_after_s else run.crashes + 1
        run.crashes = crashes
        run.ready = False
        self.restarting[run.job_id] = run
        self._push(now + policy.backoff(crashes), run.job_id, run.token, "restart")

    def _probe(self, now: float) -> None:
        for run in self.running.values():
            if run.job is None or now < run.next_probe:
                continue
            sub = self.submissions.get(run.job_id)
            if sub is None or sub.service is None or sub.service.probe is None:
                continue
            probe = sub.service.probe
            run.ready = probe_ready(probe, probe.port + sub.replica)
            run.next_probe = now + probe.period

    def _fire(self, job_id: int, token: int, action: str, now: float) -> None:
        if action == "restart":
            run = self.restarting.pop(job_id, None)
            sub = self.submissions.get(job_id)
            if run is not None and run.token == token and sub is not None and run.job is not None:
                new = self._spawn(run.job, sub, now, restarts=run.restarts + 1, crashes=run.crashes)
                new.token = run.token
            return
        if action == "kill-dying":
            for run in self.dying:
                if run.job_id == job_id and run.token == token:
                    proc.signal_group(run.pid, signal.SIGKILL)
            return
        run = self.running.get(job_id)
        if run is None or run.token != token:
            return
        if action == "signal":
            sb = self.submissions[job_id].sbatch
            sig = proc.parse_signal(sb.signal.signal)
            proc.signal_steps(run.pid, sig, batch_only="B" in sb.signal.flags)
        elif action == "timeout":
            run.timed_out = True
            proc.signal_group(run.pid, signal.SIGCONT)
            proc.signal_group(run.pid, signal.SIGTERM)
            self._push(now + self.kill_wait, job_id, token, "kill")
        elif action == "kill":
            proc.signal_group(run.pid, signal.SIGKILL)

    def _exit_status(self, run: Running) -> int | None:
        """The script's exit status once the job's process is gone (None while it runs)."""
        if run.popen is not None:
            rc = run.popen.poll()
            if rc is None:
                return None
            written = proc.read_exit_status(run.rc_file) if run.rc_file else None
            if written is not None:
                return written
            return 128 - rc if rc < 0 else rc  # the wrapper itself was killed by signal -rc
        if proc.alive(run.pid):
            return None
        written = proc.read_exit_status(run.rc_file) if run.rc_file else None
        return written if written is not None else 128 + signal.SIGKILL

    def shutdown(self) -> None:
        """Leave running jobs alone: a restarted daemon re-adopts them (no signals sent)."""
        for run in self.running.values():
            if run.popen is not None:
                run.popen.returncode = 0  # do not let subprocess reap it behind our back later


def _exit_code(status: int) -> str:
    """Slurm's ``ExitCode`` text ``exit:signal``."""
    if status >= 128:
        return f"0:{status - 128}"
    return f"{status}:0"
