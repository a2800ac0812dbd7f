"""PAI 2020 reader: task table grouped into jobs, joined with the job table."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.errors import InputError
from gpupool.formats.traces import read_trace
from gpupool.formats.traces.pai import JOB_COLUMNS, TASK_COLUMNS, read_pai

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"

TASKS = """\
j1,worker,4.0,Terminated,1000.0,1600.0,600.0,29.296875,50.0,V100
j1,ps,1.0,Terminated,990.0,1610.0,400.0,10.0,,
j2,tensorflow,1.0,Failed,2000.0,2100.0,800.0,20.0,200.0,MISC
j3,worker,1.0,Running,3000.0,,600.0,10.0,100.0,T4
j4,cpu,1.0,Terminated,500.0,600.0,100.0,1.0,,
"""
JOBS = """\
j1,i1,userA,Terminated,900.0,1610.0
j2,i2,userB,Failed,1990.0,2100.0
j3,i3,userA,Running,2990.0,
j4,i4,userC,Terminated,480.0,600.0
"""


def test_tasks_grouped_into_jobs_with_the_job_table(tmp_path):
    tasks = tmp_path / "pai_task_table.csv"
    tasks.write_text(TASKS)
    (tmp_path / "pai_job_table.csv").write_text(JOBS)
    got = read_trace(tasks)
    assert [w.name for w in got] == ["j1", "j2"]
    j1, j2 = got
    assert (j1.submit_time, j1.runtime, j1.user, j1.outcome) == (0.0, 620.0, "userA", "COMPLETED")
    worker, ps = j1.pod_sets
    assert (worker.name, worker.count, worker.gpus, worker.cpu_m, worker.memory_mib) == ("worker", 4, 1, 6000, 30000)
    assert (ps.name, ps.count, ps.gpus) == ("ps", 1, 0)
    assert j1.labels == {"pai.gpu_fraction": "2", "pai.gpu_type": "V100"}
    assert worker.gpu_type is None
    assert (j2.submit_time, j2.outcome, j2.total_gpus) == (1090.0, "FAILED", 2)
    assert j1.source == f"{tasks}:1"
    assert got.skipped_by_reason() == {"no GPUs (gpu_only)": 1, "task not finished (no start or end time)": 1}


def test_without_job_table_and_keep_gpu_type(tmp_path):
    tasks = tmp_path / "tasks.csv"
    tasks.write_text(",".join(TASK_COLUMNS) + "\n" + TASKS)
    got = read_pai(tasks, keep_gpu_type=True, gpu_only=False)
    assert [w.name for w in got] == ["j4", "j1", "j2"]
    assert got[1].pod_sets[0].gpu_type == "V100"
    assert got[2].pod_sets[0].gpu_type is None  # MISC is never a constraint
    assert got[1].user is None and got.notes


def test_malformed_rows(tmp_path):
    tasks = tmp_path / "pai_task_table.csv"
    tasks.write_text("j1,worker,four,Terminated,1,2,100,1,100,T4\n")
    with pytest.raises(InputError) as err:
        read_pai(tasks)
    assert str(err.value) == f"{tasks}:1: column 'inst_num': expected a whole number >= 1, got 'four'"
    tasks.write_text(JOBS)
    with pytest.raises(InputError) as err:
        read_pai(tasks)
    assert str(err.value) == (
        f"{tasks}:1: expected 10 comma-separated columns ({','.join(TASK_COLUMNS)}: see pai_task_table.header), "
        "got 6 (this looks like pai_job_table; give the task table, which holds the GPU requests)")


@pytest.mark.traces
def test_reader_columns_match_the_official_headers():
    folder = TRACES / "alibaba-pai-gpu-2020"
    if not folder.exists():
        pytest.skip("shared/traces absent")
    assert tuple((folder / "pai_task_table.header").read_text().strip().split(",")) == TASK_COLUMNS
    assert tuple((folder / "pai_job_table.header").read_text().strip().split(",")) == JOB_COLUMNS
