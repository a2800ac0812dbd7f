"""A Deployment on the live host: replicas as processes, readiness checks, restart in place."""
from __future__ import annotations

import os
import signal
import socket
import time

from gpupool.live.services import Probe, ServiceSpec, _expand, parse_services
from tests.live.conftest import wait_for

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: server
        command: ["sh", "-c"]
        args: ["echo start $(PORT) >> starts.log; exec {python} -m http.server $(PORT) --bind 127.0.0.1"]
        resources:
          limits: {{nvidia.com/gpu: 1, cpu: "1", memory: 1Gi}}
        ports: [{{name: http, containerPort: {port}}}]
        readinessProbe:
          httpGet: {{path: /, port: http}}
          periodSeconds: 1
"""


def _free_port_pair() -> int:
    for _ in range(50):
        s1 = socket.socket()
        s1.bind(("127.0.0.1", 0))
        port = s1.getsockname()[1]
        s2 = socket.socket()
        try:
            s2.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue
        finally:
            s1.close()
            s2.close()
    raise RuntimeError("no two consecutive free ports")


def test_expansion_and_parsing_of_a_live_deployment():
    assert _expand("a $(PORT) $$(PORT) $(NOPE)", {"PORT": "80"}) == "a 80 $(PORT) $(NOPE)"
    import sys

    spec = parse_services(DEPLOYMENT.format(python=sys.executable, port=9000), "web.yaml", None)[0]
    assert spec.service.name == "web" and spec.service.replicas == 2 and spec.service.pod.gpus == 1
    assert spec.probe == Probe("http", 9000, "/", 1.0, 0.0, 1.0)
    assert "9001 --bind" in spec.script(1) and "export PORT=9001" in spec.script(1)
    assert isinstance(spec, ServiceSpec)


def test_replicas_become_ready_and_restart_in_place_after_a_crash(daemon, tmp_path):
    import sys

    port = _free_port_pair()
    path = tmp_path / "web.yaml"
    path.write_text(DEPLOYMENT.format(python=sys.executable, port=port))
    ids = [int(x) for x in daemon.cli("submit", "--parsable", str(path)).stdout.split()]
    assert len(ids) == 2
    with daemon.client() as c:
        wait_for(lambda: all(c.job(i).get("ready") for i in ids), timeout=30)
        facts = [c.job(i) for i in ids]
        assert [f["port"] for f in facts] == [port, port + 1]
        assert sorted(g for f in facts for g in f["gpus"]) == [0, 1]
        assert 'gpupool_service_ready_replicas{pool="pool",service="web"} 2' in c.metrics()
        first = facts[0]
        os.killpg(first["pid"], signal.SIGKILL)  # the container dies; the replica keeps its GPU
        wait_for(lambda: not c.job(ids[0])["ready"], timeout=10)
        assert c.job(ids[0])["state"] == "RUNNING"
        t0 = time.time()
        wait_for(lambda: c.job(ids[0]).get("ready") and c.job(ids[0])["restarts"] == 1, timeout=40)
        assert time.time() - t0 >= 8  # CrashLoopBackOff: 10 s after the first crash
        again = c.job(ids[0])
        assert again["pid"] != first["pid"] and again["gpus"] == first["gpus"]
    assert (daemon.root / "starts.log").read_text().count(f"start {port}\n") == 2
