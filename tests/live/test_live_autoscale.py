"""Live autoscaling: the simulator's HPA resizing a Deployment's replica processes on the daemon.

Real daemon, real replica processes (a tiny Python HTTP server), fake GPUs. One test replays a
traffic CSV on the wall clock; the other reads a Prometheus gauge that the service serves.
"""
from __future__ import annotations

import json
import socket
import sys
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpupool.errors import InputError
from gpupool.fleet.traffic import Traffic
from gpupool.live.autoscale import (
    PolledMetric,
    ServiceScaler,
    TrafficMetric,
    metric_source,
    parse_metric_text,
    scale_down_order,
)
from gpupool.live.services import parse_services
from tests.live.conftest import wait_for

SERVER = '''import http.server, os
port = int(os.environ["PORT"])

class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/metrics":
            try:
                v = open("load").read().strip() or "0"
            except OSError:
                v = "0"
            body = ("# TYPE requests_per_second gauge\\n"
                    f'requests_per_second{{port="{port}"}} {v}\\n').encode()
        else:
            body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass

http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
'''

MANIFEST = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    gpupool.io/capacity-rps: "10"
    gpupool.io/traffic: "{traffic}"
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: server
        command: ["{python}", "server.py"]
        resources:
          limits: {{nvidia.com/gpu: 1, cpu: "1", memory: 1Gi}}
        ports: [{{name: http, containerPort: {port}}}]
        readinessProbe:
          httpGet: {{path: /, port: http}}
          periodSeconds: 1
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: web
  annotations:
    gpupool.io/sync-period: "1s"
    gpupool.io/metric-window: "{window}"
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}
  minReplicas: 1
  maxReplicas: 3
  metrics:
  - type: Pods
    pods:
      metric: {{name: requests_per_second}}
      target: {{type: AverageValue, averageValue: "5"}}
  behavior:
    scaleUp:
      stabilizationWindowSeconds: 0
      policies: [{{type: Pods, value: 4, periodSeconds: 1}}]
    scaleDown:
      stabilizationWindowSeconds: 2
      policies: [{{type: Percent, value: 100, periodSeconds: 1}}]
