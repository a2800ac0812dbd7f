"""priority/multifactor arithmetic (spec §3; numbers of case prio-001)."""
from gpupool.policy.slurm.priority import (
    UINT32_MAX,
    age_factor,
    combine,
    factors,
    job_size_factor,
)

W = {"age": 1000, "fairshare": 10000, "job_size": 1000, "partition": 1000, "qos": 2000, "assoc": 0}
TOTALS = {"cpu": 128, "mem": 0, "gres/gpu": 16, "node": 4}


def _f(**kw):
    base = {"max_age": 604800, "nodes_total": 4, "cpus_total": 128, "favor_small": False,
            "max_part_factor": 20, "max_qos_priority": 100, "tres_total": TOTALS, "tres_weights": {}}
    base.update(kw)
    return factors(**base)


def test_job_a_and_b():
    a = _f(age_s=86400, fs=0.5, nodes=2, cpus=64, part_factor=10, qos_priority=100, tres_req={})
    assert abs(a["age"] - 1 / 7) < 1e-12 and a["job_size"] == 0.5 and a["partition"] == 0.5 and a["qos"] == 1.0
    assert combine(a, W, {}, 0) == 8142
    b = _f(age_s=700000, fs=0.25, nodes=1, cpus=1, part_factor=20, qos_priority=0, tres_req={})
    assert b["age"] == 1.0 and b["job_size"] == 0.12890625
    assert combine(b, W, {}, 100) == 4528


def test_favor_small_and_tres():
    assert job_size_factor(1, 1, 4, 128, True) == 0.87109375
    assert job_size_factor(2, 64, 4, 128, True) == 0.5
    tw = {"cpu": 1000.0, "gres/gpu": 2000.0}
    d = _f(age_s=86400, fs=0.5, nodes=2, cpus=64, part_factor=10, qos_priority=100,
           tres_req={"cpu": 64, "gres/gpu": 8}, tres_weights=tw)
    assert d["tres"] == {"cpu": 0.5, "gres/gpu": 0.5}
    assert combine(d, W, tw, 0) == 9642


def test_floor_and_cap():
    f = _f(age_s=0, fs=0, nodes=1, cpus=1, part_factor=0, qos_priority=0, tres_req={})
    assert combine(f, {}, {}, 100) == 1  # never below 1 (0 = held)
    assert combine(f, {"age": 0, "job_size": 10**12}, {}, 0) == UINT32_MAX
    assert age_factor(-5, 100) == 0.0 and age_factor(500, 100) == 1.0
