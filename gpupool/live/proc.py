"""Job processes: start a process group, know it again after a restart, signal it, see it end.

A process is identified by (pid, start time in clock ticks since boot, from /proc/PID/stat):
a pid alone can be reused after the job ended, so a restarted daemon re-adopts a pid only
when its start time matches what was recorded. Each job runs under a small ``sh`` wrapper
that leads the process group and writes the script's exit status to a file, so the status of
a job whose daemon was restarted (it is no longer our child) is still known.
"""
from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")

# $1 = cgroup dir or "", $2 = exit-status file, then the command. The wrapper moves itself into
# the job's cgroup before starting the script, so every process of the job is inside it.
_WRAPPER = (
    'cg=$1; rcf=$2; shift 2; '
    'if [ -n "$cg" ]; then echo $$ > "$cg/cgroup.procs" 2>/dev/null; fi; '
    '"$@"; rc=$?; echo $rc > "$rcf"; exit $rc'
)


@dataclass(frozen=True, slots=True)
class ProcId:
    pid: int
    start_ticks: int


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state letter, process group, start time in ticks) of ``pid``; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name is in parentheses and may itself contain spaces or ')'.
    rest = data[data.rfind(")") + 2:].split()
    return rest[0], int(rest[2]), int(rest[19])


def start_ticks(pid: int) -> int | None:
    st = _stat(pid)
    return None if st is None else st[2]


def alive(proc: ProcId) -> bool:
    """The very process that was recorded still runs (not a zombie, not a reused pid)."""
    st = _stat(proc.pid)
    return st is not None and st[0] not in ("Z", "X") and st[2] == proc.start_ticks


def group_members(pgid: int) -> list[int]:
    """Live processes of process group ``pgid`` (a scan of /proc; used only for signals)."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        st = _stat(int(entry.name))
        if st is not None and st[1] == pgid and st[0] not in ("Z", "X"):
            out.append(int(entry.name))
    return out


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def signal_group(proc: ProcId, sig: int) -> bool:
    """Send ``sig`` to the job's whole process group (only if the leader is still the recorded
    process, so a reused pid is never signalled). True when sent."""
    if not alive(proc):
        # The leader may have exited while others of the group live on: still signal them
        # when the group id is in use by processes that were started after the leader.
        if not group_members(proc.pid):
            return False
    try:
        os.killpg(proc.pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def signal_steps(proc: ProcId, sig: int, batch_only: bool) -> int:
    """``--signal``: ``B:`` signals the batch shell only; otherwise every process of the job but
    the batch shell (Slurm signals the job steps). Returns how many processes were signalled."""
    if not alive(proc):
        return 0
    shells = children(proc.pid)  # the batch script under our wrapper
    targets = shells if batch_only else [p for p in group_members(proc.pid) if p != proc.pid and p not in shells]
    sent = 0
    for pid in targets:
        try:
            os.kill(pid, sig)
            sent += 1
        except (ProcessLookupError, PermissionError):
            pass
    return sent


def cgroup_v2_available() -> bool:
    return (CGROUP_ROOT / "cgroup.controllers").exists() and os.access(CGROUP_ROOT, os.W_OK)


def make_cgroup(name: str, cpus: int | None, memory_mib: int | None) -> Path | None:
    """A cgroup v2 directory with ``memory.max`` and ``cpu.max`` set, or None when cgroup v2 is
    not available or not writable here (limits are best effort, never required)."""
    if not cgroup_v2_available():
        return None
    parent = CGROUP_ROOT / "gpupool"
    try:
        parent.mkdir(exist_ok=True)
        wanted = [c for c in ("cpu", "memory") if c in (CGROUP_ROOT / "cgroup.controllers").read_text().split()]
        for level in (CGROUP_ROOT, parent):
            try:
                (level / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))
            except OSError:
                pass
        cg = parent / name
        cg.mkdir(exist_ok=True)
        if memory_mib and (cg / "memory.max").exists():
            (cg / "memory.max").write_text(str(memory_mib * 1024 * 1024))
        if cpus and (cg / "cpu.max").exists():
            (cg / "cpu.max").write_text(f"{cpus * 100000} 100000")
        return cg
    except OSError:
        return None


def remove_cgroup(cg: str | None) -> None:
    if cg:
        try:
            os.rmdir(cg)
        except OSError:
            pass


def launch(script: Path, *, cwd: str, env: dict[str, str], stdout: Path, stderr: Path | None,
           rc_file: Path, uid: int | None = None, gid: int | None = None,
           cgroup: Path | None = None, append: bool = False) -> tuple[subprocess.Popen, ProcId]:
    """Start ``script`` as the leader of a new session/process group; output to the files."""
    for path in (stdout, stderr):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
    mode = "ab" if append else "wb"
    out = open(stdout, mode)
    err = open(stderr, mode) if stderr is not None and stderr != stdout else None
    if uid is not None and os.geteuid() == 0 and uid != 0:
        for path in (stdout, stderr):
            if path is not None:
                try:
                    os.chown(path, uid, gid if gid is not None else -1)
                except OSError:
                    pass
    kwargs = {}
    if uid is not None and os.geteuid() == 0 and uid != os.geteuid():
        kwargs = {"user": uid, "group": gid, "extra_groups": []}
    try:
        p = subprocess.Popen(
            ["/bin/sh", "-c", _WRAPPER, "gpupool-job", str(cgroup or ""), str(rc_file), str(script)],
            cwd=cwd if os.path.isdir(cwd) else "/", env=env, stdin=subprocess.DEVNULL, stdout=out,
            stderr=err if err is not None else subprocess.STDOUT, start_new_session=True, **kwargs,
        )
    finally:
        out.close()
        if err is not None:
            err.close()
    ticks = start_ticks(p.pid)
    return p, ProcId(p.pid, ticks if ticks is not None else -1)


def read_exit_status(rc_file: Path) -> int | None:
    """The script's exit status as the wrapper wrote it (128+N when killed by signal N)."""
    try:
        text = rc_file.read_text().strip()
    except OSError:
        return None
    return int(text) if text.lstrip("-").isdigit() else None


SIGNALS = {name[3:]: getattr(signal, name) for name in dir(signal)
           if name.startswith("SIG") and not name.startswith("SIG_") and isinstance(getattr(signal, name), int)}


def parse_signal(text: str) -> int:
    """``USR1``, ``SIGUSR1`` or ``10`` -> the signal number."""
    t = text.upper().removeprefix("SIG")
    if t.isdigit():
        return int(t)
    if t not in SIGNALS:
        raise ValueError(f"unknown signal {text!r}")
    return int(SIGNALS[t])
