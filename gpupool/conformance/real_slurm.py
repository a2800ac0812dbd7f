"""Bring up a real Slurm 22.05 (Debian packages) in one directory, shaped like a gpupool pool.

Why: gpupool's ``--policy slurm`` claims to make slurmctld's decisions. The only honest check
is to run slurmctld itself beside it (the differential harness, the ledger's real-``sacct``
import, the live daemon's hand-off). This module is the one place that knows how to do that on
a single host; the facts come from ``../shared/tools/real-slurm/README.md``.

What runs, all started by this module and stopped by pid file (never by name):
one ``munged`` with a private socket, ``slurmctld``, one ``slurmd -N NODE`` per pool node
(each on its own port, GPUs are fake device files ``DIR/dev/gpuK``), and with
``accounting="dbd"`` a private ``mariadbd`` plus ``slurmdbd`` into which the pool's QOS,
accounts, users and shares are loaded with ``sacctmgr``. Every TCP port is picked free at
start, so several clusters can run on the host at the same time.

API (stable; other packages rely on it)::

    from gpupool.conformance.real_slurm import RealSlurm, RealSlurmUnavailable

    with RealSlurm("/tmp/rs", pool, accounting="dbd", speedup=10) as rs:
        job_id = rs.sbatch(["-N1", "--gres=gpu:2", "-t", "1", "--wrap", "sleep 30"])
        print(rs.run(["squeue"]).stdout)          # any client, with rs.env
        rs.wait_idle(timeout=120)                 # no job pending or running
        rs.now()                                  # Slurm's clock (fake seconds under speedup)

``RealSlurm(directory, pool=None, *, nodes=4, gpus_per_node=8, ...)`` takes either a
``Pool`` (nodes, GPUs, partitions, scheduler and priority keys, accounting tree) or explicit
parameters for a plain N x G cluster. Keys of the pool's slurm.conf that tie Slurm to a real
site (hosts, ports, users, paths, auth, cgroups, logging, accounting storage, topology plugin)
are replaced by this module's own; every scheduling key is kept as written. ``extra_conf``
appends lines (later keys win over earlier ones only where Slurm allows; prefer
``overrides``, which replaces keys). ``speedup`` runs every daemon, client and job under
one shared libfaketime clock (x10–x30 make the same decisions as real time).

Attributes after ``start()``: ``env`` (environment for clients: ``SLURM_CONF`` and, under
speedup, the libfaketime variables), ``conf_path``, ``etc``, ``log_dir``, ``out_dir``,
``ports`` (name -> port), ``node_names``, ``cluster``.
Exceptions: ``RealSlurmUnavailable`` (packages or root missing: callers skip),
``RealSlurmError`` (installed but failed to come up; the message names the log to read).
"""
from __future__ import annotations

import copy
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from gpupool.errors import GpupoolError
from gpupool.formats.gres_conf import format_core_list
from gpupool.formats.slurm_conf import render_slurm_conf
from gpupool.model.pool import Gpu, Node, Pool
from gpupool.model.slurm import Accounting, Partition, SlurmConfig

__all__ = [
    "DEFAULT_SCHEDULER_PARAMETERS",
    "RealSlurm",
    "RealSlurmError",
    "RealSlurmUnavailable",
    "free_ports",
    "missing_packages",
]

#: Debian packages a cluster needs; the second tuple only with accounting="dbd".
BASE_PACKAGES = ("munge", "slurmctld", "slurmd", "slurm-client")
DBD_PACKAGES = ("slurmdbd", "mariadb-server")
FAKETIME_PACKAGE = "faketime"
_BINARIES = {
    "munge": ("munged", "munge"),
    "slurmctld": ("slurmctld",),
    "slurmd": ("slurmd", "slurmstepd"),
    "slurm-client": ("sbatch", "squeue", "scontrol", "sinfo", "sacct", "scancel"),
    "slurmdbd": ("slurmdbd", "sacctmgr"),
    "mariadb-server": ("mariadbd", "mariadb-install-db", "mariadb"),
    "faketime": ("faketime",),
}
#: real seconds a daemon's foreground part may take before its start counts as failed
DAEMON_START_S = 60.0
_SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/bin", "/sbin", "/bin"])

#: Fast reaction, as in the README's verified setup: 1 s backfill and main-scheduler passes.
DEFAULT_SCHEDULER_PARAMETERS = "bf_interval=1,bf_resolution=1,sched_interval=1,sched_min_interval=0,batch_sched_delay=0,bf_continue"

