"""Pieces of the live pool that need no daemon: devices, host trimming, job environment,
output patterns, srun's task binding, process identity."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpupool.errors import GpupoolError
from gpupool.formats.pool_dir import load_pool
from gpupool.live import proc
from gpupool.live.devices import declared_devices, discover, nvml_devices, slurm_type_name
from gpupool.live.host import live_host, never_fits
from gpupool.live.jobenv import JobFacts, expand_pattern, install_shims, job_environment, output_paths
from gpupool.live.srun import parse, task_devices
from gpupool.model.pool import Gpu
from gpupool.model.workload import PodSet, Workload
from tests.live.conftest import write_pool


def _facts(**kw) -> JobFacts:
    base = dict(job_id=42, name="train", user="alice", uid=1000, gid=1000, node="host01", cluster="c",
                submit_dir="/work", submit_host="h", gpus=[1, 3], visible=["1", "3"], ntasks=2)
    base.update(kw)
    return JobFacts(**base)


def test_declared_devices_are_fake_and_keep_types():
    devs = declared_devices((Gpu(0, "h100"), Gpu(1, "h100")))
    assert [(d.index, d.visible, d.type, d.fake) for d in devs] == [(0, "0", "h100", True), (1, "1", "h100", True)]
    if nvml_devices() is None:  # no NVIDIA driver on this machine
        assert discover((Gpu(0),), "auto")[0].fake
        with pytest.raises(GpupoolError, match="NVML is not available"):
            discover((Gpu(0),), "nvml")


def test_slurm_type_names_from_nvml_product_names():
    assert slurm_type_name("NVIDIA H100 80GB HBM3") == "h100_80gb_hbm3"
    assert slurm_type_name("Tesla V100-SXM2-16GB") == "v100_sxm2_16gb"
    assert slurm_type_name("NVIDIA A100-SXM4-40GB") == "a100_sxm4_40gb"


def test_host_keeps_one_node_and_refuses_what_can_never_fit(tmp_path):
    pool = load_pool(write_pool(tmp_path))
    host = live_host(pool, devices="declared")
    assert list(host.pool.nodes) == ["host01"] and host.node.gpu_count == 4
    assert host.operators() == {"root", "olga"}
    ok = Workload(1, "ok", (PodSet(gpus=4, cpu_m=64000),))
    assert never_fits(host, ok) is None
    assert "9 GPU(s)" in never_fits(host, Workload(2, "x", (PodSet(gpus=9),)))
    assert "2 nodes" in never_fits(host, Workload(3, "x", (PodSet(count=2, one_per_node=True),)))
    assert "65 CPUs" in never_fits(host, Workload(4, "x", (PodSet(cpu_m=65000),)))
    assert "invalid partition 'nope'" in never_fits(host, Workload(5, "x", (PodSet(),), partition="nope"))
    assert "type a100" in never_fits(host, Workload(6, "x", (PodSet(gpus=1, gpu_type="a100"),)))


def test_environment_is_what_slurmd_sets_for_a_batch_step():
    env = job_environment({"HOME": "/h", "SLURM_JOB_ID": "stale", "PATH": "/usr/bin"},
                          _facts(array_job_id=40, array_task_id=2, array_task_ids=(0, 2, 4), cpus_per_task=4))
    assert env["HOME"] == "/h" and env["SLURM_JOB_ID"] == "42" and env["SLURM_JOBID"] == "42"
    assert env["SLURM_JOB_GPUS"] == "1,3" and env["CUDA_VISIBLE_DEVICES"] == "1,3"
    assert env["SLURM_NTASKS"] == "2" and env["SLURM_CPUS_PER_TASK"] == "4" and env["SLURM_SUBMIT_DIR"] == "/work"
    assert env["SLURM_JOB_NODELIST"] == "host01" and env["SLURM_JOB_NUM_NODES"] == "1"
    assert (env["SLURM_ARRAY_JOB_ID"], env["SLURM_ARRAY_TASK_ID"], env["SLURM_ARRAY_TASK_COUNT"],
            env["SLURM_ARRAY_TASK_MIN"], env["SLURM_ARRAY_TASK_MAX"], env["SLURM_ARRAY_TASK_STEP"]) == \
        ("40", "2", "3", "0", "4", "2")
    assert env["PATH"] == "/usr/bin"
    shims = install_shims(Path(tempfile.mkdtemp()) / "bin")
    with_shims = job_environment({"PATH": "/usr/bin"}, _facts(), shims)
    assert with_shims["PATH"] == f"{shims}{os.pathsep}/usr/bin"
    assert os.access(shims / "srun", os.X_OK) and sys.executable in (shims / "scontrol").read_text()
    no_gpu = job_environment({"CUDA_VISIBLE_DEVICES": "0"}, _facts(gpus=[], visible=[]))
    assert "CUDA_VISIBLE_DEVICES" not in no_gpu and "SLURM_JOB_GPUS" not in no_gpu


def test_output_patterns():
    f = _facts(array_job_id=40, array_task_id=7, job_id=47)
    assert expand_pattern("%x-%j-%A_%a.%u.%N.%%j", f) == "train-47-40_7.alice.host01.%j"
    assert expand_pattern("%4a-%5j", f) == "0007-00047"
    assert output_paths(None, None, f) == (__import__("pathlib").Path("/work/slurm-40_7.out"), None)
    plain = _facts()
    out, err = output_paths("/abs/%j.out", "e-%j", plain)
    assert str(out) == "/abs/42.out" and str(err) == "/work/e-42"
    assert str(output_paths(None, None, plain)[0]) == "/work/slurm-42.out"


@given(st.text(alphabet="abc%xjAau_-.", max_size=30))
def test_pattern_expansion_never_leaves_a_known_code(pattern):
    f = _facts()
    out = expand_pattern(pattern, f)
    # Every "%%" became one "%", every known code was replaced: re-expanding only the
    # remaining "%" signs that were literal cannot produce the job id twice by accident.
    assert out.count("%") <= pattern.count("%")
    assert expand_pattern(pattern.replace("%", "%%"), f) == pattern


def test_srun_binding_of_gpus_to_tasks():
    assert task_devices(["4", "5", "6", "7"], 4, {"gpu-bind": "single:1"}) == [["4"], ["5"], ["6"], ["7"]]
    assert task_devices(["4", "5"], 4, {"gpu-bind": "single:2"}) == [["4"], ["4"], ["5"], ["5"]]
    assert task_devices(["4", "5", "6", "7"], 2, {"gpus-per-task": "2"}) == [["4", "5"], ["6", "7"]]
    assert task_devices(["4", "5"], 2, {}) == [["4", "5"], ["4", "5"]]
    opts, cmd = parse(["-n2", "--gpu-bind", "single:1", "--kill-on-bad-exit=1", "-l", "python", "-c", "x"])
    assert opts == {"ntasks": "2", "gpu-bind": "single:1", "kill-on-bad-exit": "1", "label": "1"}
    assert cmd == ["python", "-c", "x"]


def test_srun_runs_tasks_and_returns_the_highest_exit_status():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="2,3", SLURM_NTASKS="2", SLURM_JOB_NODELIST="host01")
    r = subprocess.run([sys.executable, "-m", "gpupool.live.srun", "--gpu-bind=single:1", "-l", "sh", "-c",
                        'echo "$SLURM_PROCID:$CUDA_VISIBLE_DEVICES"; exit $SLURM_PROCID'],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 1
    assert sorted(r.stdout.splitlines()) == ["0: 0:2", "1: 1:3"]
    bad = subprocess.run([sys.executable, "-m", "gpupool.live.srun", "-N", "2", "true"], capture_output=True,
                         text=True, env=env, timeout=60)
    assert bad.returncode == 1 and "one node" in bad.stderr


def test_process_identity_survives_only_with_the_same_start_time(tmp_path):
    p, pid = proc.launch(_sleeper(tmp_path), cwd=str(tmp_path), env={"PATH": os.defpath},
                         stdout=tmp_path / "o", stderr=None, rc_file=tmp_path / "rc")
    try:
        assert proc.alive(pid) and os.getpgid(pid.pid) == pid.pid
        assert not proc.alive(proc.ProcId(pid.pid, pid.start_ticks + 1))  # same pid, other process
        assert proc.signal_group(pid, 15)
        p.wait(10)
        time.sleep(0.05)
        assert not proc.alive(pid)
    finally:
        if p.poll() is None:
            p.kill()
    ok, okpid = proc.launch(_sleeper(tmp_path, "exit 3"), cwd=str(tmp_path), env={"PATH": os.defpath},
                            stdout=tmp_path / "o2", stderr=None, rc_file=tmp_path / "rc2")
    ok.wait(10)
    assert proc.read_exit_status(tmp_path / "rc2") == 3


def _sleeper(tmp_path, body: str = "sleep 30"):
    path = tmp_path / f"s{abs(hash(body))}.sh"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def test_signal_names():
    assert proc.parse_signal("USR1") == 10 and proc.parse_signal("SIGTERM") == 15 and proc.parse_signal("9") == 9
    with pytest.raises(ValueError):
        proc.parse_signal("NOPE")
