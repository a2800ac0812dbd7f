"""Kubernetes workload objects into gpupool Workloads, as Kueue would see them."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.errors import InputError, MissingReferenceError
from gpupool.formats.kube_workloads import parse_runtime, workloads_from_documents
from gpupool.formats.kube_yaml import load_yaml_documents, load_yaml_text
from gpupool.formats.kueue_objects import parse_pool_objects
from gpupool.model.kueue import KueueConfig, LocalQueue, Topology, WorkloadPriorityClass
from gpupool.model.workload import PodSet

SEED = Path(__file__).resolve().parents[2] / "examples" / "seed-pool"

KUEUE = KueueConfig(
    topologies={"t": Topology("t", ("example.com/block", "example.com/rack", "kubernetes.io/hostname"))},
    local_queues={("ml", "train"): LocalQueue("ml", "train", "cq")},
    priority_classes={"low": WorkloadPriorityClass("low", 100)},
)

JOB = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: train
  namespace: ml
  labels: {kueue.x-k8s.io/queue-name: train, kueue.x-k8s.io/priority-class: low}
  annotations:
    gpupool.io/runtime: "2-00:00:00"
    gpupool.io/submit-time: "600"
    gpupool.io/outcome: FAILED
    gpupool.io/checkpoint-interval: "1800"
spec:
  parallelism: 4
  completions: 4
  completionMode: Indexed
  activeDeadlineSeconds: 200000
  template:
    metadata:
      annotations: {kueue.x-k8s.io/podset-preferred-topology: example.com/rack}
    spec:
      nodeSelector: {nvidia.com/gpu.product: H100}
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      initContainers:
      - name: fetch
        resources: {requests: {cpu: '16', memory: 1Gi}}
      - name: log-agent
        restartPolicy: Always
        resources: {requests: {cpu: 500m, memory: 256Mi}}
      containers:
      - name: trainer
        resources:
          requests: {cpu: '8', memory: 64Gi}
          limits: {nvidia.com/gpu: '8', example.com/ib: '1'}
      - name: helper
        resources: {limits: {cpu: 250m}}
      overhead: {memory: 64Mi}
"""


def load(text: str, kueue: KueueConfig | None = KUEUE, source: str = "w.yaml"):
    return workloads_from_documents(load_yaml_text(text, source), kueue)


def error_of(text: str, kueue: KueueConfig | None = KUEUE) -> str:
    with pytest.raises(InputError) as exc:
        load(text, kueue)
    return str(exc.value)


def test_job_becomes_one_workload():
    (wl,) = load(JOB)
    assert (wl.id, wl.name, wl.namespace, wl.kind, wl.gang) == (0, "train", "ml", "batch", "all")
    assert (wl.queue_name, wl.priority_class, wl.priority) == ("train", "low", 100)
    assert (wl.runtime, wl.submit_time, wl.outcome, wl.checkpoint_interval) == (172800.0, 600.0, "FAILED", 1800.0)
    assert wl.time_limit == 200000.0
    assert wl.source == "w.yaml (document 1)"
    # CPU: app 8 + 0.25 (limit as request) + 0.5 sidecar = 8.75 < init 16 (the sidecar starts after
    # it) -> 16; memory: app 64Gi + 256Mi sidecar > init 1Gi -> app; + 64Mi overhead.
    assert wl.pod_sets == (PodSet(
        name="main", count=4, cpu_m=16000, memory_mib=64 * 1024 + 256 + 64, gpus=8, gpu_type="H100",
        extra=(("example.com/ib", 1),), node_selector=(("nvidia.com/gpu.product", "H100"),),
        tolerations=((("effect", "NoSchedule"), ("key", "nvidia.com/gpu"), ("operator", "Exists")),),
        topology_preferred="example.com/rack"),)


def test_job_defaults_and_min_parallelism():
    text = ("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n"
            "  annotations: {kueue.x-k8s.io/job-min-parallelism: '2'}\n"
            "spec:\n  parallelism: 6\n  completions: 5\n  template:\n    spec:\n"
            "      containers: [{name: c, resources: {requests: {cpu: '1'}}}]\n")
    (wl,) = load(text, None)
    assert (wl.namespace, wl.queue_name, wl.priority, wl.runtime, wl.time_limit) == ("default", None, None, 0.0, None)
    assert wl.gang == "min"
    assert (wl.pod_sets[0].count, wl.pod_sets[0].min_count) == (5, 2)


