"""The column-wise sacct parser: what each field becomes (pinned on the awkward cases a
per-record reading handled one by one), bad values named by file, line and field, the tuple
rows the writers take, and the garbage-collector pause of a bulk import."""
from __future__ import annotations

import gc

import pytest
import sqlalchemy as sa

from gpupool.errors import InputError
from gpupool.ledger import schema as s
from gpupool.ledger.imports.sacct import import_sacct, parse_parsable, parse_parsable_table
from gpupool.ledger.store import (
    ALLOCATION_COLUMNS,
    EVENT_COLUMNS,
    JOB_COLUMNS,
    allocation_tuples,
    event_tuples,
    gc_paused,
    job_tuples,
)

HEADER = ("JobID|JobIDRaw|JobName|User|Account|Partition|QOS|Cluster|Priority|Submit|Eligible|Start|End|Elapsed|"
          "ElapsedRaw|Timelimit|State|ExitCode|Reason|AllocCPUS|NNodes|NodeList|AllocTRES|WorkDir")
LINES = [
    # a finished 2-node job: one allocation per node, three events
    "7|7|train|ann|ml|gpu|normal|c1|120|2026-01-01T00:00:00|2026-01-01T00:00:00|2026-01-01T00:10:00|"
    "2026-01-01T02:10:00|02:00:00|7200|08:00:00|COMPLETED|0:0|None|16|2|gpu[01-02]|billing=16,cpu=16,gres/gpu=8|/w",
    # an array task still running, typed GPUs, Eligible after Submit, no ElapsedRaw (Elapsed is read)
    "40_3|43|sweep|bob|ml|gpu|high|c1|12.5|2026-01-01T01:00:00|2026-01-01T01:00:05|2026-01-01T01:30:00|Unknown|"
    "01:00:00||01:00:00|RUNNING|0:0|None|8|1|gpu03|cpu=8,gres/gpu:h100=3|",
    # cancelled while pending: Start = End, nothing assigned: never ran
    "9||lint|cy|ops|cpu|low|c1||2026-01-01T03:00:00|2026-01-01T03:00:00|2026-01-01T03:05:00|2026-01-01T03:05:00|"
    "00:00:00|0|UNLIMITED|CANCELLED by 1001||Priority|0|0|None assigned||",
    # a job step (--allocations would not print it): skipped
    "7.batch|7.batch|batch|ann|ml|gpu|normal|c1||2026-01-01T00:10:00|2026-01-01T00:10:00|2026-01-01T00:10:00|"
    "2026-01-01T02:10:00|02:00:00|7200||COMPLETED|0:0|None|16|1|gpu01|cpu=16,gres/gpu=4|",
]


def _write(tmp_path, lines, name="sacct.txt", header=HEADER, trailing=""):
    p = tmp_path / name
    p.write_text("\n".join(line + trailing for line in [header] + lines) + "\n")
    return p


def _jobs(ledger):
    with ledger.read() as conn:
        return {r["job_id"]: r for r in conn.execute(sa.select(s.jobs)).mappings()}


def test_fields_become_what_each_record_says(ledger, tmp_path):
    result = import_sacct(ledger, _write(tmp_path, LINES), pool="none")
    assert (result["records"], result["jobs_added"], result["events_added"]) == (4, 3, 3 + 2 + 2)
    jobs = _jobs(ledger)
    assert set(jobs) == {"7", "40_3", "9"}
    done, task, never = jobs["7"], jobs["40_3"], jobs["9"]
    assert (done["job_id_raw"], done["gpus"], done["billing"], done["elapsed"], done["gpu_seconds"]) == (
        7, 8, 16.0, 7200.0, 57600.0)
    assert (done["reason"], done["extra"], done["timelimit"], done["priority"]) == (
        "", '{"WorkDir": "/w"}', 28800.0, 120)
    assert (task["array_job_id"], task["array_task_id"], task["job_id_raw"], task["gpu_type"]) == (40, 3, 43, "h100")
    assert (task["elapsed"], task["priority"], task["billing"], task["end"]) == (3600.0, 12, 8.0, None)
    assert task["eligible"] == task["submit"] + 5
    assert (never["job_id_raw"], never["node_list"], never["priority"], never["timelimit"], never["state"]) == (
        9, "", None, None, "CANCELLED by 1001")
    with ledger.read() as conn:
        events = conn.execute(sa.select(s.events.c.job_id, s.events.c.kind, s.events.c.detail)
                              .order_by(s.events.c.id)).all()
        allocs = conn.execute(sa.select(s.allocations.c.job_id, s.allocations.c.node, s.allocations.c.gpu_count,
                                        s.allocations.c.time_to, s.allocations.c.as_of)
                              .order_by(s.allocations.c.id)).all()
    assert [tuple(e) for e in events] == [
        ("7", "submitted", ""), ("7", "started", "gpu[01-02]"), ("7", "finished", "COMPLETED"),
        ("40_3", "submitted", ""), ("40_3", "started", "gpu03"),
        ("9", "submitted", ""), ("9", "finished", "CANCELLED by 1001")]
    t0 = jobs["40_3"]["start"]
    assert [tuple(a) for a in allocs] == [("7", "gpu01", 4, done["end"], None), ("7", "gpu02", 4, done["end"], None),
                                          ("40_3", "gpu03", 3, None, t0 + 3600.0)]


