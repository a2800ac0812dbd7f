"""``--nodes=N --ntasks=T`` without ``--ntasks-per-node``: select/cons_tres gives each node as
many tasks as it can while every later node keeps one (``gpupool/policy/slurm/split_tasks.py``).
Every expectation is what a real 22.05.8 did with the same holders and submission on four
16-core 64000 MB nodes (docs/differential.md finding 47;
``tests/differential/test_real_slurm_split_tasks.py`` runs some of them on both)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.sbatch_plans import SCENARIO_CONF, run_spaced, slurm_pool, workload

CONF = "ClusterName=split\n" + SCENARIO_CONF + """\
GresTypes=gpu
NodeName=gpu[01-04] CPUs=16 RealMemory=64000 Gres=gpu:8
PartitionName=p Nodes=gpu[01-04] Default=YES MaxTime=60
"""

IDLE: list[str] = []
TWO_FREE_ON_01_02 = ["-w gpu01 -c14", "-w gpu02 -c14"]
LITTLE_MEMORY_ON_01 = ["-w gpu01 -c1 --mem=63000"]
ONE_FREE_ON_01_THREE_ON_03 = ["-w gpu01 -c15", "-w gpu03 -c13"]
ONE_FREE_ON_02_03_04 = ["-w gpu02 -c15", "-w gpu03 -c15", "-w gpu04 -c15"]
SIX_FREE_ON_02_FOUR_ON_04 = ["-w gpu02 -c10", "-w gpu04 -c12"]

#: (holders, the job, its pods as (node index, CPUs, MB) or its state)
CASES = [
    (IDLE, "-N2 -n6", [(0, 5, 500), (1, 1, 100)]),
    (IDLE, "-N3 -n4", [(0, 2, 200), (1, 1, 100), (2, 1, 100)]),
    (IDLE, "-N4 -n5", [(0, 2, 200), (1, 1, 100), (2, 1, 100), (3, 1, 100)]),
    (IDLE, "-N2 -n20", [(0, 16, 1600), (1, 4, 400)]),
    (IDLE, "-N2 -n6 --mem-per-cpu=1000", [(0, 5, 5000), (1, 1, 1000)]),
    (IDLE, "-N2 -n6 --mem=2000", [(0, 5, 2000), (1, 1, 2000)]),
    (IDLE, "-N2 -n3 -c2", [(0, 4, 400), (1, 2, 200)]),
    (IDLE, "-N2 -n40", "REJECTED"),
    (TWO_FREE_ON_01_02, "-N2 -n6", [(0, 2, 200), (2, 4, 400)]),
    (TWO_FREE_ON_01_02, "-N2 -n3", [(0, 2, 200), (1, 1, 100)]),
    (TWO_FREE_ON_01_02, "-N3 -n6", [(0, 2, 200), (1, 2, 200), (2, 2, 200)]),
    (TWO_FREE_ON_01_02, "-N2 -n20", [(2, 16, 1600), (3, 4, 400)]),
    (LITTLE_MEMORY_ON_01, "-N2 -n6 --mem-per-cpu=500", [(0, 2, 1000), (1, 4, 2000)]),
    (LITTLE_MEMORY_ON_01, "-N2 -n6", [(0, 5, 500), (1, 1, 100)]),
    (LITTLE_MEMORY_ON_01, "-N4 -n20", [(0, 10, 1000), (1, 8, 800), (2, 1, 100), (3, 1, 100)]),
    (ONE_FREE_ON_01_THREE_ON_03, "-N2 -n6", [(0, 1, 100), (1, 5, 500)]),
    (ONE_FREE_ON_01_THREE_ON_03, "-N2 -n20", [(1, 16, 1600), (3, 4, 400)]),
    (ONE_FREE_ON_01_THREE_ON_03, "-N3 -n6", [(0, 1, 100), (1, 4, 400), (2, 1, 100)]),
    (ONE_FREE_ON_02_03_04, "-N2 -n6", [(0, 5, 500), (1, 1, 100)]),
    (ONE_FREE_ON_02_03_04, "-N2 -n18", "PENDING"),
    (ONE_FREE_ON_02_03_04, "-N2 -n17", [(0, 16, 1600), (1, 1, 100)]),
    (SIX_FREE_ON_02_FOUR_ON_04, "-N2 -n6", [(0, 5, 500), (1, 1, 100)]),
    (SIX_FREE_ON_02_FOUR_ON_04, "-N2 -n10", [(0, 9, 900), (1, 1, 100)]),
    (SIX_FREE_ON_02_FOUR_ON_04, "-N3 -n8", [(0, 6, 600), (1, 1, 100), (2, 1, 100)]),
    # the retry drops the nodes with the fewest free CPUs one at a time: gpu01 alone here
    (["-w gpu01 -c15", "-w gpu02 -c15", "-w gpu03 -c12", "-w gpu04 -c12"], "-N3 -n9", [(1, 1, 100), (2, 4, 400), (3, 4, 400)]),
    (["-w gpu01 -c15", "-w gpu02 -c15", "-w gpu03 -c12", "-w gpu04 -c12"], "-N3 -n8", [(1, 1, 100), (2, 4, 400), (3, 3, 300)]),
    (["-w gpu01 -c15", "-w gpu02 -c15", "-w gpu03 -c12", "-w gpu04 -c12"], "-N3 -n6", [(0, 1, 100), (1, 1, 100), (2, 4, 400)]),
    # runs split by a full node: a larger run that cannot hold the job is chosen over a smaller
    # one that can (gpu04 first), the rest then goes to the best fitting node of the other run
    (["-w gpu01 -c12", "-w gpu02 -c12", "-w gpu03 -c16"], "-N2 -n6", [(0, 1, 100), (3, 5, 500)]),
    (["-w gpu01 -c12", "-w gpu02 -c12", "-w gpu03 -c16"], "-N2 -n8", [(0, 1, 100), (3, 7, 700)]),
    (["-w gpu01 -c12", "-w gpu02 -c12", "-w gpu03 -c16"], "-N3 -n9", [(0, 1, 100), (1, 1, 100), (3, 7, 700)]),
    # even jobs choose their nodes the same way (finding 48)
    (["-w gpu01 -c14", "-w gpu02 -c14", "-w gpu03 -c16"], "-N2", [(0, 1, 100), (3, 1, 100)]),
    (["-w gpu01 -c14", "-w gpu02 -c14", "-w gpu03 -c16"], "-N2 --ntasks-per-node=2", [(0, 2, 200), (3, 2, 200)]),
    (["-w gpu01 -c14", "-w gpu02 -c14", "-w gpu03 -c16"], "-N2 -c2", [(0, 2, 200), (3, 2, 200)]),
    (["-w gpu01 -c14", "-w gpu02 -c14", "-w gpu03 -c16"], "-N3", [(0, 1, 100), (1, 1, 100), (3, 1, 100)]),
    (["-w gpu01 -c12", "-w gpu02 -c12", "-w gpu03 -c16"], "-N2 --ntasks-per-node=3", [(0, 3, 300), (3, 3, 300)]),
    # --nodelist nodes first, then up from them in their run, then down; --exclude narrows
    (IDLE, "-N2 -n6 -w gpu02", [(1, 5, 500), (2, 1, 100)]),
    (IDLE, "-N2 -n6 -w gpu03,gpu04", [(2, 5, 500), (3, 1, 100)]),
    (IDLE, "-N3 -n8 -w gpu03", [(1, 1, 100), (2, 6, 600), (3, 1, 100)]),
    (IDLE, "-N2 -n20 -w gpu04", [(2, 4, 400), (3, 16, 1600)]),
    (IDLE, "-N2 -n6 -x gpu01", [(1, 5, 500), (2, 1, 100)]),
    (TWO_FREE_ON_01_02, "-N2 -n6 -w gpu02", [(1, 2, 200), (2, 4, 400)]),
    (TWO_FREE_ON_01_02, "-N2 -n20 -w gpu01", "PENDING"),
    (TWO_FREE_ON_01_02, "-N3 -n6 -w gpu04", [(1, 1, 100), (2, 1, 100), (3, 4, 400)]),
    # walking on from a required node the last node is taken though it cannot hold the rest:
    # the choice fails, gpu02 (2 free) is dropped and the retry picks gpu04's run
    (["-w gpu02 -c14", "-w gpu04 -c8"], "-N2 -n20 -w gpu01", [(0, 16, 1600), (3, 4, 400)]),
    (["-w gpu02 -c14", "-w gpu04 -c8"], "-N2 -n20", [(0, 16, 1600), (2, 4, 400)]),
    # the retry's count of a node's CPUs is in whole tasks only where memory is per CPU: with
    # 2, 6, 3 and 16 free, gpu03 counts 3 with --mem and is kept while gpu01 goes, so gpu02
    # takes 3 tasks; per CPU it counts 2 and both go at once, gpu02 then taking 2 (finding 56)
    (["-w gpu01 -c14", "-w gpu02 -c10", "-w gpu03 -c13"], "-N2 -n10 -c2 --mem=100", [(1, 6, 100), (3, 14, 100)]),
    (["-w gpu01 -c14", "-w gpu02 -c10", "-w gpu03 -c13"], "-N2 -n10 -c2 --mem-per-cpu=100",
     [(1, 4, 400), (3, 16, 1600)]),
]


SIX_GPUS_ON_01 = ["-w gpu01 -c1 --gres=gpu:6"]
SEVEN_GPUS_ON_01_02 = ["-w gpu01 -c1 --gres=gpu:7", "-w gpu02 -c1 --gres=gpu:7"]

#: --gpus-per-task: (holders, the job, its pods as (node index, CPUs, MB, GPUs) or its state)
GPU_CASES = [
    (IDLE, "-N2 -n6 --gpus-per-task=1", [(0, 5, 500, 5), (1, 1, 100, 1)]),
    (IDLE, "-N2 -n10 --gpus-per-task=1", [(0, 8, 800, 8), (1, 2, 200, 2)]),
    (IDLE, "-N2 -n6 --gpus-per-task=2", [(0, 4, 400, 8), (1, 2, 200, 4)]),
    (IDLE, "-N3 -n5 --gpus-per-task=1 -c2", [(0, 6, 600, 3), (1, 2, 200, 1), (2, 2, 200, 1)]),
    (IDLE, "-N2 -n20 --gpus-per-task=1", "REJECTED"),
    (SIX_GPUS_ON_01, "-N2 -n6 --gpus-per-task=1", [(1, 5, 500, 5), (2, 1, 100, 1)]),
    (SIX_GPUS_ON_01, "-N2 -n12 --gpus-per-task=1", [(1, 8, 800, 8), (2, 4, 400, 4)]),
    (SEVEN_GPUS_ON_01_02, "-N2 -n6 --gpus-per-task=1", [(2, 5, 500, 5), (3, 1, 100, 1)]),
    (SEVEN_GPUS_ON_01_02, "-N2 -n3 --gpus-per-task=1", [(2, 2, 200, 2), (3, 1, 100, 1)]),
    # the retry drops the node with the fewest free CPUs plus GPUs, its CPUs not capped by its
    # GPUs: gpu01 (2 + 8) goes, gpu02 (15 + 3) stays (finding 56; real: three idle 16-core
    # nodes, gpu04 here is full)
    (["-w gpu01 -c14", "-w gpu02 -c1 --gres=gpu:5", "-w gpu03 -c1 --gres=gpu:1", "-w gpu04 -c16"],
     "-N2 -n10 --gpus-per-task=1", [(1, 3, 300, 3), (2, 7, 700, 7)]),
]


def _pods(tmp_path: Path, holders: list[str], job: str, gpus: bool = False):
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF), holders + [job], 2.0, 2.0 * len(holders) + 10)
    last = engine.jobs[len(holders) + 1]
    if last.state != "RUNNING":
        return last.state
    return sorted((node, cpu // 1000, mem, mask.bit_count())[:4 if gpus else 3]
                  for node, mask, cpu, mem in last.placement)


def _ids(cases) -> list[str]:
    return [f"{'+'.join(h) or 'idle'}:{j}" for h, j, _ in cases]


@pytest.mark.parametrize("holders,job,expected", CASES, ids=_ids(CASES))
def test_tasks_are_split_as_a_real_slurm_split_them(tmp_path: Path, holders, job, expected) -> None:
    assert _pods(tmp_path, holders, job) == expected


@pytest.mark.parametrize("holders,job,expected", GPU_CASES, ids=_ids(GPU_CASES))
def test_gpus_per_task_follow_the_tasks(tmp_path: Path, holders, job, expected) -> None:
    assert _pods(tmp_path, holders, job, gpus=True) == expected


def test_the_totals_of_gpus_per_task_count_tasks(tmp_path: Path) -> None:
    engine, pol = run_spaced(slurm_pool(tmp_path, CONF), ["-N2 -n5 --gpus-per-task=1 --mem-per-gpu=300"], 2.0, 10)
    job = engine.jobs[1]
    assert [(n, mask.bit_count(), mem) for n, mask, _cpu, mem in job.placement] == [(0, 4, 1200), (1, 1, 300)]
    (ps,) = job.wl.pod_sets
    assert (ps.total_gpus, job.total_gpus, job.wl.total_gpus, ps.memory_total, ps.cpus_total) == (5, 5, 5, 1500, 5)
    req = pol.req(job)
    assert (req.cpus, req.gpus, req.mem) == (5, 5, 1500)


def test_per_node_gpus_stay_per_node_and_the_totals_count_tasks(tmp_path: Path) -> None:
    # real: -N2 -n5 --gpus=2 ran as 4 + 1 CPUs, one GPU on each node; ReqTRES cpu=5
    engine, pol = run_spaced(slurm_pool(tmp_path, CONF), ["-N2 -n5 --gpus=2 --mem-per-cpu=100"], 2.0, 10)
    job = engine.jobs[1]
    assert [(n, mask.bit_count(), cpu // 1000, mem) for n, mask, cpu, mem in job.placement] == [
        (0, 1, 4, 400), (1, 1, 1, 100)]
    (ps,) = job.wl.pod_sets
    assert (ps.cpus_total, ps.memory_total, ps.split) == (5, 500, True)


def test_other_policies_see_the_even_share() -> None:
    (ps,) = workload("j", "-N2 -n5 --mem-per-cpu=100", 0.0, 1).pod_sets
    assert (ps.count, ps.cpu_m, ps.memory_mib, ps.split_tasks, ps.split) == (2, 3000, 300, 5, False)
    assert (ps.cpus_total, ps.memory_total) == (6, 600)


@pytest.mark.parametrize("opts", ["-N2 -n6 --ntasks-per-node=3", "-N2 -n2", "-N1 -n4", "-N2 -n6 --exclusive",
                                  "-N2 -n6 --cpus-per-gpu=2 --gres=gpu:1"])
def test_shapes_left_even(opts: str) -> None:
    assert workload("j", opts, 0.0, 1).pod_sets[0].split_tasks == 0


#: an LLN partition: the nodes with the most free CPUs first (16 on gpu03, 12, 8, 1 on gpu04)
LLN_HOLDERS = ["-w gpu01 -c8", "-w gpu02 -c4", "-w gpu04 -c15"]
LLN_CASES = [
    (IDLE, "-N2 -n6", [(0, 5, 500), (1, 1, 100)]),
    (LLN_HOLDERS, "-N2 -n6", [(1, 1, 100), (2, 5, 500)]),
    (LLN_HOLDERS, "-N2 -n20", [(1, 4, 400), (2, 16, 1600)]),
    (LLN_HOLDERS, "-N3 -n30", [(0, 2, 200), (1, 12, 1200), (2, 16, 1600)]),
    (LLN_HOLDERS, "-N2 -n13", [(1, 1, 100), (2, 12, 1200)]),
    (LLN_HOLDERS, "-N3 -n6", [(0, 1, 100), (1, 1, 100), (2, 4, 400)]),
]


@pytest.mark.parametrize("holders,job,expected", LLN_CASES, ids=_ids(LLN_CASES))
def test_least_loaded_nodes_take_the_tasks_first(tmp_path: Path, holders, job, expected) -> None:
    conf = CONF.replace("MaxTime=60\n", "MaxTime=60 LLN=YES\n")
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), holders + [job], 2.0, 2.0 * len(holders) + 10)
    last = engine.jobs[len(holders) + 1]
    assert sorted((n, cpu // 1000, mem) for n, _m, cpu, mem in last.placement) == expected


def test_a_node_range_of_memory_under_max_mem_per_cpu_stays_even(tmp_path: Path) -> None:
    # one task's CPU cannot hold --mem=10000 at MaxMemPerCPU=4000: the even share (3 CPUs each)
    conf = CONF.replace("DefMemPerCPU=100\n", "DefMemPerCPU=100\nMaxMemPerCPU=4000\n")
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), ["-N2 -n6 --mem=10000"], 2.0, 10)
    assert sorted((n, cpu // 1000, mem) for n, _m, cpu, mem in engine.jobs[1].placement) == [
        (0, 3, 10000), (1, 3, 10000)]


def test_busy_nodes_first_for_a_later_start(tmp_path: Path) -> None:
    # bf_busy_nodes: a later start of a split job is planned busy nodes first, with the split
    # (an even share of 12 CPUs per node would fit nowhere: no plan, and the short job below
    # would be backfilled onto gpu01 ahead of it)
    conf = CONF.replace("bf_interval=30", "bf_interval=30,bf_busy_nodes")
    jobs = ["-w gpu01 -c12 -t 2", "-w gpu02 -c8", "-w gpu03 -c8", "-w gpu04 -c8", "-N2 -n24", "-w gpu01 -c4 -t 30"]
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), jobs, 2.0, 400, runtimes=[100, 3000, 3000, 3000, 3000, 1800])
    big, short = engine.jobs[5], engine.jobs[6]
    assert big.state == "RUNNING" and short.state == "PENDING"
    assert sorted((n, cpu // 1000) for n, _m, cpu, _mem in big.placement) == [(0, 16), (1, 8)]


def test_nodes_after_the_nodelist_go_by_weight(tmp_path: Path) -> None:
    # gpu02 weighs more: after the required gpu01 the next node is gpu03, as for an even job
    conf = CONF.replace("NodeName=gpu[01-04] CPUs=16 RealMemory=64000 Gres=gpu:8\n",
                        "NodeName=gpu01 CPUs=16 RealMemory=64000 Gres=gpu:8\n"
                        "NodeName=gpu02 CPUs=16 RealMemory=64000 Gres=gpu:8 Weight=100\n"
                        "NodeName=gpu[03-04] CPUs=16 RealMemory=64000 Gres=gpu:8\n")
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), ["-N2 -n6 -w gpu01", "-N2 -n4 --ntasks-per-node=2 -w gpu01"],
                           2.0, 10)
    assert sorted((n, cpu // 1000) for n, _m, cpu, _mem in engine.jobs[1].placement) == [(0, 5), (2, 1)]
    assert sorted(n for n, *_ in engine.jobs[2].placement) == [0, 2]


def test_no_gpus_per_task_passes_the_engines_checks(tmp_path: Path) -> None:
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)
    from gpupool.engine.core import Engine
    from gpupool.engine.policy_api import make_policy

    pool = slurm_pool(tmp_path, CONF)
    wls = [workload("j0", "-N2 -n6 --gpus-per-task=0", 0.0, 1), workload("j1", "-N2 -n6 --gpus-per-task=2", 0.0, 2)]
    engine = Engine(pool, wls, make_policy("slurm", pool), until=10, check=True)
    engine.run()
    assert [sorted(m.bit_count() for _n, m, _c, _mem in engine.jobs[k].placement) for k in (1, 2)] == [[0, 0], [4, 8]]


def test_a_pod_of_part_cpus_still_counts_a_node_it_fits() -> None:
    # a node that fits a 1.5-CPU pod counts a whole pod's CPUs in the walk (found by review:
    # counts rounded down to 1 left two fitting nodes unused)
    from gpupool.engine.nodes import NodeTable
    from gpupool.model.pool import Node, Pool
    from gpupool.model.workload import PodSet
    from gpupool.policy.slurm.select import Free, _multi_node

    pool = Pool(name="p", nodes={f"n{i}": Node(name=f"n{i}", cpus=2, memory_mib=1024) for i in range(4)})
    free = Free(NodeTable(pool))
    free.cpu[:] = [1500, 1500, 0, 1500]  # three fit, two needed: the walk decides
    got = _multi_node(PodSet(count=2, cpu_m=1500, one_per_node=True), [0, 1, 2, 3], free, [1] * 4)
    assert [p[0] for p in got] == [0, 1]


#: even jobs with --nodelist: on from the required nodes as _eval_nodes walks (a real 22.05.8)
NODELIST_CASES = [
    (IDLE, "-N2 -w gpu02", [1, 2]),
    (IDLE, "-N3 -w gpu02", [1, 2, 3]),
    (IDLE, "-N2 -w gpu03 -c2", [2, 3]),
    (TWO_FREE_ON_01_02, "-N3 -w gpu04", [1, 2, 3]),
    (TWO_FREE_ON_01_02, "-N2 -w gpu01", [0, 1]),
    # the run holding the required node competes with the others: gpu04 (4 free) fits tighter
    # than gpu02 (14 free) beside gpu01
    (["-w gpu02 -c2", "-w gpu03 -c16", "-w gpu04 -c12"], "-N2 -w gpu01", [0, 3]),
    (["-w gpu02 -c2", "-w gpu03 -c16", "-w gpu04 -c12"], "-N2 -c2 -w gpu01", [0, 3]),
    (["-w gpu02 -c2", "-w gpu03 -c16", "-w gpu04 -c12"], "-N2 -n6 -w gpu01", [0, 3]),
]


@pytest.mark.parametrize("holders,job,expected", NODELIST_CASES, ids=_ids(NODELIST_CASES))
def test_even_jobs_walk_on_from_their_nodelist(tmp_path: Path, holders, job, expected) -> None:
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF), holders + [job], 2.0, 2.0 * len(holders) + 10)
    assert sorted(n for n, *_ in engine.jobs[len(holders) + 1].placement) == expected
