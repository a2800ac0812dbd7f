"""Imports of real outputs (written here as Slurm 22.05 and Kueue print them); re-imports add nothing."""
from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from gpupool.ledger import schema as s
from gpupool.ledger.imports import import_kueue_workloads, import_sacct, import_sacct_json, import_sshare
from gpupool.ledger.query import acct_jobs, audit_gpus, render_acct, parse_format, usage_report
from gpupool.ledger.sacct_fields import SACCT_2205_FIELDS
from gpupool.ledger.timefmt import parse_time

# What `sacct --parsable2 --allocations --format=ALL -M seed` prints on 22.05 for three jobs:
# a finished 2-node GPU job, a running array task with typed GPUs, a pending job; plus a
# job step line of the kind --allocations suppresses (it must be skipped if present).
_JOBS = [
    {"Account": "ml-research", "AllocCPUS": "32", "AllocNodes": "2",
     "AllocTRES": "billing=32,cpu=32,gres/gpu=16,mem=1920000M,node=2", "AssocID": "7", "Cluster": "seed",
     "CPUTime": "5-14:00:00", "CPUTimeRAW": "482400", "DBIndex": "311", "DerivedExitCode": "0:0",
     "Elapsed": "04:11:15", "ElapsedRaw": "15075", "Eligible": "2026-11-30T08:59:58", "End": "2026-11-30T13:11:16",
     "ExitCode": "0:0", "Flags": "SchedMain", "GID": "1001", "Group": "alice", "JobID": "4201", "JobIDRaw": "4201",
     "JobName": "pretrain-run", "NCPUS": "32", "NNodes": "2", "NodeList": "gpu[01-02]", "Priority": "10342",
     "Partition": "train", "QOS": "normal", "QOSRAW": "1", "Reason": "None", "ReqCPUS": "32", "ReqMem": "1875G",
     "ReqNodes": "2", "ReqTRES": "billing=32,cpu=32,gres/gpu=16,mem=1875G,node=2", "Reserved": "00:00:03",
     "ResvCPU": "00:01:36", "ResvCPURAW": "96", "Start": "2026-11-30T09:00:01", "State": "COMPLETED",
     "Submit": "2026-11-30T08:59:58", "Suspended": "00:00:00", "Timelimit": "12:00:00", "TimelimitRaw": "720",
     "UID": "1001", "User": "alice", "WCKey": "", "WCKeyID": "0", "WorkDir": "/home/alice/pretrain"},
    {"Account": "ml-research", "AllocCPUS": "16", "AllocNodes": "1",
     "AllocTRES": "billing=16,cpu=16,gres/gpu:h100=2,gres/gpu=2,mem=240000M,node=1", "Cluster": "seed",
     "Elapsed": "00:20:00", "ElapsedRaw": "1200", "Eligible": "2026-11-30T13:00:00", "End": "Unknown",
     "ExitCode": "0:0", "Flags": "SchedBackfill", "JobID": "4210_3", "JobIDRaw": "4213", "JobName": "eval-sweep",
     "NCPUS": "16", "NNodes": "1", "NodeList": "gpu03", "Priority": "9120", "Partition": "train", "QOS": "normal",
     "Reason": "None", "ReqTRES": "billing=16,cpu=16,gres/gpu=2,mem=240000M,node=1", "Reserved": "00:00:00",
     "Start": "2026-11-30T13:00:00", "State": "RUNNING", "Submit": "2026-11-30T12:59:50", "Timelimit": "01:00:00",
     "TimelimitRaw": "60", "User": "bob"},
    {"Account": "ml-platform", "AllocCPUS": "0", "AllocNodes": "0", "AllocTRES": "", "Cluster": "seed",
     "Elapsed": "00:00:00", "ElapsedRaw": "0", "Eligible": "2026-11-30T13:10:00", "End": "Unknown", "ExitCode": "0:0",
     "JobID": "4220", "JobIDRaw": "4220", "JobName": "lint-all", "NCPUS": "4", "NNodes": "1",
     "NodeList": "None assigned", "Priority": "500", "Partition": "train", "QOS": "scavenger", "Reason": "Priority",
     "ReqTRES": "billing=4,cpu=4,mem=8G,node=1", "Reserved": "INVALID", "Start": "Unknown", "State": "PENDING",
     "Submit": "2026-11-30T13:10:00", "Timelimit": "UNLIMITED", "TimelimitRaw": "UNLIMITED", "User": "dave"},
]
_STEP = {"JobID": "4201.batch", "JobIDRaw": "4201.batch", "JobName": "batch", "State": "COMPLETED", "Cluster": "seed",
         "Start": "2026-11-30T09:00:01", "End": "2026-11-30T13:11:16", "AllocTRES": "cpu=16,gres/gpu=8,mem=937.50G,node=1"}


