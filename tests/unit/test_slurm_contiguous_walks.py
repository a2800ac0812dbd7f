"""``--contiguous`` beside the walks for GPUs, choose_nodes' second chance and the first test of
a start (docs/differential.md, finding 106).

Every expectation in the tables is what a real 22.05.8 did on probe p162's pool: four 16-core
8-GPU 64000 MB nodes gpu01-04 (CR_Core_Memory, DefMemPerCPU=100), partition p over all four
and x over gpu01 and gpu03; each job behind its holders, submitted 2 s apart (probes p167 and
p167b-e, 2026-12-07, 32 answers; one from p163b, 2026-12-06). At 2f672e4 (the commit before)
8 of these 33 answers agreed: ``--gpus=X --contiguous`` was refused (one pod of X GPUs),
``-n T --gres=gpu:G --contiguous`` refused by the reader, and a contiguous job always started
where its run fitted after choose_nodes dropped a node.
"""
from __future__ import annotations

import pytest

from gpupool.formats.sbatch import job_pod_set, parse_sbatch_text
from gpupool.policy.slurm.contiguous_list import REFUSAL, fill_gaps
from tests.unit.sbatch_plans import run_spaced, script, slurm_pool, workload
from tests.unit.test_slurm_contiguous import CONF, EX, NODE, _on, _outcome

ONE8 = (1, 100, 8)
H2 = ["-w gpu02 " + EX]
H24 = ["-w gpu02 " + EX, "-w gpu04 " + EX]
G13 = ["-w gpu01 --gres=gpu:6", "-w gpu03 --gres=gpu:5"]
WAITS = ("PENDING", "Resources")

#: (holders, the job, its (node index, CPUs, MB, GPUs) per node or its state and reason)
WALKS = [
    ([], "--gpus=12 --contiguous", [(0, *ONE8), (1, 1, 100, 4)]),
    (H2, "--gpus=12 --contiguous", [(2, *ONE8), (3, 1, 100, 4)]),
    (H24, "--gpus=12 --contiguous", WAITS),
    (H24, "--gpus=12", [(0, *ONE8), (2, 1, 100, 4)]),  # (without it)
    # one run, weights aside: gpu01-03 as 2 + 8 + 2 (without it gpu02 and gpu04, which offer more)
    (G13, "--gpus=12 --contiguous", [(0, 1, 100, 2), (1, *ONE8), (2, 1, 100, 2)]),
    (G13, "--gpus=12", [(1, *ONE8), (3, 1, 100, 4)]),
    ([], "-p x --gpus=12 --contiguous", ("REJECTED", "Requested node configuration is not available")),
    (H2, "-n4 --gres=gpu:1 --contiguous", [(0, 4, 400, 1)]),
    (H2, "-n20 --gres=gpu:1 --contiguous", [(2, 16, 1600, 1), (3, 4, 400, 1)]),
    (H2, "-n20 --gres=gpu:1", [(2, 16, 1600, 1), (3, 4, 400, 1)]),
    (H24, "-n20 --gres=gpu:1 --contiguous", WAITS),
    (H2, "-n4 --gpus=12 --contiguous", [(2, 3, 300, 8), (3, 1, 100, 4)]),
    (H2, "-N1-3 --gpus=12 --contiguous", [(2, *ONE8), (3, 1, 100, 4)]),
    (H2, "--gpus=12 --exclusive --contiguous", [(2, 16, 1600, 8), (3, 16, 1600, 8)]),
    (G13, "-N1-3 --gpus=12 --contiguous", [(0, 1, 100, 2), (1, *ONE8), (2, 1, 100, 2)]),
    (H2, "--gpus=12 --cpus-per-gpu=2 --contiguous", [(2, 16, 1600, 8), (3, 8, 800, 4)]),
    # the list's gap filled: gpu01-03 required, the GPUs dealt out in index order
    ([], "--gpus=12 --contiguous -w gpu01,gpu03", [(0, *ONE8), (1, 1, 100, 3), (2, 1, 100, 1)]),
    ([], "-n4 --gres=gpu:1 --contiguous -w gpu01,gpu03", [(0, 2, 200, 1), (1, 1, 100, 1), (2, 1, 100, 1)]),
    ([], "--contiguous -w gpu01,gpu03 --gpus=4", [(0, 1, 100, 2), (1, 1, 100, 1), (2, 1, 100, 1)]),  # (p163b)
]


