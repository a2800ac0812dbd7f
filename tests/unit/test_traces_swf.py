"""SWF reader: conversions, skipped rows, located errors, and the two PWA logs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpupool.errors import InputError
from gpupool.formats.traces import read_trace
from gpupool.formats.traces.swf import read_swf

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
HEADER = "; Version: 2.2\n; MaxNodes: 64\n; MaxProcs: 128\n; Partition: 1 batch\n"


def _row(*fields) -> str:
    values = list(fields) + [-1] * (18 - len(fields))
    return " ".join(str(v) for v in values) + "\n"


def test_fields_become_a_gpu_job(tmp_path):
    path = tmp_path / "log.swf"
    path.write_text(HEADER
                    + _row(1, 100, 5, 3600, 4, -1, -1, 4, 7200, 1024, 1, 7, 3, -1, 2, 1)
                    + _row(2, 50, 0, 60, 16, -1, -1, 16, -1, -1, 0, 8, 3)
                    + _row(3, 200, 0, 10, 1, -1, -1, 1, 600, -1, 5, 7, 3))
    got = read_swf(path)
    assert [w.name for w in got] == ["swf-2", "swf-1", "swf-3"]
    big, first, cancelled = got
    assert (big.submit_time, big.runtime, big.outcome, big.time_limit) == (0.0, 60.0, "FAILED", None)
    assert (big.pod_sets[0].count, big.pod_sets[0].gpus, big.pod_sets[0].one_per_node) == (2, 8, True)
    assert (first.submit_time, first.total_gpus, first.time_limit, first.user, first.account) == (
        50.0, 4, 7200.0, "user7", "group3")
    assert first.pod_sets[0].memory_mib == 4  # 1024 KB per processor × 4 processors
    assert first.labels == {"swf.queue": "2", "swf.partition": "1"}
    assert cancelled.outcome == "CANCELLED"
    assert got.meta["MaxProcs"] == 128 and got.meta["Partitions"] == ["1 batch"]
    assert first.source == f"{path}:5"


def test_procs_per_gpu_shrinks_jobs(tmp_path):
    path = tmp_path / "log.swf"
    path.write_text(_row(1, 0, 0, 10, 128, -1, -1, 128) + _row(2, 1, 0, 10, 3, -1, -1, 3))
    got = read_swf(path, procs_per_gpu=8)
    assert [w.total_gpus for w in got] == [16, 1]


def test_unknown_runtime_is_skipped_and_counted(tmp_path):
    path = tmp_path / "log.swf"
    path.write_text(_row(1, 0, 0, -1, 4) + _row(2, 5, 0, 10, 4) + _row(3, 6, 0, 10, -1, -1, -1, -1))
    got = read_swf(path)
    assert len(got) == 1
    assert got.skipped_by_reason() == {"processor count unknown (-1)": 1, "run time unknown (-1)": 1}
    assert got.notes == ["1 jobs had an unknown status (-1 or other): read as COMPLETED."]


def test_malformed_rows_name_the_line_and_field(tmp_path):
    path = tmp_path / "bad.swf"
    path.write_text(HEADER + "1 2 3\n")
    with pytest.raises(InputError) as err:
        read_swf(path)
    assert str(err.value) == f"{path}:5: expected 18 whitespace-separated fields, got 3"
    path.write_text(_row(1, 0, 0, "x", 4))
    with pytest.raises(InputError) as err:
        read_swf(path)
    assert str(err.value) == f"{path}:1: field 4 (run time): expected a number, got 'x'"


@pytest.mark.traces
def test_hpc2n_slice():
    path = TRACES / "pwa-swf" / "HPC2N-2002-2.2.first3170jobs.swf"
    if not path.exists():
        pytest.skip("shared/traces absent")
    got = read_trace(path)
    assert len(got) == 3145 and len(got.skipped) == 25
    assert got.meta["MaxProcs"] == 240
    runtimes = np.array([w.runtime for w in got])
    assert 850 <= np.median(runtimes) <= 1000  # README: p50 928 s
    assert all(w.time_limit for w in got)  # it carries user estimates (field 9)


@pytest.mark.traces
def test_nasa_slice():
    path = TRACES / "pwa-swf" / "NASA-iPSC-1993-3.1-cln.swf"
    if not path.exists():
        pytest.skip("shared/traces absent")
    got = read_trace(path)
    assert len(got) == 18239
    gpus = np.array([w.total_gpus for w in got])
    assert 0.25 <= (gpus == 1).mean() <= 0.30  # README: 27 % serial
    assert np.median(gpus) == 4
    assert np.median([w.runtime for w in got]) == pytest.approx(86, abs=3)
