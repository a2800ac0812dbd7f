"""Speed round 7 of the Slurm policy: shortcuts that must answer exactly as the plain computation.

- ``NodeSpace.window`` walks the slots after ``later_start`` is found with one AND over a range
  of slots (found by bisection): compared with the slot-by-slot walk it replaced, on hypothesis
  and seeded maps (nodes, ``later_start`` and ``reach``).
- ``queue._order`` keeps the last build's order and inserts the new records: compared with one
  stable sort of every record, over random sequences of builds (jobs leaving, arriving, made
  anew, several records with equal keys per job).
- The queue as a whole: every build of a simulation equals a build from an empty cache.
- A backfill cycle takes over the last cycle's will-run answers and node timeline when nothing
  they read changed (``backfill._Carry``): every cycle's plans and reservations, and the job
  table, equal those of the same run with the carry switched off, and the carry was used.
"""
from __future__ import annotations

import bisect
import random
from operator import attrgetter
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool
from gpupool.policy.slurm import backfill, queue
from gpupool.policy.slurm.node_space import NodeSpace, bits
from gpupool.workload.sources import load_workload

from tests.unit.test_slurm_speed_nodespace import ALL, END, RES, _resv  # the same maps

ROOT = Path(__file__).resolve().parents[2]


def _window_by_slot(space: NodeSpace, start_res: float, end_time: float, nodes: int) -> tuple[int, float, float]:
    """The slot-by-slot walk ``NodeSpace.window`` made before this round: (nodes, later, reach)."""
    begins, ends, avail = space.begins, space.ends, space.avail
    last = len(ends) - 1
    acc = nodes
    later = 0.0
    k = last
    for k in range(bisect.bisect_right(ends, start_res), last + 1):
        a = avail[k]
        if not later and k < last and (nodes & avail[k + 1]) & ~(acc & a):
            later = ends[k]
        if begins[k] > end_time:
            break
        acc &= a
    return acc, later, ends[k + 1 if k < last else k]


def _check_windows(space: NodeSpace, queries) -> None:
    for start, length, nodes in queries:
        want = _window_by_slot(space, start, start + length, nodes)
        acc, later = space.window(start, start + length, nodes)
        assert (acc, later, space.reach) == want, (start, length, nodes)


@settings(max_examples=300, deadline=None)
@given(st.lists(_resv, max_size=14),
       st.lists(st.tuples(st.integers(-100, 21_000).map(float), st.integers(0, 9_000).map(float),
                          st.integers(1, ALL)), min_size=1, max_size=20))
def test_window_answers_as_the_slot_by_slot_walk(resvs, queries):
    space = NodeSpace(0.0, END, ALL)
    for k, (start, length, mask) in enumerate(resvs):
        space.add(start, start + length, frozenset(bits(mask)), k, RES)
    _check_windows(space, queries)


def test_window_answers_as_the_slot_by_slot_walk_on_seeded_maps():
    rng = random.Random(7)
    for _ in range(1_500):
        space = NodeSpace(0.0, END, ALL)
        for k in range(rng.randint(0, 30)):
            start = float(rng.choice([rng.randint(-600, 21_000), rng.randint(0, 40) * 600]))
            space.add(start, start + rng.randint(1, 8_000), frozenset(bits(rng.randint(1, ALL))), k, RES)
        # query at slot bounds too, where the bisections' ties lie
        edges = space.begins + space.ends
        queries = []
        for _ in range(20):
            start = rng.choice(edges) if rng.random() < 0.5 else float(rng.randint(-100, 21_000))
            end = rng.choice(edges) - start if rng.random() < 0.5 else float(rng.randint(0, 9_000))
            queries.append((start, max(0.0, end), rng.randint(1, ALL)))
        _check_windows(space, queries)


class _Job:
    __slots__ = ("id",)

    def __init__(self, jid: int) -> None:
        self.id = jid


def _records(jid: int, rng: random.Random) -> list[queue.Record]:
    """One to three records of a job; ties (equal keys) between its records are common."""
    job = _Job(jid)
    tier = rng.randint(0, 1)
    prio = rng.randint(0, 3)
    submit = float(rng.randint(0, 5))
    out = []
    for p in range(rng.randint(1, 3)):
        t = tier if rng.random() < 0.7 else rng.randint(0, 1)
        out.append(queue.Record((-t, -prio, submit, jid, 0, jid), job, f"p{p}", prio))
    return out