def test_parsable_trailing_bars_blank_lines_and_a_repeated_job(tmp_path):
    text = HEADER + "|\n\n" + LINES[0] + "|\n   \n" + LINES[1] + "|\n" + LINES[0].replace("COMPLETED", "FAILED") + "|\n"
    header, rows, lines = parse_parsable_table(text, "f")
    assert header == HEADER.split("|") and list(lines) == [3, 5, 6]
    assert list(parse_parsable_table("\n\n" + HEADER + "\n" + LINES[0] + "\n", "f")[2]) == [4]
    assert [r[0] for r in rows] == ["7", "40_3", "7"]
    assert parse_parsable(text, "f")[1]["JobID"] == "40_3"
    p = tmp_path / "s.txt"
    p.write_text(text)
    from gpupool.ledger import Ledger

    ledger = Ledger(tmp_path / "l.db")
    import_sacct(ledger, p)
    with ledger.read() as conn:
        order = conn.execute(sa.select(s.jobs.c.job_id, s.jobs.c.state)).all()
    assert sorted(tuple(r) for r in order) == [("40_3", "RUNNING"), ("7", "FAILED")]  # the later record wins
    ledger.close()


@pytest.mark.parametrize(("field", "bad", "cell"), [
    ("Submit", "2026-13-45T00:00:00", 9), ("AllocTRES", "cpu=2,gres/gpu=two", 22), ("NodeList", "gpu[01-", 21),
    ("End", "yesterday-ish", 12)])
def test_a_bad_value_is_named_by_file_line_and_field(ledger, tmp_path, field, bad, cell):
    lines = LINES[:3]
    cells = lines[1].split("|")
    cells[cell] = bad
    path = _write(tmp_path, [lines[0], "", "|".join(cells), lines[2]])  # the bad record is on line 4
    with pytest.raises(InputError) as err:
        import_sacct(ledger, path)
    assert (err.value.line, err.value.field, err.value.source) == (4, field, str(path))
    assert repr(bad) in str(err.value)
    assert not _jobs(ledger)  # nothing of the file lands


def test_a_short_line_is_named_by_its_line(ledger, tmp_path):
    path = _write(tmp_path, [LINES[0], "", "7|8|9"])
    with pytest.raises(InputError) as err:
        import_sacct(ledger, path)
    assert err.value.line == 4 and "got 3" in str(err.value)


def test_dict_rows_become_tuples_with_the_column_defaults():
    (job,) = job_tuples([{"origin": "c", "job_id": "1", "state": "RUNNING", "extra": {"b": 1, "a": [2]}}])
    row = dict(zip(JOB_COLUMNS, job))
    assert (row["kind"], row["exit_code"], row["gpus"], row["billing"], row["start"]) == ("batch", "0:0", 0, 0.0, None)
    assert row["extra"] == '{"a": [2], "b": 1}'
    (event,) = event_tuples([{"origin": "c", "job_id": "1", "time": 5.0, "kind": "submitted"}])
    assert dict(zip(EVENT_COLUMNS, event)) == {"origin": "c", "job_id": "1", "time": 5.0, "kind": "submitted",
                                               "detail": "", "policy_version": None, "source": ""}
    (alloc,) = allocation_tuples([{"origin": "c", "job_id": "1", "node": "n", "gpu_index": 0, "gpu_count": 1,
                                   "time_from": 1.0}])
    assert dict(zip(ALLOCATION_COLUMNS, alloc))["gpu_type"] == "" and alloc[-3:] == (None, None, None)


def test_gc_paused_nests_and_restores_the_collector():
    was = gc.isenabled()
    try:
        gc.enable()
        with gc_paused():
            assert not gc.isenabled()
            with gc_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()
        assert gc.isenabled()
        gc.disable()
        with gc_paused():
            pass
        assert not gc.isenabled()  # left off when it was off
    finally:
        (gc.enable if was else gc.disable)()


def test_line_numbers_count_lines_before_the_header(ledger, tmp_path):
    cells = LINES[1].split("|")
    cells[11] = "not-a-time"  # Start of the second record, on line 5
    path = tmp_path / "lead.txt"
    path.write_text("\n\n" + "\n".join([HEADER, LINES[0], "|".join(cells), LINES[2]]) + "\n")
    with pytest.raises(InputError) as err:
        import_sacct(ledger, path)
    assert (err.value.line, err.value.field) == (5, "Start")
