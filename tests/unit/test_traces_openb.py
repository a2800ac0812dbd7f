"""OpenB pod list reader."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from gpupool.errors import InputError
from gpupool.formats.traces import read_trace
from gpupool.formats.traces.openb import read_openb

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
          "creation_time,deletion_time,scheduled_time\n")


def test_pods_become_services_and_batch_jobs(tmp_path):
    path = tmp_path / "openb_pod_list.csv"
    path.write_text(HEADER
                    + "p0,12000,16384,1,460,,LS,Running,100,1100,110\n"
                    + "p1,8000,8192,2,1000,V100M32,BE,Failed,50,250,60\n"
                    + "p2,4000,4096,0,0,,BE,Succeeded,10,20,10\n"
                    + "p3,4000,4096,1,1000,,BE,Pending,5,20,\n")
    got = read_trace(path)
    assert [w.name for w in got] == ["p1", "p0"]
    p1, p0 = got
    assert (p0.kind, p0.gang, p0.submit_time, p0.runtime, p0.total_gpus, p0.outcome) == (
        "service", "none", 50.0, 990.0, 1, "COMPLETED")
    assert p0.labels == {"openb.gpu_milli": "460", "openb.qos": "LS"}
    assert (p1.kind, p1.gang, p1.outcome, p1.pod_sets[0].cpu_m, p1.pod_sets[0].memory_mib) == (
        "batch", "all", "FAILED", 8000, 8192)
    assert p1.pod_sets[0].gpu_type is None and p1.labels["openb.gpu_spec"] == "V100M32"
    assert read_openb(path, keep_gpu_type=True)[0].pod_sets[0].gpu_type == "V100M32"
    assert got.skipped_by_reason() == {"never scheduled (Pending)": 1, "no GPUs (gpu_only)": 1}
    assert p0.source == f"{path}:2"


def test_bad_rows_are_located(tmp_path):
    path = tmp_path / "pods.csv"
    path.write_text(HEADER + "p0,12000,16384,1.5,460,,LS,Running,100,1100,110\n")
    with pytest.raises(InputError) as err:
        read_openb(path)
    assert str(err.value) == f"{path}:2: column 'num_gpu': expected a whole number >= 0, got '1.5'"
    path.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1,1,1000\n")
    with pytest.raises(InputError, match="missing column\\(s\\) creation_time, deletion_time, scheduled_time"):
        read_openb(path)


@pytest.mark.traces
def test_default_pod_list_statistics():
    path = TRACES / "alibaba-openb-gpu-2023" / "openb_pod_list_default.csv"
    if not path.exists():
        pytest.skip("shared/traces absent")
    got = read_trace(path)
    assert len(got) + len(got.skipped) == 8152
    assert got.skipped_by_reason() == {"no GPUs (gpu_only)": 1088, "never scheduled (Pending)": 861}
    fractional = sum("openb.gpu_milli" in w.labels for w in got)
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    share = sum(r["num_gpu"] == "1" and int(r["gpu_milli"]) < 1000 for r in rows) / len(rows)
    assert share == pytest.approx(0.378, abs=0.001)
    assert fractional == sum(r["num_gpu"] == "1" and int(r["gpu_milli"]) < 1000 and r["pod_phase"] != "Pending"
                             for r in rows)
    services = np.mean([w.kind == "service" for w in got])
    assert 0.5 <= services <= 0.65  # LS ≈ 57 % of pods
    assert max(w.total_gpus for w in got) == 8