def test_single_pod_job_and_plain_pod_are_not_gangs():
    job = ("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\n"
           "spec: {template: {spec: {containers: [{name: c}]}}}\n")
    pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n"
    assert [w.gang for w in load(job + "---\n" + pod, None)] == ["none", "none"]
    (wl,) = load(pod, None)
    assert wl.pod_sets == (PodSet(name="main", count=1, cpu_m=0, memory_mib=0),)


def test_deployment_is_one_service_workload_per_replica():
    text = ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: llm, namespace: ml,"
            " labels: {kueue.x-k8s.io/queue-name: train}}\n"
            "spec:\n  replicas: 3\n  template:\n    spec:\n"
            "      containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]\n")
    wls = load(text)
    assert [w.name for w in wls] == ["llm-0", "llm-1", "llm-2"]
    assert {(w.kind, w.gang, w.queue_name, w.pod_sets[0].gpus, w.pod_sets[0].count) for w in wls} == {
        ("service", "none", "train", 1, 1)}


def test_jobset_has_a_pod_set_per_replicated_job():
    text = """\
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: js}
spec:
  replicatedJobs:
  - name: driver
    template:
      spec:
        template: {spec: {containers: [{name: c, resources: {requests: {cpu: '2'}}}]}}
  - name: workers
    replicas: 3
    template:
      spec:
        parallelism: 2
        activeDeadlineSeconds: 3600
        template: {spec: {containers: [{name: c, resources: {limits: {nvidia.com/gpu: 4}}}]}}
"""
    (wl,) = load(text, None)
    assert [(ps.name, ps.count, ps.gpus, ps.cpu_m) for ps in wl.pod_sets] == [
        ("driver", 1, 0, 2000), ("workers", 6, 4, 0)]
    assert (wl.gang, wl.time_limit) == ("all", 3600.0)


def test_leader_worker_set_is_one_workload_per_group():
    text = """\
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: vllm}
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 4
    leaderTemplate: {spec: {containers: [{name: l, resources: {requests: {cpu: '4'}}}]}}
    workerTemplate: {spec: {containers: [{name: w, resources: {limits: {nvidia.com/gpu: 8}}}]}}
"""
    wls = load(text, None)
    assert [w.name for w in wls] == ["vllm-0", "vllm-1"]
    assert [(ps.name, ps.count, ps.gpus) for ps in wls[0].pod_sets] == [("leader", 1, 0), ("worker", 3, 8)]
    assert (wls[0].kind, wls[0].gang) == ("service", "all")


@pytest.mark.parametrize("version, priority_field", [
    ("v1beta1", "priorityClassName: low\n  priorityClassSource: kueue.x-k8s.io/workloadpriorityclass"),
    ("v1beta2", "priorityClassRef: {group: kueue.x-k8s.io, kind: WorkloadPriorityClass, name: low}"),
])
def test_kueue_workload_object(version, priority_field):
    text = f"""\
apiVersion: kueue.x-k8s.io/{version}
kind: Workload
metadata: {{name: wl, namespace: ml}}
spec:
  queueName: train
  {priority_field}
  podSets:
  - name: workers
    count: 8
    minCount: 4
    topologyRequest: {{required: example.com/block}}
    template: {{spec: {{containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: 1}}}}}}]}}}}
"""
    (wl,) = load(text)
    assert (wl.queue_name, wl.priority_class, wl.priority, wl.gang) == ("train", "low", 100, "min")
    assert (wl.pod_sets[0].count, wl.pod_sets[0].min_count, wl.pod_sets[0].topology_required) == (
        8, 4, "example.com/block")


def test_kueue_pod_group_is_one_workload():
    pod = ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels: {{kueue.x-k8s.io/pod-group-name: g}}\n"
           "  annotations: {{kueue.x-k8s.io/pod-group-total-count: '3'}}\n"
           "spec: {{containers: [{{name: c, resources: {{requests: {{cpu: '{cpu}'}}}}}}]}}\n")
    text = "---\n".join(pod.format(name=f"p{i}", cpu=c) for i, c in enumerate([1, 1, 2]))
    (wl,) = load(text, None)
    assert wl.name == "g" and wl.gang == "all"
    assert [(ps.name, ps.count, ps.cpu_m) for ps in wl.pod_sets] == [("role-0", 2, 1000), ("role-1", 1, 2000)]
    assert error_of(text.replace("'3'", "'4'"), None) == (
        'w.yaml (document 1, field metadata.annotations["kueue.x-k8s.io/pod-group-total-count"]): '
        "pod group 'g' declares '4' pods but these files hold 3 of them")


