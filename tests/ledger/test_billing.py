"""The ledger bills a simulated Slurm job as the policy did (``policy.slurm.tres``): typed GPUs
count for ``gres/gpu`` and for their tracked ``gres/gpu:<type>`` (slurmctld's tres_alloc_cnt
holds both), a job that named no partition is billed under the default partition's weights,
and PriorityFlags=MAX_TRES takes the largest node TRES (22.05 ``assoc_mgr_tres_weighted``)."""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

import gpupool
from gpupool.ledger import record_run
from gpupool.ledger.store import as_ledger
from gpupool.policy.slurm.tres import tres_billing
from tests.unit.sbatch_plans import workload
from tests.unit.test_slurm_typed_gpu_limits import _pool

WEIGHTS = "CPU=1.0,Mem=0.0G,GRES/gpu=2.0,GRES/gpu:a100=8.0"


def _weighted_pool(tmp_path, flags: str = ""):
    pool = _pool(tmp_path, limit="")
    conf_path = Path(pool.path) / "slurm.conf"
    conf = conf_path.read_text().replace(
        "PartitionName=train Nodes=gpu[01-04] Default=YES",
        f'PartitionName=cheap Nodes=gpu01 MaxTime=1:00:00 TRESBillingWeights="CPU=1"\n'
        f'PartitionName=train Nodes=gpu[01-04] Default=YES TRESBillingWeights="{WEIGHTS}"')
    if flags:
        conf += f"PriorityFlags={flags}\n"
    conf_path.write_text(conf)
    return Path(pool.path)


JOBS = ["-c2 --gres=gpu:a100:2", "-c1 --gres=gpu:t4:3", "-c4 --gres=gpu:2", "-N2 -c1 --gres=gpu:a100:1"]


def _workloads(jobs):
    return [replace(workload(f"j{k}", "-A ml-platform " + opts, 8.0 * k, k + 1), user="dave",
                    partition=None if "-p " not in opts else opts.split("-p ")[1].split()[0])
            for k, opts in enumerate(jobs)]


def _billed(tmp_path, flags: str = "", jobs=JOBS, policy: str = "slurm"):
    path = _weighted_pool(tmp_path, flags)
    result = gpupool.simulate(path, _workloads(jobs), policy, until=600.0)
    ledger = as_ledger(str(tmp_path / "ledger.db"))
    facts = record_run(ledger, result, path, "test", policy)
    from gpupool.ledger import schema as s

    with ledger.read() as conn:
        rows = conn.execute(s.jobs.select().where(s.jobs.c.origin == facts["origin"])).mappings().all()
    ledger.close()
    by_id = {int(r["job_id"]): r for r in rows}
    return result, by_id


def test_typed_gpus_are_billed_for_both_tres_under_the_default_partition(tmp_path):
    result, rows = _billed(tmp_path)
    names = {j.id: j for j in result.output.jobs}
    assert all(j.state == "RUNNING" for j in names.values())
    # CPUs in whole cores (two threads per core): -c1 holds 2 per node
    assert [rows[k]["ncpus"] for k in (1, 2, 3, 4)] == [2, 2, 4, 4]
    # a100 devices are 0-3 and t4 4-7 on every node: 2 CPUs + 2 GPUs × 2 + 2 a100 × 8
    assert rows[1]["billing"] == pytest.approx(2 + 2 * 2 + 2 * 8)
    assert rows[2]["billing"] == pytest.approx(2 + 3 * 2)  # t4 is tracked but not weighted
    assert rows[4]["billing"] == pytest.approx(4 + 2 * 2 + 2 * 8)  # one a100 on each of two nodes
    # the untyped request is charged by the devices it holds, as the policy charges it
    held_a100 = sum((mask & 0b1111).bit_count() for _n, mask, _c, _m in names[3].placement)
    assert held_a100 == 2  # gpu01's a100s 2-3, after job 1's 0-1
    assert rows[3]["billing"] == pytest.approx(4 + 2 * 2 + held_a100 * 8)


def test_max_tres_bills_the_largest_node_tres(tmp_path):
    _result, rows = _billed(tmp_path, flags="MAX_TRES")
    assert rows[1]["billing"] == pytest.approx(2 * 8)  # max(2 CPUs, 2 × 2, 2 × 8)
    assert rows[2]["billing"] == pytest.approx(3 * 2)


def test_the_billing_function_sums_non_node_tres_beside_the_max():
    weights = {"cpu": 1.0, "gres/gpu": 2.0, "license/matlab": 5.0, "billing": 100.0}
    counts = {"cpu": 8, "gres/gpu": 1, "license/matlab": 2, "billing": 3}
    assert tres_billing(counts, weights, max_tres=False) == 8 + 2 + 10
    assert tres_billing(counts, weights, max_tres=True) == 8 + 10
    assert tres_billing(counts, {}, max_tres=True) == 8.0


