"""Limits on a GPU type (``GrpTRES=gres/gpu:a100=4``, AccountingStorageTRES tracking the type):
a request naming the type counts against them, a request without a type does not, but the
devices every job runs on are charged to their type (docs/differential.md, finding 60).

The scenario is the seed pool with typed GPUs (``a100`` on devices 0-3 and ``t4`` on 4-7 of
each node), AccountingStorageTRES=gres/gpu,gres/gpu:a100,gres/gpu:t4 and account ml-platform
limited to 4 a100s; its jobs are submitted 8 s apart and kept running. A real 22.05.8 with
slurmdbd ran the same jobs (2026-12-03, ``scontrol show assoc_mgr``: ``gres/gpu:a100=4(7)``).
"""
from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.nodes import mask_indices
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool
from tests.unit.sbatch_plans import workload

SEED_POOL = Path(__file__).resolve().parents[2] / "examples" / "seed-pool"
TRACKED = "AccountingStorageTRES=gres/gpu,gres/gpu:a100,gres/gpu:t4"
LIMIT = "GrpTRES=gres/gpu:a100=4"

#: (sbatch options, state, reason, {node: GPU indices}) in submission order, as real Slurm had them
SEQUENCE = [
    ("--gres=gpu:a100:2", "RUNNING", "", {"gpu01": [0, 1]}),
    ("--gres=gpu:a100:3", "PENDING", "AssocGrpGRES", {}),       # 2 + 3 > 4
    ("--gres=gpu:2", "RUNNING", "", {"gpu01": [2, 3]}),          # no type asked: not held...
    ("--gres=gpu:a100:1", "PENDING", "AssocGrpGRES", {}),       # ...but its a100s count: 4 + 1
    ("--gres=gpu:t4:4", "RUNNING", "", {"gpu01": [4, 5, 6, 7]}),
    ("--gpus=a100:1", "PENDING", "AssocGrpGRES", {}),
    ("--gres=gpu:3", "RUNNING", "", {"gpu02": [0, 1, 2]}),       # a100 usage 7, over the limit
    ("-c1 --mem=1000", "RUNNING", "", {"gpu01": []}),
    ("--gres=gpu:t4:1", "RUNNING", "", {"gpu02": [4]}),
    ("--exclusive --gres=gpu:1", "PENDING", "AssocGrpGRES", {}),  # whole node: its 4 a100s
]


def _pool(tmp_path: Path, tres: str = TRACKED, limit: str = LIMIT, qos_limit: str = ""):
    d = tmp_path / "pool"
    shutil.copytree(SEED_POOL, d)
    conf = (d / "slurm.conf").read_text()
    conf = conf.replace("AccountingStorageTRES=gres/gpu\n", tres + "\n")
    conf = conf.replace("Gres=gpu:8 State=UNKNOWN", "Gres=gpu:a100:4,gpu:t4:4 State=UNKNOWN")
    (d / "slurm.conf").write_text(conf)
    (d / "gres.conf").write_text("NodeName=gpu[01-04] Name=gpu Type=a100 File=/dev/nvidia[0-3]\n"
                                 "NodeName=gpu[01-04] Name=gpu Type=t4 File=/dev/nvidia[4-7]\n")
    accounts = (d / "accounts.cfg").read_text()
    accounts = accounts.replace("Fairshare=20:MaxJobs=20:", f"Fairshare=20:MaxJobs=20:{limit}:" if limit else
                                "Fairshare=20:MaxJobs=20:")
    if qos_limit:
        accounts = accounts.replace("Description='Default QOS':Priority=0", f"Description='Default QOS':Priority=0:{qos_limit}")
    (d / "accounts.cfg").write_text(accounts)
    return load_pool(d)


def _run(pool, jobs: list[str]):
    """``jobs`` of user dave in ml-platform, 8 s apart, past a backfill cycle: jobs by id."""
    wls = [replace(workload(f"j{k}", "-A ml-platform " + opts, 8.0 * k, k + 1), user="dave")
           for k, opts in enumerate(jobs)]
    engine = Engine(pool, wls, make_policy("slurm", pool), check=True, until=8.0 * len(jobs) + 60.0)
    engine.run()
    names = list(pool.nodes)
    return {j.id: (j.state, j.reason or "", {names[n]: mask_indices(m) for n, m, _c, _mem in j.placement})
            for j in engine.jobs.values()}


def test_a_typed_limit_holds_typed_requests_and_charges_every_job_by_its_devices(tmp_path):
    got = _run(_pool(tmp_path), [opts for opts, *_ in SEQUENCE])
    assert [got[k + 1] for k in range(len(SEQUENCE))] == [tuple(row[1:]) for row in SEQUENCE]


