"""The slurmd starter (``gpupool/conformance/subreaper.py``): the foreground status comes back
on one line, the caller's pipes reach EOF, and orphans below it are adopted and reaped at once
(not left as zombies in a job's process group for PID 1 to reap late)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import gpupool.conformance.subreaper as subreaper

SCRIPT = Path(subreaper.__file__)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl subreapers are Linux only")


def _start(*argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(SCRIPT), *argv], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(") ", 1)[1].split()[1])


def test_an_orphan_is_adopted_and_reaped_by_the_reaper(tmp_path) -> None:
    pid_file = tmp_path / "pid"
    reaper = _start("sh", "-c", f"sleep 60 >/dev/null 2>&1 & echo $! > {pid_file}; exit 0")
    out, err = reaper.stdout.read(), reaper.stderr.read()  # EOF while the reaper still waits
    assert out == b"0\n" and err == b""
    assert reaper.poll() is None
    orphan = int(pid_file.read_text())
    try:
        assert _parent(orphan) == reaper.pid
    finally:
        os.kill(orphan, signal.SIGKILL)
    assert reaper.wait(timeout=10) == 0  # it left once its last descendant was reaped
    assert not Path(f"/proc/{orphan}").exists()  # reaped, not a zombie


def test_a_failing_program_reports_its_status_and_the_reaper_leaves() -> None:
    reaper = _start("sh", "-c", "echo bad config >&2; exit 3")
    assert reaper.stdout.read() == b"3\n"
    assert reaper.stderr.read() == b"bad config\n"
    assert reaper.wait(timeout=10) == 3


def test_the_programs_own_output_never_mixes_with_the_status_line() -> None:
    reaper = _start("sh", "-c", "echo starting; echo warn >&2; exit 0")
    assert reaper.stdout.read() == b"0\n"
    assert reaper.stderr.read() == b"starting\nwarn\n"
    assert reaper.wait(timeout=10) == 0


def test_a_missing_program_is_status_127() -> None:
    reaper = _start("/nonexistent/slurmd")
    assert reaper.stdout.read() == b"127\n"
    assert b"/nonexistent/slurmd" in reaper.stderr.read()
    assert reaper.wait(timeout=10) == 127


def test_no_program_is_a_usage_error() -> None:
    reaper = _start()
    assert reaper.stdout.read() == b""
    assert b"usage" in reaper.stderr.read()
    assert reaper.wait(timeout=10) == 2


# --- RealSlurm._daemon(reaped=True): what the harness does with the reaper (no Slurm needed)

def _cluster(tmp_path):
    from gpupool.conformance.real_slurm import RealSlurm

    rs = RealSlurm(tmp_path / "rs", nodes=1)
    rs.log_dir.mkdir(parents=True)
    rs.env = dict(os.environ)
    return rs


def test_a_started_daemon_stays_under_its_reaper_until_stop(tmp_path) -> None:
    rs = _cluster(tmp_path)
    pid_file = tmp_path / "daemon.pid"
    rs._daemon(["sh", "-c", f"sleep 60 >/dev/null 2>&1 & echo $! > {pid_file}"], "fake daemon", reaped=True)
    (reaper,) = rs._reapers
    daemon = int(pid_file.read_text())
    assert _parent(daemon) == reaper.pid
    os.kill(daemon, signal.SIGTERM)
    rs._stop_reapers()
    assert reaper.returncode == 0 and rs._reapers == []


def test_a_failed_start_names_the_status_and_the_programs_words(tmp_path) -> None:
    from gpupool.conformance.real_slurm import RealSlurmError

    rs = _cluster(tmp_path)
    with pytest.raises(RealSlurmError, match=r"fake daemon failed to start \(4\): bad port"):
        rs._daemon(["sh", "-c", "echo bad port >&2; exit 4"], "fake daemon", reaped=True)
    rs._stop_reapers()


def test_a_hung_start_is_killed_with_its_reaper(tmp_path, monkeypatch) -> None:
    import gpupool.conformance.real_slurm as real_slurm

    monkeypatch.setattr(real_slurm, "DAEMON_START_S", 0.5)
    rs = _cluster(tmp_path)
    pid_file = tmp_path / "hung.pid"
    with pytest.raises(real_slurm.RealSlurmError, match="no exit status within 0.5 s"):
        rs._daemon(["sh", "-c", f"echo $$ > {pid_file}; exec sleep 60"], "hung daemon", reaped=True)
    hung = int(pid_file.read_text())
    # the foreground part went with the reaper (killed; a zombie until PID 1 reaps it)
    for _ in range(50):
        if not real_slurm._alive(hung):
            break
        time.sleep(0.1)
    assert not real_slurm._alive(hung)
    rs._stop_reapers()
