"""The seed's borrow-and-reclaim scenario, end to end (docs/services.md).

Training (nominal 16 GPUs, borrowingLimit 8) fills its quota and borrows 8 of inference's idle
GPUs; the chat service's 10:00 surge asks for all 16 GPUs of inference's nominal quota and
reclaims the borrowed ones by preempting a training job (classic preemption:
reclaimWithinCohort Any ignores priority). With the seed's fair-sharing Configuration the
inference queue stays within its nominal quota, so gate FairSharingPreemptWithinNominal
(beta, on) bypasses the share strategies and the same reclaim happens (spec kueue.md §6.3
step 4, case 28); only preemption *while borrowing* is decided by shares, which the seed's
quotas (16 + 16 = all 32 GPUs) rule out.
"""
from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpupool.cli.main import app
from gpupool.fleet import pool_services
from gpupool.formats.pool_dir import load_pool
from gpupool.simulation import simulate

SEED = Path(__file__).resolve().parents[2] / "examples" / "seed-pool"
SCENARIO = SEED / "scenarios" / "borrow-reclaim"
SURGE = 10 * 3600.0


@pytest.fixture(scope="module")
def pool():
    return load_pool(SEED)


def classic(pool):
    p = copy.deepcopy(pool)
    p.kueue.configuration.pop("fairSharing", None)
    return p


def run(pool, policy="kueue", services=None):
    return simulate(pool, str(SCENARIO), policy, check=True, services="pool" if services is None else services)


def reclaim_events(result):
    ev = result.events
    return ev[(ev["event"] == "preempted") & ev["detail"].str.contains("InCohort")]


@pytest.fixture(scope="module")
def classic_run(pool):
    return run(classic(pool))


@pytest.fixture(scope="module")
def fair_run(pool):
    return run(pool)


def test_training_borrows_up_to_eight_gpus_before_the_surge(classic_run):
    q = classic_run.summary_dict["quota"]
    # three 8-GPU runs: 16 nominal + 8 borrowed from the third start (t=120 s) to the surge,
    # and again once the surge is over and the victim is readmitted
    before = 8 * (SURGE + 15 - 120) / 3600
    assert before < q["gpu_hours_borrowed"]["training"] <= 8 * 14
    assert q["gpu_hours_borrowed"]["inference"] == 0.0
    tl = classic_run.timeline
    assert tl["allocated_gpus"].max() <= 32


def test_the_surge_reclaims_the_borrowed_gpus_by_preempting_training(classic_run):
    rec = reclaim_events(classic_run)
    assert len(rec) == 1
    victim = int(rec.iloc[0]["job_id"])
    assert "InCohortReclamation" in rec.iloc[0]["detail"]
    assert SURGE <= rec.iloc[0]["time"] < SURGE + 120  # within the HPA's first scale-ups
    jobs = classic_run.jobs.set_index("id")
    assert jobs.loc[victim, "kind"] == "batch" and jobs.loc[victim, "queue"] == "training"
    q = classic_run.summary_dict["quota"]
    assert q["reclaimed"]["gpus"] == 8 and q["reclaimed"]["preemptions"] == 1
    assert q["reclaimed"]["gpu_hours"] > 0
    # the victim had no checkpoint (b or c): all ten hours of its progress are lost
    assert q["training_gpu_hours_lost_to_preemption"] == pytest.approx(8 * (SURGE + 15 - jobs.loc[victim, "start"]) / 3600,
                                                                       rel=0.01)
    svc = classic_run.summary_dict["services"]["by_service"]["chat"]
    assert svc["peak_replicas"] == 16 and svc["slo_attainment"] > 0.98


def test_reclaim_ignores_priority(pool):
    # The same surge from a service with no priority at all (0) still takes back the GPUs
    # training (priority 500) borrowed: reclaimWithinCohort: Any.
    svc = [replace(s, priority=None, priority_class=None) for s in pool_services(pool)]
    low = run(classic(pool), services=svc)
    assert len(reclaim_events(low)) == 1