def test_a_typed_limit_on_a_type_not_tracked_is_not_enforced(tmp_path):
    """slurmctld keeps only the TRES AccountingStorageTRES names: with gres/gpu alone there,
    GrpTRES=gres/gpu:a100=4 holds nothing (22.05.8 source: the assoc manager drops it)."""
    got = _run(_pool(tmp_path, tres="AccountingStorageTRES=gres/gpu"), ["--gres=gpu:a100:2", "--gres=gpu:a100:3"])
    assert got[2][0] == "RUNNING"


def test_the_untyped_limit_counts_typed_requests_too(tmp_path):
    """``gres/gpu`` counts every GPU asked, typed or not: 2 a100s + 3 t4s against gres/gpu=4."""
    got = _run(_pool(tmp_path, limit="GrpTRES=gres/gpu=4"), ["--gres=gpu:a100:2", "--gres=gpu:t4:3"])
    assert got[2][:2] == ("PENDING", "AssocGrpGRES")


@pytest.mark.parametrize("qos_limit,reason", [("MaxTRESPerUser=gres/gpu:a100=3", "QOSMaxGRESPerUser"),
                                              ("GrpTRES=gres/gpu:a100=3", "QOSGrpGRES")])
def test_a_typed_qos_limit_holds_with_its_gres_reason(tmp_path, qos_limit, reason):
    """The QOS limits by type work alike, with the QOS's GRES reasons (22.05.8 source:
    ``_get_tres_state_reason`` gives every gres TRES, typed or not, the GRES reason)."""
    got = _run(_pool(tmp_path, limit="", qos_limit=qos_limit),
               ["--gres=gpu:a100:2", "--gres=gpu:a100:2", "--gres=gpu:2", "--gres=gpu:t4:4"])
    assert [got[k][:2] for k in (1, 2, 3, 4)] == [("RUNNING", ""), ("PENDING", reason), ("RUNNING", ""),
                                                  ("RUNNING", "")]


def test_a_typed_tres_weight_divides_the_typed_request_by_the_partitions_devices_of_that_type(tmp_path):
    """PriorityWeightTRES=GRES/gpu:a100=1000: a job asking 2 a100s has factor 2/16 (four nodes of
    four a100s); one asking 2 GPUs without a type has 0 there (its typed count is 0)."""
    pool = _pool(tmp_path)
    pool.slurm.params["PriorityWeightTRES"] = {"gres/gpu": 1000, "gres/gpu:a100": 1000}
    policy = make_policy("slurm", pool)
    wls = [replace(workload(f"j{k}", "-A ml-platform " + opts, 0.0, k + 1), user="dave")
           for k, opts in enumerate(["--gres=gpu:a100:2", "--gres=gpu:2"])]
    engine = Engine(pool, wls, policy, until=1.0)
    engine.run()
    info = policy.parts["train"]
    typed, untyped = (policy.factors(engine.jobs[k], info, 0.0, 0.0)["tres"] for k in (1, 2))
    assert typed == {"gres/gpu": 2 / 32, "gres/gpu:a100": 2 / 16}
    assert untyped == {"gres/gpu": 2 / 32, "gres/gpu:a100": 0.0}


def test_gpu_types_are_matched_whatever_their_case(tmp_path):
    """Slurm finds a TRES case-insensitively: a limit written ``gres/gpu:A100`` binds jobs on
    gres.conf's ``a100`` devices, a ``GRES/gpu:A100`` billing weight bills them (22.05.8 source:
    assoc_mgr's ``xstrcasecmp``; ``sacctmgr dump`` writes the names lower-case)."""
    got = _run(_pool(tmp_path, limit="GrpTRES=gres/gpu:A100=4"), ["--gres=gpu:a100:4", "--gres=gpu:a100:1"])
    assert got[2][:2] == ("PENDING", "AssocGrpGRES")
    from gpupool.policy.slurm.config import parse_billing_weights

    assert parse_billing_weights("CPU=1,GRES/gpu:A100=2.0") == {"cpu": 1.0, "gres/gpu:a100": 2.0}


def test_an_exclusive_job_counts_its_whole_nodes_devices_of_each_type(tmp_path):
    """``--exclusive --gres=gpu:1`` is tested on a whole node's devices, 4 a100s: with 1 a100 in
    use it is over GrpTRES=gres/gpu:a100=4, though it asks no type (22.05.8 source:
    ``_handle_exclusive_gres`` counts every GRES of the selected nodes, one entry per type)."""
    got = _run(_pool(tmp_path), ["--gres=gpu:a100:1", "--exclusive --gres=gpu:1", "--gres=gpu:a100:3"])
    assert [got[k][:2] for k in (1, 2, 3)] == [("RUNNING", ""), ("PENDING", "AssocGrpGRES"), ("RUNNING", "")]
