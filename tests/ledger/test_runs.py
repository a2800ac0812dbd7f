"""``gpupool runs`` / ``gpupool runs show``: recorded simulations, their inputs and times."""
from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

import gpupool
from gpupool.ledger import SIM_EPOCH, record_run
from gpupool.ledger import schema as s
from gpupool.ledger.db import LedgerError
from gpupool.ledger.runs import list_runs, show_run
from gpupool.ledger.timefmt import format_ts

from .conftest import SEED_POOL

WORKLOAD = str(SEED_POOL / "workloads")


@pytest.fixture(scope="module")
def first_fit_result():
    return gpupool.simulate(str(SEED_POOL), WORKLOAD, "first-fit")


def _record_two(ledger, seed_result, first_fit_result):
    a = record_run(ledger, seed_result, SEED_POOL, WORKLOAD, "fifo")
    b = record_run(ledger, first_fit_result, SEED_POOL, WORKLOAD, "first-fit", options={"note": "x"}, seed=7,
                   epoch=datetime(2026, 3, 2, tzinfo=UTC))
    return a, b


def test_runs_lists_inputs_seed_policy_version_and_times(ledger, db_url, seed_result, first_fit_result, cli):
    a, b = _record_two(ledger, seed_result, first_fit_result)
    rows = json.loads(cli("runs", "--db", db_url, "--json").output)
    assert [r["run_id"] for r in rows] == [a["run_id"], b["run_id"]]  # in recording order
    ra, rb = rows
    assert ra["policy"] == "fifo" and rb["policy"] == "first-fit"
    assert ra["policy_version"] == a["policy_version"] and len(ra["policy_version"]) == 64
    assert ra["pool"] == "seed-pool" and ra["pool_hash"] == rb["pool_hash"] and len(ra["pool_hash"]) == 64
    assert ra["workload"] == WORKLOAD
    assert ra["workload_digest"] == seed_result.summary_dict["workload_digest"] != ""
    assert ra["seed"] is None and rb["seed"] == 7
    assert ra["epoch"] == format_ts(SIM_EPOCH.timestamp()) and rb["epoch"] == "2026-03-02T00:00:00"
    assert ra["jobs"] == len(seed_result.jobs)
    assert ra["gpu_hours"] == pytest.approx(seed_result.jobs["gpu_seconds_used"].sum() / 3600, abs=1e-3)
    first_submit = SIM_EPOCH.timestamp() + seed_result.jobs["submit"].min()
    last_end = SIM_EPOCH.timestamp() + seed_result.jobs["end"].max()
    assert (ra["first_submit"], ra["last_end"]) == (format_ts(first_submit), format_ts(last_end))
    assert ra["recorded_at"] <= rb["recorded_at"]
    # filters
    assert [r["run_id"] for r in list_runs(ledger, policy="first-fit")] == [b["run_id"]]
    assert list_runs(ledger, pool="no-such-pool") == []
    # the table names every run in full (ids are what `runs show` takes)
    table = cli("runs", "--db", db_url).output
    assert a["run_id"] in table and b["run_id"] in table and "first-fit" in table


def test_runs_show_by_id_prefix_and_cluster_name(ledger, db_url, seed_result, first_fit_result, cli):
    a, b = _record_two(ledger, seed_result, first_fit_result)
    full = json.loads(cli("runs", "show", b["run_id"], "--db", db_url, "--json").output)
    assert full["run_id"] == b["run_id"] and full["cluster"] == b["origin"] == f"run:{b['run_id']}"
    assert full["policy_options"] == {"note": "x"}
    assert full["policy_version_commit"]["version"] == b["policy_version"]
    assert full["policy_version_commit"]["pool"] == "seed-pool"
    assert sum(full["states"].values()) == full["jobs"] == len(first_fit_result.jobs)
    assert full["states"] == first_fit_result.jobs["state"].value_counts().to_dict()
    assert full["summary"]["workload_digest"] == full["workload_digest"]
    assert show_run(ledger, b["run_id"][:6])["run_id"] == b["run_id"]
    assert show_run(ledger, b["origin"])["run_id"] == b["run_id"]
    text = cli("runs", "show", a["run_id"][:8], "--db", db_url).output
    assert f"run              {a['run_id']}" in text and "policy version" in text and "fifo" in text


def test_runs_show_unknown_or_ambiguous_is_a_clear_error(ledger, db_url, cli):
    base = {"pool": "p", "pool_hash": "0" * 64, "policy": "fifo", "policy_options": "{}", "workload_spec": "w",
            "workload_digest": "d", "seed": None, "epoch": 0.0, "recorded_at": 1.0, "summary": "{}"}
    with ledger.transaction() as conn:
        conn.execute(s.runs.insert(), [{**base, "run_id": rid, "origin": f"run:{rid}"}
                                       for rid in ("abc1", "abc2", "a_c3")])
    res = cli("runs", "show", "zzzz", "--db", db_url, ok=False)
    assert res.exit_code == 2 and "no recorded run 'zzzz'" in res.output
    res = cli("runs", "show", "abc", "--db", db_url, ok=False)
    assert res.exit_code == 2 and "ambiguous" in res.output and "abc1" in res.output and "abc2" in res.output
    with pytest.raises(LedgerError, match="ambiguous"):
        show_run(ledger, "run:a")
    assert show_run(ledger, "a_")["run_id"] == "a_c3"  # '_' is not a LIKE wildcard here
    assert show_run(ledger, "abc2")["jobs"] == 0


def test_runs_on_an_empty_ledger(db_url, cli):
    assert json.loads(cli("runs", "--db", db_url, "--json").output) == []
