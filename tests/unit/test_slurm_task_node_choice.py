"""Which nodes take a job's tasks when free CPUs and whole tasks differ (docs/differential.md,
findings 103 and 104): ``_eval_nodes`` sizes runs and picks the node that takes all the tasks
by free CPUs, rounded down to whole tasks where memory is per CPU and for GPU jobs.

Every expectation is what a real 22.05.8 did (probes p164 and p165, 2026-12-06) on the pool
of ``test_slurm_contiguous`` (four 16-core 8-GPU 64000 MB nodes, CR_Core_Memory,
DefMemPerCPU=100), each job behind its holders, submitted 2 s apart.
"""
from __future__ import annotations

import pytest

from tests.unit.sbatch_plans import run_spaced, slurm_pool
from tests.unit.test_slurm_contiguous import CONF, EX, _outcome

# --- probe p164 (2026-12-06, the same pool): which node takes all of ``-n T -c C`` -------------
# Before (41afe7a) 7 of 9 agreed: gpupool compared free whole tasks where memory is per node.

FEWEST_CPUS = [
    (["-w gpu02 -c1"], "-n4 -c3 --mem=100", [(1, 12, 100, 0)]),
    (["-w gpu02 -c1"], "-n4 -c3", [(0, 12, 1200, 0)]),  # (DefMemPerCPU: whole tasks tie, lowest index)
    (["-w gpu02 -c1"], "-n4 -c3 --mem-per-cpu=100", [(0, 12, 1200, 0)]),
    (["-w gpu01 -c1", "-w gpu02 -c2"], "-n2 -c7 --mem=100", [(1, 14, 100, 0)]),
    (["-w gpu01 -c1", "-w gpu02 -c2"], "-n2 -c7", [(0, 14, 1400, 0)]),
    (["-w gpu01 -c1", "-w gpu02 -c2"], "-n2 -c7 --mem-per-cpu=100", [(0, 14, 1400, 0)]),
    (["-w gpu02 -c1"], "-n1 -c3 --mem=100", [(1, 3, 100, 0)]),
    (["-w gpu01 -c1", "-w gpu02 -c2"], "-n2 -c7 --mem=100 --gres=gpu:1 -N1", [(0, 14, 100, 1)]),
    (["-w gpu01 -c1", "-w gpu02 -c2"], "-N2 -n3 -c5 --mem=100", [(0, 10, 100, 0), (1, 5, 100, 0)]),
]


@pytest.mark.parametrize("holders,opts,want", FEWEST_CPUS, ids=[f"{c[1]} behind {c[0]}" for c in FEWEST_CPUS])
def test_the_node_taking_all_tasks_has_the_fewest_free_cpus(tmp_path, holders, opts, want):
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF.format(w="")), holders + [opts], 2.0, 2.0 * len(holders) + 6.0)
    assert _outcome(engine.jobs[len(holders) + 1]) == want


# --- probe p165 (2026-12-06, the same pool): whole tasks for one node, runs sized in CPUs --------
# Before (41afe7a) 3 of 10 agreed.

ONE_NODE_AND_RUNS = [
    (["-w gpu02 -c1"], "-c3", [(0, 3, 300, 0)]),  # 16 and 15 free: 15 each in whole tasks
    (["-w gpu02 -c1"], "-c3 --mem=100", [(1, 3, 100, 0)]),  # memory per node: raw CPUs
    (["-w gpu02 -c1"], "-c3 --mem-per-cpu=100", [(0, 3, 300, 0)]),
    (["-w gpu02 -c1"], "-N1 -c3", [(0, 3, 300, 0)]),
    (["-w gpu02 -c1"], "-c3 --gres=gpu:1", [(0, 3, 300, 1)]),
    (["-w gpu02 -c1"], "-c3 --gres=gpu:1 --mem=100", [(0, 3, 100, 1)]),  # a GPU job: whole tasks
    # runs sized in CPUs: gpu03 (13 free) is tighter than gpu01 (14), both hold 12
    (["-w gpu01 -c2", "-w gpu02 " + EX, "-w gpu03 -c3", "-w gpu04 " + EX], "-n4 -c3 --mem=100", [(2, 12, 100, 0)]),
    (["-w gpu01 -c2", "-w gpu02 " + EX, "-w gpu03 -c3", "-w gpu04 " + EX], "-n4 -c3", [(0, 12, 1200, 0)]),
    (["-w gpu01 -c8", "-w gpu02 -c8", "-w gpu03 " + EX], "-n5 -c3", [(3, 15, 1500, 0)]),
]


