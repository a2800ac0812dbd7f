"""Native trace format: round trips, defaults, located errors; and format detection."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.errors import InputError
from gpupool.formats.traces import TRACE_FORMATS, detect_format, read_trace
from gpupool.formats.traces.native import TRACE_ID_LABEL, read_native, write_native
from gpupool.model.workload import PodSet, Workload

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"


def _workloads() -> list[Workload]:
    return [
        Workload(id=1, name="train-a", pod_sets=(PodSet(count=2, gpus=8, cpu_m=32000, memory_mib=262144,
                                                        one_per_node=True, gpu_type="h100"),),
                 submit_time=0.0, runtime=3600.5, time_limit=7200.0, outcome="FAILED", gang="all",
                 checkpoint_interval=1800.0, user="alice", account="nlp", qos="normal", partition="gpu",
                 namespace="team-nlp", queue_name="train", priority_class="low", priority=10,
                 labels={"team": "nlp", "note": "x,y"}),
        Workload(id=2, name="svc-1", pod_sets=(PodSet(count=1, gpus=1, cpu_m=500, memory_mib=1024),),
                 submit_time=12.25, runtime=86400.0, gang="none", kind="service"),
        Workload(id=3, name="elastic", pod_sets=(PodSet(count=4, gpus=2, min_count=2),), submit_time=100 + 0.1 + 0.2,
                 runtime=1e-3, outcome="CANCELLED", gang="min", labels={"team": "vision"}),
    ]


def _strip(workloads):
    return [(w.id, w.name, w.pod_sets, w.submit_time, w.runtime, w.time_limit, w.outcome, w.gang,
             w.checkpoint_interval, w.kind, w.user, w.account, w.qos, w.partition, w.namespace, w.queue_name,
             w.priority_class, w.priority, w.labels) for w in workloads]


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_round_trip_is_exact(tmp_path, suffix):
    path = tmp_path / f"trace{suffix}"
    original = _workloads()
    write_native(original, path)
    again = read_native(path)
    assert _strip(again) == _strip(original)
    assert again[0].source == f"{path}:{2 if suffix == '.csv' else 1}"
    assert not again.skipped


def test_only_required_columns_take_defaults(tmp_path):
    path = tmp_path / "min.csv"
    path.write_text("submit_time,runtime,gpus_per_pod\n100,60,1\n50,30,2\n")
    got = read_native(path)
    assert [(w.id, w.submit_time, w.runtime, w.total_gpus) for w in got] == [(1, 0.0, 30.0, 2), (2, 50.0, 60.0, 1)]
    w = got[0]
    assert (w.name, w.outcome, w.gang, w.kind, w.time_limit, w.pod_sets[0].cpu_m, w.pod_sets[0].count) == (
        "job-1", "COMPLETED", "all", "batch", None, 1000, 1)
    assert w.source == f"{path}:3"


def test_ids_renumbered_in_submit_order_keep_the_trace_id(tmp_path):
    path = tmp_path / "ids.jsonl"
    path.write_text('{"id": 7, "submit_time": 10, "runtime": 1, "gpus_per_pod": 1}\n'
                    '{"id": 9, "submit_time": 5, "runtime": 1, "gpus_per_pod": 1}\n')
    got = read_native(path)
    assert [w.id for w in got] == [1, 2]
    assert [w.labels[TRACE_ID_LABEL] for w in got] == ["9", "7"]


def test_limit_keeps_the_first_in_submit_order(tmp_path):
    path = tmp_path / "l.csv"
    path.write_text("submit_time,runtime,gpus_per_pod\n30,1,1\n10,1,1\n20,1,1\n")
    got = read_trace(path, limit=2)
    assert [w.submit_time for w in got] == [0.0, 10.0]


def test_bad_value_names_row_and_column(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("submit_time,runtime,gpus_per_pod\n0,60,1\n5,abc,1\n")
    with pytest.raises(InputError) as err:
        read_native(path)
    assert str(err.value) == f"{path}:3: column 'runtime': expected seconds as a number >= 0, got 'abc'"


def test_bad_enum_and_bool(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"submit_time": 0, "runtime": 1, "gpus_per_pod": 1, "gang": "some"}\n')
    with pytest.raises(InputError, match=r"bad.jsonl:1: column 'gang': expected one of all, min, none, got 'some'"):
        read_native(path)
    path.write_text('{"submit_time": 0, "runtime": 1, "gpus_per_pod": 1, "one_per_node": "maybe"}\n')
    with pytest.raises(InputError, match="column 'one_per_node': expected true or false, got 'maybe'"):
        read_native(path)


def test_missing_required_and_unknown_columns(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("submit_time,gpus_per_pod\n0,1\n")
    with pytest.raises(InputError) as err:
        read_native(path)
    assert str(err.value) == f"{path}:1: missing required column(s) runtime"
    path.write_text("submit_time,runtime,gpus_per_pod,gpus\n0,1,1,1\n")
    with pytest.raises(InputError, match="unknown column 'gpus'; known columns: id, name"):
        read_native(path)
    path.write_text("submit_time,runtime,gpus_per_pod\n0,,1\n")
    with pytest.raises(InputError, match=r"m.csv:2: column 'runtime': required, but empty"):
        read_native(path)


def test_writer_refuses_several_pod_sets(tmp_path):
    w = Workload(id=1, name="two", pod_sets=(PodSet(gpus=1), PodSet(name="ps")))
    with pytest.raises(InputError, match="has 2 pod sets"):
        write_native([w], tmp_path / "x.csv")


def test_detection_and_unknown_format(tmp_path):
    native = tmp_path / "n.csv"
    native.write_text("submit_time,runtime,gpus_per_pod\n0,1,1\n")
    assert detect_format(native) == "native"
    helios = tmp_path / "cluster_log.csv"
    helios.write_text("job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n")
    assert detect_format(helios) == "helios"
    odd = tmp_path / "odd.csv"
    odd.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="one of: native, swf, philly, pai, helios, openb"):
        read_trace(odd)
    with pytest.raises(InputError) as err:
        read_trace(native, "slurm")
    assert str(err.value) == f"{native}: unknown trace format 'slurm'; known formats: {', '.join(TRACE_FORMATS)}"


@pytest.mark.traces
def test_real_openb_survives_a_parquet_round_trip(tmp_path):
    src = TRACES / "alibaba-openb-gpu-2023" / "openb_pod_list_default.csv"
    if not src.exists():
        pytest.skip("shared/traces absent")
    original = read_trace(src)
    write_native(original, tmp_path / "openb.parquet")
    again = read_native(tmp_path / "openb.parquet")
    assert _strip(again) == _strip(original)
    assert len(again) == 6203
