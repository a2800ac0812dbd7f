"""Traffic sources: CSV series, the seeded diurnal pattern, the DLRM trace; exact integrals."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.errors import InputError
from gpupool.fleet.traffic import (
    DLRM_DEFAULT,
    Traffic,
    diurnal,
    load_traffic,
    read_traffic_csv,
)

SEED_TRAFFIC = Path(__file__).resolve().parents[2] / "examples" / "seed-pool" / "services" / "chat-traffic.csv"
DLRM = Path("/work/shared/traces") / DLRM_DEFAULT


def test_csv_rows_hold_until_the_next_and_the_last_for_one_step(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("time,requests_per_s\n0,10\n00:01:00,20\n120,40\n")
    t = read_traffic_csv(f)
    assert t.times == (0.0, 60.0, 120.0) and t.end == 180.0
    assert t.at(59.9) == 10 and t.at(60) == 20 and t.at(179) == 40 and t.at(180) == 0
    assert t.requests(180) == pytest.approx(600 + 1200 + 2400)
    assert t.mean(30, 90) == pytest.approx(15.0)


@pytest.mark.parametrize("body, line, field", [
    ("time,requests_per_s\n0,10\n0,20\n", 3, "time"),
    ("0,10\n60,-1\n", 2, "requests_per_s"),
    ("0,ten\n", 1, "requests_per_s"),
    ("0,1\nsoon,2\n", 2, "time"),
])
def test_csv_errors_name_line_and_field(tmp_path, body, line, field):
    f = tmp_path / "bad.csv"
    f.write_text(body)
    with pytest.raises(InputError) as err:
        read_traffic_csv(f)
    assert err.value.line == line and err.value.field == field


def test_seed_traffic_has_a_surge_above_inference_quota():
    t = load_traffic("csv:chat-traffic.csv", SEED_TRAFFIC.parent)
    assert t.end == 86400.0
    assert max(t.rps) / 35.0 > 16  # the surge asks for more replicas than maxReplicas


def test_diurnal_is_seeded_and_bursty():
    a, b = diurnal(seed=3, bursts_per_day=4), diurnal(seed=3, bursts_per_day=4)
    assert a == b
    c = diurnal(seed=4, bursts_per_day=4)
    assert a.rps != c.rps
    calm = diurnal(seed=3, bursts_per_day=0)
    assert max(calm.rps) <= 200.0 + 1e-9 and max(a.rps) > 200.0


def test_unknown_sources_and_bad_numbers_are_errors(tmp_path):
    with pytest.raises(InputError, match="unknown traffic source"):
        load_traffic("poisson?rate=3")
    with pytest.raises(InputError, match="not a number"):
        load_traffic("diurnal?base=lots")


@pytest.mark.skipif(not DLRM.exists(), reason="the shared DLRM trace is not here")
def test_dlrm_replica_counts_become_demand():
    t = load_traffic("dlrm:app_0?hours=2&rps_per_instance=10&step_s=600")
    assert len(t.times) == 12 and t.end == 7200.0
    # app_0 has hundreds of GPU instances alive at the start of the window
    assert t.rps[0] > 1000 and all(r % 10 == 0 for r in t.rps)
    with pytest.raises(InputError, match="no GPU instances"):
        load_traffic("dlrm:no-such-app?hours=1")


steps = st.lists(st.tuples(st.floats(0.5, 500), st.floats(0, 1000)), min_size=1, max_size=20)


@settings(max_examples=100, deadline=None)
@given(steps, st.floats(0, 1), st.floats(0, 1))
def test_window_means_are_exact_integrals(rows, u, v):
    times, t = [], 0.0
    for dt, _ in rows:
        times.append(t)
        t += dt
    tr = Traffic(tuple(times), tuple(r for _, r in rows), t)
    a, b = sorted((u * t, v * t))
    if b - a < 1e-6:
        return
    m = tr.mean(a, b)
    inside = [r for (s, r), e in zip(zip(times, tr.rps), times[1:] + [t]) if e > a and s < b]
    assert min(inside) - 1e-6 <= m <= max(inside) + 1e-6
    per_sec = tr.per_second(0.0, float(int(t)))
    assert per_sec.sum() == pytest.approx(tr.requests(float(int(t))), rel=1e-9, abs=1e-6)
    assert np.all(per_sec >= -1e-9)
