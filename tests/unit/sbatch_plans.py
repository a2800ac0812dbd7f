"""Scenario helpers for the Slurm policy tests that replay a real Slurm run: sbatch options
given as one string per job, turned into the same scripts real sbatch was given."""
from __future__ import annotations

from gpupool.formats.sbatch import parse_sbatch_text, sbatch_to_workload


def split_options(opts: str) -> list[str]:
    """``"-N2 -n2 --gres=gpu:8"`` -> ``["-N2", "-n2", "--gres=gpu:8"]``; an option's value
    written apart (``-t 5``) stays with it, one ``#SBATCH`` line per option."""
    out: list[str] = []
    cur: list[str] = []
    for tok in opts.split():
        if tok.startswith("-") and cur:
            out.append(" ".join(cur))
            cur = []
        cur.append(tok)
    return out + [" ".join(cur)] if cur else out


def script(opts: str, command: str = "sleep 3000") -> str:
    """A batch script with one ``#SBATCH`` line per option (line 1 is the shebang)."""
    return "#!/bin/bash\n" + "".join(f"#SBATCH {o}\n" for o in split_options(opts)) + command + "\n"


def workloads(name: str, opts: str, at: float, first_id: int, runtime: float = 3000.0) -> list:
    """The workloads of one submission (one, or one per array task) from ``first_id`` on."""
    return sbatch_to_workload(parse_sbatch_text(script(opts), f"{name}.sbatch"), id=first_id,
                              submit_time=at, runtime=runtime)


def workload(name: str, opts: str, at: float, jid: int, runtime: float = 3000.0):
    """The one workload of a submission that is not an array."""
    (wl,) = workloads(name, opts, at, jid, runtime)
    return wl
