"""slurm.conf: parsing, typing, errors with file:line, and render round trips."""
from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpupool.errors import InputError, MissingReferenceError
from gpupool.formats.slurm_conf import load_slurm_conf, render_slurm_conf
from gpupool.model.pool import Gpu

SEED = Path(__file__).resolve().parents[2] / "examples" / "seed-pool" / "slurm.conf"

BASE = "ClusterName=t\nGresTypes=gpu\n"


def write(tmp_path: Path, text: str, name: str = "slurm.conf") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def load_text(tmp_path: Path, text: str):
    return load_slurm_conf(write(tmp_path, text))


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(InputError) as info:
        load_text(tmp_path, text)
    return str(info.value)


def model_of(result) -> tuple:
    """What must survive a render round trip (sources, raw spelling and notes may change)."""
    config = result.config
    parts = {name: dataclasses.replace(p, source="") for name, p in config.partitions.items()}
    nodes = [dataclasses.replace(n, source="") for n in result.nodes]
    return (config.cluster_name, config.params, config.scheduler_parameters, config.select_type_parameters,
            config.gres_types, parts, nodes)


# ----------------------------------------------------------------------------------------
# The reference pool


def test_seed_pool_loads() -> None:
    result = load_slurm_conf(SEED)
    config = result.config
    assert config.cluster_name == "seed"
    assert [n.name for n in result.nodes] == ["gpu01", "gpu02", "gpu03", "gpu04"]
    node = result.nodes[0]
    assert (node.cpus, node.sockets, node.cores_per_socket, node.threads_per_core) == (128, 2, 32, 2)
    assert node.memory_mib == 1_000_000
    assert node.gpus == tuple(Gpu(i) for i in range(8))
    assert node.state == "UNKNOWN"
    train = config.partitions["train"]
    assert train.nodes == ("gpu01", "gpu02", "gpu03", "gpu04")
    assert train.default and train.max_time == 2 * 86400 and train.state == "UP"
    assert config.default_partition() is train
    params = config.params
    assert params["SelectType"] == "select/cons_tres"
    assert config.select_type_parameters == ("CR_Core_Memory",)
    assert config.gres_types == ("gpu",)
    assert params["SchedulerType"] == "sched/backfill"
    assert params["PriorityType"] == "priority/multifactor"
    assert params["PriorityDecayHalfLife"] == 7 * 86400
    assert params["PreemptType"] == "preempt/qos"
    assert params["PreemptMode"] == "REQUEUE"
    assert params["AccountingStorageTRES"] == ("gres/gpu",)
    assert config.scheduler_parameters["bf_continue"] is True
    not_modelled = [key for _, key in result.not_modelled]
    for key in ("SlurmctldPort", "StateSaveLocation", "ProctrackType", "SlurmctldHost"):
        assert key in not_modelled
    assert len(not_modelled) == len(set(not_modelled))
    assert config.raw["SlurmctldPort"] == "6817"


def test_seed_pool_round_trip(tmp_path: Path) -> None:
    first = load_slurm_conf(SEED)
    text = render_slurm_conf(first.config, first.nodes)
    second = load_text(tmp_path, text)
    assert model_of(second) == model_of(first)
    assert "NodeName=gpu[01-04] " in text
    assert render_slurm_conf(second.config, second.nodes) == text


# ----------------------------------------------------------------------------------------
# Keys, typing, includes


def test_keys_are_case_insensitive_and_kept_in_canonical_spelling(tmp_path: Path) -> None:
    result = load_text(tmp_path, "clustername=c1\nPRIORITYWEIGHTAGE=10\nschedulertype=sched/builtin\n"
                                 "slurmctldport=6817\n")
    assert result.config.cluster_name == "c1"
    assert result.config.params == {"ClusterName": "c1", "PriorityWeightAge": 10, "SchedulerType": "sched/builtin"}
    assert result.config.raw == {"ClusterName": "c1", "PriorityWeightAge": "10", "SchedulerType": "sched/builtin",
                                 "SlurmctldPort": "6817"}
    assert [key for _, key in result.not_modelled] == ["SlurmctldPort"]


