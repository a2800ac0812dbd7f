"""slurm.conf's job defaults (DefCpuPerGPU, DefMemPerGPU, DefMemPerCPU, DefMemPerNode, and the
whole node's memory when none applies) filled into sbatch jobs that did not ask, as a real
22.05.8 did on two 16-core, 64000 MB, 8-GPU nodes (CR_Core_Memory;
``tests/differential/test_real_slurm_job_defaults.py`` runs the same submissions on both)."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.errors import GpupoolError
from gpupool.formats.pool_dir import load_pool
from gpupool.formats.sbatch import parse_sbatch_text, sbatch_to_workload
from gpupool.policy.slurm.job_defaults import Defaults, fill_pod_set

from tests.unit.sbatch_plans import run_spaced, script, slurm_pool, workload

CONF = """\
ClusterName=defaults
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=30
SelectType=select/cons_tres
SelectTypeParameters={select}
PriorityType=priority/basic
GresTypes=gpu
{globals}
NodeName=n[1-2] CPUs=16 RealMemory=64000 Gres=gpu:8
PartitionName=p Nodes=n[1-2] Default=YES MaxTime=60
PartitionName=q Nodes=n[1-2] MaxTime=60 {q}
"""


def run(tmp_path: Path, globals_: str, q: str, jobs: list[str], select: str = "CR_Core_Memory", until: float = 20.0):
    """Submit ``jobs`` (sbatch options) a second apart; (memory MiB, CPUs, nodes, state, reason) per job at
    ``until``."""
    engine, _pol = run_spaced(slurm_pool(tmp_path, CONF.format(select=select, globals=globals_, q=q)), jobs, 1.0, until)
    rows = []
    for job in sorted(engine.jobs.values(), key=lambda j: j.id):
        (ps,) = job.wl.pod_sets
        node = sorted({pool_node for pool_node, *_ in job.placement}) if job.placement else None
        rows.append((ps.memory_mib * ps.count, ps.cpu_m * ps.count // 1000, node, job.state, job.reason))
    return rows


def test_without_any_default_a_job_takes_its_nodes_whole_memory(tmp_path: Path) -> None:
    # real: the first two ran with mem=62.50G on gpu01 and gpu02; the third waited (Resources)
    rows = run(tmp_path, "", "", ["--gres=gpu:1", "--gres=gpu:1", "--gres=gpu:1", "--gres=gpu:1 --mem=1000"])
    assert [r[0] for r in rows] == [64000, 64000, 64000, 1000]
    assert [r[2] for r in rows[:2]] == [[0], [1]]
    assert [r[3] for r in rows[2:]] == ["PENDING", "PENDING"]


def test_without_memory_as_a_consumable_no_default_leaves_memory_unasked(tmp_path: Path) -> None:
    rows = run(tmp_path, "", "", ["--gres=gpu:1", "--gres=gpu:1"], select="CR_Core")
    assert [r[0] for r in rows] == [0, 0]
    assert [r[2] for r in rows] == [[0], [0]]


def test_def_mem_per_cpu_of_the_partition_wins_over_the_clusters(tmp_path: Path) -> None:
    # real: 32000M (8000 x 4 CPUs), 8000M and 4000M (q's 2000 per CPU), all three on gpu01
    rows = run(tmp_path, "DefMemPerCPU=8000", "DefMemPerCPU=2000",
               ["-c4 --gres=gpu:1", "-c4 --gres=gpu:1 -p q", "-c2 --gres=gpu:1 -p q"])
    assert [(r[0], r[1]) for r in rows] == [(32000, 4), (8000, 4), (4000, 2)]
    assert {tuple(r[2]) for r in rows} == {(0,)}


def test_def_mem_per_gpu_comes_before_def_mem_per_cpu_for_gpu_jobs(tmp_path: Path) -> None:
    # real: 40000M, 2000M (no GPU: 1000 per CPU), 10000M (q's 5000 per GPU), 40000M (--gpus=2),
    # 6000M (--mem-per-cpu given)
    rows = run(tmp_path, "DefMemPerGPU=20000\nDefMemPerCPU=1000", "DefMemPerGPU=5000",
               ["-c2 --gres=gpu:2", "-c2", "-c2 --gres=gpu:2 -p q", "-c2 --gpus=2",
                "-c2 --gres=gpu:1 --mem-per-cpu=3000"])
    assert [r[0] for r in rows] == [40000, 2000, 10000, 40000, 6000]


def test_def_cpu_per_gpu_applies_only_without_a_cpu_request(tmp_path: Path) -> None:
    # real: 8 CPUs (4 per GPU) and 8000M; -c1 kept 1 CPU; q's 2 per GPU gave 4; --gpus=3 gave 12
    rows = run(tmp_path, "DefCpuPerGPU=4\nDefMemPerCPU=1000", "DefCpuPerGPU=2",
               ["--gres=gpu:2", "--gres=gpu:2 -c1", "--gres=gpu:2 -p q", "--gpus=3"])
    assert [(r[1], r[0]) for r in rows] == [(8, 8000), (1, 1000), (4, 4000), (12, 12000)]


def test_def_mem_per_node_is_asked_on_every_node(tmp_path: Path) -> None:
    # real: two 30000M jobs on gpu01, the third on gpu02; the two-node job (60000M) waited
    rows = run(tmp_path, "DefMemPerNode=30000", "",
               ["--gres=gpu:1", "--gres=gpu:1", "--gres=gpu:1", "-N2 --gres=gpu:1"])
    assert [r[0] for r in rows] == [30000, 30000, 30000, 60000]
    assert [r[2] for r in rows[:3]] == [[0], [0], [1]]
    assert rows[3][3] == "PENDING"


def test_a_request_given_in_full_is_left_as_it_is(tmp_path: Path) -> None:
    rows = run(tmp_path, "DefMemPerCPU=8000\nDefCpuPerGPU=4", "",
               ["--gres=gpu:2 -c3 --mem=5000", "--gres=gpu:1 --cpus-per-gpu=2 --mem-per-gpu=700"])
    assert [(r[1], r[0]) for r in rows] == [(3, 5000), (2, 700)]


def test_sbatch_marks_what_it_left_to_the_cluster() -> None:
    def pod(opts: str):
        (wl,) = sbatch_to_workload(parse_sbatch_text(script(opts), "x.sbatch"), id=1, submit_time=0.0, runtime=1.0)
        return wl.pod_sets[0]

    assert (pod("--gres=gpu:1").cpu_unset, pod("--gres=gpu:1").memory_unset) == (True, True)
    assert (pod("-c2 --mem=10").cpu_unset, pod("-c2 --mem=10").memory_unset) == (False, False)
    assert (pod("--cpus-per-gpu=2 --mem-per-cpu=1").cpu_unset, pod("--mem-per-gpu=5").memory_unset) == (False, False)


def test_filling_in_clears_the_flags_and_is_idempotent() -> None:
    from gpupool.model.workload import PodSet

    d = Defaults(cpu_per_gpu=4, mem_per_gpu=None, mem_per_cpu=1000, mem_per_node=None, whole_node=64000)
    once = fill_pod_set(PodSet(gpus=2, cpu_unset=True, memory_unset=True), d)
    assert (once.cpu_m, once.memory_mib, once.cpu_unset, once.memory_unset) == (8000, 8000, False, False)
    assert fill_pod_set(once, d) == once


@pytest.mark.parametrize("line, message", [
    ("DefMemPerCPU=lots", "DefMemPerCPU must be a whole number"),
    ("DefCpuPerGPU=-1", "DefCpuPerGPU must be at least 0"),
])
def test_bad_partition_defaults_name_the_line(tmp_path: Path, line: str, message: str) -> None:
    (tmp_path / "slurm.conf").write_text(CONF.format(select="CR_Core_Memory", globals="", q=line))
    with pytest.raises(GpupoolError, match=message) as err:
        load_pool(tmp_path)
    assert "slurm.conf" in str(err.value) and ":11" in str(err.value)


@pytest.mark.parametrize("policy", ["bridge", "operator"])
def test_policies_built_on_slurm_fill_defaults_in_too(policy: str) -> None:
    import gpupool.policy.bridge  # noqa: F401  (registers the policies)
    import gpupool.policy.operator  # noqa: F401

    # the seed pool sets DefMemPerGPU=120000 (and declares the operator's NodeSets)
    pool = load_pool(Path(__file__).resolve().parents[2] / "examples" / "seed-pool")
    wl = workload("j", "-c2 --gres=gpu:1", 0.0, 1)
    (ps,) = make_policy(policy, pool).resolve_request(wl).pod_sets
    assert (ps.memory_mib, ps.memory_unset) == (120000, False)


def test_mem_zero_takes_the_whole_node_whatever_the_defaults(tmp_path: Path) -> None:
    # real: --mem=0 gave mem=62.50G under DefMemPerGPU=20000 and DefMemPerCPU=1000
    rows = run(tmp_path, "DefMemPerGPU=20000\nDefMemPerCPU=1000", "",
               ["-c2 --gres=gpu:1 --mem=0", "-c2 --gres=gpu:1", "-c2 --gres=gpu:1 --mem=0"])
    assert [r[0] for r in rows] == [64000, 20000, 64000]
    assert [r[2] for r in rows[:2]] == [[0], [1]]
    assert rows[2][3] == "PENDING"


def test_max_mem_per_node_refuses_at_submit_with_sbatchs_messages(tmp_path: Path) -> None:
    # real (MaxMemPerNode=30000; q has DefMemPerCPU=500): --mem=40000, -c4 --mem-per-cpu=10000
    # and --mem=0 were refused with "Memory required by task is not available"; a job no default
    # covers with "Requested partition configuration not available now"; the rest ran
    jobs = ["-c2 --mem=40000 --gres=gpu:1", "-c4 --mem-per-cpu=10000", "-c2 --mem=0 --gres=gpu:1",
            "-c2 --gres=gpu:1", "-c2 --gres=gpu:1 -p q", "-N2 -c2 --mem=30000"]
    rows = run(tmp_path, "MaxMemPerNode=30000", "DefMemPerCPU=500", jobs)
    assert [r[3] for r in rows] == ["REJECTED"] * 4 + ["RUNNING"] * 2
    assert [r[4] for r in rows[:4]] == ["Memory required by task is not available"] * 3 + [
        "Requested partition configuration not available now"]
    from gpupool.policy.slurm.submit_check import submit_rejection

    pool = load_pool(tmp_path)
    said = [submit_rejection(pool, workload(f"j{k}", opts, 0.0, k + 1)) for k, opts in enumerate(jobs)]
    assert said == ["Memory required by task is not available"] * 3 + [
        "Requested partition configuration not available now", None, None]


def test_mem_per_cpu_follows_cpus_filled_in_from_def_cpu_per_gpu(tmp_path: Path) -> None:
    # real: --gres=gpu:2 --mem-per-cpu=1000 under DefCpuPerGPU=4 got 8 CPUs and 8000M;
    # -n2 --gpus-per-task=1 --mem-per-cpu=100 got 8 CPUs and 800M
    rows = run(tmp_path, "DefCpuPerGPU=4\nDefMemPerCPU=1000", "",
               ["--gres=gpu:2 --mem-per-cpu=1000", "-n2 --gpus-per-task=1 --mem-per-cpu=100"])
    assert [(r[1], r[0]) for r in rows] == [(8, 8000), (8, 800)]


def test_max_mem_per_node_counts_per_node_memory_whole_and_per_cpu_memory_per_task(tmp_path: Path) -> None:
    # real (MaxMemPerNode=30000): -n4 --mem=40000 refused; -n4 --mem-per-cpu=9000 (36000 MB on
    # one node) and -n2 --mem=25000 ran
    rows = run(tmp_path, "MaxMemPerNode=30000\nDefMemPerCPU=1000", "",
               ["-n4 --mem=40000", "-n4 --mem-per-cpu=9000", "-n2 --mem=25000"])
    assert [r[3] for r in rows] == ["REJECTED", "RUNNING", "RUNNING"]
    assert rows[0][4] == "Memory required by task is not available"


def test_def_mem_per_node_wins_when_both_forms_are_set(tmp_path: Path) -> None:
    # real: DefMemPerCPU=1000 with DefMemPerNode=30000, cluster-wide or on one partition line:
    # -c4 got 30000M ("DefMemPerCPU ignored, since it's mutually exclusive with DefMemPerNode")
    rows = run(tmp_path, "DefMemPerCPU=1000\nDefMemPerNode=30000", "DefMemPerCPU=1000 DefMemPerNode=30000",
               ["-c4", "-c4 -p q"])
    assert [r[0] for r in rows] == [30000, 30000]
    conf = CONF.format(select="CR_Core_Memory", globals="", q="DefMemPerNode=5000").replace(
        "PartitionName=p ", "PartitionName=DEFAULT DefMemPerCPU=1000\nPartitionName=p ")
    (tmp_path / "slurm.conf").write_text(conf)
    pool = load_pool(tmp_path)
    pol = make_policy("slurm", pool)
    mem = [pol.resolve_request(workload("j", opts, 0.0, 1)).pod_sets[0].memory_mib for opts in ("-c4", "-c4 -p q")]
    assert mem == [4000, 5000]


def test_wrapping_policies_pass_the_submit_time_request_on(tmp_path: Path) -> None:
    from gpupool.conformance.diff_slurm_lockstep import LockstepPolicy
    from gpupool.conformance.slurm_cases import _Recorder

    (tmp_path / "slurm.conf").write_text(CONF.format(select="CR_Core_Memory", globals="DefMemPerCPU=700", q=""))
    pool = load_pool(tmp_path)
    wl = workload("j", "-c2 --gres=gpu:1", 0.0, 1)
    for wrapped in (LockstepPolicy(make_policy("slurm", pool), {}), _Recorder(make_policy("slurm", pool))):
        out = Engine(pool, [wl], wrapped, until=1.0).run()
        assert out.jobs[0].wl.pod_sets[0].memory_mib == 1400


def test_the_bridge_leaves_kubernetes_workloads_to_its_own_external_jobs() -> None:
    import gpupool.policy.bridge  # noqa: F401  (registers the policy)
    from dataclasses import replace as dc_replace

    pool = load_pool(Path(__file__).resolve().parents[2] / "examples" / "seed-pool")
    wl = workload("j", "-c2 --gres=gpu:1", 0.0, 1)
    k8s = dc_replace(wl, kind="job", labels={"kueue.x-k8s.io/queue-name": "q"})
    pol = make_policy("bridge", pool, {"kubernetes": "all"})
    assert pol.resolve_request(k8s) is k8s


def test_max_mem_per_cpu_raises_cpus_as_slurmctld_did(tmp_path: Path) -> None:
    # real (MaxMemPerCPU=4000, DefMemPerCPU=1000): -c2 --mem-per-cpu=8000 ran with 4 CPUs (16000M);
    # -n1 --mem-per-cpu=3000 kept 1; -c2 --mem=0 got the node's 16 CPUs and 62.50G
    rows = run(tmp_path, "MaxMemPerCPU=4000\nDefMemPerCPU=1000", "",
               ["-c2 --mem-per-cpu=8000 --gres=gpu:1", "-n1 --mem-per-cpu=3000", "-c2 --mem=0 --gres=gpu:1"])
    assert [(r[1], r[0]) for r in rows] == [(4, 16000), (1, 3000), (16, 64000)]
    assert [r[2] for r in rows] == [[0], [0], [1]]


def test_max_mem_per_cpu_doubles_cpus_per_task(tmp_path: Path) -> None:
    # real (MaxMemPerCPU=4000, no default): no --mem took the whole node with 16 CPUs;
    # -c2 --mem-per-cpu=5000 ran with 4 CPUs (10000M); -n3 --mem-per-cpu=6000 with 2 per task
    rows = run(tmp_path, "MaxMemPerCPU=4000", "",
               ["-c2 --gres=gpu:1", "-c2 --gres=gpu:1 --mem-per-cpu=5000", "-n3 --mem-per-cpu=6000"])
    assert [(r[1], r[0]) for r in rows] == [(16, 64000), (4, 10000), (6, 18000)]


def test_max_mem_per_cpu_multiplies_cpus_per_task_by_one_factor(tmp_path: Path) -> None:
    # real (MaxMemPerCPU=4000): -c1 --mem-per-cpu=9000 ran on 3 CPUs at 3000 (9000M), -c2 on 6
    rows = run(tmp_path, "MaxMemPerCPU=4000\nDefMemPerCPU=1000", "", ["-c1 --mem-per-cpu=9000", "-c2 --mem-per-cpu=9000"])
    assert [(r[1], r[0]) for r in rows] == [(3, 9000), (6, 18000)]


def test_max_mem_per_cpu_comes_before_def_cpu_per_gpu(tmp_path: Path) -> None:
    # real (DefCpuPerGPU=4, MaxMemPerCPU=4000): --gres=gpu:2 --mem-per-cpu=5000 ran on 8 CPUs at 2500
    rows = run(tmp_path, "DefCpuPerGPU=4\nMaxMemPerCPU=4000\nDefMemPerCPU=1000", "", ["--gres=gpu:2 --mem-per-cpu=5000"])
    assert [(r[1], r[0]) for r in rows] == [(8, 20000)]


def test_max_mem_per_cpu_is_ignored_beside_max_mem_per_node(tmp_path: Path) -> None:
    # real (both set): -c2 --mem-per-cpu=5000 kept 2 CPUs at 5000
    rows = run(tmp_path, "MaxMemPerCPU=4000\nMaxMemPerNode=30000\nDefMemPerCPU=1000", "", ["-c2 --mem-per-cpu=5000"])
    assert [(r[1], r[0]) for r in rows] == [(2, 10000)]


def test_whole_node_memory_needing_more_cpus_than_a_node_has_is_refused(tmp_path: Path) -> None:
    # real (MaxMemPerCPU=2000, 64000 MB 16-core nodes): -c1 and -c1 --mem=0 were refused, "CPU
    # count per node can not be satisfied" / "Requested node configuration is not available"
    rows = run(tmp_path, "MaxMemPerCPU=2000", "", ["-c1", "-c1 --mem=0"])
    assert [(r[3], r[4]) for r in rows] == [("REJECTED", "Requested node configuration is not available")] * 2


def test_max_mem_per_node_never_refuses_on_the_rounding_of_a_split(tmp_path: Path) -> None:
    rows = run(tmp_path, "MaxMemPerNode=30002\nDefMemPerCPU=1000", "", ["-n3 --mem=30001", "-n3 --mem=30010"])
    assert [r[3] for r in rows] == ["RUNNING", "REJECTED"]


def test_max_mem_per_cpu_gives_a_per_node_amount_its_cpus_in_whole_tasks(tmp_path: Path) -> None:
    # real (MaxMemPerCPU=4000): ceil(memory / 4000) CPUs rounded down to a multiple of -c, never
    # fewer than asked: -c2 --mem=20000 got 4, --mem=40000 10, -c3 --mem=20000 3, -c1 --mem=10000 3
    rows = run(tmp_path, "MaxMemPerCPU=4000\nDefMemPerCPU=1000", "",
               ["-c2 --mem=20000", "-c2 --mem=40000", "-c3 --mem=20000", "-c1 --mem=10000"])
    assert [(r[1], r[0]) for r in rows] == [(4, 20000), (10, 40000), (3, 20000), (3, 10000)]


def test_max_mem_per_cpu_rounds_whole_node_and_default_node_memory_the_same_way(tmp_path: Path) -> None:
    # real (MaxMemPerCPU=4000, DefMemPerNode=20000): -c3 --mem=0 got 15 CPUs, -c2 4, -c3 3, a GPU job 5
    rows = run(tmp_path, "MaxMemPerCPU=4000\nDefMemPerNode=20000", "", ["-c3 --mem=0", "-c2", "-c3", "-c1 --gres=gpu:1"])
    assert [r[1] for r in rows] == [15, 4, 3, 5]


def test_task_pods_keep_their_cpus_under_a_per_node_amount(tmp_path: Path) -> None:
    # -n2 --mem=20000 got 5 CPUs on a real 22.05.8, which two identical whole-CPU pods cannot
    # hold: left as asked (docs/differential.md, finding 37)
    rows = run(tmp_path, "MaxMemPerCPU=4000", "", ["-n2 --mem=20000"])
    assert rows[0][1] == 2


def test_a_partitions_memory_limit_replaces_the_clusters(tmp_path: Path) -> None:
    # real: q's MaxMemPerNode=20000 refused --mem=30000, --mem=0 and a job no default covers; p
    # (no limit) ran --mem=30000
    rows = run(tmp_path, "", "MaxMemPerNode=20000",
               ["-p q -c2 --mem=30000", "-c2 --mem=30000", "-p q -c2 --mem-per-cpu=8000", "-p q -c2 --mem=0", "-p q -c2"])
    assert [(r[3], r[4]) for r in rows] == [
        ("REJECTED", "Memory required by task is not available"), ("RUNNING", ""), ("RUNNING", ""),
        ("REJECTED", "Memory required by task is not available"),
        ("REJECTED", "Requested partition configuration not available now")]
    # real: q's 40000 over the cluster's 20000 ran --mem=30000 in q and refused it in p
    rows = run(tmp_path, "MaxMemPerNode=20000", "MaxMemPerNode=40000", ["-p q -c2 --mem=30000", "-c2 --mem=30000"])
    assert [r[3] for r in rows] == ["RUNNING", "REJECTED"]


def test_a_partitions_max_mem_per_cpu_replaces_the_clusters_max_mem_per_node(tmp_path: Path) -> None:
    # real (cluster MaxMemPerNode=30000, q MaxMemPerCPU=4000): -p q -c2 --mem-per-cpu=5000 on 4
    # CPUs, -p q -c2 --mem=40000 on 10; -c2 --mem=40000 in p refused
    rows = run(tmp_path, "MaxMemPerNode=30000\nDefMemPerCPU=1000", "MaxMemPerCPU=4000",
               ["-p q -c2 --mem-per-cpu=5000", "-p q -c2 --mem=40000", "-c2 --mem=40000"])
    assert [(r[1], r[3]) for r in rows[:2]] == [(4, "RUNNING"), (10, "RUNNING")]
    assert rows[2][3] == "REJECTED"


def test_a_partitions_unlimited_memory_lifts_the_clusters_limit(tmp_path: Path) -> None:
    rows = run(tmp_path, "MaxMemPerNode=20000\nDefMemPerCPU=1000", "MaxMemPerNode=UNLIMITED",
               ["-p q -c2 --mem=30000", "-c2 --mem=30000"])
    assert [r[3] for r in rows] == ["RUNNING", "REJECTED"]


@pytest.mark.parametrize("line", ["MaxMemPerNode=lots", "MaxMemPerCPU=-5"])
def test_bad_partition_memory_limits_name_the_line(tmp_path: Path, line: str) -> None:
    (tmp_path / "slurm.conf").write_text(CONF.format(select="CR_Core_Memory", globals="", q=line))
    with pytest.raises(GpupoolError, match=line.split("=")[0]) as err:
        load_pool(tmp_path)
    assert "slurm.conf" in str(err.value) and ":11" in str(err.value)


def test_a_one_node_job_is_rounded_as_one_task_too(tmp_path: Path) -> None:
    # real (MaxMemPerCPU=4000): -N1 -c2 --mem=20000 got 4 CPUs and -N1 -c3 --mem=0 15, as without -N1
    rows = run(tmp_path, "MaxMemPerCPU=4000\nDefMemPerCPU=1000", "", ["-N1 -c2 --mem=20000", "-N1 -c3 --mem=0"])
    assert [r[1] for r in rows] == [4, 15]


def test_a_pod_per_node_is_cut_in_whole_tasks_under_max_mem_per_cpu(tmp_path: Path) -> None:
    # real (MaxMemPerCPU=4000): -N1 -n2 -c2 --mem=20000 got 4, -N1 -n4 --mem=20000 5,
    # -N1 --ntasks-per-node=2 --mem=10000 3; -N1 -n3 --mem=0 needs 16 one-CPU tasks
    rows = run(tmp_path, "MaxMemPerCPU=4000\nDefMemPerCPU=1000", "",
               ["-N1 -n2 -c2 --mem=20000", "-N1 -n4 --mem=20000", "-N1 --ntasks-per-node=2 --mem=10000", "-N1 -n3 --mem=0"])
    assert [r[1] for r in rows] == [4, 5, 3, 16]


def test_a_gpu_job_with_its_own_memory_needs_def_mem_per_gpu_free(tmp_path: Path) -> None:
    # real (DefMemPerGPU=20000; q 5000): holders leave 25000 MB free on n1 and 14000 on n2; in q
    # 2 x 5000 fit n2 (8000 left), then --mem=6000 in p waited for 20000; --mem-per-cpu too
    rows = run(tmp_path, "DefMemPerGPU=20000", "DefMemPerGPU=5000",
               ["-w n1 -c1 --mem=39000", "-w n2 -c1 --mem=50000", "-p q --gres=gpu:2 --mem=6000 -w n2",
                "--gres=gpu:1 --mem=6000 -w n2", "-p q --gres=gpu:1 --mem-per-cpu=3000"])
    assert [(r[0], r[2], r[3]) for r in rows] == [
        (39000, [0], "RUNNING"), (50000, [1], "RUNNING"), (6000, [1], "RUNNING"), (6000, None, "PENDING"),
        (3000, [0], "RUNNING")]
    # real (sbatch --test-only): on 25000 MB free --mem=22000 would start now, gpu:2 --mem=6000
    # (40000) later; --mem-per-gpu is the job's own per-GPU amount: 12000 now on 14000 free
    rows = run(tmp_path, "DefMemPerGPU=20000", "",
               ["-w n1 -c1 --mem=39000", "-w n2 -c1 --mem=50000",
                "-p q --gres=gpu:1 --mem=22000 -w n1", "-p q --gres=gpu:1 --mem-per-gpu=12000 -w n2"])
    assert [(r[0], r[2], r[3]) for r in rows[2:]] == [(22000, [0], "RUNNING"), (12000, [1], "RUNNING")]
    rows = run(tmp_path, "DefMemPerGPU=20000", "", ["-w n1 -c1 --mem=39000", "-w n2 -c1 --mem=50000",
                                                     "--gres=gpu:2 --mem=6000"])
    assert rows[2][2:4] == (None, "PENDING")


def test_more_def_mem_per_gpu_than_a_node_has_is_refused_at_submit(tmp_path: Path) -> None:
    # real: --gres=gpu:4 --mem=1000 under DefMemPerGPU=20000 (80000 on 64000 MB nodes) was
    # refused; in a partition at 5000 it ran
    rows = run(tmp_path, "DefMemPerGPU=20000", "DefMemPerGPU=5000",
               ["--gres=gpu:4 --mem=1000", "-p q --gres=gpu:4 --mem=1000"])
    assert [r[3:] for r in rows] == [("REJECTED", "Requested node configuration is not available"),
                                      ("RUNNING", "")]


def test_def_mem_per_gpu_fit_is_set_only_where_it_asks_more() -> None:
    from gpupool.model.workload import PodSet

    d = Defaults(cpu_per_gpu=None, mem_per_gpu=20000, mem_per_cpu=None, mem_per_node=None, whole_node=64000)
    asked = PodSet(gpus=2, memory_mib=6000, cpu_unset=True)
    assert fill_pod_set(asked, d).memory_fit == 40000
    assert fill_pod_set(PodSet(gpus=2, memory_mib=50000, cpu_unset=True), d).memory_fit == 0
    assert fill_pod_set(PodSet(gpus=2, memory_mib=6000, memory_per="gpu", cpu_unset=True), d).memory_fit == 0
    assert fill_pod_set(PodSet(gpus=2, memory_unset=True, cpu_unset=True), d).memory_fit == 0  # 40000 held
    assert fill_pod_set(PodSet(gpus=2, memory_mib=6000, exclusive=True, cpu_unset=True), d).memory_fit == 0
    assert fill_pod_set(PodSet(memory_mib=6000, cpu_unset=True), d).memory_fit == 0  # no GPU
    assert fill_pod_set(fill_pod_set(asked, d), d) == fill_pod_set(asked, d)  # filling twice changes nothing


def test_a_jobs_task_pods_on_one_node_need_def_mem_per_gpu_for_each(tmp_path: Path) -> None:
    # real (DefMemPerGPU=20000, 25000 MB free on n1, 1000 on n2, sbatch --test-only): one task
    # would start now, two tasks (2 x 20000) later, --mem-per-cpu alike; four tasks on empty
    # nodes need two of them (80000 is more than a node has)
    holders = ["-w n1 -c1 --mem=39000", "-w n2 -c1 --mem=63000"]
    for opts, state in (("-n1 --gpus-per-task=1 --mem=2000", "RUNNING"), ("-n2 --gpus-per-task=1 --mem=2000", "PENDING"),
                        ("-n2 --gpus-per-task=1 --mem-per-cpu=1000", "PENDING")):
        rows = run(tmp_path, "DefMemPerGPU=20000", "", [*holders, opts])
        assert rows[2][3] == state, opts
    ((mem, _cpus, nodes, state, _why),) = run(tmp_path, "DefMemPerGPU=20000", "", ["-n4 --gpus-per-task=1 --mem=1000"])
    assert (mem, nodes, state) == (1000, [0, 1], "RUNNING")  # each task holds its own 250 MB


def test_backfill_plans_a_gpu_job_by_the_memory_it_needs_free(tmp_path: Path) -> None:
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    (tmp_path / "slurm.conf").write_text(CONF.format(select="CR_Core_Memory", globals="DefMemPerGPU=20000", q=""))
    pool = load_pool(tmp_path)
    # w, first in the queue, needs both nodes whole: the main pass stops at it, so x can only be
    # backfilled. With 14000 MB free on each node x (20000 to fit) waits for a's end; on the
    # memory it holds alone (6000) backfill would start it at its first cycle
    wls = [workload("a", "-w n1 -c1 --mem=50000 -t 5", 0.0, 1, runtime=3000),
           workload("b", "-w n2 -c1 --mem=50000 -t 10", 0.0, 2, runtime=3000),
           workload("w", "-N2 --exclusive -t 10", 1.0, 3, runtime=60),
           workload("x", "--gres=gpu:1 --mem=6000 -t 4", 2.0, 4, runtime=60)]
    out = Engine(pool, wls, make_policy("slurm", pool), until=900).run()
    a, _b, _w, x = sorted(out.jobs, key=lambda j: j.id)
    assert x.via == "SchedBackfill" and x.start >= a.end
    assert sum(p[3] for p in x.placement) == 6000
