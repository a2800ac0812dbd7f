"""Prometheus text exposition (format 0.0.4) of the daemon's figures, written by hand: a few
gauges and counters do not need a client library."""
from __future__ import annotations


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def exposition(facts: dict, pool: str) -> str:
    p = f'pool="{_label(pool)}"'
    lines: list[str] = []

    def metric(name: str, kind: str, help_: str, samples: list[tuple[str, float]]) -> None:
        lines.append(f"# HELP {name} {help_}")
        lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            lines.append(f"{name}{{{p}{',' + labels if labels else ''}}} {value:g}")

    metric("gpupool_queue_depth", "gauge", "Jobs waiting to start (PENDING).", [("", facts["pending"])])
    metric("gpupool_running_jobs", "gauge", "Jobs running now.", [("", facts["running"])])
    metric("gpupool_gpus", "gauge", "Schedulable GPUs (devices, MIG instances counted separately).",
           [("", facts["gpus_total"])])
    metric("gpupool_gpus_allocated", "gauge", "GPUs held by jobs now.", [("", facts["gpus_allocated"])])
    metric("gpupool_jobs", "gauge", "Jobs this daemon knows, by state.",
           [(f'state="{_label(k)}"', v) for k, v in sorted(facts["states"].items())])
    metric("gpupool_jobs_submitted_total", "counter", "Jobs accepted since the daemon started.",
           [("", facts["submitted_total"])])
    metric("gpupool_jobs_started_total", "counter", "Job starts since the daemon started.",
           [("", facts["started_total"])])
    metric("gpupool_account_gpu_seconds_total", "counter", "GPU-seconds used per account since the daemon started.",
           [(f'account="{_label(k)}"', v) for k, v in sorted(facts["usage_gpu_seconds"].items())])
    metric("gpupool_service_ready_replicas", "gauge", "Replicas of each live service that pass their readiness check.",
           [(f'service="{_label(k)}"', v) for k, v in sorted(facts.get("service_ready", {}).items())])
    scaled = facts.get("service_autoscaler", {})
    metric("gpupool_service_desired_replicas", "gauge", "Replicas the autoscaler of each live service last asked for.",
           [(f'service="{_label(k)}"', v["desired"]) for k, v in sorted(scaled.items())])
    metric("gpupool_service_metric_rps", "gauge", "Requests/s the autoscaler of each live service last saw.",
           [(f'service="{_label(k)}"', v["rps"]) for k, v in sorted(scaled.items()) if v["rps"] is not None])
    return "\n".join(lines) + "\n"
