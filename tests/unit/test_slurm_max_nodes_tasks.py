"""Task pods (``-n T`` with no ``--nodes``) in a partition with MaxNodes (docs/differential.md,
finding 107): slurmctld's max_nodes caps the nodes ``_eval_nodes`` takes, the last of them one
that holds what is left (``select._spread_tasks``' ``most``).

Every expectation is what a real 22.05.8 did (probe p168, 2026-12-07) on probe p162's pool
(four 16-core 8-GPU 64000 MB nodes, CR_Core_Memory, DefMemPerCPU=100) with a partition m over
gpu01-04 at MaxNodes=2; each job behind its holders, submitted 2 s apart. At 2f672e4 7 of the
10 answers agreed: ``-p m -n20`` took three nodes.
"""
from __future__ import annotations

import pytest

from tests.unit.sbatch_plans import run_spaced, slurm_pool
from tests.unit.test_slurm_contiguous import CONF, _outcome

CONF_M = CONF.format(w="") + "PartitionName=m Nodes=gpu[01-04] MaxTime=60 MaxNodes=2 State=UP\n"
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
