"""simulate → ledger → acct / usage / audit."""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest

import gpupool
from gpupool.engine.core import NodeEvent
from gpupool.ledger import SIM_EPOCH, record_run
from gpupool.ledger.query import decayed_usage
from gpupool.ledger.timefmt import format_ts

from .conftest import SEED_POOL

T0 = SIM_EPOCH.timestamp()
FMT = ("JobID,JobName,User,Account,QOS,Partition,Queue,Submit,Eligible,Start,End,State,NNodes,NodeList,"
       "GPUs,GPUIndices,GPUSeconds,Requeues,Preemptions")


def _expected(jobs: pd.DataFrame) -> list[str]:
    """The simulator's own job table, written the way sacct writes these fields."""
    def ts(x):
        return format_ts(None if pd.isna(x) else T0 + x)

    def text(x):
        return "" if x is None or (isinstance(x, float) and math.isnan(x)) else str(x)

    lines = [FMT.replace(",", "|")]
    for r in jobs.itertuples():
        lines.append("|".join([
            str(r.id), r.name, text(r.user), text(r.account), text(r.qos), text(r.partition), text(r.queue),
            ts(r.submit), ts(r.eligible), ts(r.start), ts(r.end), r.state,
            str(len(r.gpu_indices.split(";"))) if r.gpu_indices else "0", r.nodes or "None assigned",
            str(r.gpus), r.gpu_indices, f"{r.gpu_seconds_used:g}", str(r.requeues), str(r.preemptions),
        ]))
    return lines


def test_round_trip_acct_equals_the_simulators_job_table(db_url, seed_result, cli):
    facts = record_run(db_url, seed_result, SEED_POOL, str(SEED_POOL / "workloads"), "fifo")
    assert facts["jobs_added"] == len(seed_result.jobs) == 7
    got = cli("acct", "--db", db_url, "--parsable2", "--format", FMT, "--clusters", facts["origin"]).output
    assert got.splitlines() == _expected(seed_result.jobs)
    # and as JSON
    data = json.loads(cli("acct", "--db", db_url, "--json", "-o", "JobID,State,AllocTRES,Elapsed").output)
    first = data["jobs"][0]
    assert first["State"] == "COMPLETED" and first["Elapsed"] == "10:30:00"
    assert "gres/gpu=16" in first["AllocTRES"] and "node=2" in first["AllocTRES"]


def test_recording_twice_adds_nothing(ledger, seed_result):
    first = record_run(ledger, seed_result, SEED_POOL, str(SEED_POOL / "workloads"), "fifo")
    again = record_run(ledger, seed_result, SEED_POOL, str(SEED_POOL / "workloads"), "fifo")
    assert first["run_id"] == again["run_id"]
    assert again["jobs_added"] == again["events_added"] == again["allocations_added"] == 0
    assert "runs_added" not in again


def test_acct_filters_and_formats(ledger, seed_result, cli):
    record_run(ledger, seed_result, SEED_POOL, str(SEED_POOL / "workloads"), "fifo")
    db = ledger.url.replace("***", "")  # sqlite URLs carry no password
    if ledger.engine.dialect.name != "sqlite":
        pytest.skip("filters are dialect-independent; checked on SQLite")
    out = cli("acct", "--db", db, "-P", "-n", "-o", "JobID,State", "--state", "CD", "-S", "2026-01-05T11:00:00").output
    # jobs that ended at or after 11:00 (10:30:00 pretrain ended before)
    assert [ln.split("|")[0] for ln in out.splitlines()] == ["3", "4", "5", "6", "7"]
    out = cli("acct", "--db", db, "-P", "-n", "-o", "JobID", "-E", "2026-01-05T01:00:00").output
    assert out.split() == ["1", "2"]  # started or eligible before 01:00 (job 2 was submitted at 00:30)
    table = cli("acct", "--db", db).output.splitlines()
    assert table[0].split() == ["JobID", "JobName", "Partition", "Account", "AllocCPUS", "State", "ExitCode"]
    bad = cli("acct", "--db", db, "-o", "JobID,Nonsense", ok=False)
    assert bad.exit_code == 2 and "Nonsense" in bad.output


def test_usage_by_account_and_gpu_type_in_month_periods(ledger, seed_result, cli):
    record_run(ledger, seed_result, SEED_POOL, str(SEED_POOL / "workloads"), "fifo")
    from gpupool.ledger.query import usage_report

    rows = usage_report(ledger, by=["account", "gpu-type"], period="month", weights={"*": 2.0})
    total = sum(r["hours"] for r in rows)
    assert total == pytest.approx(seed_result.jobs["gpu_seconds_used"].sum() / 3600)
    assert all(r["billed_hours"] == pytest.approx(2 * r["hours"]) for r in rows)
    assert {r["period"] for r in rows} == {"2026-01"}
    if ledger.engine.dialect.name == "sqlite":
        csv_text = cli("usage", "--db", ledger.url, "--by", "account,gpu-type", "--period", "day", "--csv").output
        assert csv_text.splitlines()[0] == "period,account,gpu-type,hours,billed_hours"