def test_global_key_typing(tmp_path: Path) -> None:
    result = load_text(tmp_path, """
SchedulerParameters=bf_window=4320,bf_continue
PriorityParameters=x=1
PriorityDecayHalfLife=14-0
PriorityCalcPeriod=5
PriorityMaxAge=1-00:00:00
PriorityUsageResetPeriod=monthly
PriorityFavorSmall=YES
PriorityFlags=SMALL_RELATIVE_TO_TIME,calculate_running
PriorityWeightAge=1000
PriorityWeightFairshare=2000
PriorityWeightJobSize=3
PriorityWeightPartition=4
PriorityWeightQOS=5
PriorityWeightAssoc=6
PriorityWeightTRES=CPU=1000,Mem=2000,GRES/gpu=3000
PreemptMode=suspend,gang
PreemptExemptTime=-1
OverTimeLimit=5
KillWait=30
SchedulerTimeSlice=60
AccountingStorageEnforce=Associations,Limits,QOS
AccountingStorageTRES=GRES/gpu,cpu
EnforcePartLimits=any
DefMemPerCPU=4000
DefMemPerGPU=64000
MaxMemPerCPU=8000
TreeWidth=50
""")
    p = result.config.params
    assert p["SchedulerParameters"] == {"bf_window": "4320", "bf_continue": True}
    assert p["PriorityParameters"] == {"x": "1"}
    assert p["PriorityDecayHalfLife"] == 14 * 86400
    assert p["PriorityCalcPeriod"] == 300
    assert p["PriorityMaxAge"] == 86400
    assert p["PriorityUsageResetPeriod"] == "MONTHLY"
    assert p["PriorityFavorSmall"] is True
    assert p["PriorityFlags"] == ("SMALL_RELATIVE_TO_TIME", "CALCULATE_RUNNING")
    assert [p[f"PriorityWeight{k}"] for k in ("Age", "Fairshare", "JobSize", "Partition", "QOS", "Assoc")] == [
        1000, 2000, 3, 4, 5, 6]
    assert p["PriorityWeightTRES"] == {"cpu": 1000, "mem": 2000, "gres/gpu": 3000}
    assert p["PreemptMode"] == "SUSPEND,GANG"
    assert p["PreemptExemptTime"] is None
    assert p["OverTimeLimit"] == 300
    assert (p["KillWait"], p["SchedulerTimeSlice"]) == (30, 60)
    assert p["AccountingStorageEnforce"] == ("associations", "limits", "qos")
    assert p["AccountingStorageTRES"] == ("gres/gpu", "cpu")
    assert p["EnforcePartLimits"] == "ANY"
    assert (p["DefMemPerCPU"], p["DefMemPerGPU"], p["MaxMemPerCPU"], p["TreeWidth"]) == (4000, 64000, 8000, 50)
    assert result.config.scheduler_parameters == {"bf_window": "4320", "bf_continue": True}


def test_comments_continuations_and_quotes(tmp_path: Path) -> None:
    result = load_text(tmp_path, BASE + (
        "# a comment\n"
        "NodeName=n[1-2] CPUs=8 \\\n"
        "   RealMemory=1000 # trailing comment\n"
        'NodeName=n3 CPUs=8 Reason="disk \\# swap" State=DRAIN\n'
    ))
    assert [n.name for n in result.nodes] == ["n1", "n2", "n3"]
    assert result.nodes[0].memory_mib == 1000
    assert result.nodes[2].slurm_extra == {"Reason": "disk # swap"}
    assert result.nodes[2].state == "DRAIN"


def test_include_is_relative_to_the_including_file(tmp_path: Path) -> None:
    (tmp_path / "conf.d").mkdir()
    write(tmp_path / "conf.d", "NodeName=gpu[01-02] CPUs=16 Gres=gpu:h100:4\n", "nodes.conf")
    path = write(tmp_path, BASE + "Include conf.d/nodes.conf\nPartitionName=p Nodes=ALL\n")
    result = load_slurm_conf(path)
    assert [n.name for n in result.nodes] == ["gpu01", "gpu02"]
    assert result.nodes[0].source == f"{tmp_path / 'conf.d' / 'nodes.conf'}:1"
    assert result.config.sources == [str(path), str(tmp_path / "conf.d" / "nodes.conf")]
    assert result.config.partitions["p"].nodes == ("gpu01", "gpu02")


