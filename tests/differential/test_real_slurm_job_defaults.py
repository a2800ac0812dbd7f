"""slurm.conf's job defaults on a real Slurm 22.05 and in gpupool, side by side (the rules:
``gpupool/policy/slurm/job_defaults.py``; the same cases without a real Slurm:
``tests/unit/test_slurm_job_defaults.py``).

Each case starts two 16-core, 64000 MB, 8-GPU nodes (CR_Core_Memory) with its defaults,
submits its jobs a couple of seconds apart and reads each job's CPUs, memory, nodes and state
from ``scontrol show job`` (or sbatch's message for a refused one); gpupool replays the cluster's own slurm.conf and the same
submissions. Skipped where Slurm is not installed. Run alone with
``python -m pytest tests/differential/test_real_slurm_job_defaults.py -o addopts=""``.
"""
from __future__ import annotations

import re

import pytest

from gpupool.conformance.real_slurm import RealSlurm
from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.formats.hostlist import expand_hostlist
from gpupool.formats.pool_dir import load_pool
from gpupool.model.slurm import Partition

from tests.differential.real_cluster import need, started
from tests.unit.sbatch_plans import workload

pytestmark = [pytest.mark.slurm_real, pytest.mark.slow]

GAP_S = 2.0  # between submissions
SETTLE_S = 8.0  # after the last: the submissions' own scheduling passes have run