@pytest.mark.parametrize("holders,opts,want", WALKS, ids=[f"{c[1]} behind {c[0]}" for c in WALKS])
def test_contiguous_walks_as_on_a_real_slurm(tmp_path, holders, opts, want):
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF.format(w="")), holders + [opts], 2.0, 2.0 * len(holders) + 6.0)
    assert _outcome(engine.jobs[len(holders) + 1]) == want


#: p167b: gpu04 at Weight=2. A run that holds the job beats the lighter one that does not
#: (``_eval_nodes``: "first continuous set large enough")
GPU04_HEAVIER = [
    (H2 + ["-w gpu01 -c4"], "--gpus=12 --contiguous", [(2, *ONE8), (3, 1, 100, 4)]),
    (H2 + ["-w gpu01 -c4"], "--gpus=12", [(0, *ONE8), (2, 1, 100, 4)]),
    (H2, "--gpus=12 --contiguous", [(2, *ONE8), (3, 1, 100, 4)]),
    (H2 + ["-w gpu01 -c4"], "-n20 --gres=gpu:1 --contiguous", [(2, 16, 1600, 1), (3, 4, 400, 1)]),
    (H2 + ["-w gpu01 -c4"], "-N2 --contiguous", _on(2, 3)),
]


@pytest.mark.parametrize("holders,opts,want", GPU04_HEAVIER, ids=[f"{c[1]} behind {c[0]}" for c in GPU04_HEAVIER])
def test_a_run_holding_the_job_beats_a_lighter_one_as_on_a_real_slurm(tmp_path, holders, opts, want):
    conf = CONF.format(w="").replace(f"NodeName=gpu[03-04] {NODE}\n",
                                     f"NodeName=gpu03 {NODE}\nNodeName=gpu04 {NODE} Weight=2\n")
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), holders + [opts], 2.0, 2.0 * len(holders) + 6.0)
    assert _outcome(engine.jobs[len(holders) + 1]) == want


#: p167c-e: gpu02 at Weight=2, so the run gpu01-02 weighs more than a lone gpu04, which cannot
#: hold the job. choose_nodes then drops gpu04 (fewest free resources) and the job takes
#: gpu01-02, but only where the start's first test, with every core free, passes: gpu03 under
#: an exclusive job is left out of it and gpu04 then has as many resources as the others (the
#: job waits); gpu03 under a 16-CPU job that is not exclusive joins the one run (it starts)
GPU02_HEAVIER = [
    (["-w gpu03 " + EX, "-w gpu04 -c4"], "--gpus=12 --contiguous", WAITS),
    (["-w gpu03 " + EX], "--gpus=12 --contiguous", WAITS),
    (["-w gpu03 " + EX, "-w gpu04 -c4"], "-n20 --gres=gpu:1 --contiguous", WAITS),
    (["-w gpu03 " + EX, "-w gpu04 -c8"], "-N2 --contiguous", WAITS),
    (["-w gpu03 " + EX, "-w gpu04 -c8"], "-n20 --contiguous", WAITS),
    (["-w gpu03 -c16", "-w gpu04 -c8"], "-N2 --contiguous", _on(0, 1)),
    (["-w gpu03 -c16", "-w gpu04 -c8"], "-n20 --contiguous", [(0, 16, 1600, 0), (1, 4, 400, 0)]),
    (["-w gpu03 -c16", "-w gpu04 -c8"], "--gpus=12 --contiguous", [(0, *ONE8), (1, 1, 100, 4)]),
    (["-w gpu03 -c16", "-w gpu04 -c8"], "-n20 --gres=gpu:1 --contiguous", [(0, 16, 1600, 1), (1, 4, 400, 1)]),
]


@pytest.mark.parametrize("holders,opts,want", GPU02_HEAVIER, ids=[f"{c[1]} behind {c[0]}" for c in GPU02_HEAVIER])
def test_the_second_chance_and_the_first_test_as_on_a_real_slurm(tmp_path, holders, opts, want):
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF.format(w="Weight=2")), holders + [opts], 2.0,
                           2.0 * len(holders) + 6.0)
    assert _outcome(engine.jobs[len(holders) + 1]) == want


