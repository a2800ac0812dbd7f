"""Fair-share usage across a daemon restart (gpupool/live/fairshare.py), without a daemon: the
journal that follows the policy, the restarted controller's first decay pass, and a fresh Slurm
policy given the restored usage."""
from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.errors import GpupoolError
from gpupool.formats.pool_dir import load_pool
from gpupool.formats.sbatch import parse_sbatch_text, sbatch_to_workload
from gpupool.live import fairshare
from gpupool.live.fairshare import SavedUsage, UsageJournal, restart_usage
from gpupool.policy.slurm.decay import UsageLedger, decay_factor, segment_usage
from tests.live.conftest import SLURM_CONF, script, write_pool

A, B = ("team", "alice"), ("team", "bob")
P, HL = 10.0, 100.0
DF = decay_factor(HL)

#: (key, start, end, weight); end None = still running when the daemon stops at t=48
SEGMENTS = [
    (A, 3.0, 27.0, 4.0),   # ended two passes before the last one
    (B, 12.0, None, 2.0),  # running across the restart
    (A, 31.0, 38.0, 1.5),  # started and ended between two passes
    (A, 41.0, 47.0, 4.0),  # ended after the last pass (t_ref = 40)
    (B, 44.0, None, 3.0),  # started after the last pass, still running
]
CRASH = 48.0


def _journal_until_crash(remainder: bool, epoch: float = 1000.0) -> UsageJournal:
    """Drive a journal the way the daemon does (one observe per turn) through SEGMENTS."""
    j = UsageJournal(P, HL, "NONE", remainder, epoch=epoch)
    jobs = {i: SimpleNamespace(final_state=None, end=None, submit=0.0) for i in range(len(SEGMENTS))}
    t = 0.0
    while t <= CRASH:
        segs = {}
        for i, (key, s, e, w) in enumerate(SEGMENTS):
            if s <= t and (e is None or t < e):
                segs[i] = (s, key, w)
            elif e is not None and t >= e:
                jobs[i].final_state, jobs[i].end = "COMPLETED", e
        j.observe(segs, segs, jobs, t)
        t += 0.5
    return j


def _reference(remainder: bool) -> tuple[UsageLedger, list]:
    """An uninterrupted policy's ledger with the same segments (the open ones as running)."""
    ref = UsageLedger(P, HL, "NONE", remainder)
    running = []
    for key, s, e, w in SEGMENTS:
        if e is None:
            running.append((key, s, w))
        else:
            ref.close(key, s, e, w)
    return ref, running


def _close(a: dict, b: dict, rel: float = 1e-12) -> None:
    assert set(k for k, v in a.items() if v) == set(k for k, v in b.items() if v), (a, b)
    for k in a:
        assert a[k] == pytest.approx(b.get(k, 0.0), rel=rel, abs=1e-12), (k, a, b)


@pytest.mark.parametrize("remainder", [True, False])
def test_journal_saves_the_usage_of_its_last_pass(remainder):
    j = _journal_until_crash(remainder)
    saved = j.saved()
    assert saved.t_ref == 40.0 and saved.epoch == 1000.0
    assert sorted(saved.running) == sorted([(12.0, B, 2.0), (44.0, B, 3.0)])
    ref, running = _reference(remainder)
    _close(j.usage(), ref.at(CRASH, running))  # what the policy ranks with at pass 40


@pytest.mark.parametrize("remainder", [True, False])
def test_restart_on_the_next_pass_equals_the_uninterrupted_usage(remainder):
    """Down from t=48 to t=50, the next pass of the old clock: slurmctld's first pass after the
    start charges the running jobs' pieces since the last pass (here exactly one period) and
    the ended jobs' remainders, as the uninterrupted pass at 50 would."""
    saved = _journal_until_crash(remainder).saved()
    ref, running = _reference(remainder)
    _close(restart_usage(saved, 1000.0 + 50.0, HL, "NONE"), ref.at(50.0, running))


def test_restart_after_a_long_downtime_is_slurms_first_pass():
    """Down for 3.75 periods: everything known at the last pass decays by df**Δ; ended jobs
    decay exactly as they would have without the restart; each running job adds one piece
    d·df**d for the whole time since the last pass (not one per missed pass)."""
    saved = _journal_until_crash(True).saved()
    x0 = 77.5
    got = restart_usage(saved, 1000.0 + x0, HL, "NONE")
    ref_closed, running = _reference(True)
    closed_at_80 = ref_closed.at(80.0, [])
    # ended jobs: the uninterrupted figure at x0 (usage of ended jobs only decays)
    alice = closed_at_80[A] * DF ** (x0 - 80.0)
    assert got[A] == pytest.approx(alice, rel=1e-12)
    bob = sum(segment_usage(s, math.inf, 40.0, P, DF, w, True) for _k, s, w in running) * DF ** (x0 - 40.0)
    bob += sum(w * (x0 - max(40.0, s)) * DF ** (x0 - max(40.0, s)) for _k, s, w in running)
    assert got[B] == pytest.approx(bob, rel=1e-12)


