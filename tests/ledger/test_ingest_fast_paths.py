"""The bulk paths of a sacct import store exactly what the row-by-row paths store: the events
the database makes from the jobs just inserted (``store.insert_new_job_events``: every job new,
each record its own job) equal the importer's event tuples, ids and policy versions included;
columns left out of an insert because they are None in every row read back as None; the usage
day rows hold NULL (never NaN) for an hour without usage."""
from __future__ import annotations

import math
import random

import sqlalchemy as sa

from gpupool.ledger import Ledger
from gpupool.ledger import schema as s
from gpupool.ledger.imports.sacct import import_sacct
from gpupool.ledger.store import usage_hours
from gpupool.ledger.timefmt import format_ts

HEADER = ("JobID|JobIDRaw|JobName|User|Account|Partition|QOS|Cluster|Submit|Eligible|Start|End|ElapsedRaw|"
          "Timelimit|State|ExitCode|Reason|AllocCPUS|NNodes|NodeList|AllocTRES")
T0 = 1767225600  # 2026-01-01T00:00:00Z
STATES = ["COMPLETED", "FAILED", "CANCELLED by 1001", "TIMEOUT", "RUNNING", "PENDING", "NODE_FAIL",
          "OUT_OF_MEMORY", "REQUEUED", "PREEMPTED", "", "SUSPENDED", "DEADLINE"]
NODES = ["gpu01", "gpu[01-02]", "gpu[03,05]", "None assigned", "(null)", ""]


def _line(rng: random.Random, job: int, cluster: str) -> str:
    submit = T0 + rng.randrange(0, 3 * 86400)
    start = None if rng.random() < 0.1 else submit + rng.choice([0, 0, rng.randrange(1, 7200)])
    elapsed = rng.randrange(0, 6 * 3600)
    state = rng.choice(STATES)
    end = "Unknown" if start is None or state in ("RUNNING", "PENDING") else format_ts(start + elapsed)
    nodes = rng.choice(NODES)
    gpus = rng.choice([0, 2, 4])
    tres = f"billing={gpus * 2 or 1},cpu=4,gres/gpu={gpus},node=1" if gpus else "cpu=4"
    return "|".join(map(str, (job, job, f"j{job}", rng.choice(["ann", "bob"]), rng.choice(["a", "b"]), "gpu",
                              "normal", cluster, format_ts(submit), format_ts(submit),
                              "Unknown" if start is None else format_ts(start), end, elapsed, "08:00:00", state,
                              "0:0", "None", 4, 1, nodes, tres)))


def _rows(ledger: Ledger, table: sa.Table) -> list[tuple]:
    with ledger.read() as conn:
        return [tuple(r) for r in conn.execute(sa.select(table).order_by(*table.primary_key.columns))]


def test_events_made_by_the_database_equal_the_importers_tuples(tmp_path, monkeypatch):
    rng = random.Random(5)
    files = []
    job = 1
    for i in range(4):
        lines = []
        for _ in range(rng.randrange(1, 60)):
            lines.append(_line(rng, job, rng.choice(["c1", "c1", "c2"]) if i % 2 else "c1"))
            job += 1
        path = tmp_path / f"sacct{i}.txt"
        path.write_text(HEADER + "\n" + "\n".join(lines) + "\n")
        files.append(path)
    ledgers = []
    for name in ("bulk", "tuples"):
        ledger = Ledger(tmp_path / f"{name}.db")
        # versions in force at different event times, two committed at the same instant (the
        # later one wins), one between the others in time but committed last
        with ledger.transaction() as conn:
            for k, at in enumerate((T0 - 10.0, T0 + 86400.0, T0 + 86400.0, T0 + 2 * 86400.0 + 0.5, T0 + 3600.0)):
                conn.execute(s.policy_versions.insert().values(
                    version=f"v{k}", pool="p", tree=f"t{k}", parent=None, author="t", message="m",
                    committed_at=at, manifest="{}"))
        ledgers.append((ledger, "p"))
    bulk, tuples = ledgers
    results = {}
    for (ledger, pool), label in ((bulk, "bulk"), (tuples, "tuples")):
        if label == "tuples":  # the importer's own event tuples, as for changed records
            monkeypatch.setattr(Ledger, "last_job_rowid", lambda self, conn: None)
        results[label] = [import_sacct(ledger, f, pool=pool if i % 2 == 0 else None) for i, f in enumerate(files)]
    assert results["bulk"] == results["tuples"]
    events = _rows(bulk[0], s.events)
    assert events == _rows(tuples[0], s.events)
    assert {e[4] for e in events} == {"submitted", "started", "finished"}
    assert {e[6] for e in events} >= {None, "v2", "v3", "v4"}  # v1 ties with v2, which wins
    assert "v1" not in {e[6] for e in events}
    for table in (s.jobs, s.allocations):
        assert _rows(bulk[0], table) == _rows(tuples[0], table)
    # never started or nothing assigned: no start event; a final state with an end: finished
    jobs = {(r[0], r[1]): r for r in _rows(bulk[0], s.jobs)}
    started = {(e[1], e[2]) for e in events if e[4] == "started"}
    for key, r in jobs.items():
        ran = r[s.jobs.c.keys().index("start")] is not None and r[s.jobs.c.keys().index("node_list")] not in ("", "(null)")
        assert (key in started) == ran
    for ledger, _ in ledgers:
        ledger.close()