#: (cluster-wide keys, partition q's keys, sbatch options per job)
CASES = {
    "none": ({}, {}, ["--gres=gpu:1", "--gres=gpu:1", "--gres=gpu:1", "--gres=gpu:1 --mem=1000"]),
    "per_cpu": ({"DefMemPerCPU": "8000"}, {"DefMemPerCPU": "2000"},
                ["-c4 --gres=gpu:1", "-c4 --gres=gpu:1 -p q", "-c2 --gres=gpu:1 -p q"]),
    "per_gpu": ({"DefMemPerGPU": "20000", "DefMemPerCPU": "1000"}, {"DefMemPerGPU": "5000"},
                ["-c2 --gres=gpu:2", "-c2", "-c2 --gres=gpu:2 -p q", "-c2 --gpus=2"]),
    # a GPU job giving its own memory still needs DefMemPerGPU x GPUs free (the partition's
    # value in q): of gpu02's 14000 MB free, 5000 x 2 is enough in q; then 8000 are too few
    # for 20000 in p, though the job holds only 6000; two tasks on one node need 2 x 20000
    "per_gpu_fit": ({"DefMemPerGPU": "20000"}, {"DefMemPerGPU": "5000"},
                    ["-w gpu01 -c1 --mem=39000", "-w gpu02 -c1 --mem=50000", "-p q --gres=gpu:2 --mem=6000 -w gpu02",
                     "--gres=gpu:1 --mem=6000 -w gpu02", "-p q --gres=gpu:1 --mem-per-cpu=3000",
                     "-n2 --gpus-per-task=1 --mem=2000"]),
    "cpu_per_gpu": ({"DefCpuPerGPU": "4", "DefMemPerCPU": "1000"}, {"DefCpuPerGPU": "2"},
                    ["--gres=gpu:2", "--gres=gpu:2 -c1", "--gres=gpu:2 -p q", "--gpus=3"]),
    # (a pending job's ReqTRES shows its CPUs before DefCpuPerGPU, so these run on their own)
    "mem_follows_cpus": ({"DefCpuPerGPU": "4", "DefMemPerCPU": "1000"}, {},
                         ["--gres=gpu:2 --mem-per-cpu=1000", "-n2 --gpus-per-task=1 --mem-per-cpu=100"]),
    "per_node": ({"DefMemPerNode": "30000"}, {},
                 ["--gres=gpu:1", "--gres=gpu:1", "--gres=gpu:1", "-N2 --gres=gpu:1"]),
    "mem_zero": ({"DefMemPerGPU": "20000", "DefMemPerCPU": "1000"}, {},
                 ["-c2 --gres=gpu:1 --mem=0", "-c2 --gres=gpu:1", "-c2 --gres=gpu:1 --mem=0"]),
    # sbatch refuses some of these: compared by sbatch's message
    "max_per_node": ({"MaxMemPerNode": "30000"}, {"DefMemPerCPU": "500"},
                     ["-c2 --mem=40000 --gres=gpu:1", "-c4 --mem-per-cpu=10000", "-c2 --mem=0 --gres=gpu:1",
                      "-c2 --gres=gpu:1", "-c2 --gres=gpu:1 -p q", "-N2 -c2 --mem=30000"]),
    "max_per_node_tasks": ({"MaxMemPerNode": "30000", "DefMemPerCPU": "1000"}, {},
                           ["-n4 --mem=40000", "-n4 --mem-per-cpu=9000", "-n2 --mem=25000"]),
    # MaxMemPerCPU raises CPUs
    "max_per_cpu": ({"MaxMemPerCPU": "4000", "DefMemPerCPU": "1000"}, {},
                    ["-c2 --mem-per-cpu=8000 --gres=gpu:1", "-n1 --mem-per-cpu=3000", "-c2 --mem=0 --gres=gpu:1"]),
    # a DefMemPerCPU over MaxMemPerCPU is raised as a --mem-per-cpu of that much: 2 x CPUs at 1500
    "max_per_cpu_default_over": ({"DefMemPerCPU": "3000", "MaxMemPerCPU": "2000"}, {}, ["-c2", "-c1 --gres=gpu:1"]),
    "max_per_cpu_no_default": ({"MaxMemPerCPU": "4000"}, {},
                               ["-c2 --gres=gpu:1", "-c2 --gres=gpu:1 --mem-per-cpu=5000", "-n3 --mem-per-cpu=6000"]),
    "max_per_cpu_factor": ({"MaxMemPerCPU": "4000", "DefMemPerCPU": "1000"}, {},
                           ["-c1 --mem-per-cpu=9000", "-c2 --mem-per-cpu=9000"]),
    "max_per_cpu_whole_node_too_big": ({"MaxMemPerCPU": "2000"}, {}, ["-c1", "-c1 --mem=0"]),
    "max_per_cpu_and_per_node": ({"MaxMemPerCPU": "4000", "MaxMemPerNode": "30000", "DefMemPerCPU": "1000"}, {},
                                 ["-c2 --mem-per-cpu=5000"]),
    "max_per_cpu_then_cpu_per_gpu": ({"DefCpuPerGPU": "4", "MaxMemPerCPU": "4000", "DefMemPerCPU": "1000"}, {},
                                     ["--gres=gpu:2 --mem-per-cpu=5000"]),
    # a per-node amount under MaxMemPerCPU: the CPUs it needs, in whole tasks
    "max_per_cpu_node_memory": ({"MaxMemPerCPU": "4000", "DefMemPerCPU": "1000"}, {},
                                ["-c2 --mem=20000", "-c2 --mem=40000", "-c3 --mem=20000", "-c1 --mem=10000"]),
    "max_per_cpu_one_node": ({"MaxMemPerCPU": "4000", "DefMemPerCPU": "1000"}, {},
                             ["-N1 -c2 --mem=20000", "-N1 -c3 --mem=0"]),
    "max_per_cpu_node_default": ({"MaxMemPerCPU": "4000", "DefMemPerNode": "20000"}, {},
                                 ["-c3 --mem=0", "-c2", "-c3", "-c1 --gres=gpu:1"]),
    # a partition's memory limit replaces the cluster's (either one replaces both)
    "partition_max_per_node": ({}, {"MaxMemPerNode": "20000"},
                               ["-p q -c2 --mem=30000", "-c2 --mem=30000", "-p q -c2 --mem-per-cpu=8000",
                                "-p q -c2 --mem=0", "-p q -c2"]),
    "partition_max_over_cluster": ({"MaxMemPerNode": "20000"}, {"MaxMemPerNode": "40000"},
                                   ["-p q -c2 --mem=30000", "-c2 --mem=30000", "-p q -c2 --mem=50000"]),
    "partition_max_per_cpu": ({"DefMemPerCPU": "1000"}, {"MaxMemPerCPU": "4000"},
                              ["-p q -c1 --mem-per-cpu=9000", "-c1 --mem-per-cpu=9000", "-p q -c2 --mem=0"]),
    "partition_per_cpu_over_cluster_per_node": ({"MaxMemPerNode": "30000", "DefMemPerCPU": "1000"},
                                                {"MaxMemPerCPU": "4000"},
                                                ["-p q -c2 --mem-per-cpu=5000", "-p q -c2 --mem=40000",
                                                 "-c2 --mem=40000"]),
    "both_default_forms": ({"DefMemPerCPU": "1000", "DefMemPerNode": "30000"},
                           {"DefMemPerCPU": "1000", "DefMemPerNode": "20000"}, ["-c4", "-c4 -p q"]),
}
REFUSED = "Batch job submission failed: "


