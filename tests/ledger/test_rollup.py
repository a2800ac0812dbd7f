"""The array roll-up (``rollup.delta_of``, what imports and rebuilds use) gives bit for bit the
rows of the plain one (``add_jobs`` + ``add_allocations`` + ``as_tuples``), clipped or not,
with whole and fractional times; and migrations 0004 and 0005 keep every usage row."""
from __future__ import annotations

import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.ledger import rollup
from gpupool.ledger import schema as s
from gpupool.ledger.db import current_revision, make_engine, upgrade

T0 = 1767225600.0  # 2026-01-01T00:00:00Z
times = st.one_of(st.integers(-7200, 40 * 3600).map(float),
                  st.floats(-7200, 40 * 3600, allow_nan=False, allow_infinity=False))
names = st.sampled_from(["a", "b", ""])
job = st.tuples(st.one_of(st.none(), times), st.one_of(st.none(), st.floats(-10, 30000, allow_nan=False)),
                st.sampled_from([0, 1, 4, 32]), names, names, names, names,
                st.sampled_from([0.0, 1.0, 2.5, 0.1, 48.0]))
alloc = st.tuples(times, st.one_of(st.none(), times), st.one_of(st.none(), times), st.sampled_from([0, 1, 2, 8]),
                  st.sampled_from(["", "h100"]), names, names, names, names, st.sampled_from(["", "a100"]))


def _shift(row, positions):
    return tuple(T0 + v if i in positions and v is not None else v for i, v in enumerate(row))


@settings(max_examples=300, deadline=None)
@given(jobs=st.lists(job, max_size=25), allocs=st.lists(alloc, max_size=25),
       clip=st.one_of(st.none(), st.tuples(st.integers(-3, 30), st.integers(1, 20))))