#: slurm.conf keys that bind Slurm to a site; this module writes its own values for them.
_SITE_KEYS = {
    k.lower()
    for k in (
        "SlurmctldHost", "ControlMachine", "ControlAddr", "BackupController", "BackupAddr",
        "SlurmctldPort", "SlurmdPort", "SlurmUser", "SlurmdUser", "AuthType", "AuthInfo",
        "AuthAltTypes", "AuthAltParameters", "CredType", "StateSaveLocation", "SlurmdSpoolDir",
        "SlurmctldPidFile", "SlurmdPidFile", "SlurmctldLogFile", "SlurmdLogFile", "SlurmctldDebug",
        "SlurmdDebug", "SlurmSchedLogFile", "SlurmSchedLogLevel", "DebugFlags", "MailProg",
        "MpiDefault", "ProctrackType", "TaskPlugin", "TaskPluginParam", "JobAcctGatherType",
        "JobAcctGatherFrequency", "JobAcctGatherParams", "SlurmdParameters", "JobCompType",
        "JobCompLoc", "JobCompHost", "JobCompPort", "JobCompUser", "JobCompPass",
        "AccountingStorageType", "AccountingStorageHost", "AccountingStoragePort",
        "AccountingStoragePass", "AccountingStorageUser", "AccountingStorageLoc",
        "AccountingStorageEnforce", "AccountingStorageTRES", "AccountingStorageBackupHost",
        "AccountingStorageExternalHost", "AccountingStorageParameters", "ClusterName",
        "TopologyPlugin", "TopologyParam", "Prolog", "Epilog", "PrologSlurmctld",
        "EpilogSlurmctld", "PrologFlags", "TaskProlog", "TaskEpilog", "SrunProlog", "SrunEpilog",
        "HealthCheckProgram", "HealthCheckInterval", "HealthCheckNodeState", "PluginDir",
        "PlugStackConfig", "LaunchType", "LaunchParameters", "SwitchType", "CommunicationParameters",
        "SlurmctldParameters", "SlurmctldTimeout", "SlurmdTimeout", "MinJobAge", "MaxJobCount",
        "FirstJobId", "ReturnToService", "InactiveLimit", "EnforcePartLimits", "GresTypes",
        "JobContainerType", "CoreSpecPlugin", "ResvEpilog", "ResvProlog", "RebootProgram",
        "SuspendProgram", "ResumeProgram", "SuspendTime", "UnkillableStepProgram",
        "AcctGatherEnergyType", "AcctGatherNodeFreq", "AcctGatherProfileType",
        "AcctGatherInterconnectType", "AcctGatherFilesystemType", "X11Parameters",
        "JobSubmitPlugins", "PrivateData", "UsePAM", "SlurmdUser", "TmpFS",
    )
}
_NODE_SITE_KEYS = {"nodeaddr", "nodehostname", "port", "bcastaddr"}


class RealSlurmUnavailable(GpupoolError):
    """Real Slurm cannot run here (packages or privileges missing): callers should skip."""


class RealSlurmError(GpupoolError):
    """Real Slurm is installed but did not come up or a client command failed."""


def missing_packages(accounting: str = "none", speedup: float | None = None) -> list[str]:
    """Debian packages whose programs are not on this machine (empty when all are)."""
    wanted = list(BASE_PACKAGES)
    if accounting == "dbd":
        wanted += DBD_PACKAGES
    if speedup:
        wanted.append(FAKETIME_PACKAGE)
    return [p for p in wanted if any(_which(b) is None for b in _BINARIES[p])]