def _stable_sort_of(kept: dict[int, float], made: dict[int, list]) -> list:
    """The order one stable sort of every job's records (in ``kept``'s order) gives."""
    recs = [r for jid in kept for r in made[jid]]
    recs.sort(key=attrgetter("key"))
    return recs


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 25))
def test_order_equals_one_stable_sort_over_builds(seed, builds):
    rng = random.Random(seed)
    st_ = queue._Static(parts={})
    made: dict[int, list] = {}  # job id -> its records (the cache's entry)
    pending: list[int] = []
    next_id = 1
    for _ in range(builds):
        # jobs leave, arrive, and some get their records made anew (a new priority period)
        left = [j for j in pending if rng.random() < 0.2]
        pending = [j for j in pending if j not in left]
        for _ in range(rng.choice([0, 0, 1, 2, 20])):
            pending.append(next_id)
            next_id += 1
        # a job that left comes back with its old records (requeued with its old times)
        gone_before = [j for j in made if j not in pending and j not in left]
        if gone_before and rng.random() < 0.2:
            pending.append(rng.choice(gone_before))
        rng.shuffle(pending)
        fresh_ids = [j for j in pending if j not in made or rng.random() < 0.1]
        fresh = []
        for jid in fresh_ids:
            made[jid] = _records(jid, rng)
            fresh.extend(made[jid])
        st_.recs = {jid: (0.0, 0.0, None, made[jid], True) for jid in pending}
        kept = {jid: 0.0 for jid in pending}
        got = queue._order(st_, kept, fresh_ids, fresh)
        want = _stable_sort_of(kept, made)
        assert [id(r) for r in got] == [id(r) for r in want]


def _slice(pool, hours: float):
    return [w for w in load_workload("synthetic:month?seed=3&median=80", pool) if w.submit_time < hours * 3600]


def test_every_queue_build_equals_one_from_an_empty_cache(monkeypatch):
    from gpupool.policy.slurm.policy import Cycle
    pool = load_pool(ROOT / "examples" / "seed-pool")
    wls = load_workload(None, pool)
    built = queue.build
    checked = []

    def both(cy):
        recs = built(cy)
        pol = cy.pol
        mine = queue._STATIC[pol]
        queue._STATIC[pol] = queue._Static(pol.parts)
        try:
            ref_cy = Cycle(pol, cy.snap)
            ref = built(ref_cy)
        finally:
            queue._STATIC[pol] = mine
        assert [(r.key, r.job.id, r.part.name, r.prio) for r in recs] == [
            (r.key, r.job.id, r.part.name, r.prio) for r in ref]
        assert cy.accrue == ref_cy.accrue
        checked.append(len(recs))
        return recs

    monkeypatch.setattr(queue, "build", both)
    Engine(pool, wls, make_policy("slurm", pool), record_events=False).run()
    assert len(checked) > 100 and max(checked) > 10


def _plans(pool, wls, carry: bool, monkeypatch) -> tuple:
    used = []
    same = backfill._same_state

    def spy(state, cy):
        got = same(state, cy) if carry else False
        used.append(got)
        return got

    monkeypatch.setattr(backfill, "_same_state", spy)
    pol = make_policy("slurm", pool, {"record": True})
    eng = Engine(pool, wls, pol, record_events=False)
    eng.run()
    jobs = sorted((j.id, j.state, j.start, j.end, j.placement) for j in eng.jobs.values())
    return pol.plan_log, pol.resv_log, jobs, sum(used)


def test_a_carried_will_run_memo_plans_as_a_fresh_one(monkeypatch):
    # the seed pool's week: a stale memo taken over (the fingerprint ignored) changes its
    # plans and job table, so this run notices one
    pool = load_pool(ROOT / "examples" / "seed-pool")
    wls = load_workload(None, pool)
    plans, resv, jobs, carried = _plans(pool, wls, True, monkeypatch)
    plans0, resv0, jobs0, none = _plans(pool, wls, False, monkeypatch)
    assert none == 0 and carried > 10  # the carry was taken, and only where it was on
    assert len(plans) > 100
    assert plans == plans0
    assert resv == resv0
    assert jobs == jobs0
