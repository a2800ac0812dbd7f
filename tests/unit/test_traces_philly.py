"""Philly reader: cluster_job_log JSON and the CSV carriers."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gpupool.errors import InputError
from gpupool.formats.traces import detect_format, read_trace
from gpupool.formats.traces.philly import read_philly

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"


def _job(jobid, submitted, status="Pass", attempts=None, vc="vc1", user="u1"):
    return {"status": status, "vc": vc, "jobid": jobid, "submitted_time": submitted, "user": user,
            "attempts": attempts if attempts is not None else []}


def _attempt(start, end, *machines):
    return {"start_time": start, "end_time": end,
            "detail": [{"ip": f"m{i}", "gpus": [f"gpu{g}" for g in range(n)]} for i, n in enumerate(machines)]}


def _write(path: Path, jobs) -> Path:
    path.write_text("[\n" + ",\n".join(json.dumps(j) for j in jobs) + "\n]\n")
    return path


def test_jobs_attempts_and_layout(tmp_path):
    path = _write(tmp_path / "cluster_job_log", [
        _job("a", "2017-10-03 10:00:00", "Failed", [
            _attempt("2017-10-03 10:01:00", "2017-10-03 10:02:00", 8, 8),
            _attempt("2017-10-03 10:05:00", "2017-10-03 10:15:00", 8, 8)]),
        _job("b", "2017-10-03 09:00:00", "Killed", [_attempt("2017-10-03 09:00:10", "2017-10-03 09:00:40", 2)]),
        _job("c", "2017-10-03 11:00:00", "Pass", []),
        _job("d", "2017-10-03 11:00:00", "Pass", [_attempt("2017-10-03 11:00:00", None, 1)]),
    ])
    assert detect_format(path) == "philly"
    got = read_trace(path)
    assert [w.name for w in got] == ["philly-b", "philly-a"]
    b, a = got
    assert (b.submit_time, b.runtime, b.outcome, b.total_gpus, b.account, b.queue_name) == (
        0.0, 30.0, "CANCELLED", 2, "vc1", "vc1")
    assert (a.submit_time, a.runtime, a.outcome) == (3600.0, 660.0, "FAILED")
    assert (a.pod_sets[0].count, a.pod_sets[0].gpus, a.pod_sets[0].one_per_node) == (2, 8, True)
    assert a.labels["philly.attempts"] == "2"
    assert a.source == f"{path}:2"
    assert got.skipped_by_reason() == {"no attempts (never ran)": 1,
                                       "still running at the snapshot (null end_time)": 1}


def test_bad_status_names_the_job_and_line(tmp_path):
    path = _write(tmp_path / "log.json", [_job("a", "2017-10-03 10:00:00"), _job("zz", "2017-10-03 10:00:00", "Done")])
    with pytest.raises(InputError) as err:
        read_philly(path)
    assert str(err.value) == f"{path}:3: job zz: key 'status': expected Pass, Failed or Killed, got 'Done'"


def test_bad_time_and_bad_json(tmp_path):
    path = _write(tmp_path / "log.json", [_job("a", "yesterday")])
    with pytest.raises(InputError, match="job a: key 'submitted_time': expected a timestamp"):
        read_philly(path)
    path.write_text('[{"jobid": 1,,}]')
    with pytest.raises(InputError, match="not valid JSON"):
        read_philly(path)


def test_carrier_csv_is_a_backlog(tmp_path):
    path = tmp_path / "sample.csv"
    path.write_text("duration_s,num_gpus\n7200,1\n3600,16\n")
    got = read_trace(path)
    assert [(w.submit_time, w.runtime, w.total_gpus) for w in got] == [(0.0, 7200.0, 1), (0.0, 3600.0, 16)]
    assert got[1].pod_sets[0].count == 2 and got[1].pod_sets[0].one_per_node
    assert got.notes
    path.write_text("duration_s,num_gpus\n7200,0\n")
    with pytest.raises(InputError) as err:
        read_philly(path)
    assert str(err.value) == f"{path}:2: column 'num_gpus': expected a whole number >= 1, got '0'"


def test_runtime_only_file_is_refused(tmp_path):
    path = tmp_path / "runtime.csv"
    path.write_text("runtime\n1.0\n")
    with pytest.raises(InputError, match="runtimes only"):
        read_philly(path)


@pytest.mark.traces
def test_gavel_sample_statistics():
    path = TRACES / "philly-2017" / "philly_job_duration_gpus_gavel_sample.csv"
    if not path.exists():
        pytest.skip("shared/traces absent")
    got = read_trace(path)
    assert len(got) == 33192
    gpus = np.array([w.total_gpus for w in got])
    runtime = np.array([w.runtime for w in got])
    assert (gpus == 1).mean() == pytest.approx(0.762, abs=0.002)
    assert np.median(runtime) == pytest.approx(14398, rel=0.01)
    gpu_time = gpus * runtime
    assert gpu_time[gpus == 8].sum() / gpu_time.sum() == pytest.approx(0.59, abs=0.01)


@pytest.mark.traces
def test_calibration_carriers_are_not_job_lists():
    path = TRACES / "philly-2017" / "philly_runtime_from_pai_analysis.csv"
    if not path.exists():
        pytest.skip("shared/traces absent")
    with pytest.raises(InputError, match="calibration input"):
        read_trace(path)
