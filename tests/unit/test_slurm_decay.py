"""Usage decay: closed form against a step-by-step decay thread (spec §4, case decay-001)."""
import math

import pytest

from gpupool.policy.slurm.decay import (
    UsageLedger,
    decay_factor,
    reset_boundary,
    segment_usage,
    usage_clock,
    usage_end,
)

DF = decay_factor(604800)


def brute(s, e, T, P, df, w, remainder):
    """Slurm's decay thread, one pass at a time: U = U·df^Δ, then + Δ_job·df^Δ_job·w."""
    u = 0.0
    last = 0.0
    t = P
    while t <= T:
        u *= df ** (t - last)
        a, b = max(s, last), min(e, t)
        if b > a and e >= t:  # only jobs still running at the pass are charged
            d = b - a
            u += d * df ** d * w
        last = t
        t += P
    return u


def brute_with_end(s, e, T, P, df, w):
    u = 0.0
    last = 0.0
    t = P
    ended = False
    while t <= T:
        if not ended and e < t:  # job end between passes: remainder added now
            r = e - max(s, last)
            if r > 0:
                u += r * df ** r * w
            ended = True
        u *= df ** (t - last)
        if not ended:
            a, b = max(s, last), min(e, t)
            if b > a:
                u += (b - a) * df ** (b - a) * w
            if e == t:
                ended = True
        last = t
        t += P
    return u


def test_constants():
    assert DF == 1 - 0.693 / 604800
    assert abs(1000 * DF ** 604800 - 500.0733971527) < 1e-6
    assert decay_factor(0) == 1.0


def test_decay_001_numbers():
    assert abs(segment_usage(0, 3600, 3600, 300, DF, 4, False) - 14367.871016221) < 1e-6
    assert abs(segment_usage(0, 3600, 3600 + 604800, 300, DF, 4, True) - 7184.990068934) < 1e-6
    assert abs(segment_usage(0, 3600, 3600, 300, DF, 8, True) - 28735.742032442) < 1e-6


def test_closed_form_matches_passes():
    for s, e, T in [(0, 3600, 3600), (10, 1000, 1500), (130, 170, 600), (250, 7777, 9000), (10, 5000, 2400)]:
        assert math.isclose(segment_usage(s, e, T, 300, DF, 3, False), brute(s, e, T, 300, DF, 3, False),
                            rel_tol=1e-11, abs_tol=1e-9)
        if e <= T:
            assert math.isclose(segment_usage(s, e, T, 300, DF, 3, True), brute_with_end(s, e, T, 300, DF, 3),
                                rel_tol=1e-11, abs_tol=1e-9)


def test_ledger_fold_and_reset():
    led = UsageLedger(300, 604800, "NONE", False)
    led.close("a", 0, 900, 2.0)
    u1 = led.at(1000, [])["a"]
    assert math.isclose(u1, segment_usage(0, 900, 900, 300, DF, 2.0, False))
    u2 = led.at(1900, [("b", 1200, 1.0)])
    assert math.isclose(u2["a"], segment_usage(0, 900, 1800, 300, DF, 2.0, False))
    assert math.isclose(u2["b"], segment_usage(1200, 10**9, 1800, 300, DF, 1.0, False))
    daily = UsageLedger(300, 604800, "DAILY", False)
    daily.close("a", 0, 3600, 1.0)
    assert daily.at(86400 + 10, []).get("a", 0.0) == 0.0
    assert reset_boundary(86400 * 3 + 5, "WEEKLY") == 0 and reset_boundary(40 * 86400, "MONTHLY") == 31 * 86400


def _slurmctld_usage(start_w: float, end_w: float, passes: int, limits: bool, epoch: float, period: float,
                     half_life: float) -> float:
    """priority/multifactor 22.05.8 as its source reads, on the wall clock: the decay thread
    wakes at ``epoch`` + k × period (fraction kept) and counts to time(NULL), its whole second;
    a running job gets the piece since the last pass; a job that ended before a pass gets none
    there, but with limits enforced its end adds the piece up to its end_time (whole second)."""
    df = decay_factor(half_life)
    st, et = math.floor(start_w), math.floor(end_w)
    u, last = 0.0, math.floor(epoch)
    for k in range(1, passes + 1):
        wake = epoch + k * period
        now = math.floor(wake)
        if limits and epoch + (k - 1) * period <= end_w < wake:
            d = et - max(last, st)
            u += d * df ** d if d > 0 else 0.0
        u *= df ** (now - last)
        if start_w < wake <= end_w:
            d = now - max(last, st)
            u += d * df ** d if d > 0 else 0.0
        last = now
    return u


@pytest.mark.parametrize("limits", [False, True])
@pytest.mark.parametrize("end", [9.7, 10.2, 9.4, 15.0])
def test_a_job_ended_in_the_second_of_a_pass_but_before_it_gets_no_piece_of_it(limits, end):
    """Findings 24 and 54: starts, ends and passes on fair share's clock (``usage_clock``), an
    end in the second of a pass but before the thread wakes kept before it (``usage_end``)."""
    period, half_life, epoch = 10.0, 100.0, 1000.5
    ledger = UsageLedger(period, half_life, "NONE", limits)
    ledger.close("a", usage_clock(1.0, epoch), usage_end(end, epoch, period), 1.0)
    got = ledger.at(10.0, []).get("a", 0.0)
    assert got == pytest.approx(_slurmctld_usage(1.0 + epoch, end + epoch, 1, limits, epoch, period, half_life))