def sacct_text(jobs) -> str:
    lines = ["|".join(SACCT_2205_FIELDS)]
    for job in jobs:
        lines.append("|".join(job.get(f, "") for f in SACCT_2205_FIELDS))
    return "\n".join(lines) + "\n"


def _count(ledger, table):
    with ledger.read() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()


def test_sacct_parsable2_import_and_idempotent_reimport(ledger, tmp_path):
    f = tmp_path / "sacct.txt"
    f.write_text(sacct_text(_JOBS + [_STEP]))
    first = import_sacct(ledger, f)
    assert first["clusters"] == ["seed"] and first["jobs_added"] == 3
    counts = {t.name: _count(ledger, t) for t in (s.jobs, s.events, s.allocations, s.usage)}
    again = import_sacct(ledger, f)
    assert again["jobs_added"] == again["jobs_updated"] == again["events_added"] == again["allocations_added"] == 0
    assert {t.name: _count(ledger, t) for t in (s.jobs, s.events, s.allocations, s.usage)} == counts
    # sacct shows the records back in its own formats
    fields = parse_format("JobID,JobName,State,Start,End,Elapsed,Timelimit,AllocTRES,NodeList,Reason,WorkDir")
    text = render_acct(acct_jobs(ledger), fields, parsable="|")
    assert text.splitlines()[1:] == [
        "4201|pretrain-run|COMPLETED|2026-11-30T09:00:01|2026-11-30T13:11:16|04:11:15|12:00:00|"
        "billing=32,cpu=32,gres/gpu=16,mem=1920000M,node=2|gpu[01-02]|None|/home/alice/pretrain",
        "4210_3|eval-sweep|RUNNING|2026-11-30T13:00:00|Unknown|00:20:00|01:00:00|"
        "billing=16,cpu=16,gres/gpu:h100=2,gres/gpu=2,mem=240000M,node=1|gpu03|None|",
        "4220|lint-all|PENDING|Unknown|Unknown|00:00:00|UNLIMITED||None assigned|Priority|",
    ]
    # GPU-seconds: 16 GPUs × 15075 s (finished) + 2 × 1200 s (running, as of its ElapsedRaw)
    rows = usage_report(ledger, by=["account", "gpu-type"], period="all")
    total = sum(r["hours"] for r in rows)
    assert total * 3600 == pytest.approx(16 * 15075 + 2 * 1200)
    assert {r["gpu-type"] for r in rows} == {"", "h100"}
    # per node, without device indices
    held = audit_gpus(ledger, "gpu02:3", parse_time("2026-11-30T10:00:00"))
    assert [(r["job_id"], r["gpus"], r["gpu_index"]) for r in held] == [("4201", 8, None)]


def test_a_later_sacct_updates_a_job_that_finished(ledger, tmp_path):
    early = tmp_path / "early.txt"
    early.write_text(sacct_text(_JOBS))
    import_sacct(ledger, early)
    done = dict(_JOBS[1], State="COMPLETED", End="2026-11-30T13:40:00", Elapsed="00:40:00", ElapsedRaw="2400")
    late = tmp_path / "late.txt"
    late.write_text(sacct_text([_JOBS[0], done, _JOBS[2]]))
    result = import_sacct(ledger, late)
    assert result["jobs_added"] == 0 and result["jobs_updated"] == 1 and result["allocations_updated"] == 1
    job = acct_jobs(ledger, jobs=["4210_3"])[0]
    assert job["state"] == "COMPLETED" and job["elapsed"] == 2400
    assert _count(ledger, s.allocations) == 3  # 2 nodes of 4201 + 1 of 4210_3: closed, not duplicated
    rows = usage_report(ledger, period="all")
    assert sum(r["hours"] for r in rows) * 3600 == pytest.approx(16 * 15075 + 2 * 2400)


