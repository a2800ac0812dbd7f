"""What a job process sees: Slurm's environment variables and its output file names.

The variables are those slurmd sets for a batch step on one node (sbatch(1) "OUTPUT
ENVIRONMENT VARIABLES"), so a script written for Slurm runs unchanged; the submitting
user's environment is passed through first, as sbatch's default ``--export=ALL`` does.
"""
from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

_SHIMS = {"srun": "gpupool.live.srun", "scontrol": "gpupool.live.scontrol"}


def install_shims(directory: Path) -> Path:
    """Write the ``srun`` and ``scontrol`` a live job finds first on its PATH into ``directory``.

    They are written at daemon start, pointing at the daemon's own interpreter, so jobs use the
    same gpupool whatever python their PATH would find (and no data files need packaging)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, module in _SHIMS.items():
        path = directory / name
        text = (f"#!/bin/sh\n# gpupool's {name} for jobs of the live daemon (see {module.replace('.', '/')}.py)\n"
                f"exec {shlex.quote(sys.executable)} -m {module} \"$@\"\n")
        if not path.exists() or path.read_text() != text:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.chmod(0o755)
            tmp.replace(path)
    return directory


@dataclass
class JobFacts:
    """Everything the environment and the file names are made of, for one job."""

    job_id: int
    name: str
    user: str
    uid: int
    gid: int
    node: str
    cluster: str
    submit_dir: str
    submit_host: str
    gpus: list[int] = field(default_factory=list)  # node-local device indices
    visible: list[str] = field(default_factory=list)  # CUDA_VISIBLE_DEVICES entries, same order
    ntasks: int = 1
    cpus_per_task: int | None = None
    cpus: int = 1
    memory_mib: int = 0
    account: str = ""
    partition: str = ""
    qos: str = ""
    array_job_id: int | None = None
    array_task_id: int | None = None
    array_task_ids: tuple[int, ...] = ()
    array_max_running: int | None = None
    time_limit: float | None = None
    start_time: float = 0.0
    restart_count: int = 0


def job_environment(base: dict[str, str], f: JobFacts, shim_dir: Path | None = None) -> dict[str, str]:
    """``base`` (the user's exported environment) plus the Slurm batch-step variables; with
    ``shim_dir``, its ``srun``/``scontrol`` come first on PATH."""
    env = {k: v for k, v in base.items() if not k.startswith("SLURM_")}
    gpu_list = ",".join(str(g) for g in f.gpus)
    set_ = env.__setitem__
    for key, value in (
        ("SLURM_JOB_ID", f.job_id), ("SLURM_JOBID", f.job_id), ("SLURM_JOB_NAME", f.name),
        ("SLURM_JOB_NODELIST", f.node), ("SLURM_NODELIST", f.node), ("SLURM_JOB_NUM_NODES", 1),
        ("SLURM_NNODES", 1), ("SLURM_NODEID", 0), ("SLURMD_NODENAME", f.node), ("SLURM_TOPOLOGY_ADDR", f.node),
        ("SLURM_TOPOLOGY_ADDR_PATTERN", "node"), ("SLURM_NTASKS", f.ntasks), ("SLURM_NPROCS", f.ntasks),
        ("SLURM_TASKS_PER_NODE", f.ntasks), ("SLURM_CPUS_ON_NODE", f.cpus), ("SLURM_JOB_CPUS_PER_NODE", f.cpus),
        ("SLURM_SUBMIT_DIR", f.submit_dir), ("SLURM_SUBMIT_HOST", f.submit_host), ("SLURM_JOB_USER", f.user),
        ("SLURM_JOB_UID", f.uid), ("SLURM_JOB_GID", f.gid), ("SLURM_CLUSTER_NAME", f.cluster),
        ("SLURM_PROCID", 0), ("SLURM_LOCALID", 0), ("SLURM_GTIDS", 0), ("SLURM_RESTART_COUNT", f.restart_count),
        ("SLURM_JOB_START_TIME", int(f.start_time)), ("ENVIRONMENT", "BATCH"),
    ):
        set_(key, str(value))
    if f.account:
        env["SLURM_JOB_ACCOUNT"] = f.account
    if f.partition:
        env["SLURM_JOB_PARTITION"] = f.partition
    if f.qos:
        env["SLURM_JOB_QOS"] = f.qos
    if f.cpus_per_task is not None:
        env["SLURM_CPUS_PER_TASK"] = str(f.cpus_per_task)
    if f.memory_mib:
        env["SLURM_MEM_PER_NODE"] = str(f.memory_mib)
    if f.time_limit is not None and f.time_limit != float("inf"):
        env["SLURM_JOB_END_TIME"] = str(int(f.start_time + f.time_limit))
    if f.gpus:
        env["SLURM_JOB_GPUS"] = gpu_list
        env["SLURM_GPUS_ON_NODE"] = str(len(f.gpus))
        env["CUDA_VISIBLE_DEVICES"] = ",".join(f.visible)
        env["GPU_DEVICE_ORDINAL"] = ",".join(f.visible)
    else:
        # task-spooler's convention for jobs without GPUs: hide every device.
        env.pop("CUDA_VISIBLE_DEVICES", None)
        env.pop("GPU_DEVICE_ORDINAL", None)
    if f.array_job_id is not None and f.array_task_id is not None:
        ids = f.array_task_ids or (f.array_task_id,)
        env["SLURM_ARRAY_JOB_ID"] = str(f.array_job_id)
        env["SLURM_ARRAY_TASK_ID"] = str(f.array_task_id)
        env["SLURM_ARRAY_TASK_COUNT"] = str(len(ids))
        env["SLURM_ARRAY_TASK_MIN"] = str(min(ids))
        env["SLURM_ARRAY_TASK_MAX"] = str(max(ids))
        if len(ids) > 1:
            step = ids[1] - ids[0]
            if all(b - a == step for a, b in zip(ids, ids[1:])):
                env["SLURM_ARRAY_TASK_STEP"] = str(step)
    if shim_dir is not None:  # srun/scontrol first on PATH, as Slurm's own binaries would be
        env["PATH"] = f"{shim_dir}{os.pathsep}{env.get('PATH') or os.defpath}"
    return env


_PATTERN = re.compile(r"%(%|(\d*)([xjAauNnts]))")


def expand_pattern(pattern: str, f: JobFacts) -> str:
    """sbatch's filename pattern: ``%x %j %A %a %u %N %n %t %s`` and ``%%``; a number after
    ``%`` zero-pads (``%4j``). ``%A``/``%a`` outside an array are the job id and 4294967294,
    as Slurm prints them."""
    def repl(m: re.Match) -> str:
        if m.group(1) == "%":
            return "%"
        width, key = m.group(2), m.group(3)
        value: object
        if key == "x":
            return f.name
        if key == "u":
            return f.user
        if key == "N":
            return f.node
        if key == "j":
            value = f.job_id
        elif key == "A":
            value = f.array_job_id if f.array_job_id is not None else f.job_id
        elif key == "a":
            value = f.array_task_id if f.array_task_id is not None else 4294967294
        elif key == "s":
            return "batch"
        else:  # n (node id), t (task id)
            value = 0
        text = str(value)
        return text.zfill(int(width)) if width else text

    return _PATTERN.sub(repl, pattern)


def output_paths(output: str | None, error: str | None, f: JobFacts) -> tuple[Path, Path | None]:
    """(stdout file, stderr file or None for "same as stdout"), relative paths from the submit dir.

    The default is ``slurm-%j.out``, and ``slurm-%A_%a.out`` for array tasks, as sbatch names them.
    """
    if output is None:
        output = "slurm-%A_%a.out" if f.array_task_id is not None else "slurm-%j.out"
    out = Path(expand_pattern(output, f))
    if not out.is_absolute():
        out = Path(f.submit_dir) / out
    err = None
    if error is not None:
        err = Path(expand_pattern(error, f))
        if not err.is_absolute():
            err = Path(f.submit_dir) / err
    return out, err