def test_array_rollup_equals_the_plain_one(jobs, allocs, clip):
    jobs = [_shift(j, {0}) for j in jobs]
    allocs = [_shift(a, {0, 1, 2}) for a in allocs]
    lo = hi = None
    if clip is not None:
        lo = T0 + clip[0] * 3600.0
        hi = lo + clip[1] * 3600.0
    totals: rollup.Totals = {}
    rollup.add_jobs(totals, jobs, lo, hi)
    rollup.add_allocations(totals, allocs, lo, hi)
    expected = rollup.as_tuples(totals, "c1")
    delta = rollup.delta_of("c1", jobs, allocs, lo, hi)
    assert delta.tuples() == expected
    assert len(delta) == len(expected)
    if expected:
        mid = expected[len(expected) // 2][1]
        assert delta.outside(mid, mid + 3600.0).tuples() == [r for r in expected if r[1] != mid]


@settings(max_examples=150, deadline=None)
@given(jobs=st.lists(job, max_size=20), allocs=st.lists(alloc, max_size=20))
def test_fresh_usage_rows_equal_the_roll_up_of_the_same_rows(jobs, allocs):
    """``store.fresh_usage_rows`` (columns straight from job and allocation tuples) gives the
    rows ``delta_of`` gives for the same jobs and allocations row by row."""
    from gpupool.ledger import store

    job_rows = {}
    for i, (start, elapsed, ncpus, account, user, qos, queue, billing) in enumerate(jobs):
        job_rows[str(i)] = store.job_tuples([{
            "origin": "c1", "job_id": str(i), "state": "COMPLETED", "start": None if start is None else T0 + start,
            "elapsed": elapsed, "ncpus": ncpus, "account": account, "user": user, "qos": qos, "queue": queue,
            "billing": billing, "gpu_type": ("", "a100")[i % 2]}])[0]
    alloc_rows = []
    if job_rows:
        for k, r in enumerate(allocs):
            time_from, time_to, as_of, count, gpu_type = _shift(r[:5], {0, 1, 2})
            alloc_rows.append(store.allocation_tuples([{
                "origin": "c1", "job_id": str(k % len(job_rows)), "node": f"n{k}", "gpu_index": -1,
                "gpu_count": count, "gpu_type": gpu_type, "time_from": time_from, "time_to": time_to,
                "as_of": as_of, "policy_version": None}])[0])
    by_row = rollup.delta_of(
        "c1", [(j[store.J_START], j[store.J_ELAPSED], j[store.J_NCPUS], j[store.J_ACCOUNT], j[store.J_USER],
                j[store.J_QOS], j[store.J_QUEUE], j[store.J_BILLING]) for j in job_rows.values()],
        [(a[store.A_TIME_FROM], a[store.A_TIME_TO], a[store.A_AS_OF], a[store.A_GPU_COUNT], a[store.A_GPU_TYPE],
          *(job_rows[a[1]][i] for i in (store.J_ACCOUNT, store.J_USER, store.J_QOS, store.J_QUEUE,
                                        store.J_GPU_TYPE))) for a in alloc_rows])
    assert store.fresh_usage_rows("c1", job_rows, alloc_rows).tuples() == by_row.tuples()


#: The usage table as migrations 0001-0004 made it: one row per hour (``s.usage`` is 0005's)
HOURLY_COLUMNS = ("origin", "period_start", "account", "user", "qos", "queue", "gpu_type", "tres", "seconds")
hourly_usage = sa.table("usage", *(sa.column(c) for c in HOURLY_COLUMNS))


def _downgrade(engine, revision: str) -> None:
    """Alembic's downgrade (``db.upgrade`` to an older revision does nothing)."""
    from alembic import command

    from gpupool.ledger.db import _alembic_config

    with engine.begin() as conn:
        command.downgrade(_alembic_config(conn), revision)


def _hourly_rows(engine) -> list[tuple]:
    with engine.connect() as conn:
        return sorted(tuple(r) for r in conn.execute(sa.select(*hourly_usage.c)))


def test_migration_0004_keeps_usage_rows(db_url):
    engine = make_engine(db_url)
    upgrade(engine, "0003")
    rows = [("c1", T0 + h * 3600.0, acct, "u", "normal", "gpu", gt, tres, 60.0 * h + 0.5)
            for h in range(5) for acct in ("a", "b") for gt, tres in (("", "cpu"), ("h100", "gres/gpu"))]
    with engine.begin() as conn:
        conn.execute(hourly_usage.insert(), [dict(zip(HOURLY_COLUMNS, r)) for r in rows])
    upgrade(engine, "0004")
    assert current_revision(engine) == "0004"
    with engine.connect() as conn:
        pk = sa.inspect(conn).get_pk_constraint("usage")["constrained_columns"]
    assert _hourly_rows(engine) == sorted(rows)
    assert pk == ["origin", "tres", "period_start", "account", "gpu_type", "user", "qos", "queue"]
    _downgrade(engine, "0003")  # and back
    assert current_revision(engine) == "0003"
    assert _hourly_rows(engine) == sorted(rows)
    engine.dispose()


def test_migration_0005_moves_hourly_rows_into_day_rows(db_url):
    """A ledger made at 0004 (hourly usage rows, an imported job) upgrades in place: every
    hour's seconds land in its day row's hour column unchanged, the job stays, ``usage`` reports
    what it reported before the upgrade, later imports add to the moved hours, and the
    downgrade gives the hourly rows back."""
    from gpupool.ledger import Ledger
    from gpupool.ledger.query import usage_report
    from gpupool.ledger.store import usage_hours

    engine = make_engine(db_url)
    upgrade(engine, "0004")
    # hours across a UTC midnight, fractional seconds, several keys, two origins
    rows = [(o, T0 + h * 3600.0, acct, u, "normal", "gpu", gt, tres, 60.0 * h + 0.125 * k)
            for o in ("c1", "c2") for h in range(20, 30) for k, (acct, u) in enumerate((("a", "ann"), ("b", "bob")))
            for gt, tres in (("", "cpu"), ("h100", "gres/gpu")) if (h + k) % 3]
    with engine.begin() as conn:
        conn.execute(hourly_usage.insert(), [dict(zip(HOURLY_COLUMNS, r)) for r in rows])
        conn.execute(sa.text('INSERT INTO jobs (origin, job_id, state, gpus, gpu_seconds) '
                             "VALUES ('c1', '7', 'COMPLETED', 2, 200.0)"))
    # what the hourly schema's query answered, before the upgrade
    hourly = sa.table("usage", *(sa.column(c) for c in HOURLY_COLUMNS))
    with engine.connect() as conn:
        before = sorted(conn.execute(sa.select(hourly.c.origin, hourly.c.tres, hourly.c.account,
                                               sa.func.sum(hourly.c.seconds))
                                     .group_by(hourly.c.origin, hourly.c.tres, hourly.c.account)).all())
    upgrade(engine, "0005")
    assert current_revision(engine) == "0005"
    with engine.connect() as conn:
        assert sorted(usage_hours(conn)) == sorted(rows)
        days = conn.execute(sa.select(s.usage.c.day_start).distinct()).scalars().all()
        assert sorted(days) == [T0, T0 + 86400.0]
        n = conn.execute(sa.select(sa.func.count()).select_from(s.usage)).scalar_one()
        assert n == len({(r[0], r[7], r[1] // 86400, r[2], r[6], r[3]) for r in rows})
        assert conn.execute(sa.select(s.jobs.c.gpu_seconds).where(s.jobs.c.job_id == "7")).scalar_one() == 200.0
    led = Ledger(engine=engine)
    for o, tres, acct, secs in before:
        got = usage_report(led, by=["cluster", "account"], period="all", tres=tres, clusters=[o])
        assert [(r["cluster"], r["account"]) for r in got if r["account"] == acct] == [(o, acct)]
        assert [r["hours"] for r in got if r["account"] == acct] == [round(secs / 3600.0, 6)]
    # a later write adds to a moved hour as it added to the hourly row
    from gpupool.ledger import store
    delta = rollup.delta_of("c1", [(T0 + 20 * 3600.0, 1800.0, 4, "a", "ann", "normal", "gpu", 0.0)])
    with led.transaction() as conn:
        store.write_usage(conn, delta)
    with engine.connect() as conn:
        after = {r[:8]: r[8] for r in usage_hours(conn)}
    key = ("c1", T0 + 20 * 3600.0, "a", "ann", "normal", "gpu", "", "cpu")
    old = {r[:8]: r[8] for r in rows}
    assert after[key] == round(old.get(key, 0.0) + 4 * 1800.0, 6)
    _downgrade(engine, "0004")  # and back
    assert current_revision(engine) == "0004"
    restored = {r[:8]: r[8] for r in _hourly_rows(engine)}
    assert restored == {**old, key: after[key]}
    engine.dispose()