def test_kubernetes_pod_group_gang():
    text = """\
apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata: {name: pg}
spec: {schedulingPolicy: {gang: {minCount: 2}}}
"""
    for i in range(3):
        text += f"---\napiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}}}\n" \
                f"spec: {{schedulingGroup: {{podGroupName: pg}}, containers: [{{name: c}}]}}\n"
    (wl,) = load(text, None)
    assert (wl.name, wl.gang, wl.pod_sets[0].count, wl.pod_sets[0].min_count) == ("pg", "min", 3, 2)
    assert error_of(text.replace("name: pg}", "name: other}"), None) == (
        "w.yaml (document 2, field spec.schedulingGroup.podGroupName): Pod default/p0 refers to PodGroup "
        "default/pg, which is not defined")


def test_pods_created_by_a_deployment_in_the_same_dump_count_once():
    text = ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
            "spec: {template: {spec: {containers: [{name: c}]}}}\n---\n"
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web-5d8f-abcde\n"
            "  ownerReferences: [{kind: ReplicaSet, name: web-5d8f, controller: true}]\n"
            "spec: {containers: [{name: c}]}\n")
    notes: list = []
    wls = workloads_from_documents(load_yaml_text(text, "dump.yaml"), None, notes)
    assert [w.name for w in wls] == ["web-0"]
    assert notes == [("dump.yaml (document 2)", "Pod default/web-5d8f-abcde: created by Deployment default/web, "
                                                "counted there")]


# --------------------------------------------------------------------------- errors


def test_unknown_priority_class_names_both_ends():
    text = JOB.replace("priority-class: low", "priority-class: lowest")
    with pytest.raises(MissingReferenceError) as exc:
        load(text)
    assert str(exc.value) == ('w.yaml (document 1, field metadata.labels["kueue.x-k8s.io/priority-class"]): '
                              "Job ml/train refers to WorkloadPriorityClass 'lowest', which is not defined")


def test_unknown_local_queue_names_both_ends():
    text = JOB.replace("queue-name: train", "queue-name: trian")
    assert error_of(text) == ('w.yaml (document 1, field metadata.labels["kueue.x-k8s.io/queue-name"]): '
                              "Job ml/train refers to LocalQueue ml/trian, which is not defined")


def test_unknown_topology_level():
    text = JOB.replace("podset-preferred-topology: example.com/rack", "podset-preferred-topology: rack")
    assert error_of(text) == (
        'w.yaml (document 1, field spec.template.metadata.annotations["kueue.x-k8s.io/podset-preferred-topology"]): '
        "Job ml/train asks for topology level 'rack', which no Topology defines (levels: example.com/block, "
        "example.com/rack, kubernetes.io/hostname)")


def test_bad_request_quantity():
    text = JOB.replace("memory: 64Gi", "memory: 64 GB")
    assert error_of(text) == (
        "w.yaml (document 1, field spec.template.spec.containers[0].resources.requests.memory): "
        "expected a Kubernetes quantity such as '500m', '4', '2048Gi' or '1e3', got '64 GB'")


@pytest.mark.parametrize("old, new, message", [
    ('gpupool.io/runtime: "2-00:00:00"', 'gpupool.io/runtime: "two days"',
     '"gpupool.io/runtime"]): expected seconds (\'43200\'), a Slurm time (\'12:00:00\', \'1-00:00:00\') '
     "or a duration ('12h', '90m'), got 'two days'"),
    ("gpupool.io/outcome: FAILED", "gpupool.io/outcome: TIMEOUT",
     "\"gpupool.io/outcome\"]): expected one of COMPLETED, FAILED, CANCELLED, got 'TIMEOUT'"),
    ("gpupool.io/outcome: FAILED", "gpupool.io/outcom: FAILED",
     "\"gpupool.io/outcom\"]): unknown gpupool annotation 'gpupool.io/outcom' (known: gpupool.io/runtime, "
     "gpupool.io/submit-time, gpupool.io/outcome, gpupool.io/checkpoint-interval)"),
])
def test_gpupool_annotation_errors(old, new, message):
    assert error_of(JOB.replace(old, new)) == "w.yaml (document 1, field metadata.annotations[" + message