def test_the_ledger_bills_each_job_as_the_policy_did(tmp_path):
    """Same jobs through the policy itself: its billing (fair share's) equals the ledger's,
    a job given two partitions billed under the one it ran in (here train, where ``cheap``,
    tried first, has no room left for it)."""
    from gpupool.engine.core import Engine
    from gpupool.engine.policy_api import make_policy
    from gpupool.formats.pool_dir import load_pool

    jobs = [*JOBS, "-p cheap,train -c2 --gres=gpu:a100:4"]
    _result, rows = _billed(tmp_path / "a", jobs=jobs)
    pool = load_pool(_weighted_pool(tmp_path / "b"))
    pol = make_policy("slurm", pool)
    engine = Engine(pool, _workloads(jobs), pol, until=600.0)
    engine.run()
    assert engine.jobs[5].partition == "train" and engine.jobs[5].state == "RUNNING"
    for job in engine.jobs.values():
        assert rows[job.id]["billing"] == pytest.approx(pol.billing(job, job.placement)), job.id
    assert rows[5]["billing"] == pytest.approx(2 + 4 * 2 + 4 * 8)


def test_a_run_of_another_policy_bills_cpus_and_ignores_slurm_only_settings(tmp_path):
    """A fifo or Kueue run has no Slurm partition: CPUs, as before; and a slurm.conf setting
    the Slurm policy would refuse (PriorityDecayHalfLife=0 without a reset period) does not stop
    recording it."""
    path = _weighted_pool(tmp_path)
    conf = path / "slurm.conf"
    conf.write_text(re.sub(r"(?m)^PriorityDecayHalfLife=.*$", "PriorityDecayHalfLife=0", conf.read_text()))
    plain = ["-c2 --gres=gpu:2", "-c3 --gres=gpu:1", "-N2 -c1 --gres=gpu:1"]
    result = gpupool.simulate(path, _workloads(plain), "fifo", until=600.0)
    assert all(j.state == "RUNNING" for j in result.output.jobs)
    ledger = as_ledger(str(tmp_path / "ledger.db"))
    facts = record_run(ledger, result, path, "test", "fifo")
    from gpupool.ledger import schema as s

    with ledger.read() as conn:
        rows = conn.execute(s.jobs.select().where(s.jobs.c.origin == facts["origin"])).mappings().all()
    ledger.close()
    assert sorted(r["ncpus"] for r in rows) == [2, 2, 3]
    assert all(r["billing"] == pytest.approx(r["ncpus"]) for r in rows)


def test_a_pending_job_is_billed_by_its_request_as_the_policy_bills_it(tmp_path):
    """A job holding nothing at the end (here: asking more a100s than are free) is billed by
    what it asks, typed GPUs included, as the policy (and sshare's view) bills a request."""
    from gpupool.engine.core import Engine
    from gpupool.engine.policy_api import make_policy
    from gpupool.formats.pool_dir import load_pool
    from gpupool.policy.slurm.tres import tres_billing

    jobs = ["-N4 -c1 --gres=gpu:a100:4", "-c1 --gres=gpu:a100:2"]
    _result, rows = _billed(tmp_path / "a", jobs=jobs)
    pool = load_pool(_weighted_pool(tmp_path / "b"))
    pol = make_policy("slurm", pool)
    engine = Engine(pool, _workloads(jobs), pol, until=600.0)
    engine.run()
    job = engine.jobs[2]
    assert job.state == "PENDING" and not job.placement
    want = tres_billing(pol.req(job).tres, pol.parts["train"].billing_weights, False)
    assert rows[2]["billing"] == pytest.approx(want) == pytest.approx(1 + 2 * 2 + 2 * 8)


def test_an_unplaced_job_without_weights_bills_its_requested_cpus_as_reqtres_shows_them(tmp_path):
    """Four pods of 500m CPU that never start: 2 CPUs (rounded up per pod set), as ReqTRES says."""
    path = _weighted_pool(tmp_path)
    (wl,) = _workloads(["-c1 --gres=gpu:1"])
    ps = replace(wl.pod_sets[0], count=4, cpu_m=500, gpus=9)  # 9 GPUs a pod: never fits an 8-GPU node
    result = gpupool.simulate(path, [replace(wl, pod_sets=(ps,))], "fifo", until=60.0)
    ledger = as_ledger(str(tmp_path / "ledger.db"))
    facts = record_run(ledger, result, path, "test", "fifo")
    from gpupool.ledger import schema as s

    with ledger.read() as conn:
        (row,) = conn.execute(s.jobs.select().where(s.jobs.c.origin == facts["origin"])).mappings().all()
    ledger.close()
    assert row["ncpus"] == 0 and row["billing"] == pytest.approx(2.0) and "cpu=2" in row["req_tres"]