def test_a_job_whose_first_test_fails_is_planned_now_on_the_will_run_nodes(tmp_path):
    """Backfill's will-run finds gpu01-02 free for ``-n20 --contiguous``; its start fails the
    first test, and the cycle plans it at once on those nodes, as a real 22.05.8's log showed
    ("to start at <now> ... on nodes gpu[01-02]", probe p167d)."""
    holders = ["-w gpu03 " + EX, "-w gpu04 -c8"]
    engine, pol = run_spaced(slurm_pool(tmp_path, CONF.format(w="Weight=2")), holders + ["-n20 --contiguous"], 2.0,
                             40.0, record=True)
    assert engine.jobs[3].state == "PENDING"
    cycle = max(t for t in pol.plan_log if 3 in pol.plan_log[t])
    assert pol.plan_log[cycle][3] == cycle
    assert [nodes for jid, nodes, _b, _e in pol.resv_log[cycle] if jid == 3] == [[0, 1]]


#: p169 (and one of p163b, three of p171): GPUs per job over a fixed count and ``--ntasks-per-node`` take one
#: run too; beside a list with a gap the run is filled (before finding 106: placed as without
#: the option)
FIXED_COUNTS = [
    (H2, "-N2 --gpus=4 --contiguous", [(2, 1, 100, 3), (3, 1, 100, 1)]),
    (H2, "-N2 --gpus=4", [(2, 1, 100, 3), (3, 1, 100, 1)]),
    (H24, "-N2 --gpus=4 --contiguous", WAITS),
    (H2, "-N2 --ntasks-per-node=2 --contiguous", _on(2, 3, each=(2, 200, 0))),
    (H2, "-n4 --ntasks-per-node=2 --contiguous", _on(2, 3, each=(2, 200, 0))),
    (H24, "-N2 --ntasks-per-node=1 --contiguous", WAITS),
    ([], "--contiguous -w gpu01,gpu03 --ntasks-per-node=1", _on(0, 1, 2)),
    (H2, "-N2 -n4 --gpus-per-task=1 --contiguous", [(2, 3, 300, 3), (3, 1, 100, 1)]),
    (H2, "-N2 --gres=gpu:2 --contiguous", _on(2, 3, each=(1, 100, 2))),
    (H2, "-N2 --gpus=3 --contiguous", [(2, 1, 100, 2), (3, 1, 100, 1)]),
    # p171 (review 154, then probed): the run's first nodes have one free GPU each, the walk
    # meets the node count short of the GPUs, and choose_nodes' second try drops them
    (["-w gpu01 --gres=gpu:7", "-w gpu02 --gres=gpu:7"], "-N2 --gpus=4 --contiguous", [(2, 1, 100, 3), (3, 1, 100, 1)]),
    (["-w gpu01 --gres=gpu:7", "-w gpu02 --gres=gpu:7", "-w gpu04 -c16"], "-N2 --gpus=4 --contiguous",
     [(1, 1, 100, 1), (2, 1, 100, 3)]),
    (["-w gpu01 --gres=gpu:7", "-w gpu02 --gres=gpu:7"], "-N2 --gpus=4", [(2, 1, 100, 3), (3, 1, 100, 1)]),
]


@pytest.mark.parametrize("holders,opts,want", FIXED_COUNTS, ids=[f"{c[1]} behind {c[0]}" for c in FIXED_COUNTS])
def test_fixed_counts_of_gpus_and_tasks_per_node_as_on_a_real_slurm(tmp_path, holders, opts, want):
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF.format(w="")), holders + [opts], 2.0, 2.0 * len(holders) + 6.0)
    assert _outcome(engine.jobs[len(holders) + 1]) == want


def test_a_filled_list_raises_the_tasks_per_node_counts():
    """``--ntasks-per-node=K`` beside a filled list: the stored least count and the tasks rise
    with the run (p163b ran three tasks on gpu01-03 for ``--ntasks-per-node=1``); a larger
    ``--ntasks`` stays (not probed)."""
    for opts, count, want in (("--contiguous -w gpu01,gpu03 --ntasks-per-node=1", 3, (3, 3, 1)),
                              ("--contiguous -w gpu01,gpu03 --ntasks-per-node=2", 3, (3, 6, 2)),
                              ("-n16 --contiguous -w gpu01,gpu03 --ntasks-per-node=4", 4, (3, 16, 4))):
        filled, why = fill_gaps(workload("j", opts, 0.0, 1), ORDER, INDEX)
        assert why is None and filled.pod_sets[0].count == count and filled.pod_sets[0].per_node_tasks == want, opts