def test_include_errors_name_the_including_line(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + "include missing.conf\n")
    with pytest.raises(InputError) as info:
        load_slurm_conf(path)
    assert str(info.value) == (
        f"{path}:3: Include names 'missing.conf', which does not exist (looked for {tmp_path / 'missing.conf'})"
    )
    write(tmp_path, "Include slurm.conf\n", "other.conf")
    path = write(tmp_path, "Include other.conf\n")
    with pytest.raises(InputError) as info:
        load_slurm_conf(path)
    assert str(info.value) == (
        f"{tmp_path / 'other.conf'}:1: Include of 'slurm.conf' would include a file that is already being read "
        "(a loop)"
    )


def test_errors_inside_an_included_file_name_that_file(tmp_path: Path) -> None:
    write(tmp_path, "\nBogusKey=1\n", "extra.conf")
    path = write(tmp_path, "Include extra.conf\n")
    with pytest.raises(InputError) as info:
        load_slurm_conf(path)
    assert str(info.value) == (
        f"{tmp_path / 'extra.conf'}:2: unknown slurm.conf key 'BogusKey' (not a Slurm 22.05 slurm.conf key)"
    )


# ----------------------------------------------------------------------------------------
# Nodes


def test_node_lines_defaults_topology_and_gres(tmp_path: Path) -> None:
    result = load_text(tmp_path, """
ClusterName=t
GresTypes=gpu,nvme
NodeName=DEFAULT Sockets=2 CoresPerSocket=16 ThreadsPerCore=2 RealMemory=512000 Weight=5
NodeName=a[1-2] Gres=gpu:a100:4,gpu:h100:4 Features=nvlink,ib NodeAddr=10.0.0.[1-2] TmpDisk=100
NodeName=b1 CPUs=32 Sockets=2 CoresPerSocket=16 ThreadsPerCore=2 Gres=gpu:8,nvme:2 Weight=1
NodeName=c1 Boards=2 SocketsPerBoard=2 CoresPerSocket=4 ThreadsPerCore=1
NodeName=d1 CPUs=32
""")
    a1, a2, b1, c1, d1 = result.nodes
    assert (a1.cpus, a1.sockets, a1.cores_per_socket, a1.threads_per_core) == (64, 2, 16, 2)
    assert a1.weight == 5 and a1.memory_mib == 512000
    assert a1.gpus == tuple(Gpu(i, "a100") for i in range(4)) + tuple(Gpu(i, "h100") for i in range(4, 8))
    assert a1.features == ("nvlink", "ib")
    assert a1.slurm_extra == {"NodeAddr": "10.0.0.1", "TmpDisk": "100"}
    assert a2.slurm_extra["NodeAddr"] == "10.0.0.2"
    assert b1.cpus == 32 and b1.weight == 1 and b1.gpu_count == 8 and b1.gpu_type is None
    assert b1.extra == {"gres/nvme": 2}
    assert (c1.cpus, c1.sockets) == (16, 4)
    assert (d1.cpus, d1.sockets, d1.cores_per_socket, d1.threads_per_core) == (32, 2, 16, 2)
    assert d1.memory_mib == 512000
    assert ("NodeName:NodeAddr" in [k for _, k in result.not_modelled])


def test_cpus_without_topology_follow_slurm(tmp_path: Path) -> None:
    node = load_text(tmp_path, "NodeName=n1 CPUs=4\n").nodes[0]
    assert (node.cpus, node.sockets, node.cores_per_socket, node.threads_per_core, node.memory_mib) == (4, 4, 1, 1, 1)


def test_down_nodes_set_state_and_reason(tmp_path: Path) -> None:
    result = load_text(tmp_path, 'NodeName=n[1-3] CPUs=4\nDownNodes=n[2-3] State=DRAIN Reason="bad fan"\n')
    assert [n.state for n in result.nodes] == ["UNKNOWN", "DRAIN", "DRAIN"]
    assert result.nodes[1].slurm_extra == {"Reason": "bad fan"}


# ----------------------------------------------------------------------------------------
# Partitions


