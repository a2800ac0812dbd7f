"""``gpupool conformance run`` and ``diff-slurm`` through the CLI (no real Slurm needed)."""
from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from gpupool.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
SLURM_CASES = ROOT / "tests" / "conformance" / "slurm"
KUEUE_CASES = ROOT / "tests" / "conformance" / "kueue"
runner = CliRunner()


def test_run_a_folder_reports_each_case_and_passes():
    res = runner.invoke(app, ["conformance", "run", str(SLURM_CASES), "--json"])
    doc = json.loads(res.stdout)
    assert res.exit_code == 0, [c for c in doc["cases"] if not c["ok"]]
    assert doc["passed"] == len(doc["cases"]) and all(c["kind"] == "slurm" for c in doc["cases"])
    assert {"gang-001", "gang-gp-002", "preempt-gp-002"} <= {c["case"] for c in doc["cases"]}


def test_kind_is_read_from_each_file_and_unseen_cases_run(tmp_path):
    case = yaml.safe_load((SLURM_CASES / "bf-001-classic-backfill.yaml").read_text())
    case["id"] = "bf-unseen"
    case["variants"] = []
    unseen = tmp_path / "my-case.yaml"
    unseen.write_text(yaml.safe_dump(case))
    kueue = min(KUEUE_CASES.glob("*.yaml"))
    res = runner.invoke(app, ["conformance", "run", str(unseen), str(kueue)])
    assert res.exit_code == 0, res.stdout
    assert "PASS slurm bf-unseen [base]" in res.stdout and "PASS kueue" in res.stdout


def test_a_failing_expectation_is_shown_with_what_differs(tmp_path):
    case = yaml.safe_load((SLURM_CASES / "bf-001-classic-backfill.yaml").read_text())
    case["variants"] = []
    key = next(iter(case["expected"]["start"]))
    case["expected"]["start"][key] = 12345
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(case))
    res = runner.invoke(app, ["conformance", "run", str(bad)])
    assert res.exit_code == 1
    assert f"start[{key}]: expected 12345" in res.stdout


def test_a_file_of_neither_kind_is_an_error_naming_it(tmp_path):
    odd = tmp_path / "odd.yaml"
    odd.write_text("hello: world\n")
    res = runner.invoke(app, ["conformance", "run", str(odd)])
    assert res.exit_code == 2 and "odd.yaml" in res.output and "neither a Kueue case" in res.output


def test_diff_slurm_says_when_slurm_is_missing(monkeypatch):
    from gpupool.conformance import real_slurm

    monkeypatch.setattr(real_slurm, "_which", lambda name: None)
    res = runner.invoke(app, ["conformance", "diff-slurm", str(ROOT / "examples" / "seed-pool"), "--jobs", "3"])
    assert res.exit_code == 3 and "slurmctld" in res.output


def test_qos_limits_given_as_a_mapping_read_like_a_tres_list(tmp_path):
    """A case may give a QOS limit as ``{GRES/gpu: 4}``: names are matched as Slurm matches
    them (case-insensitively) and the case passes as with ``"gres/gpu=4"``; a bad count names
    the QOS and the limit."""
    case = yaml.safe_load((SLURM_CASES / "qos-001-max-gres-per-user.yaml").read_text())
    case["cluster"]["qos"][0]["limits"] = {"MaxTRESPerUser": {"GRES/gpu": 4}}
    mapped = tmp_path / "mapped.yaml"
    mapped.write_text(yaml.safe_dump(case))
    res = runner.invoke(app, ["conformance", "run", str(mapped)])
    assert res.exit_code == 0 and "FAIL" not in res.stdout, res.stdout
    case["cluster"]["qos"][0]["limits"] = {"MaxTRESPerUser": {"gres/gpu": "four"}}
    mapped.write_text(yaml.safe_dump(case))
    res = runner.invoke(app, ["conformance", "run", str(mapped)])
    assert res.exit_code != 0
    assert "QOS 'gpuq' limit MaxTRESPerUser" in res.output and "four" in res.output