def _mb(text: str) -> int:
    """``62.50G`` / ``8000M`` -> MB."""
    value, unit = float(text[:-1]), text[-1]
    return round(value * {"M": 1, "G": 1024, "T": 1024 * 1024}[unit])


def _real(tmp_path, globals_: dict, q: dict, jobs: list[str]):
    rs = RealSlurm(tmp_path, nodes=2, gpus_per_node=8, cpus_per_node=16, memory_mb=64000, speedup=10,
                   overrides={"SelectTypeParameters": "CR_Core_Memory", "PriorityType": "priority/basic", **globals_},
                   scheduler_parameters="bf_interval=30")
    names = rs.node_names
    rs._config.partitions = {
        "p": Partition(name="p", nodes=tuple(names), default=True, max_time=3600),
        "q": Partition(name="q", nodes=tuple(names), max_time=3600, extra=dict(q)),
    }
    started(rs)
    try:
        ids = []
        for k, opts in enumerate(jobs):
            if k:
                rs.sleep(GAP_S)
            got = rs.run(["sbatch", "--parsable", "-o", "/dev/null", "-J", f"j{k}", *opts.split(),
                          "--wrap", "sleep 3000"], check=False)
            ids.append(int(got.stdout.split(";")[0]) if got.returncode == 0 else got.stderr.split(REFUSED)[-1].strip())
        rs.sleep(SETTLE_S)
        rows = []
        for jid in ids:
            if isinstance(jid, str):
                rows.append(("REFUSED", jid))
                continue
            text = rs.run(["scontrol", "show", "job", str(jid)]).stdout
            # a running job shows AllocTRES, a pending one ReqTRES (22.05 prints TRES= for both
            # on some lines): the first non-empty one
            found = [v for v in re.findall(r"\b(?:Alloc|Req)?TRES=(\S*)", text) if v]
            tres = dict(kv.split("=", 1) for kv in found[0].split(","))
            state = re.search(r"JobState=(\S+)", text).group(1)
            where = None
            if state == "RUNNING":
                nodes = re.search(r"(?<![A-Za-z])NodeList=(\S+)", text).group(1)
                where = sorted(names.index(x) for x in expand_hostlist(nodes))
            rows.append((int(tres["cpu"]), _mb(tres["mem"]), where, state))
    finally:
        rs.stop()
    return rows, rs.etc


def _ours(conf, jobs: list[str]):
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    pool = load_pool(conf)
    wls = [workload(f"j{k}", opts, GAP_S * k, k + 1) for k, opts in enumerate(jobs)]
    out = Engine(pool, wls, make_policy("slurm", pool), until=GAP_S * len(jobs) + SETTLE_S).run()
    rows = []
    for job in sorted(out.jobs, key=lambda j: j.id):
        if job.state == "REJECTED":
            rows.append(("REFUSED", job.reason))
            continue
        cpus = sum(ps.count * ps.cpu_m // 1000 for ps in job.wl.pod_sets)
        mem = sum(ps.count * ps.memory_mib for ps in job.wl.pod_sets)
        if any(ps.walked for ps in job.wl.pod_sets):  # ``--gpus`` with no node count: its nodes'
            if job.placement:  # (AllocTRES: what the nodes it got hold)
                cpus, mem = sum(p[2] for p in job.placement) // 1000, sum(p[3] for p in job.placement)
            else:  # (ReqTRES: one node's worth, the GPUs' memory)
                cpus = sum(ps.cpus_total for ps in job.wl.pod_sets)
                mem = sum(ps.memory_total for ps in job.wl.pod_sets)
        where = sorted({p[0] for p in job.placement}) if job.state == "RUNNING" else None
        rows.append((cpus, mem, where, job.state))
    return rows


@pytest.mark.parametrize("case", sorted(CASES))
def test_job_defaults_match_real_slurm(tmp_path, case):
    need("none")
    globals_, q, jobs = CASES[case]
    real, conf = _real(tmp_path / "real", globals_, q, jobs)
    assert _ours(conf, jobs) == real