def test_not_a_workload_kind():
    text = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: q}\n"
    assert error_of(text) == (
        "w.yaml (document 1, field kind): ClusterQueue (kueue.x-k8s.io/v1beta2) is not a workload kind gpupool "
        "reads (Job, Pod, Deployment, StatefulSet, JobSet, LeaderWorkerSet, Workload)")


@pytest.mark.parametrize("text, seconds", [("43200", 43200.0), ("12:00:00", 43200.0), ("1-00:00:00", 86400.0),
                                           ("12h", 43200.0), ("1h30m", 5400.0), ("90.5", 90.5)])
def test_runtime_forms(text, seconds):
    assert parse_runtime(text) == seconds


# --------------------------------------------------------------------------- the seed pool


def test_seed_pretrain_job():
    docs = load_yaml_documents(SEED / "kueue.yaml") + load_yaml_documents(SEED / "kueue-config.yaml")
    kueue = parse_pool_objects(docs).kueue
    job_docs = load_yaml_documents(SEED / "workloads" / "pretrain-run-job.yaml")
    assert parse_pool_objects(job_docs).workload_docs == job_docs
    (wl,) = workloads_from_documents(job_docs, kueue)
    assert (wl.name, wl.namespace, wl.queue_name, wl.priority, wl.gang) == (
        "pretrain-run", "ml-training", "training", 100, "all")
    assert (wl.time_limit, wl.runtime) == (43200.0, 37800.0)
    assert wl.pod_sets == (PodSet(name="main", count=2, cpu_m=64000, memory_mib=500 * 1024, gpus=8,
                                  topology_required="cloud.gpupool.io/topology-rack"),)
    assert wl.total_gpus == 16


def test_sidecar_started_before_an_init_container_adds_to_it():
    text = """\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  initContainers:
  - {name: proxy, restartPolicy: Always, resources: {requests: {cpu: '1'}}}
  - {name: warmup, resources: {requests: {cpu: '4'}}}
  containers:
  - {name: app, resources: {requests: {cpu: '2'}}}
"""
    (wl,) = load(text, None)
    assert wl.pod_sets[0].cpu_m == 5000  # warmup 4 + proxy 1 > app 2 + proxy 1


def test_slurm_bridge_annotations_reach_the_bridge_policy():
    from gpupool.policy.bridge.mapping import slurm_fields

    text = ("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  annotations:\n"
            "    slurmjob.slinky.slurm.net/partition: train\n"
            "    slurmjob.slinky.slurm.net/timelimit: \"30\"\n"
            "    unrelated.example.com/x: y\n"
            "spec:\n  template:\n    spec:\n      containers:\n      - name: c\n        image: i\n"
            "        resources: {limits: {nvidia.com/gpu: 1}}\n")
    (wl,) = load(text, None)
    assert "unrelated.example.com/x" not in wl.labels
    fields = slurm_fields(wl)
    assert (fields.partition, fields.time_limit) == ("train", 1800.0)


# ----------------------------------------------------------------------------- TAS slices and pod-set groups

SLICED_JOBSET = """\
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: pretrain
  namespace: ml
  labels: {kueue.x-k8s.io/queue-name: train}
spec:
  replicatedJobs:
  - name: leader
    replicas: 1
    template:
      spec:
        completions: 1
        parallelism: 1
        template:
          metadata:
            annotations:
              kueue.x-k8s.io/podset-required-topology: example.com/block
          spec:
            containers: [{name: leader, image: trainer:1, resources: {requests: {cpu: '2'}}}]
  - name: workers
    replicas: 2
    template:
      spec:
        completions: 4
        parallelism: 4
        template:
          metadata:
            annotations:
              kueue.x-k8s.io/podset-preferred-topology: example.com/block
              kueue.x-k8s.io/podset-slice-required-topology: kubernetes.io/hostname
              kueue.x-k8s.io/podset-slice-size: "4"
          spec:
            containers:
            - name: worker
              image: trainer:1
              resources: {limits: {nvidia.com/gpu: 8}}
"""

