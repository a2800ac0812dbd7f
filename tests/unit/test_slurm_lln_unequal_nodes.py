"""Least-loaded partitions over nodes of unequal CPU counts (docs/differential.md, finding 108):
22.05.8's ``_eval_nodes_lln`` takes, per weight, the node with the largest share of its CPUs
free, not the most free CPUs, and its search stops early at a node with as many free CPUs as
the node taken before it (``eval_nodes.least_loaded_order``).

Every expectation in the tables is what a real 22.05.8 did (probes p172, p172b and p172c, 2026-12-07)
on probe p162's pool with gpu02 and gpu04 at 32 CPUs (gpu01 and gpu03 at 16; CR_Core_Memory,
DefMemPerCPU=100), partition l over gpu01-04 with LLN=YES, l2 the same at MaxNodes=2; each job
behind its holders, submitted 2 s apart. At bd0ccd6, which ordered by free CPUs, 4 of p172's 11
answers agreed; a read-only review (156) found p172c's cases in the source, of which 3 of 7
agreed at 46c857a.
"""
from __future__ import annotations

import pytest

from gpupool.policy.slurm.eval_nodes import least_loaded_order, node_order
from tests.unit.sbatch_plans import run_spaced, slurm_pool
from tests.unit.test_slurm_contiguous import CONF, NODE, _outcome

BIG = NODE.replace("CPUs=16", "CPUs=32").replace("CoresPerSocket=16", "CoresPerSocket=32")
CONF_HET = (CONF.format(w="").replace(f"NodeName=gpu02 {NODE} \n", f"NodeName=gpu02 {BIG}\n")
            .replace(f"NodeName=gpu[03-04] {NODE}\n", f"NodeName=gpu03 {NODE}\nNodeName=gpu04 {BIG}\n")
            + "PartitionName=l Nodes=gpu[01-04] MaxTime=60 LLN=YES State=UP\n"
            + "PartitionName=l2 Nodes=gpu[01-04] MaxTime=60 MaxNodes=2 LLN=YES State=UP\n")
#: free CPUs 8 of 16, 12 of 32, 4 of 16, 6 of 32: gpu01 the least loaded, gpu02 the most free
A = ["-w gpu01 -c8", "-w gpu02 -c20", "-w gpu03 -c12", "-w gpu04 -c26"]
#: 8 of 16, 8 of 32, 8 of 16, none: after gpu01 the search stops at gpu02 (8 free, as gpu01 had)
B = ["-w gpu01 -c8", "-w gpu02 -c24", "-w gpu03 -c8", "-w gpu04 -c32"]
C = ["-w gpu01 -c8", "-w gpu02 -c23", "-w gpu03 -c8", "-w gpu04 -c24"]
D = ["-w gpu01 -c8", "-w gpu02 -c24", "-w gpu03 -c10", "-w gpu04 -c32"]
E = ["-w gpu01 -c12", "-w gpu02 -c28", "-w gpu03 -c13", "-w gpu04 -c25"]

CASES = [
    (A, "-p l -c1", [(0, 1, 100, 0)]),
    (A, "-p l -n21", [(0, 8, 800, 0), (1, 12, 1200, 0), (2, 1, 100, 0)]),  # free CPUs first: gpu04
    (A, "-p l -N3", [(0, 1, 100, 0), (1, 1, 100, 0), (2, 1, 100, 0)]),
    (A, "-p l --gres=gpu:1", [(0, 1, 100, 1)]),
    (A, "-p l -c4", [(0, 4, 400, 0)]),
    (B, "-p l -N2", [(0, 1, 100, 0), (1, 1, 100, 0)]),
    (B, "-p l -n12", [(0, 8, 800, 0), (1, 4, 400, 0)]),  # gpu03 (8 of 16) would be the larger share
    (C, "-p l -n17", [(0, 8, 800, 0), (1, 1, 100, 0), (2, 8, 800, 0)]),  # gpu01, gpu03, then gpu02
    (D, "-p l -n14", [(0, 8, 800, 0), (1, 6, 600, 0)]),
    ([], "-p l -N3", [(0, 1, 100, 0), (1, 1, 100, 0), (2, 1, 100, 0)]),  # all idle: by index
    (A, "-p p -c1", [(2, 1, 100, 0)]),  # (no LLN: best fit)
    (E, "-p l2 -n10", ("PENDING", "Resources")),
    (E, "-p l2 -n8", [(0, 4, 400, 0), (1, 4, 400, 0)]),
    (E, "-p l -n10", [(0, 4, 400, 0), (1, 4, 400, 0), (3, 2, 200, 0)]),
]


@pytest.mark.parametrize("holders,opts,want", CASES, ids=[f"{c[1]} behind {c[0]}" for c in CASES])
def test_least_loaded_nodes_of_unequal_sizes_as_on_a_real_slurm(tmp_path, holders, opts, want):
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF_HET), holders + [opts], 2.0, 2.0 * len(holders) + 6.0)
    assert _outcome(engine.jobs[len(holders) + 1]) == want


