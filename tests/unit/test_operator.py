"""--policy operator: slurm-operator NodeSets (spec fleet_and_bridge §2.2), one test per statement."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.engine.core import Engine, NodeEvent
from gpupool.engine.policy_api import make_policy
from gpupool.errors import GpupoolError, InputError
from gpupool.formats.kube_yaml import load_yaml_text
from gpupool.formats.pool_dir import load_pool
from gpupool.formats.slinky import (
    initial_members,
    member_nodes,
    parse_nodeset,
    pool_nodesets,
)
from gpupool.model.workload import GANG_NONE, KIND_SERVICE, PodSet, Workload
from gpupool.policy.operator.draining import draining_figures, draining_intervals
from gpupool.policy.operator.membership import DRAINING, FLEET, SLURM

SEED = Path(__file__).resolve().parents[2] / "examples" / "seed-pool"


def nodeset_yaml(replicas=2, annotations=None, selector="rack1", extra=""):
    ann = "".join(f"\n    gpupool.io/capacity-{k}: \"{v}\"" for k, v in (annotations or {}).items())
    return (f"apiVersion: slinky.slurm.net/v1beta1\nkind: NodeSet\nmetadata:\n  name: gpu\n"
            f"  annotations:{ann or ' {}'}\n"
            f"spec:\n  replicas: {replicas}\n{extra}  template:\n    spec:\n      nodeSelector:\n"
            f"        cloud.gpupool.io/topology-rack: {selector}\n")


@pytest.fixture(scope="module")
def seed():
    return load_pool(SEED)


def _policy(pool, tmp_path, **kw):
    f = tmp_path / "nodeset.yaml"
    f.write_text(nodeset_yaml(**kw))
    return make_policy("operator", pool, {"nodesets": str(f)})


def _train(i, submit=0.0, run=600.0, gpus=8, tl=3600.0):
    return Workload(i, f"train-{i}", (PodSet(count=1, cpu_m=1000, memory_mib=1000, gpus=gpus),), submit_time=submit,
                    runtime=run, time_limit=tl, user="alice", account="ml-research", partition="train",
                    source="train.sbatch")


def _replica(i, submit=0.0, run=600.0, gpus=1):
    return Workload(i, f"svc-{i}", (PodSet(count=1, cpu_m=1000, memory_mib=1000, gpus=gpus),), submit_time=submit,
                    runtime=run, gang=GANG_NONE, kind=KIND_SERVICE, namespace="ml-serving", queue_name="inference",
                    source="svc.yaml (document 1)")


def _run(pool, policy, wls, faults=(), controllers=True):
    eng = Engine(pool, wls, policy, check=True, faults=list(faults))
    ctrls = policy.controllers() if controllers else []
    for c in ctrls:
        eng.add_controller(c)
    out = eng.run()
    return {j.id: j for j in out.jobs}, out, ctrls


def _node(out, job):
    names = list(out.pool.nodes)
    return {names[p[0]] for p in job.placement}


# ----------------------------------------------------------------------------- NodeSet files
def test_nodeset_fields_and_membership(seed):
    (doc,) = load_yaml_text(nodeset_yaml(annotations={"mode": "schedule", "schedule": "0=2,8h=0", "period": "1d"},
                                         extra="  scalingMode: StatefulSet\n  extraConf: Gres=gpu:8\n"), "ns.yaml")
    ns = parse_nodeset(doc)
    assert (ns.name, ns.replicas, ns.scaling_mode, ns.extra_conf) == ("gpu", 2, "StatefulSet", "Gres=gpu:8")
    assert ns.capacity.mode == "schedule" and ns.capacity.schedule == ((0.0, 2), (28800.0, 0))
    assert ns.capacity.period == 86400.0
    assert member_nodes(ns, seed) == ["gpu01", "gpu02"] and initial_members(ns, seed) == ["gpu01", "gpu02"]


def test_daemonset_mode_takes_every_matching_node(seed):
    text = nodeset_yaml(selector="rack2").replace("  replicas: 2\n", "  scalingMode: DaemonSet\n")
    ns = parse_nodeset(load_yaml_text(text, "ns.yaml")[0])
    assert ns.replicas is None and initial_members(ns, seed) == ["gpu03", "gpu04"]


@pytest.mark.parametrize("text, field, message", [
    (nodeset_yaml().replace("v1beta1", "v9"), "apiVersion", "unsupported apiVersion slinky.slurm.net/v9"),
    (nodeset_yaml().replace("replicas: 2", "replicas: two"), "spec.replicas", "expected a whole number, got a string"),
    (nodeset_yaml(extra="  colour: red\n"), "spec.colour", "unknown field 'colour'"),
    (nodeset_yaml(annotations={"mode": "wild"}), "metadata.annotations.gpupool.io/capacity-mode",
     "expected one of fixed, schedule, demand, got 'wild'"),
    (nodeset_yaml(annotations={"mode": "schedule", "schedule": "8h"}), "metadata.annotations.gpupool.io/capacity-schedule",
     "entry 1: expected TIME=REPLICAS, got '8h'"),
    (nodeset_yaml(annotations={"min": "3", "max": "1"}), "metadata.annotations.gpupool.io/capacity-max",
     "must be at least capacity-min (3), got 1"),
])
def test_nodeset_errors_name_the_field(text, field, message):
    (doc,) = load_yaml_text(text, "ns.yaml")
    with pytest.raises(InputError) as exc:
        parse_nodeset(doc)
    assert exc.value.field == field and message in exc.value.message


def test_more_replicas_than_matching_nodes_is_an_error(seed):
    ns = parse_nodeset(load_yaml_text(nodeset_yaml(replicas=3), "ns.yaml")[0])
    with pytest.raises(InputError, match="asks for 3 replicas but only 2 pool nodes match"):
        initial_members(ns, seed)


def test_the_seed_pool_declares_a_nodeset(seed):
    (ns,) = pool_nodesets(seed)
    assert ns.name == "gpu" and ns.capacity.mode == "demand" and ns.replicas == 2


def test_a_pool_without_nodesets_is_refused(tmp_path):
    pool = load_pool(SEED)
    pool.path = str(tmp_path)
    with pytest.raises(GpupoolError, match="declares no NodeSet"):
        make_policy("operator", pool, {})


# ----------------------------------------------------------------------------- scheduling
def test_slurm_jobs_run_only_on_nodeset_nodes_and_services_only_on_the_fleet(seed, tmp_path):
    pol = _policy(seed, tmp_path)
    wls = [_train(i) for i in range(1, 5)] + [_replica(i) for i in range(5, 13)]
    jobs, out, _ = _run(seed, pol, wls)
    for i in range(1, 5):
        assert _node(out, jobs[i]) <= {"gpu01", "gpu02"}
    for i in range(5, 13):
        assert _node(out, jobs[i]) <= {"gpu03", "gpu04"}
    assert jobs[3].start >= 600  # two nodes for Slurm: the third 8-GPU job waits for one


def test_scale_in_drains_before_the_node_returns(seed, tmp_path):
    """Schedule 2 -> 1 replicas at t=100: the busier node is kept... the victim (the one whose
    job ends first) is drained, its running job finishes, nothing new starts there, then it
    goes back to the fleet."""
    pol = _policy(seed, tmp_path, annotations={"mode": "schedule", "schedule": "0=2,100=1", "interval": "10"})
    wls = [_train(1, run=1000), _train(2, run=500), _train(3, submit=200, run=100)]
    jobs, out, (ctrl,) = _run(seed, pol, wls)
    (node, began, ended), = draining_intervals(out)
    victim = _node(out, jobs[2])
    assert victim == {node} and began == 100 and 500 <= ended < 520
    assert jobs[2].state == "COMPLETED" and jobs[2].end == 500  # not interrupted
    assert jobs[3].start >= 1000 and _node(out, jobs[3]) == _node(out, jobs[1])  # not on the draining node
    figures = draining_figures(out)
    assert figures["drains"] == 1 and figures["gpu_hours_draining"] == pytest.approx(8 * (ended - 100) / 3600, abs=1e-3)
    assert figures["gpu_hours_draining_idle"] == pytest.approx(8 * (ended - 500) / 3600, abs=1e-3)
    assert [a for _, a, n in ctrl.log if n == node] == ["drain", "returned"]


def test_a_running_job_on_a_draining_node_ends_at_its_limit(seed, tmp_path):
    pol = _policy(seed, tmp_path, annotations={"mode": "schedule", "schedule": "0=2,100=0", "interval": "10"})
    jobs, out, _ = _run(seed, pol, [_train(1, run=5000, tl=600)])
    assert jobs[1].state == "TIMEOUT"
    (_, began, ended), = [r for r in draining_intervals(out) if r[0] in _node(out, jobs[1])]
    assert began == 100 and ended >= jobs[1].end


def test_scale_to_zero_leaves_slurm_jobs_pending_not_rejected(seed, tmp_path):
    pol = _policy(seed, tmp_path, annotations={"mode": "schedule", "schedule": "0=0,1000=1"})
    jobs, _out, _ = _run(seed, pol, [_train(1, submit=10)])
    assert jobs[1].state == "COMPLETED" and jobs[1].start >= 1000


def test_demand_mode_gives_nodes_to_pending_inference(seed, tmp_path):
    """16 one-GPU replicas more than the fleet's 16 free GPUs: the NodeSet shrinks by a node."""
    pol = _policy(seed, tmp_path, annotations={"mode": "demand", "interval": "30"})
    wls = [_replica(i, run=2000) for i in range(1, 25)]
    jobs, out, _ = _run(seed, pol, wls)
    owners = [e for e in out.events if e[1] == "node_owner"]
    assert any(d.endswith(DRAINING) for _, _, _, d in owners) and any(d.endswith(FLEET) for _, _, _, d in owners)
    assert all(j.start is not None and j.start < 100 for j in jobs.values())


