"""Service files: Deployment + HorizontalPodAutoscaler (autoscaling/v2) and gpupool/v1 Service."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpupool.errors import InputError
from gpupool.fleet import pool_services
from gpupool.formats.kube_services import parse_seconds, services_from_documents
from gpupool.formats.kube_yaml import load_yaml_text
from gpupool.formats.pool_dir import load_pool

SEED = Path(__file__).resolve().parents[2] / "examples" / "seed-pool"

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: chat
  namespace: ml-serving
  labels: {kueue.x-k8s.io/queue-name: inference, kueue.x-k8s.io/priority-class: inference-high}
  annotations:
    gpupool.io/capacity-rps: "40"
    gpupool.io/startup-time: "2m"
    gpupool.io/traffic: "diurnal?base=10&peak=100"
    gpupool.io/mtbf: "12h"
spec:
  replicas: 3
  template:
    spec:
      containers:
        - name: s
          resources: {requests: {cpu: "4", memory: 32Gi, nvidia.com/gpu: 2}}
"""

HPA = """
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: chat, namespace: ml-serving}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: chat}
  minReplicas: 2
  maxReplicas: 10
  metrics:
    - type: Pods
      pods:
        metric: {name: rps}
        target: {type: AverageValue, averageValue: "30"}
  behavior:
    scaleDown:
      stabilizationWindowSeconds: 120
      policies: [{type: Pods, value: 1, periodSeconds: 60}]
"""

GPUPOOL = """
apiVersion: gpupool/v1
kind: Service
metadata: {name: embed, namespace: ml-serving}
spec:
  replicas: 1
  minReplicas: 1
  maxReplicas: 4
  resources: {cpu: 2, memory: 16Gi, nvidia.com/gpu: 1}
  capacityRps: 100
  startupTime: 90s
  traffic: diurnal?base=5&peak=50&seed=2
  queueName: inference
  priorityClass: inference-high
  slurm: {qos: serving, account: ml-serving}
  autoscaler: {kind: kpa, targetUtilisation: 0.6, stableWindow: 2m}
  restartPolicy: {initialBackoff: 5s, maxBackoff: 2m}
  meanTimeBetweenCrashes: 1d
"""


@pytest.fixture(scope="module")
def kueue():
    return load_pool(SEED).kueue


def parse(text, kueue):
    return services_from_documents(load_yaml_text(text, "svc.yaml"), kueue)


def test_deployment_with_hpa(kueue):
    (svc,) = parse(DEPLOYMENT + HPA, kueue)
    assert svc.name == "chat" and svc.replicas == 3 and (svc.lo, svc.hi) == (2, 10)
    assert svc.pod.gpus == 2 and svc.pod.cpu_m == 4000 and svc.pod.memory_mib == 32 * 1024
    assert svc.queue_name == "inference" and svc.priority == 1000
    assert svc.capacity_rps == 40 and svc.startup_time == 120 and svc.mtbf_s == 12 * 3600
    a = svc.autoscaling
    assert a.kind == "hpa" and a.target_utilisation == pytest.approx(0.75)
    assert a.scale_down.stabilization_s == 120 and a.scale_down.policies[0].type == "Pods"
    assert a.scale_up.policies[1].value == 4  # defaults kept where behavior says nothing


def test_deployment_alone_is_fixed(kueue):
    (svc,) = parse(DEPLOYMENT, kueue)
    assert svc.autoscaling.kind == "fixed" and svc.lo == svc.hi == 3


def test_gpupool_service(kueue):
    (svc,) = parse(GPUPOOL, kueue)
    assert svc.name == "embed" and svc.autoscaling.kind == "kpa" and svc.autoscaling.stable_window_s == 120
    assert svc.restart.initial_backoff_s == 5 and svc.restart.max_backoff_s == 120 and svc.mtbf_s == 86400
    assert svc.qos == "serving" and svc.account == "ml-serving" and svc.priority == 1000


@pytest.mark.parametrize("text, field, message", [
    (GPUPOOL.replace("capacityRps: 100", "capacityRps: -1"), "spec.capacityRps", "greater than 0"),
    (GPUPOOL.replace("startupTime: 90s", "startupTime: soon"), "spec.startupTime", "duration"),
    (GPUPOOL.replace("queueName: inference", "queueName: nope"), "spec.queueName", "LocalQueue"),
    (GPUPOOL.replace("kind: kpa", "kind: keda"), "spec.autoscaler.kind", ""),
    (GPUPOOL.replace("maxReplicas: 4", "maxReplicas: 4\n  surprise: 1"), "spec.surprise", ""),
    (DEPLOYMENT.replace('gpupool.io/capacity-rps: "40"', 'gpupool.io/capacity-rps: "x"'),
     'metadata.annotations["gpupool.io/capacity-rps"]', "number"),
    (DEPLOYMENT + HPA.replace("AverageValue", "Utilization"), "spec.metrics[0].pods.target.type", "AverageValue"),
    (DEPLOYMENT + HPA.replace("name: chat}", "name: other}"), "spec.scaleTargetRef.name", "other"),
    (DEPLOYMENT + HPA.replace("minReplicas: 2", "minReplicas: 20"), "spec.minReplicas", "above"),
])
def test_errors_name_file_document_and_field(kueue, text, field, message):
    with pytest.raises(InputError) as err:
        parse(text, kueue)
    assert err.value.source == "svc.yaml" and err.value.document is not None
    assert err.value.field == field
    assert message in str(err.value)


def test_seed_pool_declares_the_chat_service():
    (svc,) = pool_services(load_pool(SEED))
    assert svc.name == "chat" and svc.hi == 16 and svc.queue_name == "inference"
    assert svc.traffic == "csv:chat-traffic.csv"


@given(st.integers(0, 10**6))
def test_durations_round_trip(seconds):
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    assert parse_seconds(seconds) == seconds
    assert parse_seconds(f"{seconds}s") == seconds
    assert parse_seconds(f"{h}h{m}m{s}s") == seconds
    d, hh = divmod(h, 24)
    assert parse_seconds(f"{d}-{hh:02d}:{m:02d}:{s:02d}") == seconds


@given(st.text(max_size=12))
def test_bad_durations_raise_value_error_only(text):
    try:
        assert parse_seconds(text) >= 0
    except ValueError:
        pass


@given(st.integers(0, 5), st.integers(0, 20), st.integers(1, 8), st.integers(1, 64), st.floats(0.01, 1.0),
       st.sampled_from(["hpa", "kpa", "fixed"]))
def test_gpupool_service_fields_round_trip(lo, span, gpus, cpu, util, kind):
    import yaml

    body = {"apiVersion": "gpupool/v1", "kind": "Service", "metadata": {"name": "svc"},
            "spec": {"minReplicas": lo, "maxReplicas": max(1, lo + span), "replicas": lo,
                     "resources": {"cpu": cpu, "memory": "8Gi", "nvidia.com/gpu": gpus},
                     "capacityRps": 10, "traffic": "diurnal", "autoscaler": {"kind": kind, "targetUtilisation": util}}}
    (svc,) = services_from_documents(load_yaml_text(yaml.safe_dump(body), "p.yaml"))
    assert (svc.lo, svc.hi) == (lo, max(1, lo + span))
    assert svc.pod.gpus == gpus and svc.pod.cpu_m == cpu * 1000 and svc.pod.memory_mib == 8192
    assert svc.autoscaling.kind == kind and svc.autoscaling.target_utilisation == pytest.approx(util)
