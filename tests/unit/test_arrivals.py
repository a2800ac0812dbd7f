"""Arrivals files: when each script is submitted and how long it really runs."""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from gpupool.errors import InputError
from gpupool.formats.arrivals import Arrival, arrivals_epoch, parse_arrivals


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "arrivals.csv"
    path.write_text(text)
    return path


def error_of(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(InputError) as info:
        parse_arrivals(path)
    return str(info.value).replace(str(path), "arrivals.csv")


def test_minimal_rows_durations_and_comments(tmp_path: Path) -> None:
    path = write(tmp_path, "# header comment\n\nsource,submit_time,runtime\n"
                           "a.sbatch,0,10:30:00\nb.sbatch, 1:00:00 ,5400\n# note\nc.sbatch,90.5,1-0\n")
    rows = parse_arrivals(path)
    assert [(r.source, r.submit_time, r.runtime, r.line) for r in rows] == [
        ("a.sbatch", 0.0, 37800.0, 4), ("b.sbatch", 3600.0, 5400.0, 5), ("c.sbatch", 90.5, 86400.0, 7)]
    assert rows[0] == Arrival("a.sbatch", 0.0, 37800.0, file=str(path), line=4)
    assert rows[0].where == f"{path}:4"
    assert arrivals_epoch(rows) is None


def test_optional_columns_in_any_order(tmp_path: Path) -> None:
    path = write(tmp_path, "source,submit_time,runtime,count,interval,outcome,checkpoint_interval\n"
                           "a.sbatch,100,60,3,10:00,failed,1800\nb.sh,0,60,,\n")
    a, b = parse_arrivals(path)
    assert (a.count, a.interval, a.outcome, a.checkpoint_interval) == (3, 600.0, "FAILED", 1800.0)
    assert a.submit_times() == [100.0, 700.0, 1300.0]
    assert (b.count, b.interval, b.outcome, b.checkpoint_interval) == (1, 0.0, None, None)
    assert b.submit_times() == [0.0]


def test_timestamps_count_from_the_earliest(tmp_path: Path) -> None:
    path = write(tmp_path, "source,submit_time,runtime\n"
                           "a.sbatch,2026-12-01T10:30:00,60\nb.sbatch,2026-12-01T10:00:00Z,60\n")
    a, b = parse_arrivals(path)
    assert (a.submit_time, b.submit_time) == (1800.0, 0.0)
    assert arrivals_epoch([a, b]) == datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)


def test_quoted_names(tmp_path: Path) -> None:
    (row,) = parse_arrivals(write(tmp_path, 'source,submit_time,runtime\n"odd,name.sh",0,60\n'))
    assert row.source == "odd,name.sh"


@pytest.mark.parametrize(("text", "message"), [
    ("", "arrivals.csv:1: empty arrivals file; expected a header 'source,submit_time,runtime"
         "[,outcome][,count][,interval][,checkpoint_interval][,user]' and one row per submission"),
    ("source,submit_time,walltime\n", "arrivals.csv:1 (field walltime): unknown column 'walltime'; "
     "expected the columns source, submit_time, runtime, outcome, count, interval, checkpoint_interval, user"),
    ("source,submit_time,runtime,count,count\n", "arrivals.csv:1 (field count): column 'count' appears twice"),
    ("source,runtime\n", "arrivals.csv:1: the header lacks the required column(s) submit_time; expected "
     "'source,submit_time,runtime' and optionally outcome, count, interval, checkpoint_interval, user"),
    ("source,submit_time,runtime\na.sbatch,0\n", "arrivals.csv:2: expected 3 cells as in the header "
     "(source,submit_time,runtime), got 2"),
    ("source,submit_time,runtime,count\na.sbatch,0,1,2,3\n", "arrivals.csv:2: expected 3 to 4 cells as "
     "in the header (source,submit_time,runtime,count), got 5"),
    ("source,submit_time,runtime\n,0,60\n", "arrivals.csv:2 (field source): expected the file name of a "
     "script or manifest in the folder, got an empty cell"),
    ("source,submit_time,runtime\nsub/a.sbatch,0,60\n", "arrivals.csv:2 (field source): expected a file "
     "name in the workload folder (no directories), got 'sub/a.sbatch'"),
    ("source,submit_time,runtime\n..,0,60\n", "arrivals.csv:2 (field source): expected a file name in "
     "the workload folder (no directories), got '..'"),
    ("source,submit_time,runtime\na.sbatch,soon,60\n", "arrivals.csv:2 (field submit_time): expected "
     "seconds or a Slurm duration such as '3600', '10:30:00' or '1-00:00:00', got 'soon'"),
    ("source,submit_time,runtime\na.sbatch,0,\n", "arrivals.csv:2 (field runtime): the runtime cell is "
     "empty; expected seconds or a Slurm duration such as '10:30:00'"),
    ("source,submit_time,runtime\na.sbatch,0,UNLIMITED\n", "arrivals.csv:2 (field runtime): expected a "
     "finite duration, got 'UNLIMITED'"),
    ("source,submit_time,runtime\na.sbatch,0,-5\n", "arrivals.csv:2 (field runtime): expected seconds "
     "or a Slurm duration such as '3600', '10:30:00' or '1-00:00:00', got '-5'"),
    ("source,submit_time,runtime,outcome\na.sbatch,0,60,TIMEOUT\n", "arrivals.csv:2 (field outcome): "
     "expected one of COMPLETED, FAILED, CANCELLED, got 'TIMEOUT'"),
    ("source,submit_time,runtime,count\na.sbatch,0,60,0\n", "arrivals.csv:2 (field count): expected a "
     "whole number of copies >= 1, got '0'"),
    ("source,submit_time,runtime,interval\na.sbatch,0,60,often\n", "arrivals.csv:2 (field interval): "
     "expected seconds or a Slurm duration such as '3600', '10:30:00' or '1-00:00:00', got 'often'"),
    ("source,submit_time,runtime,checkpoint_interval\na.sbatch,0,60,0\n", "arrivals.csv:2 (field "
     "checkpoint_interval): expected a positive duration, got '0'"),
    ("source,submit_time,runtime\na.sbatch,2026-13-01T00:00:00,60\n", "arrivals.csv:2 (field "
     "submit_time): expected a timestamp such as '2026-11-30T09:00:00', got '2026-13-01T00:00:00'"),
    ("source,submit_time,runtime\na.sbatch,2026-12-01T00:00:00,60\nb.sbatch,60,60\n", "arrivals.csv:3 "
     "(field submit_time): submit_time mixes timestamps and offsets: line 2 gives a timestamp, this "
     "line an offset; use one form throughout"),
])
def test_errors(tmp_path: Path, text: str, message: str) -> None:
    assert error_of(tmp_path, text) == message


def test_unreadable(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read the arrivals file"):
        parse_arrivals(tmp_path / "nope.csv")