def test_fair_sharing_reclaims_the_same_way_within_nominal(classic_run, fair_run):
    a, b = reclaim_events(classic_run), reclaim_events(fair_run)
    assert list(a["job_id"]) == list(b["job_id"]) and list(a["time"]) == list(b["time"])
    assert all("InCohortReclamation" in d for d in b["detail"])
    qa, qb = classic_run.summary_dict["quota"], fair_run.summary_dict["quota"]
    assert qa == qb


def test_slurm_serving_qos_preempts_training_by_requeue(pool):
    r = run(pool, "slurm")
    svc = r.summary_dict["services"]["by_service"]["chat"]
    assert svc["restart_mode"] == "requeue" and svc["peak_replicas"] == 16
    replicas = r.jobs[r.jobs["kind"] == "service"]
    assert set(replicas["qos"]) == {"serving"} and set(replicas["account"]) == {"ml-serving"}
    # QOS serving (Preempt=normal, PreemptMode=REQUEUE) requeues a training job of QOS normal
    ev = r.events
    pre = ev[ev["event"] == "preempted"]
    assert len(pre) >= 1 and SURGE <= pre.iloc[0]["time"] < SURGE + 120
    victim = int(pre.iloc[0]["job_id"])
    assert r.jobs.set_index("id").loc[victim, "kind"] == "batch"
    # Slurm's victim here is finetune-a, which checkpoints hourly: little work is lost
    assert r.summary_dict["quota"]["training_gpu_hours_lost_to_preemption"] < 0.5
    assert r.summary_dict["services"]["overall"]["slo_attainment"] > 0.9


def test_services_are_opt_in_for_simulate(pool):
    plain = simulate(pool, str(SCENARIO), "kueue")
    assert plain.fleet is None and "services" not in plain.summary_dict and len(plain.jobs) == 3
    res = CliRunner().invoke(app, ["simulate", str(SEED), "-w", str(SCENARIO), "--policy", "kueue",
                                   "--services", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["services"]["by_service"]["chat"]["peak_replicas"] == 16


def test_compare_shows_service_and_quota_columns(tmp_path):
    res = CliRunner().invoke(app, ["compare", str(SEED), "-w", str(SCENARIO), "--policies", "kueue,fifo",
                                   "--out", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    kueue = next(p for p in data["policies"] if p["policy"] == "kueue")
    assert kueue["quota"]["reclaimed"]["gpus"] == 8
    assert "chat" in kueue["services"]["by_service"]
    csv_head = (tmp_path / "comparison.csv").read_text().splitlines()[0]
    assert "services.overall.slo_attainment" in csv_head and "quota.reclaimed.gpu_hours" in csv_head
    table = CliRunner().invoke(app, ["compare", str(SEED), "-w", str(SCENARIO), "--policies", "kueue",
                                     "--out", str(tmp_path)])
    assert "services and quotas" in table.output and "SLO met" in table.output


def test_hpa_ramp_at_the_surge(classic_run):
    # 60 s requests/s adapter window: at 10:00:15 the mean is (45*240 + 15*700)/60 = 355 rps over
    # 7 ready pods -> ratio 1.45 -> ceil(1.45*7) = 11 (within max(2x, +4)); the next syncs count
    # the 4 starting pods as 0 rps (missing metrics on scale-up) -> 14, then maxReplicas 16.
    f = classic_run.services_frame()
    ramp = f[(f["time"] >= SURGE) & (f["time"] <= SURGE + 60)]
    assert list(ramp["desired"]) == [7, 11, 14, 16, 16]
    assert list(ramp["replicas"]) == [7, 7, 11, 14, 16]
    # ready 3 minutes (startupTime) after the pods started
    later = f[f["time"] == SURGE + 15 + 180 + 15]
    assert int(later["ready"].iloc[0]) >= 11
