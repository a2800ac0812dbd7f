"""Invariants of --policy operator under random workloads and capacity schedules."""
from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool
from gpupool.model.workload import GANG_ALL, GANG_NONE, KIND_SERVICE, PodSet, Workload
from gpupool.policy.operator.draining import draining_intervals
from gpupool.policy.operator.membership import SLURM_SIDE

SEED = Path(__file__).resolve().parents[2] / "examples" / "seed-pool"
POOL = load_pool(SEED)

job_st = st.tuples(st.booleans(), st.integers(1, 8), st.integers(1, 2), st.integers(0, 3000), st.integers(1, 3000),
                   st.sampled_from([None, 300.0, 1800.0]))
step_st = st.tuples(st.integers(0, 3000), st.integers(0, 4))


def _workloads(specs):
    out = []
    for i, (service, gpus, pods, submit, run, tl) in enumerate(specs, start=1):
        if service:
            out.append(Workload(i, f"s{i}", (PodSet(count=1, cpu_m=1000, memory_mib=1000, gpus=gpus),), submit_time=submit,
                                runtime=run, gang=GANG_NONE, kind=KIND_SERVICE, namespace="ml-serving",
                                queue_name="inference", source="s.yaml (document 1)"))
        else:
            ps = PodSet(count=pods, cpu_m=1000, memory_mib=1000, gpus=gpus, one_per_node=pods > 1)
            out.append(Workload(i, f"t{i}", (ps,), submit_time=submit, runtime=run, time_limit=tl or 3600.0,
                                gang=GANG_ALL, user="alice", account="ml-research", partition="train",
                                source="t.sbatch"))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(specs=st.lists(job_st, min_size=1, max_size=10), steps=st.lists(step_st, min_size=1, max_size=4),
       demand=st.booleans(), replicas=st.integers(0, 4))
def test_draining_nodes_get_no_new_work_and_sides_never_mix(tmp_path_factory, specs, steps, demand, replicas):
    tmp = tmp_path_factory.mktemp("ns")
    sched = ",".join(f"{t}={n}" for t, n in sorted(dict(steps).items()))
    mode = ("    gpupool.io/capacity-mode: demand\n    gpupool.io/capacity-cooldown: \"60\"\n" if demand else
            f"    gpupool.io/capacity-mode: schedule\n    gpupool.io/capacity-schedule: \"{sched}\"\n")
    (tmp / "ns.yaml").write_text(
        "apiVersion: slinky.slurm.net/v1beta1\nkind: NodeSet\nmetadata:\n  name: gpu\n  annotations:\n" + mode +
        f"    gpupool.io/capacity-interval: \"20\"\nspec:\n  replicas: {replicas}\n")
    policy = make_policy("operator", POOL, {"nodesets": str(tmp / "ns.yaml")})
    wls = _workloads(specs)
    eng = Engine(POOL, wls, policy, check=True, until=40000)  # check: no GPU allocated twice
    for c in policy.controllers():
        eng.add_controller(c)
    out = eng.run()
    drains = draining_intervals(out)
    owner: dict[str, str] = {}
    kube = {wl.id for wl in wls if wl.kind == KIND_SERVICE}
    for t, what, job, detail in out.events:
        if what == "node_owner":
            node, owner[node] = detail.split()[0], detail.split()[1]
        if what not in ("placed", "started"):
            continue
        nodes = {pod.split(":")[0] for pod in detail.rsplit(" ", 1)[-1].split(";") if ":" in pod}
        for node in nodes:
            # a draining node never receives new work
            assert not any(n == node and a <= t < b for n, a, b in drains), (job, node, t, drains)
            # Slurm jobs only on NodeSet nodes, Kubernetes workloads only on fleet nodes
            assert (owner.get(node) in SLURM_SIDE) == (job not in kube), (job, node, t, owner.get(node))