def test_walks_are_marked_contiguous():
    for opts in ("--gpus=12 --contiguous", "-n4 --gres=gpu:1 --contiguous", "-n4 --gpus=12 --contiguous",
                 "-N1-3 --gpus=12 --contiguous", "--gpus=12 --exclusive --contiguous"):
        (ps,) = workload("j", opts, 0.0, 1).pod_sets
        assert ps.walk_gpus and ps.contiguous, opts
    for opts in ("-N2 --gpus=4 --contiguous", "-N2 --ntasks-per-node=2 --contiguous"):
        (ps,) = workload("j", opts, 0.0, 1).pod_sets
        assert ps.contiguous and not ps.walk_gpus, opts
    # (exclusive task pods too: ``select._exclusive_tasks`` walks one run for them, probe p175)
    assert all(ps.contiguous for ps in workload("j", "--exclusive -n20 --contiguous", 0.0, 1).pod_sets)


ORDER = ("gpu01", "gpu02", "gpu03", "gpu04")
INDEX = {name: i for i, name in enumerate(ORDER)}


def test_a_walked_range_below_the_filled_run_is_refused():
    """``_job_create`` raises the least count to the filled run and refuses a largest count
    below it (22.05.8 source, as for ``-N2 --contiguous -w gpu01,gpu03``; not probed)."""
    wl = workload("j", "-N1-3 --gpus=12 --contiguous -w gpu01,gpu04", 0.0, 1)
    assert fill_gaps(wl, ORDER, INDEX) == (wl, REFUSAL)
    wl = workload("j", "-N1-4 --gpus=12 --contiguous -w gpu01,gpu03", 0.0, 1)
    filled, why = fill_gaps(wl, ORDER, INDEX)
    assert why is None and filled.nodelist == "gpu[01-03]" and filled.pod_sets[0].walk_nodes == (3, 4)


@pytest.mark.parametrize("opts", ["--gpus=2 --contiguous -w gpu01,gpu03", "--gpus=3 --contiguous -w gpu01,gpu04"])
def test_a_filled_run_longer_than_the_gpus_is_refused(tmp_path, opts):
    """``_job_create`` fills the list and raises the least count before
    ``gres_job_state_validate`` tests "--gpus < -N" (22.05.8 source, found by a review; the
    reader refuses such a list as written)."""
    wl = workload("j", opts, 0.0, 1)
    filled, why = fill_gaps(wl, ORDER, INDEX)
    assert why is None and filled.pod_sets[0].contiguous and filled.nodelist != wl.nodelist
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF.format(w="")), [opts], 2.0, 6.0)
    assert _outcome(engine.jobs[1]) == ("REJECTED", "Invalid generic resource (gres) specification")


def test_a_filled_run_longer_than_the_tasks_is_not_modelled():
    """``-n2 --gres=gpu:1`` beside ``-w gpu01,gpu04``: four nodes for two tasks (not probed);
    kept as listed, without the option, as for task pods."""
    wl = workload("j", "-n2 --gres=gpu:1 --contiguous -w gpu01,gpu04", 0.0, 1)
    filled, why = fill_gaps(wl, ORDER, INDEX)
    assert why is None and filled.nodelist == wl.nodelist and not filled.pod_sets[0].contiguous
    wl = workload("j", "-n4 --gres=gpu:1 --contiguous -w gpu01,gpu03", 0.0, 1)
    filled, why = fill_gaps(wl, ORDER, INDEX)
    assert why is None and filled.nodelist == "gpu[01-03]" and filled.pod_sets[0].contiguous


@pytest.mark.parametrize("opts", ["-N2 --exclusive --contiguous", "--gpus=12 --exclusive --contiguous"])
def test_an_exclusive_job_is_not_held_by_the_first_test(tmp_path, opts):
    """An exclusive job's selection sees idle nodes only (``_pick_best_nodes``), all cores free
    there already: gpu04, under a one-CPU job, is no run of its (found by a review, from the
    22.05.8 source; not probed)."""
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF.format(w="Weight=2")), ["-w gpu03 " + EX, "-w gpu04 -c1", opts],
                           2.0, 10.0)
    assert [p[0] for p in engine.jobs[3].placement] == [0, 1]


def test_the_reader_keeps_the_option_listed_as_read():
    job = parse_sbatch_text(script("-n4 --gres=gpu:1 --contiguous"), "job.sbatch")
    assert ("contiguous", None) in job.not_modelled
    ps, _gang = job_pod_set(job)
    assert ps.contiguous and ps.walk_gpus