GROUPED_LWS = """\
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: vllm
  namespace: ml
  labels: {kueue.x-k8s.io/queue-name: train}
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 3
    leaderTemplate:
      metadata:
        annotations:
          kueue.x-k8s.io/podset-group-name: lws-group
          kueue.x-k8s.io/podset-required-topology: example.com/rack
      spec:
        containers: [{name: leader, image: vllm:1, resources: {requests: {cpu: '4'}}}]
    workerTemplate:
      metadata:
        annotations:
          kueue.x-k8s.io/podset-group-name: lws-group
          kueue.x-k8s.io/podset-required-topology: example.com/rack
      spec:
        containers: [{name: worker, image: vllm:1, resources: {limits: {nvidia.com/gpu: 8}}}]
"""


def test_jobset_slices_read_from_annotations():
    (wl,) = load(SLICED_JOBSET)
    leader, workers = wl.pod_sets
    assert (leader.topology_required, leader.topology_slice_level, leader.topology_slice_size) == (
        "example.com/block", None, None)
    assert (workers.count, workers.topology_preferred, workers.topology_slice_level, workers.topology_slice_size) == (
        8, "example.com/block", "kubernetes.io/hostname", 4)
    # Without podset-slice-size a JobSet's slice is one Job (its parallelism), as in Kueue.
    (wl,) = load(SLICED_JOBSET.replace('              kueue.x-k8s.io/podset-slice-size: "4"\n', ""))
    assert wl.pod_sets[1].topology_slice_size == 4


def test_leader_worker_set_group_read_from_annotations():
    wls = load(GROUPED_LWS)
    assert [(ps.name, ps.count, ps.topology_required, ps.topology_group) for ps in wls[0].pod_sets] == [
        ("leader", 1, "example.com/rack", "lws-group"), ("worker", 2, "example.com/rack", "lws-group")]


def test_kueue_workload_topology_request_slices_and_group():
    text = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: wl, namespace: ml}
spec:
  queueName: train
  podSets:
  - name: leader
    count: 1
    topologyRequest: {required: example.com/rack, podSetGroupName: g}
    template: {spec: {containers: [{name: c, resources: {requests: {cpu: '1'}}}]}}
  - name: workers
    count: 4
    topologyRequest: {required: example.com/rack, podSetGroupName: g}
    template: {spec: {containers: [{name: c, resources: {requests: {nvidia.com/gpu: 1}}}]}}
  - name: sliced
    count: 6
    topologyRequest: {preferred: example.com/block, podSetSliceRequiredTopology: example.com/rack, podSetSliceSize: 3}
    template: {spec: {containers: [{name: c, resources: {requests: {nvidia.com/gpu: 1}}}]}}