@pytest.mark.parametrize("holders,opts,want", ONE_NODE_AND_RUNS, ids=[f"{c[1]} behind {c[0]}" for c in ONE_NODE_AND_RUNS])
def test_whole_tasks_and_runs_in_cpus_as_on_a_real_slurm(tmp_path, holders, opts, want):
    """Not modelled, the tenth answer: ``-n5 -c3 --mem=100`` behind gpu01-02 at 8 free CPUs
    and gpu03 held ran on gpu01-02 with 8 + 6 CPUs (14 for 15 asked); gpupool takes the run
    gpu01-02, 2 + 2 tasks, and a fifth task on gpu04."""
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF.format(w="")), holders + [opts], 2.0, 2.0 * len(holders) + 6.0)
    assert _outcome(engine.jobs[len(holders) + 1]) == want


# --- probe p166 (2026-12-06, the same pool): a run entered for the rest of ``-n T`` --------------
# Before (41afe7a) 4 of 6 agreed: the node after the first was taken in index order.

THE_REST = [
    # gpu01's run is used up with 3 tasks left: the next run gives them to its best fit, gpu04
    (["-w gpu02 " + EX, "-w gpu03 -c8", "-w gpu04 -c12"], "-n19 --mem=100", [(0, 16, 100, 0), (3, 3, 100, 0)]),
    (["-w gpu02 " + EX, "-w gpu03 -c8", "-w gpu04 -c12"], "-n19", [(0, 16, 1600, 0), (3, 3, 300, 0)]),
    (["-w gpu02 " + EX, "-w gpu03 -c8", "-w gpu04 -c12"], "-n22", [(0, 16, 1600, 0), (2, 6, 600, 0)]),
    # within one run the walk goes on in index order: gpu02 (6 free), not gpu03 (4)
    (["-w gpu02 -c10", "-w gpu03 -c12"], "-n19", [(0, 16, 1600, 0), (1, 3, 300, 0)]),
    (["-w gpu02 -c10", "-w gpu03 -c12"], "-n19 --contiguous", [(0, 16, 1600, 0), (1, 3, 300, 0)]),
    (["-w gpu02 -c10", "-w gpu03 -c12"], "-N2 -n19", [(0, 16, 1600, 0), (1, 3, 300, 0)]),
]


@pytest.mark.parametrize("holders,opts,want", THE_REST, ids=[f"{c[1]} behind {c[0]}" for c in THE_REST])
def test_a_run_entered_for_the_rest_gives_it_to_its_best_fit(tmp_path, holders, opts, want):
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF.format(w="")), holders + [opts], 2.0, 2.0 * len(holders) + 6.0)
    assert _outcome(engine.jobs[len(holders) + 1]) == want


# --- found by a fifth read-only review (22.05.8 source, not probed) ----------------------------

@pytest.mark.parametrize("opts", ["-n4 -c3", "-n4 -c3 --mem-per-cpu=100", "-n2 -c4 --gpus-per-task=1"])
def test_runs_in_whole_tasks_are_compared_in_tasks(tmp_path, opts):
    """Where runs are counted in whole tasks (memory per CPU, GPUs) the tighter run that holds
    the job still wins: gpu03 at 12 free CPUs before gpu01 at 16 (``per_task`` only with CPUs)."""
    holders = ["-w gpu02 " + EX, "-w gpu04 " + EX, "-w gpu03 -c4"]
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF.format(w="")), holders + [opts], 2.0, 12.0)
    assert [n for n, *_rest in _outcome(engine.jobs[4])] == [2]


@pytest.mark.parametrize("opts", ["-p q -c3 --gres=gpu:1", "-p q -c3 --mem=100", "-p q -c3"])
def test_one_node_counts_cpus_within_max_cpus_per_node(tmp_path, opts):
    """MaxCPUsPerNode=8 in q: gpu01 (4 of q's 8 left) is tighter than gpu02 (8 left, 10 free)."""
    conf = CONF.format(w="") + "PartitionName=q Nodes=gpu[01-02] MaxCPUsPerNode=8 MaxTime=60 State=UP\n"
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), ["-p q -w gpu01 -c4", "-p p -w gpu02 -c6", opts], 2.0, 10.0)
    assert [n for n, *_rest in _outcome(engine.jobs[3])] == [0]