"""


def _free_ports(n: int = 3) -> int:
    """A base port with ``n`` consecutive free ports (replica k listens on base + k)."""
    for _ in range(100):
        s0 = socket.socket()
        s0.bind(("127.0.0.1", 0))
        base = s0.getsockname()[1]
        held = [s0]
        try:
            for k in range(1, n):
                s = socket.socket()
                held.append(s)
                s.bind(("127.0.0.1", base + k))
            return base
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError("no consecutive free ports")


def _replicas(c) -> dict[int, dict]:
    return {r["id"]: r for r in c.queue() if r["name"].startswith("web-")}


def _events(daemon, first: int) -> list[dict]:
    out = daemon.cli("audit", "job", str(first), "--json").stdout
    return [ev for rec in json.loads(out) for ev in rec["events"]]


# ----------------------------------------------------------------------------- units

def test_parse_metric_text_reads_numbers_and_prometheus_samples():
    assert parse_metric_text(" 12.5\n", None, "m") == 12.5
    text = ('# HELP requests_per_second r\n# TYPE requests_per_second gauge\n'
            'other 99\nrequests_per_second{pod="a"} 3\nrequests_per_second{pod="b"} 4.5 1700000000\n')
    assert parse_metric_text(text, "requests_per_second", "m") == 7.5
    assert parse_metric_text(text, None, "m") == 99
    for bad, name in (("nan", None), ("-1", None), ("x y z w", None), ("other 1", "missing")):
        with pytest.raises(InputError):
            parse_metric_text(bad, name, "m")


_values = st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False)


@given(st.lists(_values, min_size=1, max_size=6), st.lists(_values, max_size=3))
def test_prometheus_samples_of_the_metric_sum_over_label_sets(mine, others):
    lines = [f'rps{{pod="p{i}",zone="a b"}} {v!r}' for i, v in enumerate(mine)]
    lines += [f"other_rps {v!r} 1700000000000" for v in others]
    text = "# TYPE rps gauge\n" + "\n".join(lines[::-1]) + "\n"
    assert parse_metric_text(text, "rps", "m") == pytest.approx(sum(mine), rel=1e-9, abs=1e-9)
    assert parse_metric_text(repr(mine[0]), "rps", "m") == mine[0]  # a bare number is the value


@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=8))
def test_scale_down_order_never_removes_a_ready_replica_before_a_worse_one(flags):
    rows = [(jid, jid, placed, ready and placed) for jid, (placed, ready) in enumerate(flags, start=1)]
    order = scale_down_order(rows)
    assert sorted(order) == [r[0] for r in rows]
    rank = {r[0]: (r[2], r[3]) for r in rows}
    for a, b in zip(order, order[1:]):
        assert rank[a] < rank[b] or (rank[a] == rank[b] and a > b)  # same rank: newest first


def test_traffic_metric_replays_window_means_from_the_service_start():
    m = TrafficMetric(Traffic((0.0, 10.0), (4.0, 14.0), 20.0))
    assert m.mean(5.0, 0.0) == 4.0
    assert m.mean(12.0, 4.0) == pytest.approx((2 * 4 + 2 * 14) / 4)
    assert m.mean(25.0, 0.0) == 0.0  # past the end of the traffic


def test_polled_metric_averages_samples_in_the_window(tmp_path):
    f = tmp_path / "rps"
    m = metric_source(f"file:{f.name}#rps", str(tmp_path), "t")
    assert isinstance(m, PolledMetric)
    m.read(0.0)
    assert m.mean(0.0, 5.0) is None and "FileNotFoundError" in m.error  # no sample: the HPA holds
    for t, v in ((1.0, 2), (2.0, 4), (9.0, 9)):
        f.write_text(f"rps {v}\n")
        m.read(t)
    assert m.mean(2.0, 5.0) == 3.0 and m.mean(9.0, 5.0) == 9.0 and m.mean(9.0, 0.0) == 9.0
    assert metric_source("live", None, "t") is None
    with pytest.raises(InputError):
        metric_source("csv:nope.csv", str(tmp_path), "t")


def test_scale_down_order_is_replicaset_order():
    # (job id, index, placed, ready): pending first, then not ready, then the newest.
    rows = [(1, 0, True, True), (2, 1, True, True), (3, 2, True, False), (4, 3, False, False)]
    assert scale_down_order(rows) == [4, 3, 2, 1]


def test_hpa_annotations_set_the_sync_period_and_the_scaler_is_the_simulators(tmp_path):
    (tmp_path / "t.csv").write_text("time,requests_per_s\n0,4\n10,14\n")
    text = MANIFEST.format(traffic="csv:t.csv", python=sys.executable, port=9000, window="2s")
    spec = parse_services(text, "web.yaml", None)[0]
    auto = spec.service.autoscaling
    assert (auto.kind, auto.sync_period_s, auto.metric_window_s) == ("hpa", 1.0, 2.0)
    assert auto.scale_down.stabilization_s == 2.0 and spec.service.hi == 3
    sc = ServiceScaler(spec, metric_source("csv:t.csv", str(tmp_path), "t"), 1, 0.0)
    from gpupool.fleet.autoscalers import Hpa

    assert isinstance(sc.scaler, Hpa) and sc.scaler.target == pytest.approx(5.0)
    assert sc.decide(1.0, 1, 1).desired == 1  # 4 req/s for one replica at 5 per replica
    assert sc.decide(12.0, 1, 1).desired == 3  # mean of [10, 12] is 14 -> ceil(14 / 5)
    bad = text.replace('gpupool.io/sync-period: "1s"', 'gpupool.io/sync-period: "soon"')
    with pytest.raises(InputError, match="sync-period"):
        parse_services(bad, "web.yaml", None)


def test_a_missing_traffic_file_refuses_the_submission(daemon, tmp_path):
    (daemon.root / "server.py").write_text(SERVER)
    path = daemon.root / "web.yaml"
    path.write_text(MANIFEST.format(traffic="csv:absent.csv", python=sys.executable, port=9000, window="2s"))
    r = daemon.cli("submit", str(path), check=False)
    assert r.returncode != 0 and "absent.csv" in (r.stderr + r.stdout)
    with daemon.client() as c:
        assert _replicas(c) == {}


# ----------------------------------------------------------------------------- live

@pytest.mark.slow
def test_traffic_csv_scales_up_then_down_on_the_wall_clock(daemon):
    port = _free_ports()
    (daemon.root / "server.py").write_text(SERVER)
    # 4 req/s (one replica at 5/replica), 14 req/s from t=4 s (three), 2 req/s from t=12 s (one).
    (daemon.root / "traffic.csv").write_text("time,requests_per_s\n0,4\n4,14\n12,2\n")
    path = daemon.root / "web.yaml"
    path.write_text(MANIFEST.format(traffic="csv:traffic.csv", python=sys.executable, port=port, window="2s"))
    t0 = time.time()
    ids = [int(x) for x in daemon.cli("submit", "--parsable", str(path)).stdout.split()]
    assert len(ids) == 1
    first = ids[0]
    with daemon.client() as c:
        wait_for(lambda: c.job(first).get("ready"), timeout=15)
        assert len(_replicas(c)) == 1
        time.sleep(max(0.0, t0 + 3.0 - time.time()))
        assert len(_replicas(c)) == 1  # 4 req/s: one replica is enough
        grown = wait_for(lambda: r if len(r := _replicas(c)) == 3 else None, timeout=15)
        t_up = time.time() - t0
        new = sorted(set(grown) - {first})
        facts = {i: c.job(i) for i in grown}
        assert sorted(g for f in facts.values() for g in f["gpus"]) == [0, 1, 2]  # own GPUs each
        assert sorted(f["port"] for f in facts.values()) == [port, port + 1, port + 2]
        wait_for(lambda: all(c.job(i).get("ready") for i in grown), timeout=15)
        wait_for(lambda: len(_replicas(c)) == 1, timeout=25)
        t_down = time.time() - t0
        assert list(_replicas(c)) == [first]  # ReplicaSet order: the newest went first
        assert c.job(first)["state"] == "RUNNING" and c.job(first)["ready"]
        for jid in new:
            assert c.job(jid)["state"] == "CANCELLED"
    assert 4.0 <= t_up <= 12.0 and 12.0 <= t_down <= 25.0, (t_up, t_down)
    events = _events(daemon, first)
    ups = [e for e in events if e["event"] == "scale_up"]
    downs = [e for e in events if e["event"] == "scale_down"]
    # The 2 s metric window ramps from 4 to 14 req/s: the HPA may pass through 2 replicas.
    assert ups and "hpa: 1 -> " in ups[0]["detail"] and "-> 3 replicas" in ups[-1]["detail"]
    assert downs and downs[-1]["detail"].split("(")[0].strip().endswith("-> 1 replicas")
    # Every decision is one event; the replicas it started and stopped are ordinary ledger jobs.
    acct = daemon.cli("acct", "-P", "-n", "-o", "JobID,JobName,State", "-M", "live:pool").stdout
    rows = {int(line.split("|")[0]): line.split("|")[1:] for line in acct.split()}
    assert rows[first] == ["web-0", "RUNNING"]
    assert all(rows[j][1].startswith("CANCELLED") for j in new)


@pytest.mark.slow
def test_a_prometheus_gauge_served_by_the_service_drives_the_hpa(daemon):
    port = _free_ports()
    (daemon.root / "server.py").write_text(SERVER)
    (daemon.root / "load").write_text("0\n")
    path = daemon.root / "web.yaml"
    url = f"http://127.0.0.1:{port}/metrics#requests_per_second"
    path.write_text(MANIFEST.format(traffic=url, python=sys.executable, port=port, window="0s"))
    first = int(daemon.cli("submit", "--parsable", str(path)).stdout.split()[0])
    with daemon.client() as c:
        wait_for(lambda: c.job(first).get("ready"), timeout=15)
        time.sleep(2.0)
        assert len(_replicas(c)) == 1  # 0 req/s: held at minReplicas
        (daemon.root / "load").write_text("9\n")  # ceil(9 / 5) = 2
        wait_for(lambda: len(_replicas(c)) == 2, timeout=10)
        time.sleep(2.5)
        assert len(_replicas(c)) == 2
        auto = c.job(first)["autoscaler"]
        assert auto["kind"] == "hpa" and (auto["min"], auto["max"], auto["desired"]) == (1, 3, 2)
        assert auto["rps"] == 9.0 and auto["error"] == "" and auto["service_id"] == first
        assert 'gpupool_service_desired_replicas{pool="pool",service="web"} 2' in c.metrics()
        assert 'gpupool_service_metric_rps{pool="pool",service="web"} 9' in c.metrics()
        (daemon.root / "load").write_text("0.5\n")
        wait_for(lambda: len(_replicas(c)) == 1, timeout=15)
        assert list(_replicas(c)) == [first]
    kinds = [e["event"] for e in _events(daemon, first) if e["event"].startswith("scale_")]
    assert kinds == ["scale_up", "scale_down"]


@pytest.mark.slow
def test_the_autoscaler_survives_a_kill_9_of_the_daemon(daemon):
    port = _free_ports()
    (daemon.root / "server.py").write_text(SERVER)
    (daemon.root / "load").write_text("12\n")  # ceil(12 / 5) = 3
    metric = daemon.root / "load"
    path = daemon.root / "web.yaml"
    path.write_text(MANIFEST.format(traffic=f"file:{metric.name}", python=sys.executable, port=port, window="0s"))
    first = int(daemon.cli("submit", "--parsable", str(path)).stdout.split()[0])
    with daemon.client() as c:
        grown = wait_for(lambda: r if len(r := _replicas(c)) == 3 else None, timeout=15)
        wait_for(lambda: all(c.job(i).get("ready") for i in grown), timeout=15)
        pids = {i: c.job(i)["pid"] for i in grown}
    daemon.kill9()
    daemon.start()
    with daemon.client() as c:
        assert set(_replicas(c)) == set(grown)  # re-adopted, not started again
        assert {i: c.job(i)["pid"] for i in grown} == pids
        metric.write_text("1\n")
        wait_for(lambda: len(_replicas(c)) == 1, timeout=15)
        assert list(_replicas(c)) == [first]
        metric.write_text("9\n")  # back to 2: the freed replica index (and port) is reused
        wait_for(lambda: len(_replicas(c)) == 2, timeout=15)
        again = max(_replicas(c))
        assert again > max(grown) and c.job(again)["port"] == port + 1
        assert c.job(again)["name"] == "web-1"
    kinds = [e["event"] for e in _events(daemon, first) if e["event"].startswith("scale_")]
    assert kinds == ["scale_up", "scale_down", "scale_up"]