#: review 156's cases, then probed (p172c): 16 of 16, 16 of 32, 12 of 16 and 4 of 32 CPUs free
H = ["-w gpu02 -c16", "-w gpu03 -c4", "-w gpu04 -c28"]
REVIEWED = [
    # a listed node is taken first and left out of the search for the rest: after gpu01 the
    # largest share is gpu03's (gpupool took gpu02, whose 16 free matched gpu01's)
    (H, "-p l --gpus=12 -w gpu01", [(0, 1, 100, 8), (2, 1, 100, 4)]),
    (H, "-p l -n2 --gpus=12 -w gpu01", [(0, 1, 100, 8), (2, 1, 100, 4)]),
    (H, "-p l -n20 --gres=gpu:1 -w gpu01", [(0, 16, 1600, 1), (2, 4, 400, 1)]),
    # an exclusive node range in an LLN partition: idle nodes by index (p: the run that holds it)
    (["-w gpu02 -c1"], "-p l -N1-2 -n20 --exclusive", [(0, 16, 1600, 8), (2, 16, 1600, 8)]),
    (["-w gpu02 -c1"], "-p p -N1-2 -n20 --exclusive", [(2, 16, 1600, 8), (3, 32, 3200, 8)]),
    # exclusive task pods beside a list: the listed node, then the first idle one
    (["-w gpu01 -c1"], "-p l -n40 --exclusive -w gpu04", [(1, 32, 3200, 8), (3, 32, 3200, 8)]),
    (["-w gpu01 -c1"], "-p l -n40 --exclusive", [(1, 32, 3200, 8), (2, 16, 1600, 8)]),
]


@pytest.mark.parametrize("holders,opts,want", REVIEWED, ids=[f"{c[1]} behind {c[0]}" for c in REVIEWED])
def test_the_reviews_cases_as_on_a_real_slurm(tmp_path, holders, opts, want):
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF_HET), holders + [opts], 2.0, 2.0 * len(holders) + 6.0)
    assert _outcome(engine.jobs[len(holders) + 1]) == want


def test_equal_sizes_order_by_free_cpus_then_index():
    weight = [1, 1, 1, 1]
    assert least_loaded_order([0, 1, 2, 3], weight, [4, 8, 8, 2], [16, 16, 16, 16]) == [1, 2, 0, 3]
    assert least_loaded_order([3, 2, 1, 0], weight, [4, 8, 8, 2], [32, 32, 32, 32]) == [1, 2, 0, 3]


def test_the_share_of_cpus_free_decides_and_the_search_stops_at_an_equal_count():
    total = [16, 32, 16, 32]
    weight = [1, 1, 1, 1]
    assert least_loaded_order([0, 1, 2, 3], weight, [8, 12, 4, 6], total) == [0, 1, 2, 3]
    # after gpu01 (8 free) the search stops at gpu02 (8 free) though gpu03 has the larger share
    assert least_loaded_order([0, 1, 2], weight, [8, 8, 8, 0], total) == [0, 1, 2]
    # the shortcut counts free CPUs, so a node not taken first breaks no tie
    assert least_loaded_order([1, 2, 3], weight, [8, 8, 8, 4], total) == [2, 1, 3]


def test_each_weight_is_searched_afresh():
    """Lower weights first; the count the shortcut compares with starts over in each weight
    (``_eval_nodes_lln`` sets it per weight; from the source)."""
    total = [16, 32, 16, 32]
    weight = [5, 1, 1, 5]
    # weight 1: gpu03 (8 of 16) then gpu02; weight 5: gpu01 (8 of 16) first, then gpu04,
    # although gpu04 has as many free CPUs as gpu02, taken last
    assert least_loaded_order([0, 1, 2, 3], weight, [8, 8, 8, 8], total) == [2, 1, 0, 3]


def test_the_order_is_made_over_the_nodes_given():
    """The shortcut depends on which nodes are searched, so an order of fewer nodes (a second
    try's) is made afresh, not cut from a longer one (``_eval_nodes_lln`` is called again on
    the smaller node map; from the source)."""
    total = [16, 32, 32, 16]
    cpu = [8, 8, 10, 4]
    arrange = node_order([1, 1, 1, 1], None, cpu, total)
    assert arrange([0, 1, 2, 3]) == [0, 1, 2, 3]  # gpu02 at 8 free stops the search after gpu01
    assert arrange([1, 2, 3]) == [2, 1, 3]  # without gpu01, gpu03's larger share comes first


def test_busy_nodes_come_first_within_a_weight():
    arrange = node_order([1, 1, 2, 1], 0b0110, None, [16, 16, 16, 16])
    assert arrange([3, 2, 1, 0]) == [1, 0, 3, 2]
