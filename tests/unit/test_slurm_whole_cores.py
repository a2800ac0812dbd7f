"""CPUs in whole cores and ``-n T`` with no ``--nodes`` (docs/differential.md, findings 49-50).

Every expectation is what a real 22.05.8 gave (2026-12-03): nodes of 2 sockets x 8 cores with
one or two threads per core (16 or 32 CPUs), 8 GPUs, 64000 MB, CR_Core_Memory,
DefMemPerCPU=100; holder jobs pinned with ``-w`` first, then the job alone; per node its CPUs
(``scontrol -d show job`` CPU_IDs), MB (Mem) and GPUs (GRES IDX).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.engine.nodes import NodeTable
from gpupool.policy.slurm.eval_nodes import pick_nodes
from tests.unit.sbatch_plans import run_spaced, slurm_pool

CONF = """ClusterName=t
SelectType=select/cons_tres
SelectTypeParameters={select}
DefMemPerCPU=100
SchedulerType=sched/backfill
GresTypes=gpu
NodeName=gpu[01-{last:02d}] CPUs={cpus} Sockets=2 CoresPerSocket=8 ThreadsPerCore={tpc} RealMemory=64000 Gres=gpu:8
PartitionName=p Nodes=gpu[01-{last:02d}] Default=YES MaxTime=60 State=UP
"""

#: (threads per core, nodes, holders, the job, per node (name, CPUs, MB, GPUs)) from the real runs
REAL = [
    (2, 2, [], '-n1', [('gpu01', 2, 200, 0)]),
    (2, 2, [], '-c3', [('gpu01', 4, 400, 0)]),
    (2, 2, [], '-n3', [('gpu01', 4, 400, 0)]),
    (2, 2, [], '-n2 -c3', [('gpu01', 6, 600, 0)]),
    (2, 2, [], '-N2 --ntasks-per-node=3', [('gpu01', 4, 400, 0), ('gpu02', 4, 400, 0)]),
    (2, 2, [], '-N2 -n6', [('gpu01', 4, 400, 0), ('gpu02', 2, 200, 0)]),
    (2, 2, [], '-N2 -n5', [('gpu01', 4, 400, 0), ('gpu02', 2, 200, 0)]),
    (2, 2, [], '-N2 -n5 -c3', [('gpu01', 12, 1200, 0), ('gpu02', 4, 400, 0)]),
    (2, 2, [], '-n1 --mem-per-cpu=1000', [('gpu01', 2, 2000, 0)]),
    (2, 2, [], '-c3 --mem-per-cpu=1000', [('gpu01', 4, 4000, 0)]),
    (2, 2, [], '-n3 --mem-per-cpu=1000', [('gpu01', 4, 4000, 0)]),
    (2, 2, [], '--cpus-per-gpu=3 --gres=gpu:1', [('gpu01', 4, 400, 1)]),
    (2, 2, [], '-n3 --gpus-per-task=1', [('gpu01', 4, 400, 3)]),
    (2, 2, [], '-N2 -n4 --gpus-per-task=1', [('gpu01', 2, 200, 2), ('gpu02', 2, 200, 2)]),
    (2, 2, [], '-N2 -n6 --gpus-per-task=1', [('gpu01', 4, 400, 4), ('gpu02', 2, 200, 2)]),
    (2, 2, [], '--exclusive -n1', [('gpu01', 32, 3200, 8)]),
    (2, 2, [], '-n1 --mem=1000', [('gpu01', 2, 1000, 0)]),
    (2, 2, ['-w gpu01 -c29'], '-c3', [('gpu02', 4, 400, 0)]),
    (2, 2, ['-w gpu01 -c29'], '-n3', [('gpu02', 4, 400, 0)]),
    (2, 2, ['-w gpu01 -c29'], '-n2', [('gpu01', 2, 200, 0)]),
    (2, 2, ['-w gpu01 -c29'], '-N2 -n6', [('gpu01', 2, 200, 0), ('gpu02', 4, 400, 0)]),
    (2, 2, ['-w gpu01 -c29'], '-c2', [('gpu01', 2, 200, 0)]),
    (2, 3, [], '-N3 -n7', [('gpu01', 4, 400, 0), ('gpu02', 2, 200, 0), ('gpu03', 2, 200, 0)]),
    (2, 3, [], '-N3 -n5 -c3', [('gpu01', 10, 1000, 0), ('gpu02', 4, 400, 0), ('gpu03', 4, 400, 0)]),
    (2, 3, [], '-N3 -n4', [('gpu01', 2, 200, 0), ('gpu02', 2, 200, 0), ('gpu03', 2, 200, 0)]),
    (2, 3, [], '-N3 -n6 -c2', [('gpu01', 8, 800, 0), ('gpu02', 2, 200, 0), ('gpu03', 2, 200, 0)]),
    (2, 3, [], '-N2 -n5 --mem-per-cpu=1000', [('gpu01', 4, 4000, 0), ('gpu02', 2, 2000, 0)]),
    (2, 3, [], '-N2 -n3 -c3', [('gpu01', 6, 600, 0), ('gpu02', 4, 400, 0)]),
    (2, 3, [], '-n5', [('gpu01', 6, 600, 0)]),
    (2, 3, [], '-n3 -c3', [('gpu01', 10, 1000, 0)]),
    (2, 3, [], '-n40', [('gpu01', 32, 3200, 0), ('gpu02', 8, 800, 0)]),
    (2, 3, [], '-n2 --gpus-per-task=1 -c3', [('gpu01', 6, 600, 2)]),
    (2, 3, [], '-N2 -c3', [('gpu01', 4, 400, 0), ('gpu02', 4, 400, 0)]),
    (2, 3, [], '-N2 --ntasks-per-node=2 -c3 --mem-per-cpu=500', [('gpu01', 6, 3000, 0), ('gpu02', 6, 3000, 0)]),
    (2, 3, ['-w gpu01 -c29', '-w gpu02 -c27'], '-N2 -n6', [('gpu01', 2, 200, 0), ('gpu02', 4, 400, 0)]),
    (2, 3, ['-w gpu01 -c29', '-w gpu02 -c27'], '-N2', [('gpu01', 2, 200, 0), ('gpu02', 2, 200, 0)]),
    (2, 3, ['-w gpu01 -c29', '-w gpu02 -c27'], '-N2 -c3', [('gpu02', 4, 400, 0), ('gpu03', 4, 400, 0)]),
    (2, 3, ['-w gpu01 -c29', '-w gpu02 -c27'], '-n3', [('gpu02', 4, 400, 0)]),
    (2, 3, ['-w gpu01 -c29', '-w gpu02 -c27'], '-N3 -n8', [('gpu01', 2, 200, 0), ('gpu02', 4, 400, 0), ('gpu03', 2, 200, 0)]),
    (1, 3, [], '-N3 -n5 -c2', [('gpu01', 6, 600, 0), ('gpu02', 2, 200, 0), ('gpu03', 2, 200, 0)]),
    (1, 3, [], '-N3 -n7 -c3', [('gpu01', 15, 1500, 0), ('gpu02', 3, 300, 0), ('gpu03', 3, 300, 0)]),
    (1, 3, [], '-N3 -n4 -c2', [('gpu01', 4, 400, 0), ('gpu02', 2, 200, 0), ('gpu03', 2, 200, 0)]),
    (1, 3, [], '-N3 -n6 -c4', [('gpu01', 16, 1600, 0), ('gpu02', 4, 400, 0), ('gpu03', 4, 400, 0)]),
    (1, 3, [], '-N2 -n5 -c3', [('gpu01', 12, 1200, 0), ('gpu02', 3, 300, 0)]),
    (1, 3, ['-w gpu01 -c14', '-w gpu02 -c12'], '-n2', [('gpu01', 2, 200, 0)]),
    (1, 3, ['-w gpu01 -c14', '-w gpu02 -c12'], '-n3', [('gpu02', 3, 300, 0)]),
    (1, 3, ['-w gpu01 -c14', '-w gpu02 -c12'], '-n5', [('gpu03', 5, 500, 0)]),
    (1, 3, ['-w gpu01 -c14', '-w gpu02 -c12'], '-n20', [('gpu01', 2, 200, 0), ('gpu02', 4, 400, 0), ('gpu03', 14, 1400, 0)]),
    (1, 3, ['-w gpu01 -c14', '-w gpu02 -c12'], '-n18', [('gpu01', 2, 200, 0), ('gpu02', 4, 400, 0), ('gpu03', 12, 1200, 0)]),
    (1, 3, ['-w gpu01 -c14', '-w gpu02 -c12'], '-n4 --gpus-per-task=1', [('gpu02', 4, 400, 4)]),
    (1, 3, ['-w gpu01 -c14', '-w gpu02 -c12'], '-n6 -c2', [('gpu03', 12, 1200, 0)]),
    (1, 3, [], '-n20', [('gpu01', 16, 1600, 0), ('gpu02', 4, 400, 0)]),
    (1, 3, [], '-n40', [('gpu01', 16, 1600, 0), ('gpu02', 16, 1600, 0), ('gpu03', 8, 800, 0)]),
    (1, 3, [], '-n20 -c2', [('gpu01', 16, 1600, 0), ('gpu02', 16, 1600, 0), ('gpu03', 8, 800, 0)]),
    (1, 3, ['-w gpu02 -c10'], '-n20', [('gpu01', 16, 1600, 0), ('gpu02', 4, 400, 0)]),
    (1, 3, ['-w gpu02 -c10'], '-n24', [('gpu01', 16, 1600, 0), ('gpu02', 6, 600, 0), ('gpu03', 2, 200, 0)]),
]


def _pool(directory: Path, tpc: int, nodes: int, select: str = "CR_Core_Memory"):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "gres.conf").write_text("".join(f"NodeName=gpu{n:02d} Name=gpu File=/dev/nvidia[0-7]\n"
                                                for n in range(1, nodes + 1)))
    return slurm_pool(directory, CONF.format(select=select, last=nodes, cpus=16 * tpc, tpc=tpc))


def _alloc(pool, holders: list[str], job: str) -> list[tuple[str, int, int, int]]:
    engine, _pol = run_spaced(pool, [*holders, job], 5, 5 * (len(holders) + 1) + 1)
    got = engine.jobs[len(holders) + 1]
    assert got.placement, f"{job}: not started ({got.reason})"
    names = list(pool.nodes)
    per: dict[str, list[int]] = {}
    for node, mask, cpu, mem in got.placement:
        a = per.setdefault(names[node], [0, 0, 0])
        a[0] += cpu // 1000
        a[1] += mem
        a[2] += mask.bit_count()
    return sorted((n, *v) for n, v in per.items())


@pytest.mark.parametrize(("tpc", "nodes", "holders", "job", "real"), REAL,
                         ids=[f"t{r[0]}-{'+'.join(r[2]) or 'idle'}-{r[3]}" for r in REAL])
def test_cpus_memory_and_gpus_per_node_as_real_slurm(tmp_path, tpc, nodes, holders, job, real):
    assert _alloc(_pool(tmp_path, tpc, nodes), holders, job) == real


def test_cpu_steps_follow_select_type_parameters(tmp_path):
    assert NodeTable(_pool(tmp_path / "core", 2, 2)).cpu_step == [2000, 2000]
    assert NodeTable(_pool(tmp_path / "cpu", 2, 2, "CR_CPU_Memory")).cpu_step == [1000, 1000]
    assert NodeTable(_pool(tmp_path / "one", 1, 2)).cpu_step == [1000, 1000]
    assert not NodeTable(_pool(tmp_path / "one", 1, 2)).stepped


def test_cr_cpu_counts_single_threads_but_keeps_a_core_per_later_node(tmp_path):
    # a real 22.05.8 under CR_CPU_Memory, two threads per core: TRES cpu=1 mem=100M for -n1,
    # cpu=3 mem=300M for -n3 and -c3, but -N2 -n6 as 4 + 2 tasks (400M + 200M) and -N3 -n7 as
    # 3 + 2 + 2 (its CPU_IDs list whole cores all the same)
    pool = _pool(tmp_path, 2, 3, "CR_CPU_Memory")
    assert _alloc(pool, [], "-n1") == [("gpu01", 1, 100, 0)]
    assert _alloc(pool, [], "-n3") == [("gpu01", 3, 300, 0)]
    assert _alloc(pool, [], "-c3") == [("gpu01", 3, 300, 0)]
    assert _alloc(pool, [], "-n1 --mem-per-cpu=1000") == [("gpu01", 1, 1000, 0)]
    assert _alloc(pool, [], "-N2 -n6") == [("gpu01", 4, 400, 0), ("gpu02", 2, 200, 0)]
    assert _alloc(pool, [], "-N3 -n7") == [("gpu01", 3, 300, 0), ("gpu02", 2, 200, 0), ("gpu03", 2, 200, 0)]


def test_whole_cores_are_counted_in_the_jobs_tres_and_usage(tmp_path):
    # sacct's AllocTRES and the fair-share billing read the placement: cpu=2 for -n1 (real:
    # TRES=cpu=2,mem=200M,node=1,billing=2, no GPU TRES: this pool's slurm.conf does not track
    # gres/gpu in AccountingStorageTRES, so none is counted; tracked, the GPUs count too)
    pool = _pool(tmp_path, 2, 2)
    engine, pol = run_spaced(pool, ["-n3 --gpus-per-task=1"], 5, 6)
    job = engine.jobs[1]
    assert pol.alloc_tres(job.placement) == {"cpu": 4, "mem": 400, "node": 1}
    pol.s.gpu_tracked = True
    assert pol.alloc_tres(job.placement) == {"cpu": 4, "gres/gpu": 3, "mem": 400, "node": 1}


def test_spill_walk_takes_nodes_in_index_order_once_none_holds_all():
    w = [1, 1, 1]
    assert pick_nodes({0: 2, 1: 4, 2: 16}, 1, 3, w, [], spill=True) == [(1, 3)]
    assert pick_nodes({0: 2, 1: 4, 2: 16}, 1, 20, w, [], spill=True) == [(0, 2), (1, 4), (2, 14)]
    assert pick_nodes({0: 16, 1: 16, 2: 16}, 1, 40, w, [], spill=True) == [(0, 16), (1, 16), (2, 8)]
    assert pick_nodes({0: 2, 1: 4}, 1, 7, w, [], spill=True) is None
    # without spill the job's node count is all it gets
    assert pick_nodes({0: 2, 1: 4, 2: 16}, 1, 20, w, []) is None


def test_a_node_keeps_a_cores_worth_of_tasks_for_each_later_node():
    w = [1, 1, 1]
    assert pick_nodes({0: 32, 1: 32, 2: 32}, 3, 7, w, [], keep={0: 2, 1: 2, 2: 2}) == [(0, 3), (1, 2), (2, 2)]
    assert pick_nodes({0: 32, 1: 32, 2: 32}, 3, 4, w, [], keep={0: 2, 1: 2, 2: 2}) == [(0, 1), (1, 1), (2, 2)]
    assert pick_nodes({0: 32, 1: 32, 2: 32}, 3, 7, w, []) == [(0, 5), (1, 1), (2, 1)]


def test_a_node_that_cannot_pay_the_rounded_cores_memory_does_not_fit(tmp_path):
    # (not probed; slurmctld gives a node no more CPUs than its free memory pays for) gpu01 keeps
    # 1500 MB: -n1 --mem-per-cpu=1000 holds 2 CPUs and 2000 MB, so it goes to gpu02 rather than
    # being refused there; -n3 (3 CPUs rounded to 4, 4000 MB) beside 3500 MB free likewise
    pool = _pool(tmp_path / "a", 2, 2)
    assert _alloc(pool, ["-w gpu01 -n1 --mem=62500"], "-n1 --mem-per-cpu=1000") == [("gpu02", 2, 2000, 0)]
    assert _alloc(pool, ["-w gpu01 -n1 --mem=62500"], "--gres=gpu:1 --mem-per-cpu=1000") == [("gpu02", 2, 2000, 1)]
    assert _alloc(pool, ["-w gpu01 -n1 --mem=60500"], "-n3 --mem-per-cpu=1000") == [("gpu02", 4, 4000, 0)]


def test_max_cpus_per_node_counts_whole_cores(tmp_path):
    # (not probed) MaxCPUsPerNode=5 with two threads per core allows 4 CPUs a node: -N2 -n8 runs
    # as 4 + 4 instead of being refused, a third -n1 goes to the idle node
    pool = _pool(tmp_path, 2, 2)
    conf = (tmp_path / "slurm.conf").read_text().replace("MaxTime=60", "MaxTime=60 MaxCPUsPerNode=5")
    pool = slurm_pool(tmp_path, conf)
    assert _alloc(pool, [], "-N2 -n8") == [("gpu01", 4, 400, 0), ("gpu02", 4, 400, 0)]
    assert _alloc(pool, ["-n1", "-n1"], "-n1") == [("gpu02", 2, 200, 0)]


def test_cpus_equal_to_cores_schedule_a_thread_per_core(tmp_path):
    # slurm.conf CPUs=16 with 2 x 8 cores and ThreadsPerCore=2: slurmctld counts a core as one
    # CPU (node_conf: threads per core 1 when CPUs do not exceed the cores)
    (tmp_path / "gres.conf").write_text("".join(f"NodeName=gpu{n:02d} Name=gpu File=/dev/nvidia[0-7]\n" for n in (1, 2)))
    conf = CONF.format(select="CR_Core_Memory", last=2, cpus=16, tpc=2)
    pool = slurm_pool(tmp_path, conf)
    table = NodeTable(pool)
    assert table.cpu_step == [1000, 1000] and table.core_cpus == [1000, 1000]
    assert _alloc(pool, [], "-N2 -n6") == [("gpu01", 5, 500, 0), ("gpu02", 1, 100, 0)]


def test_the_rounded_cores_memory_stands_apart_from_def_mem_per_gpus_fit_check(tmp_path):
    # (not probed) DefMemPerGPU=20000 asks 20000 MB free for one GPU; -c1 --mem-per-cpu=1000
    # holds 2 CPUs and 2000 MB: a node with 20500 MB free fits it, as it fits -c2
    conf = (CONF.format(select="CR_Core_Memory", last=2, cpus=32, tpc=2)
            .replace("DefMemPerCPU=100", "DefMemPerGPU=20000"))
    (tmp_path / "gres.conf").write_text("".join(f"NodeName=gpu{n:02d} Name=gpu File=/dev/nvidia[0-7]\n" for n in (1, 2)))
    pool = slurm_pool(tmp_path, conf)
    holder = ["-w gpu01 -n1 --mem=43500"]
    assert _alloc(pool, holder, "--gres=gpu:1 -c2 --mem-per-cpu=1000") == [("gpu01", 2, 2000, 1)]
    assert _alloc(pool, holder, "--gres=gpu:1 -c1 --mem-per-cpu=1000") == [("gpu01", 2, 2000, 1)]