def test_partition_lines(tmp_path: Path) -> None:
    result = load_text(tmp_path, """
NodeName=n[1-4] CPUs=8
NodeSet=evens Nodes=n[2,4]
PartitionName=DEFAULT MaxTime=1-00:00:00 State=UP
PartitionName=all Nodes=ALL Default=YES OverSubscribe=force:4 AllowAccounts=ALL AllowQos=Normal,High
PartitionName=old Nodes=n1,n2 Priority=7 Shared=YES DenyAccounts=Bad MaxNodes=UNLIMITED MinNodes=1
PartitionName=ev Nodes=evens MaxTime=UNLIMITED DefaultTime=30 PriorityTier=10 PriorityJobFactor=3 PreemptMode=requeue QOS=part GraceTime=60 State=DRAIN MaxNodes=2
""")
    parts = result.config.partitions
    assert parts["all"].nodes == ("n1", "n2", "n3", "n4")
    assert parts["all"].default and parts["all"].oversubscribe == "FORCE:4"
    assert parts["all"].allow_accounts is None and parts["all"].allow_qos == ("normal", "high")
    assert parts["all"].max_time == 86400 and parts["all"].state == "UP"
    old = parts["old"]
    assert (old.priority_tier, old.priority_job_factor, old.oversubscribe) == (7, 7, "YES")
    assert old.deny_accounts == ("bad",) and old.max_nodes is None and old.min_nodes == 1
    ev = parts["ev"]
    assert ev.nodes == ("n2", "n4")
    assert (ev.max_time, ev.default_time, ev.priority_tier, ev.priority_job_factor) == (None, 1800, 10, 3)
    assert (ev.preempt_mode, ev.qos, ev.state, ev.max_nodes) == ("REQUEUE", "part", "DRAIN", 2)
    assert ev.extra == {"GraceTime": "60"}
    assert result.config.default_partition() is parts["all"]
    # GraceTime is kept in ``extra`` and acted on (preemption), so it is not listed as unmodelled
    assert result.not_modelled == []