def _sacct_json() -> dict:
    """``sacct --json`` as Slurm 22.05 prints it (openapi/data_parser v0.0.38)."""
    return {
        "meta": {"plugin": {"type": "openapi/dbv0.0.38", "name": "Slurm OpenAPI DB v0.0.38"},
                 "Slurm": {"version": {"major": 22, "micro": 8, "minor": 5}, "release": "22.05.8"}},
        "errors": [],
        "jobs": [{
            "account": "ml-serving", "comment": {"administrator": None, "job": None, "system": None},
            "allocation_nodes": 1,
            "array": {"job_id": 0, "limits": {"max": {"running": {"tasks": 0}}}, "task": None, "task_id": None},
            "association": {"account": "ml-serving", "cluster": "seed", "partition": None, "user": "carol"},
            "cluster": "seed", "constraints": "", "container": "",
            "derived_exit_code": {"status": "SUCCESS", "return_code": 0},
            "time": {"elapsed": 3600, "eligible": 1796029200, "end": 1796032800, "start": 1796029200,
                     "submission": 1796029195, "suspended": 0, "system": {"seconds": 0, "microseconds": 0},
                     "limit": 120, "total": {"seconds": 0, "microseconds": 0}, "user": {"seconds": 0, "microseconds": 0}},
            "exit_code": {"status": "SUCCESS", "return_code": 0},
            "flags": ["CLEAR_SCHEDULING", "STARTED_ON_SCHEDULE"], "group": "carol",
            "het": {"job_id": 0, "job_offset": None}, "job_id": 4300, "name": "serve-llm",
            "mcs": {"label": ""}, "nodes": "gpu04", "partition": "train", "priority": 20000, "qos": "serving",
            "required": {"CPUs": 8, "memory": 65536}, "kill_request_user": None,
            "reservation": {"id": 0, "name": 0},
            "state": {"current": "COMPLETED", "reason": "None"}, "steps": [],
            "tres": {"allocated": [{"type": "cpu", "name": None, "id": 1, "count": 8},
                                   {"type": "mem", "name": None, "id": 2, "count": 65536},
                                   {"type": "node", "name": None, "id": 4, "count": 1},
                                   {"type": "billing", "name": None, "id": 5, "count": 8},
                                   {"type": "gres", "name": "gpu", "id": 1001, "count": 4}],
                     "requested": [{"type": "cpu", "name": None, "id": 1, "count": 8},
                                   {"type": "gres", "name": "gpu", "id": 1001, "count": 4}]},
            "user": "carol", "wckey": {"wckey": "", "flags": []}, "working_directory": "/srv/llm",
        }],
    }


def test_sacct_json_import(ledger, tmp_path):
    f = tmp_path / "sacct.json"
    f.write_text(json.dumps(_sacct_json(), indent=2))
    assert import_sacct_json(ledger, f)["jobs_added"] == 1
    assert import_sacct_json(ledger, f)["jobs_added"] == 0
    job = acct_jobs(ledger)[0]
    assert (job["origin"], job["job_id"], job["state"], job["gpus"], job["node_list"]) == ("seed", "4300", "COMPLETED", 4, "gpu04")
    assert job["alloc_tres"] == "billing=8,cpu=8,gres/gpu=4,mem=64G,node=1" and job["timelimit"] == 7200
    assert job["gpu_seconds"] == 4 * 3600


_SSHARE = """Account|User|RawShares|NormShares|RawUsage|NormUsage|EffectvUsage|FairShare|LevelFS|GrpTRESMins|TRESRunMins
root|||0.000000|2419200||1.000000|||cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0,gres/gpu=0|cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0,gres/gpu=0
 root|root|1|0.009901|0|0.000000|0.000000|1.000000|inf|cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0,gres/gpu=0|cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0,gres/gpu=0
 ml-research||50|0.495050|1814400|0.750000|0.750000||0.660066|cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0,gres/gpu=0|cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0,gres/gpu=0
  ml-research|alice|1|0.500000|1814400|0.750000|1.000000|0.400000|0.500000|cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0,gres/gpu=0|cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0,gres/gpu=0
"""