def _which(name: str) -> str | None:
    return shutil.which(name, path=_SEARCH_PATH)


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on 127.0.0.1 right now (the kernel picks them).

    Sockets are kept open until all are chosen so one call never returns a port twice; another
    process may still take one before Slurm binds it, which ``start`` reports as a failure.
    """
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _plain_nodes(nodes: int, gpus_per_node: int, cpus: int, memory_mb: int) -> list[Node]:
    width = max(2, len(str(nodes)))
    return [
        Node(name=f"gpu{i:0{width}d}", cpus=cpus, memory_mib=memory_mb,
             gpus=tuple(Gpu(index=g) for g in range(gpus_per_node)), state="UNKNOWN")
        for i in range(1, nodes + 1)
    ]


class RealSlurm:
    """One real Slurm cluster living in ``directory``; a context manager (start/stop)."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        pool: Pool | None = None,
        *,
        nodes: int = 4,
        gpus_per_node: int = 8,
        cpus_per_node: int = 128,
        memory_mb: int = 1_000_000,
        partition: str = "train",
        max_time: str = "60",
        accounting: str = "none",
        accounts: Sequence[str] = ("teamA", "teamB"),
        scheduler_parameters: str | None = None,
        overrides: Mapping[str, str] | None = None,
        extra_conf: Iterable[str] = (),
        speedup: float | None = None,
        submit_user: str = "root",
        submit_user_in_accounts: bool = True,
        cluster: str | None = None,
        start_timeout: float = 90.0,
        slurmctld_debug: str = "verbose",
    ) -> None:
        if accounting not in ("none", "dbd"):
            raise ValueError(f"accounting must be 'none' or 'dbd', not {accounting!r}")
        self.dir = Path(directory).resolve()
        self.pool = pool
        self.accounting = accounting
        self.speedup = float(speedup) if speedup and float(speedup) != 1.0 else None
        self.submit_user = submit_user
        self.submit_user_in_accounts = submit_user_in_accounts
        self.start_timeout = start_timeout
        #: SlurmctldDebug: "debug" adds a line for each main scheduler pass, which the
        #: differential replay reads (``diff_slurm_real.main_passes``)
        self.slurmctld_debug = slurmctld_debug
        self._overrides = dict(overrides or {})
        self._extra = list(extra_conf)
        if pool is not None:
            if pool.slurm is None:
                raise RealSlurmError(f"pool {pool.name!r} has no slurm.conf; real Slurm needs one")
            self._config: SlurmConfig = copy.deepcopy(pool.slurm)
            self._nodes = [copy.deepcopy(n) for n in pool.nodes.values()
                           if any(n.name in p.nodes for p in self._config.partitions.values())]
            self._accounting_tree: Accounting | None = self._config.accounting
        else:
            self._nodes = _plain_nodes(nodes, gpus_per_node, cpus_per_node, memory_mb)
            names = tuple(n.name for n in self._nodes)
            self._config = SlurmConfig(cluster_name="lab")
            self._config.partitions[partition] = Partition(
                name=partition, nodes=names, default=True,
                max_time=None if max_time.upper() == "UNLIMITED" else int(max_time) * 60)
            plain = {
                "SelectType": "select/cons_tres", "SelectTypeParameters": "CR_Core",
                "SchedulerType": "sched/backfill",
                "SchedulerParameters": scheduler_parameters or DEFAULT_SCHEDULER_PARAMETERS,
                "PriorityType": "priority/multifactor",
                "PriorityCalcPeriod": "1", "PriorityDecayHalfLife": "0-1", "PriorityMaxAge": "0-1",
                "PriorityWeightAge": "1000",
                "PriorityWeightFairshare": "10000" if accounting == "dbd" else "0",
                "PriorityWeightJobSize": "0", "PriorityWeightPartition": "0", "PriorityWeightQOS": "0",
            }
            for key, value in plain.items():  # written as given; explicit overrides win
                self._overrides.setdefault(key, value)
            self._accounting_tree = None
            self._plain_accounts = list(accounts)
        if scheduler_parameters is not None and pool is not None:
            self._overrides["SchedulerParameters"] = scheduler_parameters
        self.cluster = (cluster or self._config.cluster_name or "lab").lower()
        self.node_names: list[str] = [n.name for n in self._nodes]
        for n in self._nodes:
            if any(g.mig_profile for g in n.gpus):
                raise RealSlurmError(f"node {n.name}: MIG devices cannot be emulated with fake device files")
        self.etc = self.dir / "etc"
        self.conf_path = self.etc / "slurm.conf"
        self.log_dir = self.dir / "log"
        self.out_dir = self.dir / "out"
        self.run_dir = self.dir / "run"
        self.bin_dir = self.dir / "bin"
        self.munge_socket = _munge_socket_path(self.dir)
        self.ports: dict[str, int] = {}
        self.env: dict[str, str] = {}
        self._clock_holder: subprocess.Popen[bytes] | None = None
        self._reapers: list[subprocess.Popen[bytes]] = []  # one per slurmd (subreaper.py)
        self._fake_origin: tuple[float, float] | None = None  # (real, fake) at calibration
        self._started = False
        #: What this module changed in the pool's configuration and why (shown by callers).
        self.notes: list[str] = []

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> RealSlurm:  # noqa: PYI034 - start() returns self
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> RealSlurm:
        """Write the configs and start every daemon; return when all nodes are idle."""
        missing = missing_packages(self.accounting, self.speedup)
        if missing:
            raise RealSlurmUnavailable(
                "real Slurm needs the Debian packages " + " ".join(missing)
                + " (apt-get install -y --no-install-recommends " + " ".join(missing) + ")")
        if os.geteuid() != 0:
            raise RealSlurmUnavailable("real Slurm on one host runs its daemons as root; not root here")
        self.stop()  # whatever an earlier run left in this directory (our pid files only)
        self._started = True
        try:
            self._layout()
            self._start_clock()
            self._start_munge()
            n_ports = 1 + len(self._nodes) + (2 if self.accounting == "dbd" else 0)
            ports = free_ports(n_ports)
            self.ports = {"slurmctld": ports[0]}
            for i, n in enumerate(self._nodes):
                self.ports[f"slurmd:{n.name}"] = ports[1 + i]
            if self.accounting == "dbd":
                self.ports["slurmdbd"], self.ports["mysql"] = ports[-2], ports[-1]
            self._write_configs()
            if self.accounting == "dbd":
                self._start_dbd()
                # the QOS names first: slurmctld refuses to start when a partition's QOS= names
                # one the database lacks ("Partition ... has an invalid qos"); their limits
                # only after it, since a TRES such as gres/gpu is known once slurmctld registers
                self._load_accounting(adding_qos=True)
            self._start_slurmctld()
            if self.accounting == "dbd":
                self._load_accounting(adding_qos=False)
            self._start_slurmds()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Cancel this cluster's jobs, then stop the daemons named by pid files in ``DIR/run``.

        A pid is signalled only while ``/proc/PID/cmdline`` still names the daemon, so a
        reused pid is never hit. Safe to call repeatedly.
        """
        if not self.run_dir.is_dir():
            return
        ctld = self._pid("slurmctld")
        if ctld and self.conf_path.exists():
            env = self.env or self._base_env()
            try:
                ids = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, check=False,
                                     text=True, timeout=10).stdout.split()
                if ids:
                    subprocess.run(["scancel", *ids], env=env, capture_output=True, timeout=10, check=False)
                    deadline = time.monotonic() + 15
                    while time.monotonic() < deadline:
                        left = subprocess.run(["squeue", "-h", "-t", "R,CG,S", "-o", "%i"], env=env, check=False,
                                              capture_output=True, text=True, timeout=5).stdout.strip()
                        if not left:
                            break
                        time.sleep(0.2)
            except (subprocess.SubprocessError, OSError):
                pass
            except RealSlurmError as exc:
                if exc.args and str(exc.args[0]).startswith("slurmctld stopped"):
                    raise
        self._stop_pids("slurmd", sorted(self.run_dir.glob("slurmd-*.pid")))
        self._stop_reapers()
        self._stop_pids("slurmctld", [self.run_dir / "slurmctld.pid"])
        self._stop_pids("slurmdbd", [self.run_dir / "slurmdbd.pid"])
        self._stop_pids("mariadbd", [self.run_dir / "mariadbd.pid"])
        self._stop_pids("munged", [self.run_dir / "munged.pid"])
        if self.munge_socket.parent.name.startswith("gpupool-munge-"):  # the /tmp fallback folder
            shutil.rmtree(self.munge_socket.parent, ignore_errors=True)
        self._stop_pids("sleep 1000000", [self.run_dir / "clock.pid"])
        if self._clock_holder is not None:
            try:
                self._clock_holder.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            self._clock_holder = None
        self._started = False

    # ------------------------------------------------------------------ clients
    def run(self, args: Sequence[str], *, check: bool = True, timeout: float = 60,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client (``["squeue", ...]``) against this cluster; raise on failure if ``check``."""
        try:
            proc = subprocess.run(list(args), env=self.env, capture_output=True, text=True, check=False,
                                  timeout=timeout, input=input)
        except subprocess.TimeoutExpired as exc:
            raise RealSlurmError(f"{' '.join(args)} did not answer in {timeout} s") from exc
        if check and proc.returncode != 0:
            raise RealSlurmError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc

    def sbatch(self, args: Sequence[str]) -> int:
        """Submit with ``sbatch --parsable ARGS``; return the job id."""
        out = self.run(["sbatch", "--parsable", *args]).stdout.strip()
        return int(out.split(";")[0])

    def now(self) -> float:
        """Slurm's clock in epoch seconds: the shared fake clock under ``speedup``."""
        if self._fake_origin is None:
            return time.time()
        real0, fake0 = self._fake_origin
        return fake0 + (time.monotonic() - real0) * (self.speedup or 1.0)

    def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` of Slurm's clock."""
        if seconds > 0:
            time.sleep(seconds / (self.speedup or 1.0))

    def controller_started_at(self) -> float:
        """When slurmctld started, on Slurm's clock (epoch s, ms resolution, from its log).

        slurmctld's periodic work (PriorityCalcPeriod, the 30 s time-limit check) runs in
        phase with this instant, so a replay that starts its clock here shares that phase.
        """
        log = self.log_dir / "slurmctld.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        m = re.search(r"^\[(\S+)\] slurmctld version \S+ started", text, re.MULTILINE)
        if not m:
            raise RealSlurmError(f"no 'slurmctld version … started' line in {log}")
        from datetime import datetime

        return datetime.fromisoformat(m.group(1)).timestamp()

    def decay_started_at(self) -> float:
        """When priority/multifactor's decay thread started (epoch s, Slurm's clock).

        Fair-share factors are recomputed every PriorityCalcPeriod from this instant, a few
        seconds after :meth:`controller_started_at`; falls back to that without the thread's
        log line (priority/basic).
        """
        log = self.log_dir / "slurmctld.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        m = re.search(r"^\[(\S+)\] priority/multifactor: _read_last_decay_ran", text, re.MULTILINE)
        if not m:
            return self.controller_started_at()
        from datetime import datetime

        return datetime.fromisoformat(m.group(1)).timestamp()

    def wait_idle(self, timeout: float = 600.0, poll: float = 0.5) -> None:
        """Wait (real seconds) until no job is pending, running or completing."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.run(["squeue", "-h", "-o", "%i"], check=False).stdout.strip():
                return
            time.sleep(poll)
        raise RealSlurmError(f"jobs still queued after {timeout} s (squeue in {self.dir})")

    def wait_nodes_idle(self, timeout: float = 60.0, poll: float = 0.3) -> None:
        """Wait (real seconds) until ``sinfo`` answers and lists every node as plain ``idle``
        (none completing, drained or down): cases run one after another on one cluster need
        all their nodes back, and a node that does not come back is named with its state and
        reason here rather than showing up as a different placement in the next case."""
        deadline = time.monotonic() + timeout
        want = set(self.node_names)
        while True:
            got = self.run(["sinfo", "-h", "-N", "-o", "%N %T %E"], check=False)
            idle = {fields[0] for fields in map(str.split, got.stdout.splitlines()) if fields[1:2] == ["idle"]}
            if got.returncode == 0 and idle >= want:
                return
            if time.monotonic() >= deadline:
                states = (got.stdout + got.stderr).strip()
                raise RealSlurmError(f"nodes not idle after {timeout:g} s (sinfo in {self.dir}):\n{states}")
            time.sleep(poll)

    # ------------------------------------------------------------------ pieces
    def _layout(self) -> None:
        for sub in ("bin", "etc", "run", "log", "spool", "dev", "munge", "out", "state"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        for sub in ("state", "spool", "out"):
            shutil.rmtree(self.dir / sub, ignore_errors=True)
            (self.dir / sub).mkdir()
        for f in self.log_dir.glob("*"):
            if f.is_file():
                f.unlink()
        os.chmod(self.dir, 0o755)
        os.chmod(self.dir / "munge", 0o755)  # munged wants o+x along its socket path
        self.munge_socket.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        # Daemons decide what they are from argv[0]: run them through links named exactly so
        # (a "slurmctld-wlm" silently drops every node's Gres=).
        for name in ("slurmctld", "slurmd", "slurmstepd", "slurmdbd"):
            target = next((p for p in (f"/usr/sbin/{name}-wlm", f"/usr/sbin/{name}") if os.path.exists(p)), None)
            link = self.bin_dir / name
            if target:
                if link.is_symlink() or link.exists():
                    link.unlink()
                link.symlink_to(target)
        most = max((len(n.gpus) for n in self._nodes), default=0)
        for g in range(most):
            dev = self.dir / "dev" / f"gpu{g}"
            if not dev.exists():
                os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 3))  # same numbers as /dev/null

    def _base_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["SLURM_CONF"] = str(self.conf_path)
        env["PATH"] = _SEARCH_PATH
        for key in ("SLURM_JOB_ID", "SLURM_JOBID", "SBATCH_ACCOUNT", "SLURM_ACCOUNT"):
            env.pop(key, None)
        return env

    def _start_clock(self) -> None:
        """Start one libfaketime clock shared by every process this cluster runs.

        ``faketime`` creates the shared-memory clock and hands its name to its child only;
        the child prints the variables and sleeps, so daemons and clients started later with
        the same variables (and ``FAKETIME_DONT_RESET``) all see one accelerated clock.
        """
        self.env = self._base_env()
        if not self.speedup:
            return
        env = dict(self.env, FAKETIME_DONT_RESET="1")
        holder = subprocess.Popen(
            ["faketime", "-m", "-f", f"+0 x{self.speedup:g}", "sh", "-c",
             'echo "$LD_PRELOAD|$FAKETIME|$FAKETIME_SHARED|$(date +%s.%N)|$$"; exec sleep 1000000'],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        self._clock_holder = holder
        line = holder.stdout.readline().decode().strip() if holder.stdout else ""
        parts = line.split("|")
        if len(parts) != 5 or not parts[2]:
            holder.kill()
            raise RealSlurmError(f"faketime did not start a shared clock (got {line!r})")
        # the pid file names the sleeping child: when it ends, faketime removes its shared memory
        (self.run_dir / "clock.pid").write_text(f"{parts[4]}\n")
        self._fake_origin = (time.monotonic(), float(parts[3]))
        self.env.update(LD_PRELOAD=parts[0], FAKETIME=parts[1], FAKETIME_SHARED=parts[2],
                        FAKETIME_DONT_RESET="1")

    def _start_munge(self) -> None:
        key = self.dir / "munge" / "munge.key"
        if not key.exists() or key.stat().st_size == 0:
            key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o600)
        self._daemon(["munged", f"--key-file={key}", f"--socket={self.munge_socket}",
                      f"--pid-file={self.run_dir / 'munged.pid'}", f"--log-file={self.log_dir / 'munged.log'}",
                      f"--seed-file={self.dir / 'munge' / 'munged.seed'}"], "munged")
        self._wait(lambda: subprocess.run(["munge", "-n", "-S", str(self.munge_socket)], env=self.env, check=False,
                                          capture_output=True, timeout=5).returncode == 0,
                   20, "munged", self.log_dir / "munged.log")

    def render_slurm_conf(self) -> str:
        """The slurm.conf this cluster runs (site keys replaced, scheduling keys kept)."""
        cfg = copy.deepcopy(self._config)
        # the GPU TRES the pool's accounting tracks by type stay tracked (typed limits need
        # them; slurmctld registers them in slurmdbd at its start, before sacctmgr's limits)
        tracked = ["gres/gpu"] + [str(t) for t in (cfg.params.get("AccountingStorageTRES") or ())
                                  if str(t).lower().startswith("gres/gpu:")]
        for table in (cfg.raw, cfg.params):
            for key in list(table):
                if key.split("=")[0].lower() in _SITE_KEYS or "=" in key:
                    del table[key]
        for key in list(self._overrides):
            if key.lower() == "schedulerparameters":
                cfg.scheduler_parameters = {}
            elif key.lower() == "selecttypeparameters":
                cfg.select_type_parameters = ()
            for table in (cfg.raw, cfg.params):
                for k in list(table):
                    if k.lower() == key.lower():
                        del table[k]
        if self.accounting != "dbd":
            # gres/gpu is a TRES only with AccountingStorageTRES, which needs slurmdbd: without
            # it slurmctld stops on "TRES weight 'gres:gpu' is not a configured TRES type".
            for table in (cfg.raw, cfg.params):
                for k in [k for k in table if k.lower() == "priorityweighttres"]:
                    del table[k]
                    self.notes.append(f"{k} dropped: gres/gpu TRES weights need accounting='dbd'")
        cfg.gres_types = ()
        cfg.cluster_name = self.cluster
        host = socket.gethostname().split(".")[0]
        nodes = []
        for n in self._nodes:
            node = copy.deepcopy(n)
            node.slurm_extra = {k: v for k, v in node.slurm_extra.items() if k.lower() not in _NODE_SITE_KEYS}
            node.slurm_extra.update(NodeHostname=host, NodeAddr="127.0.0.1",
                                    Port=str(self.ports[f"slurmd:{n.name}"]))
            node.state = "UNKNOWN"
            nodes.append(node)
        for part in cfg.partitions.values():
            if self.accounting == "dbd" and "TRESBillingWeights" not in part.extra and \
                    not any(k.lower() == "tresbillingweights" for k in part.extra):
                part.extra["TRESBillingWeights"] = "GRES/gpu=1.0"
        body = render_slurm_conf(cfg, nodes)
        d = self.dir
        site = [
            f"# real Slurm for gpupool in {d}: site keys written by gpupool.conformance.real_slurm",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={self.ports['slurmctld']}",
            f"SlurmdPort={self.ports[f'slurmd:{self._nodes[0].name}']}",
            "SlurmUser=root", "SlurmdUser=root",
            "AuthType=auth/munge", f"AuthInfo=socket={self.munge_socket}", "CredType=cred/munge",
            f"StateSaveLocation={d}/state", f"SlurmdSpoolDir={d}/spool/%n",
            f"SlurmctldPidFile={d}/run/slurmctld.pid", f"SlurmdPidFile={d}/run/slurmd-%n.pid",
            f"SlurmctldLogFile={d}/log/slurmctld.log", f"SlurmdLogFile={d}/log/slurmd-%n.log",
            f"SlurmctldDebug={self.slurmctld_debug}", "SlurmdDebug=info", "DebugFlags=Backfill,TraceJobs",
            "MailProg=/bin/true", "MpiDefault=none", "ProctrackType=proctrack/pgid", "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none", "SlurmdParameters=config_overrides",
            "ReturnToService=2", "SlurmctldTimeout=30", "SlurmdTimeout=60", "InactiveLimit=0",
            "MinJobAge=86400", "MaxJobCount=100000", "EnforcePartLimits=ALL", "FirstJobId=1",
            "GresTypes=gpu",
            "JobCompType=jobcomp/filetxt", f"JobCompLoc={d}/log/jobcomp.txt",
        ]
        if "KillWait" not in cfg.raw and "KillWait" not in cfg.params:
            site.append("KillWait=2")
        if self.accounting == "dbd":
            site += [
                "AccountingStorageType=accounting_storage/slurmdbd",
                f"AccountingStoragePass={self.munge_socket}",  # dbd links take munge's socket from here
                "AccountingStorageHost=127.0.0.1", f"AccountingStoragePort={self.ports['slurmdbd']}",
                "AccountingStorageEnforce=associations,limits,qos", "AccountingStorageTRES=" + ",".join(tracked),
            ]
        else:
            site.append("AccountingStorageType=accounting_storage/none")
        lines = body.splitlines()
        head = [ln for ln in lines if not ln.startswith(("NodeName=", "PartitionName="))]
        tail = [ln for ln in lines if ln.startswith(("NodeName=", "PartitionName="))]
        over = [f"{k}={v}" for k, v in self._overrides.items()]
        return "\n".join(site + head + over + self._extra + tail) + "\n"

    def render_gres_conf(self) -> str:
        """gres.conf: each node's GPUs as fake device files ``DIR/dev/gpuK``, typed as in the pool;
        GPUs bound to cores (the pool's ``Cores=``) get a line each with their ``Cores=``."""
        out = []
        for n in self._nodes:
            if any(g.cores for g in n.gpus):
                for i, gpu in enumerate(n.gpus):
                    typ = f" Type={gpu.type}" if gpu.type else ""
                    cores = f" Cores={format_core_list(gpu.cores)}" if gpu.cores else ""
                    out.append(f"NodeName={n.name} Name=gpu{typ} File={self.dir / 'dev' / f'gpu{i}'}{cores}")
                continue
            by_type: dict[str | None, list[int]] = {}
            for i, gpu in enumerate(n.gpus):
                by_type.setdefault(gpu.type, []).append(i)
            for gtype, idx in by_type.items():
                typ = f" Type={gtype}" if gtype else ""
                files = ",".join(str(self.dir / "dev" / f"gpu{i}") for i in idx)
                out.append(f"NodeName={n.name} Name=gpu{typ} File={files}")
        return "\n".join(out) + "\n"

    def _write_configs(self) -> None:
        self.notes.clear()
        self.conf_path.write_text(self.render_slurm_conf())
        (self.etc / "gres.conf").write_text(self.render_gres_conf())
        (self.etc / "cgroup.conf").unlink(missing_ok=True)
        (self.dir / "env.sh").write_text(f"export SLURM_CONF={self.conf_path}\n")

    def _start_dbd(self) -> None:
        db = self.dir / "mysql"
        sock = db / "run" / "mysqld.sock"
        if not (db / "data" / "mysql").is_dir():
            (db / "data").mkdir(parents=True, exist_ok=True)
            proc = subprocess.run(
                ["mariadb-install-db", "--no-defaults", "--user=root", f"--datadir={db / 'data'}",
                 "--auth-root-authentication-method=normal", "--skip-test-db"],
                env=self._base_env(), capture_output=True, text=True, timeout=180, check=False)
            (self.log_dir / "mariadb-install.log").write_text(proc.stdout + proc.stderr)
            if proc.returncode != 0:
                raise RealSlurmError(f"mariadb-install-db failed: see {self.log_dir / 'mariadb-install.log'}")
        (db / "run").mkdir(exist_ok=True)
        # mariadbd runs on the real clock: it only stores records.
        subprocess.Popen(
            ["mariadbd", "--no-defaults", "--user=root", f"--datadir={db / 'data'}", f"--socket={sock}",
             f"--pid-file={self.run_dir / 'mariadbd.pid'}", f"--port={self.ports['mysql']}",
             "--bind-address=127.0.0.1", "--innodb-buffer-pool-size=64M", "--skip-log-bin",
             f"--log-error={self.log_dir / 'mariadbd.log'}"],
            env=self._base_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        sql = ["mariadb", "--no-defaults", "-uroot", "-S", str(sock)]
        self._wait(lambda: subprocess.run([*sql, "-e", "select 1"], capture_output=True, timeout=5,
                                          check=False).returncode == 0,
                   60, "mariadbd", self.log_dir / "mariadbd.log")
        self._wait(lambda: self._pid("mariadbd") is not None, 10, "mariadbd pid file", self.log_dir / "mariadbd.log")
        grants = ("DROP DATABASE IF EXISTS slurm_acct_db; CREATE DATABASE slurm_acct_db;"
                  "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw';"
                  "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmpw';"
                  "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
                  "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';")
        subprocess.run([*sql, "-e", grants],
                       check=True, capture_output=True, timeout=30)
        conf = self.etc / "slurmdbd.conf"  # slurmdbd has no -f: it reads it beside $SLURM_CONF
        conf.write_text("\n".join([
            "AuthType=auth/munge", f"AuthInfo=socket={self.munge_socket}", "DbdHost=localhost",
            "DbdAddr=127.0.0.1", f"DbdPort={self.ports['slurmdbd']}", "SlurmUser=root", "DebugLevel=info",
            f"LogFile={self.log_dir / 'slurmdbd.log'}", f"PidFile={self.run_dir / 'slurmdbd.pid'}",
            "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1",
            f"StoragePort={self.ports['mysql']}", "StorageLoc=slurm_acct_db", "StorageUser=slurm",
            "StoragePass=slurmpw"]) + "\n")
        os.chmod(conf, 0o600)
        self._daemon([str(self.bin_dir / "slurmdbd")], "slurmdbd")
        self._wait(lambda: self.run(["sacctmgr", "-n", "-i", "show", "cluster"], check=False, timeout=5).returncode == 0,
                   60, "slurmdbd", self.log_dir / "slurmdbd.log")
        self.run(["sacctmgr", "-i", "add", "cluster", self.cluster])

    def sacctmgr_commands(self) -> list[list[str]]:
        """The ``sacctmgr -i`` argument lists that load the pool's QOS, accounts and users."""
        c = self.cluster
        cmds: list[list[str]] = []
        tree = self._accounting_tree
        if tree is None:
            for acct in self._plain_accounts:
                cmds.append(["add", "account", acct, f"Cluster={c}", "Fairshare=1"])
                cmds.append(["add", "user", self.submit_user, f"Account={acct}", f"Cluster={c}"])
            return cmds
        from gpupool.formats.sacctmgr import (
            format_tres,  # local: only the dbd path needs it
        )
        from gpupool.formats.slurm_time import format_duration

        for q in tree.qos.values():
            if q.name != "normal":
                cmds.append(["add", "qos", q.name])
            opts = [f"Priority={q.priority}", f"UsageFactor={q.usage_factor}", f"GraceTime={q.grace_time}"]
            if q.preempt:
                opts.append(f"Preempt={','.join(q.preempt)}")
            if q.preempt_mode:
                opts.append(f"PreemptMode={q.preempt_mode}")
            if q.preempt_exempt_time is not None:
                opts.append(f"PreemptExemptTime={format_duration(q.preempt_exempt_time)}")
            for key, tres in (("GrpTRES", q.grp_tres), ("MaxTRESPerUser", q.max_tres_per_user),
                              ("MaxTRESPerJob", q.max_tres_per_job), ("MaxTRESPerAccount", q.max_tres_per_account),
                              ("MinTRESPerJob", q.min_tres_per_job)):
                if tres:
                    opts.append(f"{key}={format_tres(tres)}")
            for key, count in (("GrpJobs", q.grp_jobs), ("MaxJobsPerAccount", q.max_jobs_per_account),
                               ("GrpSubmitJobs", q.grp_submit_jobs),
                               ("MaxSubmitJobsPerAccount", q.max_submit_jobs_per_account)):
                if count is not None:
                    opts.append(f"{key}={count}")
            if q.max_wall is not None:
                opts.append(f"MaxWall={q.max_wall // 60}")
            if q.max_jobs_per_user is not None:
                opts.append(f"MaxJobsPerUser={q.max_jobs_per_user}")
            if q.max_submit_jobs_per_user is not None:
                opts.append(f"MaxSubmitJobsPerUser={q.max_submit_jobs_per_user}")
            if q.flags:
                opts.append(f"Flags={','.join(q.flags)}")
            cmds.append(["modify", "qos", q.name, "set", *opts])

        def assoc_opts(a) -> list[str]:
            opts = [f"Fairshare={a.fairshare}"]
            if a.qos:
                opts.append(f"QOS={','.join(a.qos)}")
            if a.default_qos:
                opts.append(f"DefaultQOS={a.default_qos}")
            if a.grp_tres:
                opts.append(f"GrpTRES={format_tres(a.grp_tres)}")
            if a.max_tres_per_job:
                opts.append(f"MaxTRES={format_tres(a.max_tres_per_job)}")
            for key, val in (("GrpJobs", a.grp_jobs), ("MaxJobs", a.max_jobs), ("MaxSubmitJobs", a.max_submit_jobs),
                             ("GrpSubmitJobs", a.grp_submit_jobs)):
                if val is not None:
                    opts.append(f"{key}={val}")
            if a.max_wall is not None:
                opts.append(f"MaxWall={a.max_wall // 60}")
            if a.priority is not None:
                opts.append(f"Priority={a.priority}")
            return opts

        done = {"root"}
        pending = [a for a in tree.accounts.values() if a.account != "root"]
        while pending:
            ready = [a for a in pending if (a.parent or "root") in done]
            if not ready:
                raise RealSlurmError(f"accounts {[a.account for a in pending]} do not hang off root")
            for a in ready:
                cmds.append(["add", "account", a.account, f"Cluster={c}", f"Parent={a.parent or 'root'}",
                             *assoc_opts(a)])
                done.add(a.account)
            pending = [a for a in pending if a.account not in done]
        for u in tree.user_associations:
            if u.user is None:
                continue
            cmds.append(["add", "user", u.user, f"Account={u.account}", f"Cluster={c}", *assoc_opts(u)])
        for acct in self.submit_user_accounts():
            cmds.append(["add", "user", self.submit_user, f"Account={acct}", f"Cluster={c}", "Fairshare=1"])
        return cmds

    def submit_user_accounts(self) -> list[str]:
        """Leaf accounts of the pool's tree to which the submitting user is added (Fairshare=1).

        Jobs run as the OS user that submits them (root here), and pool users such as ``alice``
        are not OS users; so root gets an association in every leaf account that lacks one,
        and ``sbatch -A ACCOUNT`` works. Callers comparing with gpupool add the same
        associations to their pool (``Association(account, user=submit_user)``).
        """
        tree = self._accounting_tree
        if tree is None or not self.submit_user_in_accounts:
            return []
        have = {u.account for u in tree.user_associations if u.user == self.submit_user}
        parents = {a.parent for a in tree.accounts.values() if a.parent}
        return [a for a in tree.accounts if a != "root" and a not in parents and a not in have]

    def _load_accounting(self, adding_qos: bool) -> None:
        """Run the ``sacctmgr`` commands that add a QOS (``adding_qos``), or the others."""
        for args in self.sacctmgr_commands():
            if (args[:2] == ["add", "qos"]) != adding_qos:
                continue
            proc = self.run(["sacctmgr", "-i", *args], check=False)
            text = (proc.stdout + proc.stderr).lower()
            if proc.returncode != 0 and "nothing new added" not in text and "already exists" not in text:
                raise RealSlurmError(f"sacctmgr {' '.join(args)} failed: {proc.stderr.strip() or proc.stdout.strip()}")

    def _start_slurmctld(self) -> None:
        self._daemon([str(self.bin_dir / "slurmctld"), "-f", str(self.conf_path)], "slurmctld")

        log = self.log_dir / "slurmctld.log"

        def up() -> bool:
            if log.exists() and "] fatal: " in log.read_text(errors="replace"):
                raise RealSlurmError(f"slurmctld stopped: {_fatal_line(log)} (log {log})")
            return "is UP" in self.run(["scontrol", "ping"], check=False, timeout=5).stdout

        self._wait(up, self.start_timeout, "slurmctld", self.log_dir / "slurmctld.log")

    def _start_slurmds(self) -> None:
        for n in self._nodes:
            (self.dir / "spool" / n.name).mkdir(parents=True, exist_ok=True)
            self._daemon([str(self.bin_dir / "slurmd"), "-f", str(self.conf_path), "-N", n.name,
                          "-d", str(self.bin_dir / "slurmstepd")], f"slurmd {n.name}", reaped=True)
        want = set(self.node_names)

        def idle() -> bool:
            out = self.run(["sinfo", "-h", "-N", "-t", "idle", "-o", "%N"], check=False, timeout=5).stdout
            return want <= set(out.split())

        self._wait(idle, self.start_timeout, "slurmd (all nodes idle)", self.log_dir / "slurmctld.log")

    def _daemon(self, argv: list[str], what: str, *, reaped: bool = False) -> None:
        """Start a self-daemonising program and wait for its foreground part to exit.

        ``reaped`` starts it through :mod:`gpupool.conformance.subreaper`, which stays behind as
        the reaper of the daemon's orphans (slurmd: a cancelled job's processes must not linger
        as zombies, see that module).
        """
        if not reaped:
            proc = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=DAEMON_START_S,
                                  check=False)
            if proc.returncode != 0:
                raise RealSlurmError(f"{what} failed to start ({proc.returncode}): {proc.stderr.strip()[-500:]}")
            return
        err_path = self.log_dir / f"start-{re.sub(r'[^A-Za-z0-9_.-]+', '-', what)}.err"
        with open(err_path, "wb") as err:
            reaper = subprocess.Popen([sys.executable, str(Path(__file__).with_name("subreaper.py")), *argv],
                                      env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=err, start_new_session=True)
        self._reapers.append(reaper)
        assert reaper.stdout is not None
        ready = False
        try:
            with selectors.DefaultSelector() as sel:
                sel.register(reaper.stdout, selectors.EVENT_READ)
                ready = bool(sel.select(DAEMON_START_S))
            line = reaper.stdout.readline().decode(errors="replace").strip() if ready else ""
        finally:
            reaper.stdout.close()
        if line != "0":
            if not line:
                # the reaper leads its own process group, with the program's foreground part
                # (a daemon's later part has left it by setsid): both go
                _kill_group(reaper.pid)
                reaper.wait()
            message = err_path.read_text(errors="replace").strip()[-500:]
            status = line or (f"no exit status within {DAEMON_START_S:g} s" if not ready
                              else "subreaper.py gave no exit status")
            raise RealSlurmError(f"{what} failed to start ({status}): {message}")

    def _stop_reapers(self) -> None:
        """Wait for the slurmd reapers, which leave once their daemon and its jobs are gone (one
        10 s deadline for all; a reaper still waiting on a stray step is then killed, and the
        step's orphans go to PID 1 instead)."""
        deadline = time.monotonic() + 10
        for reaper in self._reapers:
            try:
                reaper.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                reaper.kill()
                reaper.wait()
        self._reapers = []

    def _wait(self, ready, timeout: float, what: str, log: Path) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if ready():
                    return
            except (subprocess.SubprocessError, OSError):
                pass
            except RealSlurmError as exc:
                if exc.args and str(exc.args[0]).startswith("slurmctld stopped"):
                    raise
            time.sleep(0.1)
        tail = ""
        if log.exists():
            lines = [ln for ln in log.read_text(errors="replace").splitlines()
                     if re.search(r"error|fatal", ln, re.IGNORECASE) and "pmix" not in ln.lower()]
            tail = "\n  ".join(lines[-5:])
        raise RealSlurmError(f"{what} did not come up within {timeout:.0f} s (log {log}){':' if tail else ''}\n  {tail}")

    def _pid(self, name: str) -> int | None:
        pf = self.run_dir / f"{name}.pid"
        try:
            pid = int(re.sub(r"\D", "", pf.read_text()) or 0)
        except OSError:
            return None
        return pid if pid and _alive(pid) else None

    def _stop_pids(self, want: str, pid_files: list[Path]) -> None:
        pids = []
        for pf in pid_files:
            if not pf.exists():
                continue
            try:
                pid = int(re.sub(r"\D", "", pf.read_text()) or 0)
            except OSError:
                pid = 0
            if pid and _alive(pid) and want in _cmdline(pid):
                try:
                    os.kill(pid, signal.SIGTERM)
                    pids.append(pid)
                except OSError:
                    pass
            pf.unlink(missing_ok=True)
        deadline = time.monotonic() + 15
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if _alive(p)]
            time.sleep(0.05)
        for pid in pids:
            if want in _cmdline(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass


def _munge_socket_path(directory: Path) -> Path:
    """Where munged's socket goes: ``DIR/munge/munge.sock`` when munged accepts that path.

    munged refuses a socket whose directories are not all o+x (pytest's temporary folders are
    0700), and a Unix socket path has at most 107 bytes; then a short folder in /tmp named
    after DIR is used instead.
    """
    import hashlib
    import stat

    inside = directory / "munge" / "munge.sock"
    ok = len(str(inside)) < 100
    p = directory
    while ok and p != p.parent:
        try:
            if p.exists() and not p.stat().st_mode & stat.S_IXOTH:
                ok = False
        except OSError:
            ok = False
        p = p.parent
    if ok:
        return inside
    tag = hashlib.sha1(str(directory).encode()).hexdigest()[:12]
    return Path("/tmp") / f"gpupool-munge-{tag}" / "munge.sock"


def _fatal_line(log: Path) -> str:
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if "] fatal: " in ln]
    return lines[-1].split("] ", 1)[1] if lines else "fatal error"


def _kill_group(pgid: int) -> None:
    """SIGKILL a process group that may already be gone."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a zombie is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][:1] != "Z"
    except (OSError, IndexError):
        return True


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
