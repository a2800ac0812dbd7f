"""GPU requests that name a type, on nodes whose devices are of several types (two models, or
whole GPUs beside MIG slices): the Slurm policy against what a real 22.05.8 did.

The real run (``tests/differential/test_real_slurm_typed_gpus.py`` does it again beside
gpupool) had node g1 with ``gpu:a100`` on devices 0-3 and ``gpu:t4`` on 4-7, node g2 with
``a100`` on 0, ``a100_3g.20gb`` on 1-2 and ``v100`` on 3-4, one partition per node, and
one-task jobs submitted 5 s apart: a typed request got the lowest free devices of its type,
an untyped one the lowest free devices of any type.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.engine.nodes import mask_indices
from gpupool.errors import InvariantViolation
from gpupool.formats.pool_dir import load_pool
from gpupool.formats.sbatch import parse_sbatch_text, sbatch_to_workload

SLURM_CONF = """\
ClusterName=typed
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=30,sched_interval=60
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
GresTypes=gpu
NodeName=g1 CPUs=16 RealMemory=64000 Gres=gpu:a100:4,gpu:t4:4
NodeName=g2 CPUs=16 RealMemory=64000 Gres=gpu:a100:1,gpu:a100_3g.20gb:2,gpu:v100:2
PartitionName=p1 Nodes=g1 Default=YES MaxTime=60
PartitionName=p2 Nodes=g2 MaxTime=60
"""
GRES_CONF = """\
NodeName=g1 Name=gpu Type=a100 File=/dev/nvidia[0-3]
NodeName=g1 Name=gpu Type=t4 File=/dev/nvidia[4-7]
NodeName=g2 Name=gpu Type=a100 File=/dev/nvidia0
NodeName=g2 Name=gpu Type=a100_3g.20gb File=/dev/nvidia[1-2]
NodeName=g2 Name=gpu Type=v100 File=/dev/nvidia[3-4]
"""
#: (name, partition, GPU option) in submission order, and what the real system gave each:
#: GPU indices when it ran, else its pending reason
REAL = [
    ("J1", "p1", "--gres=gpu:t4:1", [4]),
    ("J2", "p1", "--gres=gpu:1", [0]),
    ("J3", "p1", "--gres=gpu:a100:3", [1, 2, 3]),
    ("J4", "p1", "--gres=gpu:2", [5, 6]),
    ("J6", "p1", "--gpus=t4:1", [7]),
    ("K1", "p2", "--gres=gpu:a100_3g.20gb:1", [1]),
    ("K2", "p2", "--gres=gpu:1", [0]),
    ("K4", "p2", "--gpus-per-node=v100:1", [3]),
    ("K5", "p2", "--gres=gpu:2", [2, 4]),
    ("J5", "p1", "--gres=gpu:a100:1", "Resources"),
    ("K3", "p2", "--gres=gpu:a100_3g.20gb:2", "Resources"),
]


def typed_pool(tmp_path: Path):
    (tmp_path / "slurm.conf").write_text(SLURM_CONF)
    (tmp_path / "gres.conf").write_text(GRES_CONF)
    return load_pool(tmp_path)


def script(partition: str, gpus: str) -> str:
    return f"#!/bin/bash\n#SBATCH -p {partition}\n#SBATCH -n1\n#SBATCH -t 30\n#SBATCH {gpus}\nsleep 3000\n"


def run(pool, plan, until: float):
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    wls = []
    for k, (name, part, opt, *_rest) in enumerate(plan):
        sb = parse_sbatch_text(script(part, opt), f"{name}.sbatch")
        wls.append(sbatch_to_workload(sb, id=k + 1, submit_time=5.0 * k, runtime=3000.0)[0])
    out = Engine(pool, wls, make_policy("slurm", pool), check=True, until=until).run()
    return {plan[j.id - 1][0]: j for j in out.jobs}


def test_typed_and_untyped_requests_get_the_devices_the_real_system_gave(tmp_path):
    jobs = run(typed_pool(tmp_path), REAL, until=100.0)
    for name, _part, _opt, want in REAL:
        job = jobs[name]
        if isinstance(want, str):
            assert (job.state, job.reason) == ("PENDING", want), name
        else:
            assert job.state == "RUNNING", name
            assert mask_indices(job.placement[0][1]) == want, name


def test_a_typed_request_is_planned_when_a_device_of_its_type_frees(tmp_path):
    """J5 (one a100) waits for the first a100 to free although t4s free earlier."""
    plan = [("T", "p1", "--gres=gpu:t4:4"), ("A", "p1", "--gres=gpu:a100:4"), ("W", "p1", "--gres=gpu:a100:1")]
    pool = typed_pool(tmp_path)
    import gpupool.policy.slurm  # noqa: F401

    wls = []
    for k, (name, part, opt) in enumerate(plan):
        text = script(part, opt).replace("-t 30", "-t 10" if name == "T" else "-t 20")
        sb = parse_sbatch_text(text, f"{name}.sbatch")
        wls.append(sbatch_to_workload(sb, id=k + 1, submit_time=5.0 * k, runtime=3000.0)[0])
    pol = make_policy("slurm", pool, {"record": True})
    out = Engine(pool, wls, pol, check=True, until=100.0).run()
    assert {j.id: j.state for j in out.jobs} == {1: "RUNNING", 2: "RUNNING", 3: "PENDING"}
    # A's limit end (5 s + 20 min), not T's (10 min)
    assert pol.plan_log[30.0][3] == 1205.0


def test_the_engine_refuses_devices_of_another_type(tmp_path):
    from gpupool.engine.decisions import Start

    pool = typed_pool(tmp_path)
    sb = parse_sbatch_text(script("p1", "--gres=gpu:t4:1"), "t.sbatch")
    wl = sbatch_to_workload(sb, id=1, submit_time=0.0, runtime=10.0)[0]

    class Wrong:
        name = "wrong"
        tick_interval = None
        over_time_limit = 0.0

        def decide(self, snap):
            return [Start(1, ((0, 0b1, 1000, 100),))] if snap.pending else []  # device 0 is an a100
    with pytest.raises(InvariantViolation, match="not all of the type"):
        Engine(pool, [wl], Wrong(), check=True).run()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["p1", "p2"]), st.sampled_from([None, "a100", "t4", "a100_3g.20gb", "v100"]),
                          st.integers(1, 3), st.integers(10, 400), st.integers(0, 120)), min_size=1, max_size=12))
def test_property_typed_devices(tmp_path_factory, specs):
    """Random typed and untyped requests over both nodes: the engine's checks hold (no device
    twice, typed pods only on devices of their type), a request naming a type its partition's
    node lacks is rejected at submit, and every other job ends once."""
    pool = typed_pool(tmp_path_factory.mktemp("typed"))
    import gpupool.policy.slurm  # noqa: F401

    have = {"p1": {"a100": 4, "t4": 4}, "p2": {"a100": 1, "a100_3g.20gb": 2, "v100": 2}}
    wls = []
    for k, (part, gtype, n, run_s, at) in enumerate(specs):
        opt = f"--gres=gpu:{gtype}:{n}" if gtype else f"--gres=gpu:{n}"
        sb = parse_sbatch_text(script(part, opt).replace("-t 30", "-t 5"), f"j{k}.sbatch")
        wls.append(sbatch_to_workload(sb, id=k + 1, submit_time=float(at), runtime=float(run_s))[0])
    out = Engine(pool, wls, make_policy("slurm", pool), check=True).run()
    for job, (part, gtype, n, _r, _a) in zip(sorted(out.jobs, key=lambda j: j.id), specs):
        possible = sum(have[part].values()) if gtype is None else have[part].get(gtype, 0)
        if possible < n:
            assert job.final_state == "REJECTED", (job.id, part, gtype, n)
        else:
            assert job.final_state in ("COMPLETED", "TIMEOUT"), (job.id, job.final_state, job.reason)