def _imported(tmp_path, seed: int, n: int) -> Ledger:
    """A fresh ledger holding one sacct file of ``n - 1`` random records."""
    ledger = Ledger(tmp_path / "l.db")
    path = tmp_path / "sacct.txt"
    rng = random.Random(seed)
    path.write_text(HEADER + "\n" + "\n".join(_line(rng, j, "c1") for j in range(1, n)) + "\n")
    import_sacct(ledger, path)
    return ledger


def test_a_column_none_in_every_row_reads_back_none(tmp_path):
    ledger = _imported(tmp_path, 1, 30)
    with ledger.read() as conn:
        rows = conn.execute(sa.select(s.jobs.c.array_job_id, s.jobs.c.array_task_id, s.jobs.c.job_id_raw)).all()
        allocs = conn.execute(sa.select(s.allocations.c.policy_version, s.allocations.c.as_of,
                                        s.allocations.c.time_to)).all()
    assert rows and all(r[0] is None and r[1] is None and r[2] is not None for r in rows)
    assert allocs and all(a[0] is None for a in allocs)
    assert all((a[1] is None) == (a[2] is not None) for a in allocs)  # open ones are seen as of a time
    ledger.close()


def test_usage_day_rows_hold_null_for_an_hour_without_usage(tmp_path):
    ledger = _imported(tmp_path, 2, 80)
    with ledger.read() as conn:
        day_rows = conn.execute(sa.select(s.usage)).mappings().all()
        hours = usage_hours(conn)
    values = [r[h] for r in day_rows for h in s.USAGE_HOURS]
    assert any(v is None for v in values) and not any(v is not None and math.isnan(v) for v in values)
    assert len(hours) == sum(v is not None for v in values) > 0
    assert all(r[8] > 0 for r in hours)
    ledger.close()


def _hourly_report(hours: list[tuple], by: list[str], period: str, tres: str) -> list[tuple]:
    """What ``usage`` answered when the table held one row per hour: SQL summed the rows of
    each (origin, hour, GPU type, group) in key order, then each day's hours in (origin, hour)
    order; Python added the days (or, for ``--period hour``, the hours) per period and group."""
    from gpupool.ledger.query import _BY, _period_key

    col = {"origin": 0, "account": 2, "user": 3, "qos": 4, "queue": 5, "gpu_type": 6, "tres": 7}
    key_order = lambda r: (r[0], r[7], r[1], r[2], r[6], r[3], r[4], r[5])  # noqa: E731 (the 0004 key)
    hourly: dict[tuple, float] = {}
    for r in sorted((r for r in hours if r[7] == tres), key=key_order):
        k = (r[0], r[1], r[6], *(r[col[_BY[b]]] for b in by))
        hourly[k] = hourly[k] + r[8] if k in hourly else r[8]
    units = []
    if period == "hour":
        units = [(k[1], v, k[3:]) for k, v in sorted(hourly.items())]
    else:
        days: dict[tuple, list] = {}
        for (origin, hour, gpu, *groups), v in sorted(hourly.items()):
            k = (math.floor(hour / 86400.0), gpu, *groups)
            if k in days:
                days[k][1] += v
            else:
                days[k] = [hour, v]
        units = [(h, v, tuple(k[2:])) for k, (h, v) in sorted(days.items())]
    totals: dict[tuple, float] = {}
    for hour, v, groups in units:
        k = (_period_key(hour, period), *groups)
        totals[k] = totals.get(k, 0.0) + v
    return [(*k, v / 3600.0) for k, v in sorted(totals.items())]


def test_usage_report_adds_the_day_rows_as_the_hourly_table_did(tmp_path, seed_result, monkeypatch):
    """Bit for bit (seconds not rounded): a recorded simulation (fractional times) and a sacct
    import in one ledger, every ``--by`` column, every period, every TRES."""
    from gpupool.ledger import query
    from gpupool.ledger.record import record_run
    from tests.ledger.conftest import SEED_POOL

    ledger = Ledger(tmp_path / "l.db")
    record_run(ledger, seed_result, str(SEED_POOL), None, "fifo")
    rng = random.Random(3)
    path = tmp_path / "sacct.txt"
    path.write_text(HEADER + "\n" + "\n".join(_line(rng, j, "c1") for j in range(1, 200)) + "\n")
    import_sacct(ledger, path)
    # and a roll-up of fractional seconds and rates (as a simulation with fractional times has)
    from gpupool.ledger import rollup, store

    jobs = [(T0 + 0.37 + k * 997.3, 60.1 + (k * 7919.7) % 30000, 1 + k % 5, "ab"[k % 2], ("ann", "bob", "cy")[k % 3],
             "normal", "gpu", 0.1 * (k % 7)) for k in range(300)]
    allocs = [(j[0], j[0] + j[1], None, 1 + k % 3, ("h100", "")[k % 2], *j[3:7], "a100") for k, j in enumerate(jobs)]
    with ledger.transaction() as conn:
        store.write_usage(conn, rollup.delta_of("c3", jobs, allocs))
    with ledger.read() as conn:
        hours = usage_hours(conn)
    assert len({r[0] for r in hours}) == 3 and any(r[8] != int(r[8]) for r in hours)
    monkeypatch.setattr(query, "round", lambda v, n=None: v, raising=False)  # the sums as computed
    for tres in ("gres/gpu", "cpu", "billing"):
        for by in (["account", "gpu-type"], ["account"], ["user", "qos"], ["queue"], ["cluster"], ["gpu-type"]):
            for period in ("hour", "day", "week", "month", "all"):
                got = query.usage_report(ledger, by=by, period=period, tres=tres)
                assert [(r["period"], *(r[b] for b in by), r["hours"]) for r in got] == \
                    _hourly_report(hours, by, period, tres), (tres, by, period)
    ledger.close()
