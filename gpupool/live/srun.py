"""``srun`` inside a live job: a single-node job step of N tasks.

Enough of srun(1) that batch scripts written for Slurm run unchanged on one node: ``-n/--ntasks``
(default: the job's task count), ``--gpus-per-task``, ``--gpu-bind=single:K`` (task i gets the
(i // K)-th GPU of the job), ``-l/--label``, ``--kill-on-bad-exit``; each task gets
SLURM_PROCID, SLURM_LOCALID and CUDA_VISIBLE_DEVICES. The step's exit status is the highest
of its tasks', as srun's. Options that need more than one node are refused.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

# Options that take a value when given as a separate word (short and long forms).
_VALUE_SHORT = set("nNcJpwxtobeiDdmrAgCGLMqSTW")
_VALUE_LONG = {
    "ntasks", "nodes", "cpus-per-task", "gpus-per-task", "gpu-bind", "job-name", "partition", "time",
    "export", "mpi", "ntasks-per-node", "cpu-bind", "mem", "mem-per-cpu", "mem-per-gpu", "gpus", "gres",
    "kill-on-bad-exit", "output", "error", "input", "chdir", "distribution", "nodelist", "exclude",
    "account", "qos", "constraint", "dependency", "label", "gpus-per-node", "cpus-per-gpu", "signal",
    "wait", "het-group", "overcommit", "threads-per-core",
}
_FLAG_LONG = {"label", "kill-on-bad-exit", "exclusive", "overlap", "unbuffered", "quiet", "verbose",
              "overcommit", "no-kill", "wait"}


class Usage(Exception):
    pass


def parse(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    opts: dict[str, str] = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return opts, argv[i + 1:]
        if a.startswith("--"):
            name, eq, value = a[2:].partition("=")
            if eq:
                opts[name] = value
            elif name in _FLAG_LONG:
                opts[name] = "1"
            elif name in _VALUE_LONG:
                if i + 1 >= len(argv):
                    raise Usage(f"option --{name} needs a value")
                opts[name] = argv[i + 1]
                i += 1
            else:
                opts[name] = "1"
        elif a.startswith("-") and len(a) > 1:
            key = a[1]
            long = {"n": "ntasks", "N": "nodes", "c": "cpus-per-task", "J": "job-name", "l": "label",
                    "K": "kill-on-bad-exit", "u": "unbuffered", "o": "output", "e": "error", "D": "chdir"}.get(key, key)
            if key in _VALUE_SHORT:
                if len(a) > 2:
                    opts[long] = a[2:]
                else:
                    if i + 1 >= len(argv):
                        raise Usage(f"option -{key} needs a value")
                    opts[long] = argv[i + 1]
                    i += 1
            else:
                opts[long] = "1"
        else:
            return opts, argv[i:]
        i += 1
    return opts, []


def task_devices(visible: list[str], ntasks: int, opts: dict[str, str]) -> list[list[str]]:
    """The GPUs each task sees: ``--gpus-per-task`` slices, ``--gpu-bind=single:K``, else all."""
    if "gpus-per-task" in opts:
        g = int(opts["gpus-per-task"].split(":")[-1])
        return [visible[i * g:(i + 1) * g] for i in range(ntasks)]
    bind = opts.get("gpu-bind", "")
    if bind.startswith("single:"):
        k = max(1, int(bind.split(":", 1)[1]))
        return [visible[i // k:i // k + 1] for i in range(ntasks)]
    if bind.startswith("map_gpu:"):
        ids = bind.split(":", 1)[1].split(",")
        return [[visible[int(ids[i % len(ids)])]] for i in range(ntasks)]
    return [list(visible) for _ in range(ntasks)]


def _pump(stream, label: str, out) -> None:
    for line in iter(stream.readline, b""):
        out.buffer.write(label.encode() + line)
        out.buffer.flush()


def main(argv: list[str]) -> int:
    try:
        opts, command = parse(argv)
        if not command:
            raise Usage("no command given")
        nodes = opts.get("nodes", "1")
        if nodes.split("-")[0] not in ("1", ""):
            raise Usage(f"--nodes={nodes}: a live gpupool job has one node")
        ntasks = int(opts.get("ntasks") or os.environ.get("SLURM_NTASKS") or 1)
        if ntasks < 1:
            raise Usage("--ntasks must be at least 1")
    except (Usage, ValueError) as exc:
        print(f"srun: error: {exc}", file=sys.stderr)
        return 1
    visible = [v for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v]
    devices = task_devices(visible, ntasks, opts)
    label = "label" in opts
    procs: list[subprocess.Popen] = []
    pumps: list[threading.Thread] = []
    step_gpus = os.environ.get("SLURM_JOB_GPUS", "")
    for i in range(ntasks):
        env = dict(os.environ)
        env.update({"SLURM_PROCID": str(i), "SLURM_LOCALID": str(i), "SLURM_NODEID": "0",
                    "SLURM_STEP_NUM_TASKS": str(ntasks), "SLURM_NTASKS": str(ntasks), "SLURM_NPROCS": str(ntasks),
                    "SLURM_STEP_NUM_NODES": "1", "SLURM_STEP_NODELIST": os.environ.get("SLURM_JOB_NODELIST", ""),
                    "SLURM_STEP_TASKS_PER_NODE": str(ntasks), "SLURM_STEP_ID": "0", "SLURM_STEPID": "0",
                    "SLURM_STEP_GPUS": step_gpus})
        if "cpus-per-task" in opts:
            env["SLURM_CPUS_PER_TASK"] = opts["cpus-per-task"]
        if visible:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(devices[i])
            env["GPU_DEVICE_ORDINAL"] = env["CUDA_VISIBLE_DEVICES"]
        kwargs = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT} if label else {}
        try:
            p = subprocess.Popen(command, env=env, cwd=opts.get("chdir") or None, **kwargs)
        except OSError as exc:
            print(f"srun: error: task {i}: {exc}", file=sys.stderr)
            for q in procs:
                q.kill()
            return 2
        procs.append(p)
        if label:
            t = threading.Thread(target=_pump, args=(p.stdout, f"{i}: ", sys.stdout), daemon=True)
            t.start()
            pumps.append(t)

    def forward(sig, _frame) -> None:
        for p in procs:
            if p.poll() is None:
                p.send_signal(sig)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGCONT):
        signal.signal(sig, forward)
    kill_bad = opts.get("kill-on-bad-exit", "0") not in ("0", "")
    codes: list[int] = [None] * ntasks  # type: ignore[list-item]
    remaining = set(range(ntasks))
    while remaining:
        for i in list(remaining):
            rc = procs[i].poll()
            if rc is None:
                continue
            remaining.discard(i)
            codes[i] = rc if rc >= 0 else 128 - rc
            if rc != 0 and kill_bad:
                for j in remaining:
                    procs[j].kill()
        if remaining:
            try:
                procs[min(remaining)].wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                pass
    for t in pumps:
        t.join(1)
    return max(codes) if codes else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
