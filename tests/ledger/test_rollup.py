"""The array roll-up (``rollup.delta_of``, what imports and rebuilds use) gives bit for bit the
rows of the plain one (``add_jobs`` + ``add_allocations`` + ``as_tuples``), clipped or not,
with whole and fractional times; and migration 0004 keeps every usage row."""
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


def test_migration_0004_keeps_usage_rows(db_url):
    engine = make_engine(db_url)
    upgrade(engine, "0003")
    rows = [("c1", T0 + h * 3600.0, acct, "u", "normal", "gpu", gt, tres, 60.0 * h + 0.5)
            for h in range(5) for acct in ("a", "b") for gt, tres in (("", "cpu"), ("h100", "gres/gpu"))]
    cols = ("origin", "period_start", "account", "user", "qos", "queue", "gpu_type", "tres", "seconds")
    with engine.begin() as conn:
        conn.execute(s.usage.insert(), [dict(zip(cols, r)) for r in rows])
    upgrade(engine)
    assert current_revision(engine) == "0004"
    with engine.connect() as conn:
        got = sorted(tuple(r) for r in conn.execute(sa.select(*(s.usage.c[c] for c in cols))))
        pk = sa.inspect(conn).get_pk_constraint("usage")["constrained_columns"]
    assert got == sorted(rows)
    assert pk == ["origin", "tres", "period_start", "account", "gpu_type", "user", "qos", "queue"]
    upgrade(engine, "0003")  # and back
    with engine.connect() as conn:
        assert sorted(tuple(r) for r in conn.execute(sa.select(*(s.usage.c[c] for c in cols)))) == sorted(rows)
    engine.dispose()
