"""``--nodes=A-B --gpus=X`` beside a ``--nodelist`` (docs/differential.md, finding 96): the
listed nodes are taken first, then ``_eval_nodes``' runs, a run marked by a required node
walked from it upwards, then downwards (``gpu_walk.walk``, ``eval_nodes.consec_runs``).

Every expectation is what a real 22.05.8 did on four 16-core 8-GPU nodes (CR_Core_Memory,
DefMemPerCPU=100; probe p158), each job alone behind its holders.
"""
from __future__ import annotations

import pytest

from gpupool.errors import InputError
from gpupool.policy.slurm.eval_nodes import consec_runs

from tests.unit.sbatch_plans import run_spaced, slurm_pool, workload
from tests.unit.test_slurm_split_tasks import CONF

SIX_HELD_ON_01 = ["-w gpu01 --gres=gpu:6"]
FIVE_HELD_ON_02 = ["-w gpu02 --gres=gpu:5"]

#: (holders, the job, its (node index, CPUs, MB, GPUs) per node, or its state and reason)
CASES = [
    ([], "-N1-3 --gpus=8 -w gpu02", [(1, 1, 100, 8)]),
    ([], "-N1-3 --gpus=12 -w gpu03", [(2, 1, 100, 8), (3, 1, 100, 4)]),  # upwards from gpu03
    ([], "-N1-3 --gpus=12 -w gpu01", [(0, 1, 100, 8), (1, 1, 100, 4)]),
    ([], "-N2-3 --gpus=8 -w gpu01,gpu02", [(0, 1, 100, 7), (1, 1, 100, 1)]),
    ([], "-N2-3 --gpus=8 -w gpu02,gpu04", [(1, 1, 100, 7), (3, 1, 100, 1)]),
    ([], "-N1-3 --gpus=2 -w gpu01,gpu02", [(0, 1, 100, 1), (1, 1, 100, 1)]),
    ([], "-N1-2 --gpus=12 -w gpu04", [(2, 1, 100, 8), (3, 1, 100, 4)]),  # downwards: nothing above
    ([], "-N1-4 --gpus=20 -w gpu02", [(1, 1, 100, 8), (2, 1, 100, 8), (3, 1, 100, 4)]),
    ([], "-N1-3 --gpus=4 -w gpu03", [(2, 1, 100, 4)]),
    (SIX_HELD_ON_01, "-N1-3 --gpus=8 -w gpu01", [(0, 1, 100, 2), (1, 1, 100, 6)]),
    # gpu02 offering three GPUs weighs more than the idle nodes: it ends gpu01's run and its
    # own mark is dropped, so the runs gpu01 and gpu03-04 are compared as without a list
    (FIVE_HELD_ON_02, "-N1-3 --gpus=8 -w gpu02", [(0, 1, 100, 7), (1, 1, 100, 1)]),
    (FIVE_HELD_ON_02, "-N1-3 --gpus=12 -w gpu02", [(1, 1, 100, 3), (2, 1, 100, 8), (3, 1, 100, 1)]),
    (SIX_HELD_ON_01, "-N1-3 --gpus=8 -w gpu03", [(2, 1, 100, 8)]),
    (SIX_HELD_ON_01 + FIVE_HELD_ON_02, "-N2-3 --gpus=6 -w gpu01,gpu02",
     [(0, 1, 100, 2), (1, 1, 100, 3), (2, 1, 100, 1)]),
    (SIX_HELD_ON_01, "-N1-2 --gpus=16 -w gpu01", ("PENDING", "Resources")),
    ([], "-N1-3 --gpus=12 -w gpu02 --mem=1000", [(1, 1, 1000, 8), (2, 1, 1000, 4)]),
]


def per_node(job) -> list[tuple[int, int, int, int]]:
    """(node index, CPUs, MB, GPUs) per node of a placed job, in index order (its pods summed),
    as the probes read them from ``scontrol -d show job``."""
    got: dict[int, list[int]] = {}
    for node, mask, cpu_m, mem in job.placement:
        row = got.setdefault(node, [node, 0, 0, 0])
        row[1] += cpu_m // 1000
        row[2] += mem
        row[3] += mask.bit_count()
    return [tuple(got[n]) for n in sorted(got)]


@pytest.mark.parametrize("holders,opts,want", CASES, ids=[f"{len(c[0])}-{c[1]}" for c in CASES])
def test_the_walk_takes_what_the_real_system_took(tmp_path, holders, opts, want):
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF), holders + [opts], 2.0, 2.0 * len(holders) + 6.0)
    job = engine.jobs[len(holders) + 1]
    if isinstance(want, tuple):
        assert (job.state, job.reason) == want
        return
    assert job.state == "RUNNING"
    assert per_node(job) == want


