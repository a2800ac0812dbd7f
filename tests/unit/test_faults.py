"""The faults file: parsing, exact errors, and its effect through the CLI."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpupool.cli.main import app
from gpupool.engine.core import NodeEvent
from gpupool.errors import InputError
from gpupool.formats.faults import parse_faults

SEED = Path(__file__).resolve().parents[2] / "examples" / "seed-pool"


def test_parse_hostlists_durations_and_comments(tmp_path):
    f = tmp_path / "faults.csv"
    f.write_text("# maintenance\ntime,node,event,reason\n3600,gpu[01-02],drain,firmware\n1-00:00:00,gpu01,resume,\n")
    assert parse_faults(f, {"gpu01", "gpu02"}) == [
        NodeEvent(3600.0, "gpu01", "drain", "firmware"), NodeEvent(3600.0, "gpu02", "drain", "firmware"),
        NodeEvent(86400.0, "gpu01", "resume", ""),
    ]


@pytest.mark.parametrize("body, message", [
    ("when,node,event\n", "expected the header 'time,node,event[,reason]', got 'when,node,event'"),
    ("time,node,event\nsoon,gpu01,down\n", "column 'time': expected seconds or a Slurm duration, got 'soon'"),
    ("time,node,event\n10,gpu01,explode\n", "column 'event': expected one of down, up, drain, resume, got 'explode'"),
    ("time,node,event\n10,gpu09,down\n", "column 'node': the pool has no node 'gpu09'"),
])
def test_errors_name_line_and_column(tmp_path, body, message):
    f = tmp_path / "faults.csv"
    f.write_text(body)
    with pytest.raises(InputError) as exc:
        parse_faults(f, {"gpu01"})
    line = 1 if "header" in message else 2
    assert str(exc.value) == f"{f}:{line}: {message}"


def test_node_failure_through_the_cli(tmp_path):
    f = tmp_path / "faults.csv"
    f.write_text("time,node,event\n600,gpu01,down\n7200,gpu01,up\n")
    result = CliRunner().invoke(app, ["simulate", str(SEED), "--workload", str(SEED / "workloads"),
                                      "--faults", str(f), "--check", "--json", "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["requeues"] >= 1  # the pretraining job on gpu01 was requeued (--requeue default)
    assert summary["states"].get("COMPLETED") == summary["jobs"]
