"""Task pods (``-n T`` with no ``--nodes``) in a partition with MaxNodes (docs/differential.md,
finding 107): slurmctld's max_nodes caps the nodes ``_eval_nodes`` takes, the last of them one
that holds what is left (``select._spread_tasks``' ``most``).

Every expectation is what a real 22.05.8 did (probe p168, 2026-12-07) on probe p162's pool
(four 16-core 8-GPU 64000 MB nodes, CR_Core_Memory, DefMemPerCPU=100) with a partition m over
gpu01-04 at MaxNodes=2; each job behind its holders, submitted 2 s apart. At 2f672e4 7 of the
10 answers agreed: ``-p m -n20`` took three nodes. Probe p170 (same day, the same pool plus a
partition l at MaxNodes=2 and LLN=YES) checked what a read-only review (153) found in the
source: choose_nodes' second try once the cap makes a walk fail, task pods beside a
``--nodelist`` (taken from the listed node as ``_eval_nodes`` walks, capped too) and the
least-loaded order stopping at the cap; 4 of its 10 answers agreed at 2f672e4. Probe p171 did
the same for review 154 (LLN beside a list, LLN's second try): 1 of its 4 answers here agreed.
"""
from __future__ import annotations

import pytest

from gpupool.engine.nodes import NodeTable
from gpupool.policy.slurm.select import Free, PartNodes, place
from tests.unit.sbatch_plans import run_spaced, slurm_pool, workload
from tests.unit.test_slurm_contiguous import CONF, NODE, _outcome
from tests.unit.test_slurm_range_request import ACCOUNTS as RANGE_ACCOUNTS

CONF_M = (CONF.format(w="") + "PartitionName=m Nodes=gpu[01-04] MaxTime=60 MaxNodes=2 State=UP\n"
          + "PartitionName=l Nodes=gpu[01-04] MaxTime=60 MaxNodes=2 LLN=YES State=UP\n")
H12 = ["-w gpu01 -c8", "-w gpu02 -c8"]
NOT_AVAILABLE = ("REJECTED", "Requested node configuration is not available")

CASES = [
    ([], "-p m -n20", [(0, 16, 1600, 0), (1, 4, 400, 0)]),
    # the second node must hold the 12 left: gpu02 (8 free) is passed over
    (H12, "-p m -n20", [(0, 8, 800, 0), (2, 12, 1200, 0)]),
    (H12, "-n20", [(0, 8, 800, 0), (1, 8, 800, 0), (2, 4, 400, 0)]),  # (partition p, no cap)
    (H12 + ["-w gpu03 -c8", "-w gpu04 -c10"], "-p m -n20", ("PENDING", "Resources")),
    ([], "-p m -n40", NOT_AVAILABLE),
    ([], "-p m -n20 -c2", NOT_AVAILABLE),
    (H12, "-p m -n20 --gres=gpu:1", [(0, 8, 800, 1), (2, 12, 1200, 1)]),
    (H12, "-p m --gpus=20", NOT_AVAILABLE),
    (["-w gpu01 --gres=gpu:6", "-w gpu02 --gres=gpu:6", "-w gpu03 --gres=gpu:6"], "-p m --gpus=12",
     ("PENDING", "Resources")),
    (H12, "-p m -n20 --mem=100", [(0, 8, 100, 0), (2, 12, 100, 0)]),
]


@pytest.mark.parametrize("holders,opts,want", CASES, ids=[f"{c[1]} behind {c[0]}" for c in CASES])
def test_task_pods_under_max_nodes_as_on_a_real_slurm(tmp_path, holders, opts, want):
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF_M), holders + [opts], 2.0, 2.0 * len(holders) + 6.0)
    assert _outcome(engine.jobs[len(holders) + 1]) == want