def test_a_reset_boundary_crossed_while_down_zeroes_what_came_before():
    day = 86400.0
    saved = SavedUsage(epoch=0.0, t_ref=day - 10.0, period=P, half_life=HL, folded={A: 500.0},
                       closed={A: 7.0}, running=[(day - 100.0, B, 2.0)])
    got = restart_usage(saved, day + 20.0, HL, "DAILY")
    assert got == {B: pytest.approx(2.0 * 20.0 * DF ** 20.0, rel=1e-12)}
    kept = restart_usage(saved, day - 5.0, HL, "DAILY")  # no boundary crossed: decayed, not reset
    assert kept[A] == pytest.approx(507.0 * DF ** 5.0, rel=1e-12)


def test_clock_going_back_neither_decays_nor_charges():
    saved = SavedUsage(epoch=100.0, t_ref=40.0, period=P, half_life=HL, folded={A: 5.0}, running=[(30.0, B, 1.0)])
    got = restart_usage(saved, 100.0 + 35.0, HL, "NONE")
    assert got[A] == 5.0
    assert got[B] == pytest.approx(segment_usage(30.0, math.inf, 40.0, P, DF, 1.0, True), rel=1e-12)


def test_saved_usage_round_trips_and_bad_state_names_the_field():
    saved = _journal_until_crash(True).saved()
    back = SavedUsage.from_json(saved.to_json())
    assert back == saved
    with pytest.raises(GpupoolError, match="live_meta fairshare: not JSON"):
        SavedUsage.from_json("{")
    with pytest.raises(GpupoolError, match="format 7 is not 1"):
        SavedUsage.from_json('{"format": 7}')
    with pytest.raises(GpupoolError, match="bad or missing field.*t_ref"):
        SavedUsage.from_json('{"format": 1, "epoch": 0, "period": 10, "half_life": 5}')


# ------------------------------------------------------------------ a real Slurm policy, restarted
FS_CONF = """PriorityWeightFairshare=10000
PriorityCalcPeriod=0:10
PriorityDecayHalfLife=0:01:40
AccountingStorageEnforce=limits
SchedulerParameters=sched_interval=10,bf_interval=10
"""


def _workload(jid: int, user: str, runtime: float, *opts: str):
    sb = parse_sbatch_text(script("true", *opts), f"job{jid}.sbatch")
    return replace(sbatch_to_workload(sb, id=jid, submit_time=0.0, runtime=runtime)[0], user=user)


def _step(engine: Engine, pol, journal: UsageJournal, until: float) -> None:
    t = engine.now
    while t < until:
        t = min(until, t + 0.5)
        engine.run_until(t)
        journal.observe(fairshare.open_segments(pol), engine.active, engine.jobs, t)