# ----------------------------------------------------------------------------------------
# Errors: exact texts with file:line


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("ClusterNam=x\n", 1,
         "unknown slurm.conf key 'ClusterNam' (not a Slurm 22.05 slurm.conf key); did you mean 'ClusterName'?"),
        ("ClusterName = x\n", 1, "expected key=value (no blanks around '='), got 'ClusterName'"),
        ("ClusterName=x\nPriorityWeightAge=ten\n", 2, "PriorityWeightAge must be a whole number, got 'ten'"),
        ("PriorityDecayHalfLife=7d\n", 1,
         "PriorityDecayHalfLife: expected a Slurm time such as '30', '12:00:00', '2-00:00:00', '7-0' or "
         "'UNLIMITED', got '7d'"),
        ("PriorityFavorSmall=maybe\n", 1, "PriorityFavorSmall must be YES or NO, got 'maybe'"),
        ("PreemptMode=sometimes\n", 1,
         "PreemptMode must be a comma list of CANCEL, GANG, OFF, PRIORITY, REQUEUE, SUSPEND, WITHIN, "
         "got 'sometimes'"),
        ("ClusterName=a\nClusterName=b\n", 2, "ClusterName is set twice (first at {path}:1); keep one of them"),
        ("NodeName=n1 CPUs=4\nPartitionName=train Nodes=n1,gpu09\n", 2,
         "partition 'train' lists node 'gpu09', which no NodeName line defines"),
        ("GresTypes=mps\nNodeName=n1 Gres=gpu:8\n", 2,
         "node 'n1' has Gres 'gpu', but GresTypes does not list 'gpu'; add it, e.g. GresTypes=mps,gpu "
         "(GresTypes is at {path}:1)"),
        ("NodeName=n1 Gres=gpu:8\n", 1,
         "node 'n1' has Gres 'gpu', but GresTypes does not list 'gpu'; add it, e.g. GresTypes=gpu"),
        ("GresTypes=gpu\nNodeName=n1 Gres=gpu:h100:x\n", 2, "Gres entry 'gpu:h100:x': count 'x' is not a whole number"),
        ("NodeName=n[1-2] CPUs=4\nNodeName=n2 CPUs=4\n", 2, "node 'n2' is defined twice (first at {path}:1)"),
        ("NodeName=n1 CPUs=100 Sockets=2 CoresPerSocket=32 ThreadsPerCore=2\n", 1,
         "CPUs=100 matches none of Sockets (2), Sockets*CoresPerSocket (64) or "
         "Sockets*CoresPerSocket*ThreadsPerCore (128)"),
        ("NodeName=n[1-2 CPUs=4\n", 1, "NodeName: hostlist 'n[1-2': '[' is never closed"),
        ("NodeName=n1 Cpus=4 Colour=red\n", 1, "unknown NodeName key 'Colour' (not a Slurm 22.05 NodeName key)"),
        ("NodeName=n1 CPUs=4\nPartitionName=p Nodes=n1 MaxTime=forever\n", 2,
         "MaxTime: expected a Slurm time such as '30', '12:00:00', '2-00:00:00', '7-0' or 'UNLIMITED', "
         "got 'forever'"),
        ("PartitionName=p OverSubscribe=EXCLUSIVE:2\n", 1,
         "OverSubscribe must be NO, EXCLUSIVE, YES[:count] or FORCE[:count], got 'EXCLUSIVE:2'"),
        ("PartitionName=p AllowAccounts=a DenyAccounts=b\n", 1,
         "AllowAccounts and DenyAccounts cannot both be set (Slurm would ignore DenyAccounts); keep one"),
        ("PartitionName=p\nPartitionName=p\n", 2, "partition 'p' is defined twice (first at {path}:1)"),
        ("NodeName=n1 CPUs=4 NodeAddr=a,b\n", 1, "NodeAddr lists 2 name(s) for 1 node(s); give one per node"),
        ('NodeName=n1 Reason="open\n', 1, "value of Reason opens a double quote that is never closed"),
        ("NodeName=n1 State=SLEEPY\n", 1,
         "node State must be one of CLOUD, DOWN, DRAIN, FAIL, FAILING, FUTURE, IDLE, MAINT, NO_RESPOND, PLANNED, "
         "POWERED_DOWN, POWER_DOWN, POWER_UP, REBOOT, RESERVED, RESUME, UNDRAIN, UNKNOWN (or a '+' combination), "
         "got 'SLEEPY'"),
    ],
)
def test_errors(tmp_path: Path, text: str, line: int, message: str) -> None:
    path = tmp_path / "slurm.conf"
    assert error_of(tmp_path, text) == f"{path}:{line}: " + message.format(path=path)


def test_reference_errors_are_missing_reference_errors(tmp_path: Path) -> None:
    with pytest.raises(MissingReferenceError):
        load_text(tmp_path, "PartitionName=p Nodes=ghost\n")


def test_missing_file() -> None:
    with pytest.raises(InputError) as info:
        load_slurm_conf(Path("/nonexistent/slurm.conf"))
    assert str(info.value) == "/nonexistent/slurm.conf: file not found"


# ----------------------------------------------------------------------------------------
# Render


def test_render_groups_consecutive_equal_nodes_and_keeps_extras(tmp_path: Path) -> None:
    text = """
ClusterName=t
SlurmctldHost=ctl1
SlurmctldHost=ctl2(10.0.0.2)
GresTypes=gpu
NodeName=a[01-03] CPUs=8 Gres=gpu:h100:2
NodeName=a04 CPUs=16 Gres=gpu:h100:2
NodeName=a05 CPUs=8 Gres=gpu:h100:2 Reason="held for repair"
FrontendName=fe1 FrontendAddr=10.0.0.9
PartitionName=p Nodes=a[01-05] Hidden=YES
"""
    first = load_text(tmp_path, text)
    out = render_slurm_conf(first.config, first.nodes)
    assert "SlurmctldHost=ctl1\nSlurmctldHost=ctl2(10.0.0.2)\n" in out
    assert "NodeName=a[01-03] CPUs=8 Sockets=8 CoresPerSocket=1 ThreadsPerCore=1 RealMemory=1 " \
           "Gres=gpu:h100:2 State=UNKNOWN\n" in out
    assert 'Reason="held for repair"' in out
    assert "FrontendName=fe1 FrontendAddr=10.0.0.9\n" in out
    assert "PartitionName=p Nodes=a[01-05] PriorityTier=1 PriorityJobFactor=1 Hidden=YES State=UP" in out
    second = load_text(tmp_path, out)
    assert model_of(second) == model_of(first)