def test_audit_gpus_and_job_under_policy_version(ledger, cli):
    from gpupool.ledger import policy as pol
    from gpupool.ledger.query import audit_job
    from gpupool.ledger.record import simulate_for_ledger

    version, _ = pol.commit(ledger, SEED_POOL, "seed policy", author="ops-alice", at=T0 - 86400)
    faults = [NodeEvent(5000.0, "gpu01", "down", "xid 79"), NodeEvent(5100.0, "gpu01", "up")]
    result = simulate_for_ledger(str(SEED_POOL), str(SEED_POOL / "workloads"), "fifo", faults=faults)
    facts = record_run(ledger, result, SEED_POOL, str(SEED_POOL / "workloads"), "fifo")
    assert facts["policy_version"] == version.version  # the committed tree is found, not re-committed
    assert len(pol.log(ledger)) == 1
    # Job 1 (pretrain, 16 GPUs on gpu01+gpu02) ran from 0 s until gpu01 failed at 5000 s.
    rows = query_gpus(ledger, "gpu01:0,1", T0 + 600)
    assert [(r["job_id"], r["gpu_index"]) for r in rows] == [("1", 0), ("1", 1)]
    assert rows[0]["to"] == format_ts(T0 + 5000)
    assert rows[0]["policy_version"]["author"] == "ops-alice"
    assert rows[0]["policy_version"]["message"] == "seed policy"
    assert query_gpus(ledger, "gpu01:0", T0 + 5050) == []  # the node was down
    audit = audit_job(ledger, "1")[0]
    kinds = [e["event"] for e in audit["events"]]
    assert kinds[:4] == ["submitted", "started", "node_fail", "requeued"] and kinds[-1] == "finished"
    assert all(e["policy_version"]["short"] == version.short for e in audit["events"])
    segments = sorted({(a["from"], a["to"]) for a in audit["allocations"]})
    assert len(segments) == 2 and segments[0] == (format_ts(T0), format_ts(T0 + 5000))
    assert len(audit["allocations"]) == 32  # 16 GPUs, twice
    if ledger.engine.dialect.name == "sqlite":
        out = cli("audit", "gpus", "gpu01:0,1", "--at", format_ts(T0 + 600), "--db", ledger.url, "--json").output
        assert json.loads(out)[0]["policy_version"]["author"] == "ops-alice"
        out = cli("audit", "job", "1", "--db", ledger.url).output
        assert "node_fail" in out and version.short in out
        none = cli("audit", "gpus", "gpu01:0", "--at", "2020-01-01", "--db", ledger.url).output
        assert "nobody held" in none


def test_plain_result_records_earlier_segments_without_devices(ledger):
    faults = [NodeEvent(5000.0, "gpu01", "down", "xid 79"), NodeEvent(5100.0, "gpu01", "up")]
    result = gpupool.simulate(str(SEED_POOL), str(SEED_POOL / "workloads"), "fifo", faults=faults)
    record_run(ledger, result, SEED_POOL, str(SEED_POOL / "workloads"), "fifo")
    from gpupool.ledger.query import audit_job

    allocs = audit_job(ledger, "1")[0]["allocations"]
    assert allocs[0]["node"] is None and allocs[0]["gpus"] == 16 and allocs[0]["to"] == format_ts(T0 + 5000)
    assert all(a["gpu_index"] is not None for a in allocs[1:]) and len(allocs) == 17


def query_gpus(ledger, spec, at):
    from gpupool.ledger.query import audit_gpus

    return audit_gpus(ledger, spec, at)


def test_share_decays_with_the_pools_half_life(ledger, seed_result, cli):
    from gpupool.formats.pool_dir import load_pool
    from gpupool.ledger.query import share_report

    record_run(ledger, seed_result, SEED_POOL, str(SEED_POOL / "workloads"), "fifo")
    pool = load_pool(SEED_POOL)
    rows = {(r.account, r.user): r for r in share_report(ledger, pool)}
    alice_or_none = rows[("ml-research", "")]
    assert alice_or_none.raw_usage > 0 and rows[("root", "")].raw_usage == pytest.approx(alice_or_none.raw_usage)
    # Seen a half-life later, usage has halved (Slurm's 0.693 linearisation: ≈ 0.5).
    later = {(r.account, r.user): r for r in share_report(ledger, pool, now=T0 + 47700 + 7 * 86400)}
    ratio = later[("ml-research", "")].raw_usage / share_report(ledger, pool, now=T0 + 47700)[0].raw_usage
    assert ratio == pytest.approx(0.5, abs=0.001)
    if ledger.engine.dialect.name == "sqlite":
        out = cli("share", "--db", ledger.url, "--pool", SEED_POOL, "-P").output.splitlines()
        assert out[0] == "Account|User|RawShares|NormShares|RawUsage|NormUsage|EffectvUsage|FairShare|LevelFS|GrpTRESMins|TRESRunMins"


def test_decayed_usage_matches_slurms_period_sum():
    df = 1 - 0.693 / 3600
    period = 300.0
    t0, t1, now = 100.0, 2000.0, 5000.0
    # The decay thread, literally: at each period boundary all usage decays by df^Δ and a
    # running job adds overlap·df^overlap; at the job's end the remainder is added the same way.
    usage, last, charged_to = 0.0, 0.0, t0
    for tick in sorted({period * k for k in range(1, int(now // period) + 1)} | {t1}):
        usage *= df ** (tick - last)
        a, b = max(t0, charged_to), min(t1, tick)
        if b > a:
            usage += (b - a) * df ** (b - a)
            charged_to = b
        last = tick
    usage *= df ** (now - last)
    assert decayed_usage(t0, t1, 1.0, now, df, period) == pytest.approx(usage, rel=1e-9)