def test_sshare_import_is_idempotent(ledger, tmp_path):
    f = tmp_path / "sshare.txt"
    f.write_text(_SSHARE)
    assert import_sshare(ledger, f, cluster="seed")["shares_added"] == 4
    assert import_sshare(ledger, f, cluster="seed")["shares_added"] == 0
    with ledger.read() as conn:
        row = conn.execute(sa.select(s.shares).where(s.shares.c.user == "alice")).mappings().one()
    assert row["account"] == "ml-research" and row["raw_usage"] == 1814400 and row["fairshare"] == 0.4


def _workload(name, *, created, admitted=None, evicted=None, finished=None, readmitted=False, evictions=0,
              failed=False) -> str:
    conds = []
    if admitted:
        conds.append(f"""      - lastTransitionTime: "{admitted}"
        message: Quota reserved in ClusterQueue training
        observedGeneration: 1
        reason: QuotaReserved
        status: "True"
        type: QuotaReserved
      - lastTransitionTime: "{admitted}"
        message: The workload is admitted
        observedGeneration: 1
        reason: Admitted
        status: "True"
        type: Admitted""")
    if evicted:
        status = "False" if readmitted else "True"
        conds.append(f"""      - lastTransitionTime: "{evicted}"
        message: 'Preempted to accommodate a workload (UID: 5c1e7ab2-0b61-4a3e-9c5e-9d2b0c0f7e11, JobUID: 7d3c1f4e-2a5b-4c6d-8e9f-0a1b2c3d4e5f) due to prioritization in the ClusterQueue'
        observedGeneration: 1
        reason: Preempted
        status: "{status}"
        type: Evicted
      - lastTransitionTime: "{evicted}"
        message: 'Preempted to accommodate a workload (UID: 5c1e7ab2-0b61-4a3e-9c5e-9d2b0c0f7e11, JobUID: 7d3c1f4e-2a5b-4c6d-8e9f-0a1b2c3d4e5f) due to prioritization in the ClusterQueue'
        observedGeneration: 1
        reason: InClusterQueue
        status: "{status}"
        type: Preempted""")
    if finished:
        reason, msg = ("Failed", "'Job failed: BackoffLimitExceeded'") if failed else ("Succeeded", "Job finished successfully")
        conds.append(f"""      - lastTransitionTime: "{finished}"
        message: {msg}
        observedGeneration: 1
        reason: {reason}
        status: "True"
        type: Finished""")
    admission = """    admission:
      clusterQueue: training
      podSetAssignments:
      - count: 2
        flavors:
          cpu: gpu-node
          memory: gpu-node
          nvidia.com/gpu: gpu-node
        name: main
        resourceUsage:
          cpu: "32"
          memory: 256Gi
          nvidia.com/gpu: "8"
""" if admitted else ""
    stats = f"""    schedulingStats:
      evictions:
      - count: {evictions}
        reason: Preempted
        underlyingCause: ""
""" if evictions else ""
    return f"""- apiVersion: kueue.x-k8s.io/v1beta1
  kind: Workload
  metadata:
    creationTimestamp: "{created}"
    finalizers:
    - kueue.x-k8s.io/resource-in-use
    generation: 1
    labels:
      kueue.x-k8s.io/job-uid: 0f3e9d2c-1b4a-4c5d-8e6f-7a8b9c0d1e2f
    name: job-{name}-3f2a1
    namespace: ml-training
    ownerReferences:
    - apiVersion: batch/v1
      blockOwnerDeletion: true
      controller: true
      kind: Job
      name: {name}
      uid: 0f3e9d2c-1b4a-4c5d-8e6f-7a8b9c0d1e2f
    resourceVersion: "48213"
    uid: 9a8b7c6d-5e4f-4a3b-9c2d-1e0f0000000{name}
  spec:
    active: true
    podSets:
    - count: 2
      name: main
      template:
        spec:
          containers:
          - image: ghcr.io/example/train:1.4
            name: trainer
            resources:
              requests:
                cpu: "16"
                memory: 128Gi
                nvidia.com/gpu: "4"
          restartPolicy: Never
    priority: 100
    priorityClassName: training-low
    priorityClassSource: kueue.x-k8s.io/workloadpriorityclass
    queueName: training
  status:
{admission}{stats}    conditions:
""" + "\n".join(conds) + "\n"