def test_render_uses_typed_values_over_raw(tmp_path: Path) -> None:
    result = load_text(tmp_path, "ClusterName=t\nPriorityWeightAge=10\n")
    result.config.params["PriorityWeightAge"] = 99
    result.config.params["KillWait"] = 5
    out = render_slurm_conf(result.config, result.nodes)
    assert "PriorityWeightAge=99\n" in out and "KillWait=5\n" in out


# Hypothesis: generated slurm.conf files survive parse -> render -> parse.

_names = st.lists(st.sampled_from([f"g{i:02d}" for i in range(1, 13)]), min_size=1, max_size=12, unique=True)
_gres = st.lists(st.tuples(st.sampled_from([None, "a100", "h100", "1g.10gb"]), st.integers(1, 8)), max_size=2)
_shape = st.sampled_from(["CPUs=8", "CPUs=64 Sockets=2 CoresPerSocket=16 ThreadsPerCore=2",
                          "Sockets=1 CoresPerSocket=4", "CPUs=12"])


@st.composite
def _conf(draw) -> str:
    lines = [f"ClusterName={draw(st.sampled_from(['a', 'seed', 'x1']))}", "GresTypes=gpu"]
    globals_ = {
        "PriorityType": st.sampled_from(["priority/multifactor", "priority/basic"]),
        "PriorityDecayHalfLife": st.sampled_from(["7-0", "14-00:00:00", "0", "UNLIMITED", "90"]),
        "PriorityWeightFairshare": st.integers(0, 100000).map(str),
        # (GPU weights need the GPU TRES tracked: slurmctld refuses untracked ones)
        "PriorityWeightTRES": st.sampled_from(["CPU=1000,Mem=2000,GRES/gpu=3000\nAccountingStorageTRES=gres/gpu",
                                               "gres/gpu=1.5\nAccountingStorageTRES=GRES/gpu", "CPU=2,Mem=1.5"]),
        "SchedulerParameters": st.sampled_from(["bf_window=4320,bf_continue", "bf_interval=30"]),
        "SelectTypeParameters": st.sampled_from(["CR_Core_Memory", "CR_CPU,CR_LLN"]),
        "PreemptMode": st.sampled_from(["REQUEUE", "suspend,gang", "OFF"]),
        "PreemptExemptTime": st.sampled_from(["-1", "00:10:00"]),
        "OverTimeLimit": st.sampled_from(["0", "5", "UNLIMITED"]),
        "PriorityFavorSmall": st.sampled_from(["YES", "no"]),
        "SlurmctldPort": st.sampled_from(["6817", "6820-6830"]),
        "EnforcePartLimits": st.sampled_from(["ALL", "no"]),
    }
    for key, strategy in globals_.items():
        if draw(st.booleans()):
            lines.append(f"{key}={draw(strategy)}")
    names = draw(_names)
    pos = 0
    while pos < len(names):
        size = draw(st.integers(1, len(names) - pos))
        chunk = names[pos:pos + size]
        pos += size
        attrs = [draw(_shape), f"RealMemory={draw(st.integers(1, 2_000_000))}"]
        gres = draw(_gres)
        if gres:
            attrs.append("Gres=" + ",".join(f"gpu:{t}:{n}" if t else f"gpu:{n}" for t, n in gres))
        if draw(st.booleans()):
            attrs.append(f"Weight={draw(st.integers(1, 100))}")
        if draw(st.booleans()):
            attrs.append("Features=" + ",".join(draw(st.lists(st.sampled_from(["ib", "nvl", "x"]), min_size=1,
                                                                 max_size=2, unique=True))))
        if draw(st.booleans()):
            attrs.append(f"TmpDisk={draw(st.integers(0, 9))}")
        attrs.append(f"State={draw(st.sampled_from(['UNKNOWN', 'idle', 'DOWN', 'FUTURE']))}")
        lines.append(f"NodeName={','.join(chunk)} " + " ".join(attrs))
    for pnum in range(draw(st.integers(0, 3))):
        members = draw(st.lists(st.sampled_from(names), max_size=len(names), unique=True))
        attrs = [f"Nodes={','.join(members)}" if members else "Nodes=ALL"]
        if draw(st.booleans()):
            attrs.append(f"MaxTime={draw(st.sampled_from(['UNLIMITED', '2-00:00:00', '90', '1:30:00']))}")
        if draw(st.booleans()):
            attrs.append(f"DefaultTime={draw(st.sampled_from(['30', '04:00:00']))}")
        if draw(st.booleans()):
            attrs.append(f"OverSubscribe={draw(st.sampled_from(['NO', 'YES:2', 'FORCE', 'exclusive']))}")
        if draw(st.booleans()):
            attrs.append(f"AllowQos={draw(st.sampled_from(['ALL', 'normal,high']))}")
        if draw(st.booleans()):
            attrs.append(f"DenyAccounts={draw(st.sampled_from(['a', 'b,c']))}")
        if draw(st.booleans()):
            attrs.append(f"PriorityTier={draw(st.integers(0, 100))}")
        if draw(st.booleans()):
            attrs.append("GraceTime=30")
        attrs.append(f"Default={'YES' if pnum == 0 else 'NO'}")
        lines.append(f"PartitionName=p{pnum} " + " ".join(attrs))
    return "\n".join(lines) + "\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_conf())