def test_demand_mode_grows_the_nodeset_for_waiting_slurm_jobs(seed, tmp_path):
    pol = _policy(seed, tmp_path, replicas=1, annotations={"mode": "demand", "interval": "30", "cooldown": "0"})
    jobs, _out, (ctrl,) = _run(seed, pol, [_train(1, run=1000), _train(2, submit=5, run=100)])
    assert ("join", "gpu02") in [(a, n) for _, a, n in ctrl.log]
    assert jobs[2].start < 100


def test_without_the_controller_the_initial_split_holds(seed, tmp_path):
    pol = _policy(seed, tmp_path, replicas=1)
    jobs, out, _ = _run(seed, pol, [_train(1), _train(2)], controllers=False)
    assert _node(out, jobs[1]) == _node(out, jobs[2]) == {"gpu01"} and jobs[2].start >= 600


def test_node_failure_on_a_nodeset_node_requeues_the_slurm_job(seed, tmp_path):
    pol = _policy(seed, tmp_path)
    jobs, out, _ = _run(seed, pol, [_train(1, run=1000)], faults=[NodeEvent(100, "gpu01", "down")])
    assert jobs[1].requeues == 1 and jobs[1].state == "COMPLETED" and _node(out, jobs[1]) == {"gpu02"}


def test_owner_tags_are_the_controllers(seed, tmp_path):
    pol = _policy(seed, tmp_path)
    _, out, _ = _run(seed, pol, [_train(1)])
    first = {d.split()[0]: d.split()[1] for t, w, _, d in out.events if w == "node_owner" and t == 0}
    assert first == {"gpu01": SLURM, "gpu02": SLURM}  # rack2 nodes are not NodeSet members