REVIEWED = [
    # the first walk takes gpu01 (4 free) and no second node holds 16: choose_nodes drops gpu01
    (["-w gpu01 -c12", "-w gpu02 -c4", "-w gpu03 -c4", "-w gpu04 -c16"], "-p m -n20",
     [(1, 12, 1200, 0), (2, 8, 800, 0)]),
    (H12, "-p m -n20 -w gpu01", [(0, 8, 800, 0), (2, 12, 1200, 0)]),
    ([], "-p m -n40 -w gpu01", NOT_AVAILABLE),
    # least loaded first, two nodes at most
    (H12 + ["-w gpu03 -c8", "-w gpu04 -c8"], "-p l -n20", ("PENDING", "Resources")),
    (H12 + ["-w gpu03 -c8"], "-p l -n20", [(0, 4, 400, 0), (3, 16, 1600, 0)]),
    ([], "-n2 --gpus=2 --contiguous -w gpu01,gpu03", ("REJECTED", "Invalid generic resource (gres) specification")),
    # task pods beside a list without a cap: the listed nodes first, a task kept for each later one
    ([], "-n3 -w gpu01,gpu02", [(0, 2, 200, 0), (1, 1, 100, 0)]),
    ([], "-p m -n4 -w gpu01,gpu02", [(0, 3, 300, 0), (1, 1, 100, 0)]),
    (H12, "-n20 -w gpu01", [(0, 8, 800, 0), (1, 8, 800, 0), (2, 4, 400, 0)]),
    (H12, "-n20 -w gpu02", [(1, 8, 800, 0), (2, 12, 1200, 0)]),
]


@pytest.mark.parametrize("holders,opts,want", REVIEWED, ids=[f"{c[1]} behind {c[0]}" for c in REVIEWED])
def test_the_reviews_cases_as_on_a_real_slurm(tmp_path, holders, opts, want):
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF_M), holders + [opts], 2.0, 2.0 * len(holders) + 6.0)
    assert _outcome(engine.jobs[len(holders) + 1]) == want


def test_the_second_try_holds_at_submit_too(tmp_path):
    """Select's test at submit tries again as well: with gpu01 of 8 CPUs, ``-p m -n30`` is
    accepted and runs as gpu02 16 + gpu03 14 (review 153, from the 22.05.8 source; not
    probed)."""
    small = NODE.replace("CPUs=16", "CPUs=8").replace("CoresPerSocket=16", "CoresPerSocket=8")
    conf = CONF_M.replace(f"NodeName=gpu01 {NODE}", f"NodeName=gpu01 {small}")
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), ["-p m -n30"], 2.0, 6.0)
    assert _outcome(engine.jobs[1]) == [(1, 16, 1600, 0), (2, 14, 1400, 0)]


def test_a_busy_first_plan_stops_at_the_cap(tmp_path):
    """bf_busy_nodes' order (``_eval_nodes_busy``) takes no more than MaxNodes either (review
    153, from the source; not probed): every node busy at 8 free CPUs, ``-n20`` has no plan on
    two of them."""
    free = Free(NodeTable(slurm_pool(tmp_path, CONF.format(w=""))))
    for i in range(4):
        free.cpu[i] -= 8000
    wl = workload("j", "-n20", 0.0, 1)
    assert place(wl, PartNodes((0, 1, 2, 3), max_nodes=2), free, busy=0b1111) is None
    assert len({p[0] for p in place(wl, PartNodes((0, 1, 2, 3), max_nodes=3), free, busy=0b1111)}) == 3


#: probe p171 (review 154's source answers, then probed): task pods beside a list in an LLN
#: partition (the listed nodes first, a task kept for each later one), and LLN's order tried
#: again without the nodes of fewest free resources; gpu03-04 at Weight=5 in the second set
LLN_LISTED = [([], "-p l -n3 -w gpu01,gpu02", [(0, 2, 200, 0), (1, 1, 100, 0)]),
              ([], "-p l -n12 -w gpu01,gpu02", [(0, 11, 1100, 0), (1, 1, 100, 0)])]
HEAVY_34 = [(["-w gpu01 -c12", "-w gpu02 -c12"], "-p l -n20", [(2, 16, 1600, 0), (3, 4, 400, 0)]),
            (["-w gpu01 -c12", "-w gpu02 -c12"], "-p m -n20", [(0, 4, 400, 0), (2, 16, 1600, 0)])]


