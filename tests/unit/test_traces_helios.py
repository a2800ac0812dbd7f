"""Helios cluster_log.csv reader."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.errors import InputError
from gpupool.formats.traces import read_trace
from gpupool.formats.traces.helios import read_helios

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
HEADER = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"


def test_rows_become_slurm_like_jobs(tmp_path):
    path = tmp_path / "cluster_log.csv"
    path.write_text(HEADER
                    + "j1,u1,vcA,16,64,2,COMPLETED,2020-04-01 10:00:00,2020-04-01 10:00:05,2020-04-01 11:00:05,3600,5\n"
                    + "j2,u2,vcB,1,4,1,TIMEOUT,2020-04-01 09:00:00,2020-04-01 09:00:00,2020-04-01 09:30:00,1800,0\n"
                    + "j3,u1,vcA,0,8,1,COMPLETED,2020-04-01 09:10:00,,,60,0\n"
                    + "j4,u3,vcA,2,8,1,NODE_FAIL,2020-04-01 09:20:00,2020-04-01 09:20:00,2020-04-01 09:21:40,,0\n")
    got = read_trace(path)
    assert [w.name for w in got] == ["helios-j2", "helios-j4", "helios-j1"]
    timeout, node_fail, big = got
    assert (timeout.runtime, timeout.time_limit, timeout.outcome) == (1801.0, 1800.0, "COMPLETED")
    assert (node_fail.submit_time, node_fail.runtime, node_fail.outcome) == (1200.0, 100.0, "FAILED")
    assert (big.submit_time, big.user, big.account, big.queue_name) == (3600.0, "u1", "vcA", "vcA")
    ps = big.pod_sets[0]
    assert (ps.count, ps.gpus, ps.cpu_m, ps.one_per_node) == (2, 8, 32000, True)
    assert got.skipped_by_reason() == {"no GPUs (gpu_only)": 1}
    assert big.source == f"{path}:2"


def test_bad_rows_are_located(tmp_path):
    path = tmp_path / "cluster_log.csv"
    path.write_text(HEADER + "j1,u1,vcA,two,4,1,COMPLETED,2020-04-01 10:00:00,,,10,0\n")
    with pytest.raises(InputError) as err:
        read_helios(path)
    assert str(err.value) == f"{path}:2: column 'gpu_num': expected a whole number >= 0, got 'two'"
    path.write_text(HEADER + "j1,u1,vcA,1,4,1,DONE,2020-04-01 10:00:00,,,10,0\n")
    with pytest.raises(InputError, match=r":2: column 'state': expected one of COMPLETED, FAILED"):
        read_helios(path)
    path.write_text("job_id,user\n")
    with pytest.raises(InputError, match="missing column\\(s\\) gpu_num, state, submit_time"):
        read_helios(path)


@pytest.mark.traces
def test_the_summary_file_is_not_a_job_log():
    path = TRACES / "helios-2020" / "helios_cluster_summary.csv"
    if not path.exists():
        pytest.skip("shared/traces absent")
    with pytest.raises(InputError, match="missing column"):
        read_helios(path)