def _dump(*items) -> str:
    return "apiVersion: v1\nitems:\n" + "".join(items) + 'kind: List\nmetadata:\n  resourceVersion: ""\n'


def test_kueue_dumps_over_time(ledger, tmp_path):
    # 10:00 dump: A admitted at 09:00; B admitted at 09:30.
    d1 = tmp_path / "wl-1000.yaml"
    d1.write_text(_dump(_workload("a", created="2026-11-30T08:59:00Z", admitted="2026-11-30T09:00:00Z"),
                        _workload("b", created="2026-11-30T09:29:00Z", admitted="2026-11-30T09:30:00Z")))
    # 12:00 dump: A was evicted (preempted) at 10:30 and is pending again; B finished at 11:30.
    d2 = tmp_path / "wl-1200.yaml"
    d2.write_text(_dump(_workload("a", created="2026-11-30T08:59:00Z", evicted="2026-11-30T10:30:00Z", evictions=1),
                        _workload("b", created="2026-11-30T09:29:00Z", admitted="2026-11-30T09:30:00Z",
                                  finished="2026-11-30T11:30:00Z")))
    # 14:00 dump: A re-admitted at 12:30, finished at 13:30.
    d3 = tmp_path / "wl-1400.yaml"
    d3.write_text(_dump(_workload("a", created="2026-11-30T08:59:00Z", admitted="2026-11-30T12:30:00Z",
                                  evicted="2026-11-30T10:30:00Z", readmitted=True, evictions=1,
                                  finished="2026-11-30T13:30:00Z")))
    first = import_kueue_workloads(ledger, d1, cluster="k8s")
    assert first["jobs_added"] == 2 and first["allocations_added"] == 2
    import_kueue_workloads(ledger, d2, cluster="k8s")
    import_kueue_workloads(ledger, d3, cluster="k8s")
    counts = {t.name: _count(ledger, t) for t in (s.jobs, s.events, s.allocations, s.usage)}
    for d in (d1, d2, d3):  # re-importing any of them adds nothing, and undoes nothing
        again = import_kueue_workloads(ledger, d, cluster="k8s")
        assert again["events_added"] == again["allocations_added"] == again["jobs_added"] == 0
    assert {t.name: _count(ledger, t) for t in (s.jobs, s.events, s.allocations, s.usage)} == counts
    jobs = {j["job_id"]: j for j in acct_jobs(ledger, clusters=["k8s"])}
    a, b = jobs["ml-training/job-a-3f2a1"], jobs["ml-training/job-b-3f2a1"]
    assert a["state"] == "COMPLETED" and a["preemptions"] == 1 and a["requeues"] == 1
    assert a["gpu_seconds"] == 8 * (1.5 * 3600 + 3600)  # 09:00-10:30 and 12:30-13:30, 8 GPUs
    assert b["gpu_seconds"] == 8 * 2 * 3600 and b["queue"] == "training" and b["partition"] == "training"
    rows = usage_report(ledger, by=["account"], period="day", clusters=["k8s"])
    assert rows == [{"period": "2026-11-30", "account": "ml-training", "hours": 36.0, "billed_hours": 36.0}]
    with ledger.read() as conn:
        kinds = [r.kind for r in conn.execute(sa.select(s.events.c.kind).where(
            s.events.c.job_id == "ml-training/job-a-3f2a1").order_by(s.events.c.time, s.events.c.id))]
    assert kinds == ["submitted", "admitted", "evicted", "preempted", "admitted", "finished"]


def test_import_cli(db_url, tmp_path, cli):
    f = tmp_path / "sacct.txt"
    f.write_text(sacct_text(_JOBS))
    j = tmp_path / "sacct.json"
    j.write_text(json.dumps(_sacct_json()))
    first = json.loads(cli("import", "sacct", f, j, "--db", db_url, "--json").output)
    assert [r["jobs_added"] for r in first] == [3, 1]
    assert "nothing new" in cli("import", "sacct", f, "--db", db_url).output
    out = cli("acct", "--db", db_url, "-P", "-o", "JobID,User,State", "-A", "ml-serving").output
    assert out.splitlines() == ["JobID|User|State", "4300|carol|COMPLETED"]