@pytest.mark.parametrize("heavy,holders,opts,want", [(False, *c) for c in LLN_LISTED] + [(True, *c) for c in HEAVY_34],
                         ids=[c[1] for c in LLN_LISTED + HEAVY_34])
def test_least_loaded_orders_as_on_a_real_slurm(tmp_path, heavy, holders, opts, want):
    conf = CONF_M.replace(f"NodeName=gpu[03-04] {NODE}", f"NodeName=gpu[03-04] {NODE} Weight=5") if heavy else CONF_M
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), holders + [opts], 2.0, 2.0 * len(holders) + 6.0)
    assert _outcome(engine.jobs[len(holders) + 1]) == want


# --- a QOS node limit caps task pods as MaxNodes does (probe p176, real 22.05.8 with slurmdbd) ---

#: the QOS and association of probe p176: QOS lim with MaxTRESPerJob=node=2 (as for ranges)
QOS_ACCOUNTS = RANGE_ACCOUNTS
Q = "-A teamA --qos=lim "
QH12 = [Q + "-w gpu01 -c8", Q + "-w gpu02 -c8"]
#: 4 of 8 agreed at 8184029, where the limit capped walks and node ranges only
QOS_CAPPED = [
    ([], Q + "-n20", [(0, 16, 1600, 0), (1, 4, 400, 0)]),
    (QH12, Q + "-n20", [(0, 8, 800, 0), (2, 12, 1200, 0)]),
    ([], Q + "-n40", NOT_AVAILABLE),
    (QH12, Q + "-n20 --exclusive", [(2, 16, 1600, 8), (3, 16, 1600, 8)]),
    ([], Q + "-n40 --exclusive", NOT_AVAILABLE),
    (QH12 + [Q + "-w gpu03 -c8", Q + "-w gpu04 -c10"], Q + "-n20", ("PENDING", "Resources")),
    (QH12, Q + "-n20 --gres=gpu:1", [(0, 8, 800, 1), (2, 12, 1200, 1)]),
    (QH12, "-A teamA -n20", [(0, 8, 800, 0), (1, 8, 800, 0), (2, 4, 400, 0)]),  # (QOS normal: no cap)
]


def _qos_pool(tmp_path):
    """p162's pool with slurmdbd's limits enforced and probe p176's QOS and association."""
    (tmp_path / "accounts.cfg").write_text(QOS_ACCOUNTS)
    conf = CONF.format(w="").replace("ClusterName=p162", "ClusterName=real\nAccountingStorageType=accounting_storage/slurmdbd\n"
                                     "AccountingStorageEnforce=associations,limits,qos")
    return slurm_pool(tmp_path, conf)


@pytest.mark.parametrize("holders,opts,want", QOS_CAPPED, ids=[f"{c[1]} behind {c[0]}" for c in QOS_CAPPED])
def test_a_qos_node_limit_caps_task_pods_as_on_a_real_slurm(tmp_path, holders, opts, want):
    engine, _ = run_spaced(_qos_pool(tmp_path), holders + [opts], 2.0, 2.0 * len(holders) + 6.0)
    assert _outcome(engine.jobs[len(holders) + 1]) == want


def test_the_live_submit_check_caps_by_the_node_limit_too(tmp_path):
    """What a live daemon asks before it gives a job an id goes through the same node cap:
    under MaxTRESPerJob=node=2 ``-n40`` (and the walks and ranges the cap held before) are
    refused, as at a simulated submission (review 160)."""
    _, pol = run_spaced(_qos_pool(tmp_path), [Q + "-n20"], 2.0, 4.0)
    for opts in ("-n40", "-n40 --exclusive", "-N1-3 -n40", "--gpus=24"):
        assert pol.submit_rejection(workload("x", Q + opts, 0.0, 9), "root") == NOT_AVAILABLE[1], opts
    assert pol.submit_rejection(workload("x", Q + "-n20", 0.0, 9), "root") is None
    assert pol.submit_rejection(workload("x", "-A teamA -n40", 0.0, 9), "root") is None