"""
    (wl,) = load(text)
    assert [(ps.topology_group, ps.topology_slice_level, ps.topology_slice_size) for ps in wl.pod_sets] == [
        ("g", None, None), ("g", None, None), (None, "example.com/rack", 3)]
    bad = text.replace("podSetSliceSize: 3", "podSetSliceSize: 4")
    assert "must evenly divide the pod set count 6" in error_of(bad)
    bad = text.replace(", podSetSliceSize: 3", "")
    assert "slice size (podSetSliceSize) not provided" in error_of(bad)
    bad = text.replace("count: 1\n", "count: 2\n")
    assert ("Workload ml/wl: pod-set group 'g' (leader, workers): can only define groups where at least one pod "
            "set has only 1 replica, got: 2 replica(s) and 4 replica(s) in the group") in error_of(bad)


SLICE_FIELD = ('field spec.replicatedJobs[1].template.spec.template.metadata.annotations'
               '["kueue.x-k8s.io/podset-slice-size"]')
SLICE_LEVEL_FIELD = ('field spec.replicatedJobs[1].template.spec.template.metadata.annotations'
                     '["kueue.x-k8s.io/podset-slice-required-topology"]')


@pytest.mark.parametrize("old, new, where, message", [
    ('podset-slice-size: "4"', 'podset-slice-size: "four"', SLICE_FIELD,
     "kueue.x-k8s.io/podset-slice-size must be a numeric value, got 'four'"),
    ('podset-slice-size: "4"', 'podset-slice-size: "0"', SLICE_FIELD,
     "kueue.x-k8s.io/podset-slice-size must be greater than or equal to 1, got '0'"),
    ('podset-slice-size: "4"', 'podset-slice-size: "16"', SLICE_FIELD,
     "kueue.x-k8s.io/podset-slice-size must not be greater than pod set count 8, got 16"),
    ('podset-slice-size: "4"', 'podset-slice-size: "3"', SLICE_FIELD,
     "kueue.x-k8s.io/podset-slice-size 3 must evenly divide the pod set count 8"),
    ("podset-slice-required-topology: kubernetes.io/hostname", "podset-slice-required-topology: gpu", SLICE_LEVEL_FIELD,
     "asks for slice topology level 'gpu', which no Topology defines"),
    ("podset-slice-required-topology: kubernetes.io/hostname", "podset-slice-required-topology: example.com/block",
     SLICE_LEVEL_FIELD, "podset slice topology example.com/block is above the podset topology example.com/rack"),
])
def test_slice_annotation_errors(old, new, where, message):
    text = SLICED_JOBSET.replace(old, new).replace(
        "podset-preferred-topology: example.com/block\n              kueue.x-k8s.io/podset-slice",
        "podset-preferred-topology: example.com/rack\n              kueue.x-k8s.io/podset-slice")
    err = error_of(text)
    assert f"w.yaml (document 1, {where}): JobSet ml/pretrain replicatedJob workers" in err
    assert message in err


def test_slice_size_needs_a_slice_level_and_a_job_needs_a_size():
    job = JOB.replace("annotations: {kueue.x-k8s.io/podset-preferred-topology: example.com/rack}",
                      "annotations: {kueue.x-k8s.io/podset-slice-size: '2'}")
    assert "podset-slice-size may not be set when 'kueue.x-k8s.io/podset-slice-required-topology' is not " \
           "specified" in error_of(job)
    job = JOB.replace("annotations: {kueue.x-k8s.io/podset-preferred-topology: example.com/rack}",
                      "annotations: {kueue.x-k8s.io/podset-slice-required-topology: kubernetes.io/hostname}")
    err = error_of(job)
    assert err.startswith('w.yaml (document 1, field spec.template.metadata.annotations'
                          '["kueue.x-k8s.io/podset-slice-required-topology"]): Job ml/train')
    assert "podset-slice-size must be set when 'kueue.x-k8s.io/podset-slice-required-topology' is specified" in err
    # A Job with only slices: every 2 pods in one host, anywhere.
    job = JOB.replace("annotations: {kueue.x-k8s.io/podset-preferred-topology: example.com/rack}",
                      "annotations: {kueue.x-k8s.io/podset-slice-required-topology: kubernetes.io/hostname, "
                      "kueue.x-k8s.io/podset-slice-size: '2'}")
    (wl,) = load(job)
    assert (wl.pod_sets[0].topology_slice_level, wl.pod_sets[0].topology_slice_size) == ("kubernetes.io/hostname", 2)


@pytest.mark.parametrize("old, new, message", [
    ("size: 3", "size: 1", "can only define groups of exactly 2 pod sets, got: 1 pod set(s)"),
    ("podset-group-name: lws-group\n          kueue.x-k8s.io/podset-required-topology: example.com/rack\n      spec:\n"
     "        containers: [{name: leader",
     "podset-group-name: lws-group\n          kueue.x-k8s.io/podset-required-topology: example.com/block\n      spec:\n"
     "        containers: [{name: leader",
     "topology consistent with pod set 'worker' in group 'lws-group'"),
    ("podset-group-name: lws-group\n          kueue.x-k8s.io/podset-required-topology: example.com/rack\n      spec:\n"
     "        containers: [{name: leader", "podset-group-name: '12'\n      spec:\n        containers: [{name: leader",
     "kueue.x-k8s.io/podset-group-name must not be a number, got '12'"),
    ("podset-group-name: lws-group\n          kueue.x-k8s.io/podset-required-topology: example.com/rack\n      spec:\n"
     "        containers: [{name: leader",
     "podset-group-name: lws-group\n      spec:\n        containers: [{name: leader",
     "may not be set when neither 'kueue.x-k8s.io/podset-preferred-topology' nor "
     "'kueue.x-k8s.io/podset-required-topology' is specified"),
])
def test_group_annotation_errors(old, new, message):
    text = GROUPED_LWS.replace(old, new)
    assert text != GROUPED_LWS
    err = error_of(text)
    assert "podset-group-name" in err and message in err