def test_a_fresh_slurm_policy_continues_from_the_restored_usage(tmp_path):
    """The first policy runs alice's jobs and bob's long one; a second one, started 61 s after
    the first (the first stopped at 55), is primed, re-adopts bob's job and gets the restored
    usage: its own usage (what it ranks fair share with) is then slurmctld's after the same
    restart, alice's exactly the uninterrupted figure."""
    pool_dir = write_pool(tmp_path)
    (pool_dir / "slurm.conf").write_text(FS_CONF + SLURM_CONF.format(cpus=64))
    pool = load_pool(pool_dir)
    pol1 = make_policy("slurm", pool, {})
    eng1 = Engine(pool, [], pol1)
    fairshare.prime(pol1, eng1)
    assert pol1.use_fs and pol1.s.limits_enforced and pol1.s.calc_period == P and pol1.s.half_life == HL
    j1 = UsageJournal(P, HL, "NONE", True, epoch=0.0)
    eng1.submit(_workload(1, "alice", 23.0, "--cpus-per-task=16"), at=0.0)
    eng1.submit(_workload(2, "bob", math.inf, "--cpus-per-task=2", "--gres=gpu:1"), at=0.0)
    _step(eng1, pol1, j1, 30.0)
    eng1.submit(_workload(3, "alice", 14.0, "--cpus-per-task=3"), at=30.0)
    _step(eng1, pol1, j1, 55.0)
    assert eng1.jobs[1].state == eng1.jobs[3].state == "COMPLETED" and eng1.jobs[2].state == "RUNNING"
    # the journal follows the policy: same usage as of the last pass (50). The policy closes
    # job 3's segment and runs its pass at its next decision (none since, the queue being
    # empty), so one is made: a job that waits for bob's GPU
    assert 3 in pol1._segs
    eng1.submit(_workload(5, "alice", 5.0, "--gres=gpu:4"), at=55.0)
    _step(eng1, pol1, j1, 55.0 + 1e-9)
    assert 3 not in pol1._segs and pol1.ledger.T_ref == 50.0
    _close(j1.usage(), pol1.ledger.usage(list(pol1._segs.values())))
    saved = SavedUsage.from_json(j1.saved().to_json())
    assert saved.t_ref == 50.0

    epoch2 = 61.0  # the second daemon's t=0 on the first one's clock
    restored = restart_usage(saved, epoch2, HL, "NONE")
    pol2 = make_policy("slurm", pool, {})
    eng2 = Engine(pool, [], pol2)
    fairshare.prime(pol2, eng2)
    bob = eng1.jobs[2]
    job = eng2.adopt(bob.wl, bob.placement, started=bob.start - epoch2, submitted=bob.submit - epoch2,
                     time_limit=bob.time_limit, partition=bob.partition)
    fairshare.adopt(pol2, job, bob.placement, bob.start - epoch2)
    fairshare.seed(pol2, restored)
    assert pol2.run_part[2] == "main"
    j2 = UsageJournal(P, HL, "NONE", True, epoch=epoch2, seed=restored, running=fairshare.open_segments(pol2))
    eng2.submit(_workload(4, "alice", 5.0, "--gres=gpu:4"), at=0.0)  # waits for bob's GPU: a priority is ranked
    _step(eng2, pol2, j2, 25.0)
    assert pol2.ledger.T_ref == 20.0  # job 4 waits, so the policy passes on the ticks
    usage2 = pol2.ledger.usage(list(pol2._segs.values()))  # as of its pass at 20
    _close(j2.usage(), usage2)
    # alice's jobs ended before the restart: exactly the uninterrupted figure at 61 + 20 = 81
    ref = UsageLedger(P, HL, "NONE", True)
    ref.close(A, 0.0, 23.0, 16.0)
    ref.close(A, 30.0, 44.0, 3.0)
    assert usage2[A] == pytest.approx(ref.at(80.0, [])[A] * DF ** 1.0, rel=1e-12)
    # bob: the pieces up to 50 decayed to 61, one piece 50..61 at the restart, then the second
    # policy's passes
    w = 2.0
    first = (segment_usage(0.0, math.inf, 50.0, P, DF, w, True) * DF ** 11.0 + w * 11.0 * DF ** 11.0) * DF ** 20.0
    assert usage2[B] == pytest.approx(first + segment_usage(0.0, math.inf, 20.0, P, DF, w, True), rel=1e-12)
    # and the policy ranks with it: alice used more before the restart, so bob's FairShare is
    # the higher one (from the jobs run since the restart alone, it would be alice's)
    fs = pol2._fs
    assert usage2[A] > usage2[B] and fs["team/bob"] > fs["team/alice"]


def test_usage_rebuilt_from_job_records_for_a_ledger_without_saved_usage(tmp_path):
    """An older gpupool saved no usage: it is rebuilt from the runs the ledger records, each
    charged on the new daemon's pass grid, to the association and QOS the policy would resolve."""
    acct = load_pool(write_pool(tmp_path)).slurm.accounting
    epoch = 10_000.0
    records = [
        ("", "alice", "", epoch - 95.0, epoch - 52.0, 4.0),  # default account team, QOS normal
        ("team", "bob", "normal", epoch - 30.0, None, 2.0),  # was running: charged up to the start
        ("team", "bob", "", None, None, 8.0),  # never ran
        ("team", "olga", "", epoch - 20.0, epoch - 10.0, 0.0),  # nothing billed
    ]
    got = fairshare.usage_from_records(records, acct, epoch, P, HL, True)
    assert got == {
        A: pytest.approx(segment_usage(-95.0, -52.0, 0.0, P, DF, 4.0, True), rel=1e-12),
        B: pytest.approx(segment_usage(-30.0, 0.0, 0.0, P, DF, 2.0, True), rel=1e-12),
    }
    assert got[B] == pytest.approx(2.0 * sum(10.0 * DF ** 10.0 * DF ** (10.0 * k) for k in range(3)), rel=1e-12)


def test_the_journal_closes_a_segment_where_the_policy_does(monkeypatch):
    """The policy closes usage at the job's end on fair share's clock (a whole epoch second,
    finding 54); the journal, following it, must close the same segment at the same instant."""
    closed = []
    close = UsageLedger.close
    monkeypatch.setattr(UsageLedger, "close", lambda self, key, s, e, w: (closed.append((s, e)), close(self, key, s, e, w)))
    j = UsageJournal(P, HL, "NONE", True, epoch=1000.0, clock_epoch=0.25)
    job = SimpleNamespace(final_state="COMPLETED", end=60.4, submit=0.0)
    j.observe({1: (10.0, A, 1.0)}, {1: job}, {1: job}, 30.0)
    j.observe({}, {}, {1: job}, 61.0)
    assert closed == [(10.0, 60.0)]  # floor(60.4 + 0.25) - floor(0.25)
