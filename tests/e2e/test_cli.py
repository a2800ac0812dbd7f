"""The CLI as a user runs it, on the example pools."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import gpupool
from gpupool.cli.main import app
from gpupool.engine.policy_api import registered

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "examples" / "seed-pool"
LARGE = ROOT / "examples" / "large-pool"
runner = CliRunner()


def invoke(*args: str):
    result = runner.invoke(app, [str(a) for a in args])
    return result


def test_validate_seed_pool_json_reports_the_seed():
    result = invoke("validate", SEED, "--json")
    assert result.exit_code == 0, result.output
    facts = json.loads(result.stdout)
    assert facts["nodes"] == 4 and facts["gpus"] == 32
    assert [p["name"] for p in facts["partitions"]] == ["train"]
    assert facts["partitions"][0]["max_time"] == "2-00:00:00"
    queues = {cq["name"]: cq for cq in facts["cluster_queues"]}
    assert set(queues) == {"training", "inference"}
    training = queues["training"]["quotas"]["gpu-node"]
    assert training["nvidia.com/gpu"] == {"nominalQuota": "16", "borrowingLimit": "8", "lendingLimit": None}
    assert training["cpu"]["nominalQuota"] == "256"
    assert queues["inference"]["quotas"]["gpu-node"]["nvidia.com/gpu"]["borrowingLimit"] is None
    assert all(cq["cohort"] == "gpu-pool" for cq in queues.values())
    assert [c["name"] for c in facts["cohorts"]] == ["gpu-pool"]
    levels = facts["topology_levels"]
    assert len(levels) == 3 and levels[-1] == "kubernetes.io/hostname"
    assert "block" in levels[0] and "rack" in levels[1]
    node = facts["node_list"][0]
    assert node["labels"][levels[1]] == "rack1" and node["labels"][levels[0]] == "block1"
    assert {a["name"] for a in facts["accounts"]} >= {"ml-research", "ml-serving"}
    assert {q["name"] for q in facts["qos"]} >= {"normal", "high"}
    assert any(item["key"] == "SlurmctldPort" for item in facts["not_modelled"])


def test_validate_table_names_everything():
    result = invoke("validate", SEED)
    assert result.exit_code == 0
    for word in ("gpu01", "train", "ml-research", "training", "inference", "gpu-pool", "not modelled"):
        assert word in result.stdout


def test_simulate_twice_gives_byte_identical_outputs(tmp_path):
    outs = []
    for run in ("a", "b"):
        result = invoke("simulate", SEED, "--policy", "fifo", "--out", tmp_path / run, "--check", "--json")
        assert result.exit_code == 0, result.output
        outs.append(tmp_path / run)
    names = sorted(p.name for p in outs[0].iterdir())
    assert names == ["events.parquet", "jobs.parquet", "summary.json", "timeline.parquet"]
    for name in names:
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name
    summary = json.loads((outs[0] / "summary.json").read_text())
    assert summary["jobs"] > 100 and summary["gpus"] == 32
    jobs = pd.read_parquet(outs[0] / "jobs.parquet")
    assert set(jobs["state"]) <= {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}
    assert (jobs["gpu_seconds_used"] >= 0).all()


def test_simulate_the_seed_workload_folder():
    result = invoke("simulate", SEED, "--workload", SEED / "workloads", "--json", "--check")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["jobs"] == 7 and summary["states"].get("COMPLETED") == 7


def test_compare_runs_every_registered_policy(tmp_path):
    result = invoke("compare", SEED, "--out", tmp_path, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [p["policy"] for p in data["policies"]] == list(registered())
    assert list(registered()) == ["fifo", "first-fit", "slurm", "kueue-classic", "kueue", "kueue-gang",
                                  "bridge", "operator"]
    assert (tmp_path / "comparison.csv").exists() and (tmp_path / "fifo" / "jobs.parquet").exists()
    first_fit = data["policies"][1]
    assert data["policies"][1]["policy"] == "first-fit"
    assert first_fit["wait"]["mean"] <= data["policies"][0]["wait"]["mean"]


def test_bad_pool_directory_is_one_clear_line(tmp_path):
    (tmp_path / "slurm.conf").write_text("ClusterName=x\nNodeName=n1 CPUs=abc\n")
    result = invoke("validate", tmp_path)
    assert result.exit_code == 2
    assert f"{tmp_path / 'slurm.conf'}:2:" in result.stderr.replace("\n", "")


def test_unknown_policy_and_missing_workload():
    result = invoke("simulate", SEED, "--policy", "nope")
    assert result.exit_code == 2 and "registered policies: bridge, fifo, first-fit, kueue" in result.stderr.replace("\n", " ")
    result = invoke("simulate", SEED, "--workload", "no/such/file.csv")
    assert result.exit_code == 2 and "not found" in result.stderr


def test_python_api_returns_frames():
    result = gpupool.simulate(SEED, policy="first-fit", check=True)
    assert isinstance(result.jobs, pd.DataFrame) and isinstance(result.timeline, pd.DataFrame)
    assert isinstance(result.summary, pd.DataFrame)
    assert set(result.summary["section"]) >= {"overall", "by_shape", "by_account", "accounts"}
    assert len(result.jobs) == result.summary_dict["jobs"]


@pytest.mark.slow
def test_console_script_runs_in_a_real_process(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gpupool.cli.main", "validate", str(LARGE), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    facts = json.loads(proc.stdout)
    assert facts["nodes"] == 64 and facts["gpus"] == 512 and facts["gpu_types"] == {"a100": 256, "h100": 256}


def test_simulate_records_in_a_ledger_and_acct_reads_it(tmp_path):
    db = tmp_path / "ledger.db"
    first = invoke("simulate", SEED, "--workload", SEED / "workloads", "--db", db, "--json")
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["ledger"]["jobs_added"] == 7
    again = invoke("simulate", SEED, "--workload", SEED / "workloads", "--db", db, "--json")
    assert json.loads(again.stdout)["ledger"]["jobs_added"] == 0  # the same run adds nothing
    acct = invoke("acct", "--db", db, "--parsable2", "-o", "JobID,JobName,State,NodeList")
    assert acct.exit_code == 0, acct.output
    lines = acct.stdout.strip().splitlines()
    assert lines[0] == "JobID|JobName|State|NodeList"
    assert "1|pretrain-run|COMPLETED|gpu[01-02]" in lines


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["slurm", "kueue", "kueue-gang"])
def test_faithful_policies_finish_a_synthetic_week_on_the_large_pool(policy):
    # A regression guard: on 512 GPUs of two types, timers and reservations must let every run end.
    result = gpupool.simulate(LARGE, "synthetic:week?jobs=3000&seed=2", policy, check=True)
    summary = result.summary_dict
    assert summary["jobs"] == len(result.jobs) > 3000
    assert sum(summary["states"].get(s, 0) for s in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")) > 0.9 * summary["jobs"]


def test_operator_runs_its_capacity_controller_and_reports_draining():
    import gpupool

    result = gpupool.simulate(SEED, "synthetic:day?seed=4", policy="operator", check=True)
    figures = result.summary_dict["policy_figures"]["draining"]
    assert set(figures) == {"drains", "gpu_hours_draining", "gpu_hours_draining_idle"}
    moves = result.events[result.events["event"] == "node_owner"]
    assert len(moves) >= 1  # the controller tagged the NodeSet's nodes at least once


def test_compare_skips_a_policy_the_pool_cannot_run_unless_named(tmp_path):
    large = Path(__file__).resolve().parents[2] / "examples" / "large-pool"
    named = invoke("compare", str(large), "--workload", "synthetic:day?seed=2&jobs=20", "--policies", "fifo,operator",
                   "--out", str(tmp_path / "a"))
    assert named.exit_code == 2 and "declares no NodeSet" in named.stderr
    every = invoke("compare", str(large), "--workload", "synthetic:day?seed=2&jobs=20", "--out", str(tmp_path / "b"),
                   "--json")
    assert every.exit_code == 0, every.stderr
    assert "skipped operator" in every.stderr and "declares no NodeSet" in every.stderr
    ran = [s["policy"] for s in json.loads(every.stdout)["policies"]]
    assert "operator" not in ran and {"fifo", "slurm", "kueue", "bridge"} <= set(ran)


def test_simulate_with_services_records_replicas_in_the_ledger(tmp_path):
    db = tmp_path / "svc.db"
    result = invoke("simulate", SEED, "--policy", "kueue", "--services", "--workload",
                    SEED / "scenarios" / "borrow-reclaim", "--db", db, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["services"]["overall"]["services"] == 1
    acct = invoke("acct", "--db", db, "-S", "2000-01-01", "-o", "JobName,State", "--parsable2")
    names = [line.split("|")[0] for line in acct.stdout.splitlines()[1:]]
    assert {"finetune-a", "finetune-b", "finetune-c"} <= set(names)
    assert any(n.startswith("chat-") for n in names)  # the service's replicas are jobs of the run