def test_fewer_gpus_than_the_listed_nodes_is_sbatchs_refusal():
    # (a real 22.05.8: "--gpus < -N", "Invalid generic resource (gres) specification")
    with pytest.raises(InputError, match="fewer GPUs than the 2 nodes"):
        workload("j", "-t 5 -N1-3 --gpus=1 -w gpu01,gpu02", 0.0, 1)


def test_a_list_beyond_the_largest_count_is_sbatchs_refusal():
    with pytest.raises(InputError, match=r"invalid number of nodes \(-N 3-2\)"):
        workload("j", "-t 5 -N1-2 --gpus=8 -w gpu[01-03]", 0.0, 1)


@pytest.mark.parametrize("usable,weight,required,want", [
    # one weight: a required node marks its run and counts in it as nothing
    ([0, 1, 2, 3], [1, 1, 1, 1], {1}, [([0, 2, 3], 1, 1)]),
    # a required node of another weight ends the run; the next one's weight is 0 until set,
    # so the mark goes with the next node (the C record is re-used)
    ([0, 1, 2, 3], [5, 9, 5, 5], {1}, [([0], None, 5), ([2, 3], None, 5)]),
    # a required node first: no weight to differ from, its mark stays
    ([0, 1, 2, 3], [9, 5, 5, 5], {0}, [([1, 2, 3], 0, 5)]),
    # a node that is not usable ends a run; a run of required nodes alone is dropped
    ([0, 2, 3], [1, 1, 1, 1], {0}, [([2, 3], None, 1)]),
    ([0, 1, 3], [1, 1, 1, 1], {3}, [([0, 1], None, 1)]),
    # two required nodes at the start of a run: the first keeps the mark
    ([0, 1, 2], [1, 1, 1], {0, 1}, [([2], 0, 1)]),
    # Weight=0 nodes after a break: the fresh record's weight matches no node's
    ([0, 1, 2, 3, 4, 5], [0, 0, 1, 0, 0, 0], {2}, [([0, 1], None, 0), ([3, 4, 5], None, 0)]),
])
def test_runs_are_built_as_the_source_reads(usable, weight, required, want):
    assert consec_runs(usable, weight, required) == want


def test_a_walked_range_beside_a_list_records_the_hosts_cpus(tmp_path):
    """Pending, ``-N1-3 --gpus=8 -w gpu01,gpu02`` records what ``-N1-3 -w gpu01,gpu02`` did on a
    real 22.05.8 (probe p157): cpu=2,mem=200M,node=2 (``_job_create`` raises min_cpus to the
    hosts); with ``--mem-per-cpu=300`` mem=600M (from the source, found by a review)."""
    from tests.unit.test_slurm_range_request import HOLD_ALL, pending_tres

    for opts, want in (("-N1-3 --gpus=8 -w gpu01,gpu02", (2, 200, 2)),
                       ("-N1-3 --gpus=8 -w gpu01,gpu02 --mem-per-cpu=300", (2, 600, 2))):
        (root := tmp_path / str(want[1])).mkdir()
        assert pending_tres(root, CONF, HOLD_ALL, opts) == want, opts


def test_cpus_per_gpu_beside_a_list_is_walked_where_no_gpu_has_a_type_or_cores(tmp_path):
    """A real 22.05.8 ran ``-N1-3 --gpus=12 --cpus-per-gpu=2 -w gpu03`` as 8 + 4 GPUs on gpu03-04
    with 16 + 8 CPUs (probe p160, the reader refused it before). On nodes whose GPUs have a
    type or ``Cores=`` cons_tres caps each node's GPUs by the CPUs it gives there, in index
    order (source, not probed): the Slurm policy refuses it in gpupool's words there."""
    from gpupool.policy.slurm.job_defaults import MSG_LISTED_CPG

    (ps,) = workload("j", "-t 5 -N1-3 --gpus=12 --cpus-per-gpu=2 -w gpu04", 0.0, 1).pod_sets
    assert ps.walk_gpus and ps.walk_nodes == (1, 3)
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF), ["-N1-3 --gpus=12 --cpus-per-gpu=2 -w gpu03"], 1.0, 5)
    assert per_node(engine.jobs[1]) == [(2, 16, 1600, 8), (3, 8, 800, 4)]
    (tmp_path / "typed").mkdir()
    typed = slurm_pool(tmp_path / "typed", CONF.replace("Gres=gpu:8", "Gres=gpu:a100:8"))
    for opts in ("-N1-3 --gpus=12 --cpus-per-gpu=2 -w gpu03", "--gpus=12 --cpus-per-gpu=2 -w gpu03"):
        engine, _ = run_spaced(typed, [opts], 1.0, 5)
        assert (engine.jobs[1].state, engine.jobs[1].reason) == ("REJECTED", MSG_LISTED_CPG), opts
    engine, _ = run_spaced(typed, ["-N1-3 --gpus=12 --cpus-per-gpu=2"], 1.0, 5)  # no list: walked
    assert per_node(engine.jobs[1]) == [(0, 16, 1600, 8), (1, 8, 800, 4)]