def test_parse_render_parse_is_stable(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        first = load_slurm_conf(write(Path(tmp), text, "a.conf"))
        rendered = render_slurm_conf(first.config, first.nodes)
        second = load_slurm_conf(write(Path(tmp), rendered, "b.conf"))
        assert model_of(second) == model_of(first)
        assert render_slurm_conf(second.config, second.nodes) == rendered


def test_scheduler_parameters_not_modelled_are_listed(tmp_path: Path) -> None:
    """Options the Slurm policy does not act on are kept and named (``validate`` lists them),
    never dropped in silence; the ones it reads are not."""
    result = load_text(tmp_path, "SchedulerParameters=bf_window=4320,bf_busy_nodes,batch_sched_delay=3,"
                                 "bf_hetjob_prio=min,bf_max_job_array_resv=5\n")
    assert result.config.scheduler_parameters["bf_busy_nodes"] is True
    assert sorted(key for _, key in result.not_modelled) == [
        "SchedulerParameters=batch_sched_delay", "SchedulerParameters=bf_hetjob_prio"]


def test_every_scheduler_parameter_the_policy_reads_is_listed_as_modelled() -> None:
    import re

    from gpupool.formats.slurm_conf import MODELLED_SCHEDULER_PARAMETERS
    from gpupool.policy.slurm import config

    source = Path(config.__file__).read_text()
    read = set(re.findall(r'sp\.get\("(\w+)"', source)) | set(re.findall(r'_bounded\(sp, "(\w+)"', source))
    assert read and read == set(MODELLED_SCHEDULER_PARAMETERS)


def test_keys_typed_but_not_acted_on_are_listed_as_not_modelled(tmp_path: Path) -> None:
    result = load_text(tmp_path, BASE + "CompleteWait=64\nMaxTasksPerNode=8\nTreeWidth=50\n"
                       "DependencyParameters=kill_invalid_depend,max_depend_depth=5\n")
    p = result.config.params
    assert (p["CompleteWait"], p["MaxTasksPerNode"], p["TreeWidth"]) == (64, 8, 50)  # still checked and typed
    listed = [key for _, key in result.not_modelled]
    assert {"CompleteWait", "MaxTasksPerNode", "TreeWidth", "DependencyParameters=max_depend_depth"} <= set(listed)
    assert "DependencyParameters=kill_invalid_depend" not in listed


def test_kill_invalid_depend_is_read_from_dependency_parameters(tmp_path: Path) -> None:
    from gpupool.policy.slurm.config import load_settings

    for line, want in (("DependencyParameters=kill_invalid_depend\n", True),
                       ("SchedulerParameters=kill_invalid_depend\n", True), ("", False)):
        assert load_settings(load_text(tmp_path, BASE + line).config).kill_invalid_depend is want
