"""Run a self-daemonising program under a child subreaper that reaps every orphan at once.

Why: a batch job's shell (``sbatch --wrap "sleep N"`` is ``sh`` running ``sleep``) dies first when
the job is cancelled, so ``sleep`` is orphaned and re-parented to the nearest subreaper, by
default PID 1. Where PID 1 reaps late (a container's or a micro-VM's init: seconds here, minutes
under load), the dead ``sleep`` stays a zombie in the job's process group; proctrack/pgid counts
it as alive, the job stays COMPLETING and, after UnkillableStepTimeout, slurmd drains the node
with "Kill task failed" and the next differential case runs on one node fewer. Started through
this program, slurmd and everything below it (slurmstepd, jobs) have this process as their
subreaper, which waits on them the moment they die.

Protocol (used by :class:`gpupool.conformance.real_slurm.RealSlurm`): ``python subreaper.py
PROGRAM ARGS...`` runs the program in the foreground, its output on this process's stderr,
then writes the program's exit status as the one line on stdout and detaches from stdin,
stdout and stderr (so a caller reading them sees EOF). On a non-zero status it exits with it;
otherwise it stays, reaping, until no descendant is left. Standard library only: it runs with
any Python, outside the package.
"""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys

#: prctl(2) option that makes this process the reaper of its descendants' orphans (Linux >= 3.4)
PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Ask the kernel to re-parent this process's orphaned descendants to it; False where the
    call is not available (then orphans go to PID 1 as before, which is slower, not wrong)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _detach_stdio() -> None:
    """Point fds 0-2 at /dev/null so the caller's pipes reach EOF while this process lives on."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def reap_until_alone() -> None:
    """Wait on every child (adopted orphans included) until none is left."""
    while True:
        try:
            os.wait()
        except ChildProcessError:
            return
        except InterruptedError:  # pragma: no cover - retried by Python itself since 3.5
            continue


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: subreaper.py PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    if not become_subreaper():
        print("subreaper.py: prctl(PR_SET_CHILD_SUBREAPER) failed; orphans go to PID 1",
              file=sys.stderr)
    try:
        status = subprocess.call(argv, stdout=sys.stderr)  # stdout carries the status line only
    except OSError as exc:
        print(f"{argv[0]}: {exc}", file=sys.stderr)
        status = 127
    sys.stdout.write(f"{status}\n")
    sys.stdout.flush()
    _detach_stdio()
    if status != 0:
        return status
    reap_until_alone()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
