"""A job's ReqTRES is what slurmctld counted at submit (``job_set_req_tres``): the CPUs asked
(DefCpuPerGPU not applied) and the memory before any allocation (``job_get_tres_mem``: no
DefMemPerGPU; the partition's first node's RealMemory per node where no ``--mem*``,
DefMemPerCPU or DefMemPerNode gives any). sacct's ReqTRES and a pending job's TRES priority
factors read those numbers; AllocTRES reads what the job holds. sacct sorts the entries as
strings and leaves out zero counts.

Every expected string and priority below was printed by a real Slurm 22.05.8 (Debian packages,
``gpupool.conformance.real_slurm`` with slurmdbd, 2026-12-04) for the same pool and jobs."""
from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

import gpupool
from gpupool.ledger import record_run
from gpupool.ledger import schema as s
from gpupool.ledger.store import as_ledger
from gpupool.policy.slurm.job_defaults import Defaults, submitted_request
from gpupool.policy.slurm.tres import tres_text
from gpupool.workload.folder import load_workload_folder
from tests.unit.sbatch_plans import workload
from tests.unit.test_slurm_views import _cli

SEED = Path(__file__).resolve().parents[2] / "examples" / "seed-pool"


def _edit(path: Path, edits) -> None:
    """Replace each (old, new) in the file at ``path``; every ``old`` must be there."""
    text = path.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    path.write_text(text)


def _seed_copy(tmp_path: Path, edits: list[tuple[str, str]]) -> Path:
    """The seed pool (without its workloads) copied under ``tmp_path``, slurm.conf edited."""
    pool = tmp_path / "pool"
    shutil.copytree(SEED, pool, ignore=shutil.ignore_patterns("workloads", "services", "scenarios"))
    _edit(pool / "slurm.conf", edits)
    return pool


def _jobs(tmp_path: Path, jobs: list[tuple[str, float, float]], user: str | list[str]) -> Path:
    """A workload folder: one sbatch script per (#SBATCH options, submit, runtime), submitted by
    ``user`` (or by each of a list in turn)."""
    folder = tmp_path / "wl"
    folder.mkdir()
    rows = ["source,submit_time,runtime,user"]
    users = [user] * len(jobs) if isinstance(user, str) else user
    for k, ((opts, submit, runtime), who) in enumerate(zip(jobs, users), start=1):
        (folder / f"j{k:02d}.sbatch").write_text(f"#!/bin/bash\n#SBATCH {opts}\nsleep {int(runtime)}\n")
        rows.append(f"j{k:02d}.sbatch,{submit},{runtime},{who}")
    (folder / "arrivals.csv").write_text("\n".join(rows) + "\n")
    return folder


# --- typed GPU TRES and billing weights (seed pool, h100 GPUs, AccountingStorageTRES tracks the type)
TYPED = [
    ("AccountingStorageTRES=gres/gpu", "AccountingStorageTRES=gres/gpu,gres/gpu:h100"),
    ("Gres=gpu:8", "Gres=gpu:h100:8"),
    ("PriorityTier=1 State=UP", 'PriorityTier=1 TRESBillingWeights="CPU=1.0,Mem=0.25G,GRES/gpu=2.0" State=UP'),
]
TYPED_JOBS = ["-N1 -n4 --gres=gpu:2 --mem=10G", "--gpus=h100:1 -n1", "-n2 --mem=3000M",
              "-N2 --gpus-per-node=1 --exclusive"]
#: sacct -X -P -o JobID,ReqTRES,AllocTRES on the real cluster
TYPED_REAL = [
    "1|billing=10,cpu=4,gres/gpu=2,mem=10G,node=1|billing=10,cpu=4,gres/gpu:h100=2,gres/gpu=2,mem=10G,node=1",
    "2|billing=247,cpu=1,gres/gpu:h100=1,gres/gpu=1,mem=1000000M,node=1"
    "|billing=33,cpu=2,gres/gpu:h100=1,gres/gpu=1,mem=120000M,node=1",
    "3|billing=2,cpu=2,mem=3000M,node=1|billing=2,cpu=2,mem=3000M,node=1",
    "4|billing=494,cpu=2,gres/gpu=2,mem=2000000M,node=2"
    "|billing=756,cpu=256,gres/gpu:h100=16,gres/gpu=16,mem=1875G,node=2",
]


def _typed(tmp_path):
    pool = _seed_copy(tmp_path, TYPED)
    jobs = [(f"-A ml-research -t 1 {opts}", float(k), 20.0) for k, opts in enumerate(TYPED_JOBS)]
    return pool, _jobs(tmp_path, jobs, "alice")


def test_sacct_req_and_alloc_tres_as_the_real_system_printed_them(tmp_path):
    pool, wl = _typed(tmp_path)
    r = CliRunner().invoke(_cli(), ["sacct", str(pool), "-w", str(wl), "-P", "-n", "-o", "JobID,ReqTRES,AllocTRES"])
    assert r.exit_code == 0, r.output
    assert r.output.splitlines() == TYPED_REAL


def test_the_ledger_records_the_same_tres_strings(tmp_path):
    pool_dir, wl_dir = _typed(tmp_path)
    result = gpupool.simulate(pool_dir, load_workload_folder(wl_dir), "slurm")
    ledger = as_ledger(str(tmp_path / "ledger.db"))
    facts = record_run(ledger, result, pool_dir, "test", "slurm")
    with ledger.read() as conn:
        rows = conn.execute(s.jobs.select().where(s.jobs.c.origin == facts["origin"])).mappings().all()
    ledger.close()
    got = sorted(f"{r['job_id']}|{r['req_tres']}|{r['alloc_tres']}" for r in rows)
    assert got == TYPED_REAL


# --- ReqTRES memory and CPUs, and the TRES priority factors that read them
REQ = [
    ("DefMemPerGPU=120000", "DefMemPerGPU=120000\nDefCpuPerGPU=4"),
    ("PriorityWeightAge=1000", "PriorityWeightAge=0"),
    ("PriorityWeightTRES=GRES/gpu=1000", "PriorityWeightTRES=GRES/gpu=1000,Mem=100000,CPU=1000"),
    ("NodeName=gpu[01-04] CPUs=128 Sockets=2 CoresPerSocket=32 ThreadsPerCore=2 RealMemory=1000000 Gres=gpu:8",
     "NodeName=gpu[01-03] CPUs=128 Sockets=2 CoresPerSocket=32 ThreadsPerCore=2 RealMemory=1000000 Gres=gpu:8 "
     "State=UNKNOWN\nNodeName=gpu04 CPUs=128 Sockets=2 CoresPerSocket=32 ThreadsPerCore=2 RealMemory=900000 "
     "Gres=gpu:8"),
    ("PriorityTier=1 State=UP",
     'PriorityTier=1 TRESBillingWeights="GRES/gpu=1.0" State=UP\n'
     'PartitionName=p2 Nodes=gpu[03-04] DefMemPerCPU=1000 MaxTime=2-00:00:00 TRESBillingWeights="GRES/gpu=1.0" '
     'State=UP\nPartitionName=p3 Nodes=gpu04,gpu03 MaxTime=2-00:00:00 TRESBillingWeights="GRES/gpu=1.0" State=UP\n'
     'PartitionName=p4 Nodes=gpu04 MaxTime=2-00:00:00 TRESBillingWeights="GRES/gpu=1.0" State=UP'),
]
#: (partition, options, the real ReqTRES, the real priority less its fair-share part per
#: partition as sprio listed them while a whole-cluster job held every node)
REQ_JOBS = [
    ("train", "--gres=gpu:2", "billing=2,cpu=1,gres/gpu=2,mem=1000000M,node=1", [26705]),
    ("p2", "--gres=gpu:2", "billing=2,cpu=1,gres/gpu=2,mem=1000M,node=1", [1181]),
    ("p2", "-n3", "cpu=3,mem=3000M,node=1", [1169]),
    ("train", "--mem-per-gpu=5000 --gpus=3", "billing=3,cpu=1,gres/gpu=3,mem=15000M,node=1", [1480]),
    ("train", "-N2 --gpus-per-node=2 --mem-per-gpu=5000", "billing=4,cpu=2,gres/gpu=4,mem=20000M,node=2", [1641]),
    ("train", "-n4 --gpus-per-task=1 --mem-per-gpu=1000", "billing=4,cpu=4,gres/gpu=4,mem=4000M,node=1", [1235]),
    ("train", "--mem=0 -N2", "cpu=2,mem=2000000M,node=2", [52285]),
    ("train", "-n3 --mem-per-cpu=100", "cpu=3,mem=300M,node=1", [1013]),
    ("train", "-N2 --ntasks-per-node=2 --mem=500", "cpu=4,mem=1000M,node=2", [1033]),
    ("p3", "-n1", "cpu=1,mem=1000000M,node=1", [53635]),
    ("p4", "-n1", "cpu=1,mem=900000M,node=1", [101007]),
    ("train", "-n1 --gres=gpu:1 -c2", "billing=1,cpu=2,gres/gpu=1,mem=1000000M,node=1", [26676]),
    ("train", "-N2 --exclusive", "cpu=2,mem=2000000M,node=2", [52285]),
    ("p2", "--mem-per-gpu=7000 --gres=gpu:1", "billing=1,cpu=1,gres/gpu=1,mem=7000M,node=1", [1434]),
    ("p2,train", "-n2", "cpu=2,mem=2000M,node=1", [1113, 1055]),
]


def _req(tmp_path):
    pool = _seed_copy(tmp_path, REQ)
    jobs = [("-A ml-platform -p train -N4 --exclusive -t 10", 0.0, 600.0)]
    jobs += [(f"-A ml-platform -p {part} -t 1 {opts}", 5.0, 20.0) for part, opts, _tres, _prio in REQ_JOBS]
    return pool, _jobs(tmp_path, jobs, "dave")


def test_req_tres_counts_cpus_as_asked_and_memory_before_any_allocation(tmp_path):
    pool, wl = _req(tmp_path)
    r = CliRunner().invoke(_cli(), ["sacct", str(pool), "-w", str(wl), "-P", "-n", "-o", "JobID,ReqTRES"])
    assert r.exit_code == 0, r.output
    got = dict(line.split("|") for line in r.output.splitlines())
    assert [got[str(k)] for k in range(2, 2 + len(REQ_JOBS))] == [tres for _p, _o, tres, _prio in REQ_JOBS]


def _priorities_less_fair_share(pool: Path, wl: Path) -> list[list[int]]:
    """sprio's PRIORITY − FAIRSHARE of the probe jobs at 10 s, per partition row (the real run
    submitted as root, whose fair share differs from dave's)."""
    r = CliRunner().invoke(_cli(), ["sprio", str(pool), "-w", str(wl), "--at", "10", "-P"])
    assert r.exit_code == 0, r.output
    got: dict[str, list[int]] = {}
    for row in (line.split("|") for line in r.output.splitlines()[1:]):
        got.setdefault(row[0], []).append(int(row[3]) - int(row[7]))  # JOBID|…|PRIORITY|…|FAIRSHARE
    return [got[str(k)] for k in range(2, 2 + len(REQ_JOBS))]


def test_a_pending_jobs_tres_priority_factors_read_its_req_tres(tmp_path):
    pool, wl = _req(tmp_path)
    assert _priorities_less_fair_share(pool, wl) == [prio for _p, _o, _t, prio in REQ_JOBS]


#: the same jobs under PriorityWeightTRES=billing=10000 and TRESBillingWeights=CPU=1.0,GRES/gpu=8.0
#: on every partition: sprio's priority less fair share, per partition (a node bills
#: 128 + 8 × 8 = 192, so train's total is 768, p2's and p3's 384, p4's 192)
BILLING_PRIO = [[1221], [1442], [1078], [1325], [1442], [1468], [1026], [1039], [1052], [1026], [1052], [1130],
                [1026], [1234], [1052, 1026]]


def test_a_billing_weight_divides_the_req_tres_billing_by_the_partitions_billing_total(tmp_path):
    pool, wl = _req(tmp_path)
    _edit(pool / "slurm.conf", [("PriorityWeightTRES=GRES/gpu=1000,Mem=100000,CPU=1000", "PriorityWeightTRES=billing=10000"),
                                ('TRESBillingWeights="GRES/gpu=1.0"', 'TRESBillingWeights="CPU=1.0,GRES/gpu=8.0"')])
    assert _priorities_less_fair_share(pool, wl) == BILLING_PRIO


def test_submitted_request_rules():
    d = Defaults(cpu_per_gpu=4, mem_per_gpu=120000, mem_per_cpu=None, mem_per_node=None, whole_node=None,
                 first_node_memory=64000)
    # memory no consumable (whole_node None): the first node's memory still counts, per node
    assert submitted_request(workload("a", "-N2 --gres=gpu:1", 0.0, 1), d) == (2, 128000)
    assert submitted_request(workload("b", "-n2 --mem-per-cpu=100", 0.0, 2), d) == (2, 200)
    per_node = Defaults(None, None, None, 5000, 64000, first_node_memory=64000)
    assert submitted_request(workload("c", "-N3", 0.0, 3), per_node) == (3, 15000)
    per_cpu = Defaults(None, None, 700, None, 64000, first_node_memory=64000)
    assert submitted_request(workload("d", "-n2 -c3", 0.0, 4), per_cpu) == (6, 4200)


def test_tres_text_sorts_entries_as_strings_and_leaves_out_zero_counts():
    counts = {"node": 1, "gres/gpu": 2, "gres/gpu:h100": 2, "cpu": 4, "mem": 10240, "billing": 10.9, "energy": 0}
    assert tres_text(counts) == "billing=10,cpu=4,gres/gpu:h100=2,gres/gpu=2,mem=10G,node=1"
    assert tres_text({"cpu": 2, "mem": 1920000, "billing": 0.4}) == "cpu=2,mem=1875G"


#: the same jobs under PriorityWeightJobSize=100000 (PriorityWeightTRES=GRES/gpu=1000): the job
#: size factor counts the CPUs asked, not DefCpuPerGPU's (``--gres=gpu:2``: 1 CPU, 12598)
JOBSIZE_PRIO = [[13660], [13722], [13792], [13691], [26320], [14015], [26195], [13792], [26390], [13597], [13597],
                [13726], [26195], [13660], [13695, 13695]]


def test_the_job_size_factor_counts_the_cpus_asked(tmp_path):
    pool, wl = _req(tmp_path)
    _edit(pool / "slurm.conf", [("PriorityWeightTRES=GRES/gpu=1000,Mem=100000,CPU=1000", "PriorityWeightTRES=GRES/gpu=1000"),
                                ("PriorityWeightJobSize=0", "PriorityWeightJobSize=100000")])
    assert _priorities_less_fair_share(pool, wl) == JOBSIZE_PRIO


def _sacct(pool: Path, wl: Path, at: str, fields: str) -> list[list[str]]:
    r = CliRunner().invoke(_cli(), ["sacct", str(pool), "-w", str(wl), "--at", at, "-D", "-P", "-n", "-o", fields])
    assert r.exit_code == 0, r.output
    return [line.split("|") for line in r.output.splitlines()]


def test_req_tres_is_billed_under_the_first_partition_named_wherever_the_job_runs(tmp_path):
    pool = _seed_copy(tmp_path, [("PriorityTier=1 State=UP", 'PriorityTier=1 State=UP\n'
                                  'PartitionName=pa Nodes=gpu01 MaxTime=2-00:00:00 TRESBillingWeights="GRES/gpu=10.0" '
                                  'State=UP\nPartitionName=pb Nodes=gpu02 MaxTime=2-00:00:00 '
                                  'TRESBillingWeights="GRES/gpu=1.0" State=UP')])
    wl = _jobs(tmp_path, [("-A ml-research -p pa --exclusive -t 60", 0.0, 3000.0),
                          ("-A ml-research -p pa,pb --gres=gpu:1 --mem=1000 -t 10", 1.0, 600.0)], "alice")
    rows = _sacct(pool, wl, "100", "JobID,Partition,State,ReqTRES,AllocTRES")
    # slurmctld bills the request once, at submit, under pa; the start in pb bills the allocation
    assert rows[1] == ["2", "pb", "RUNNING", "billing=10,cpu=1,gres/gpu=1,mem=1000M,node=1",
                       "billing=1,cpu=2,gres/gpu=1,mem=1000M,node=1"]


def test_an_earlier_run_of_a_requeued_job_shows_what_it_held(tmp_path):
    """A preempted run's AllocTRES is the filled-in request it held (DefCpuPerGPU's CPUs,
    DefMemPerGPU's memory), not the ReqTRES recorded at submit."""
    pool = _seed_copy(tmp_path, [("DefMemPerGPU=120000", "DefMemPerGPU=120000\nDefCpuPerGPU=4")])
    wl = _jobs(tmp_path, [("-A ml-platform -N4 --gres=gpu:8 -t 60", 0.0, 3000.0),
                          ("-A ml-research --qos=high -N1 --gres=gpu:8 -t 60", 60.0, 3000.0)], ["dave", "alice"])
    rows = _sacct(pool, wl, "100", "JobID,State,ReqTRES,AllocTRES")
    # (no TRESBillingWeights on the seed pool: billing is the CPUs)
    assert rows[0] == ["1", "PREEMPTED", "billing=4,cpu=4,gres/gpu=32,mem=4000000M,node=4",
                       "billing=128,cpu=128,gres/gpu=32,mem=3750G,node=4"]
    assert rows[1][:2] == ["1", "PENDING"] and rows[1][3] == ""


def test_a_bridge_run_bills_native_jobs_under_the_default_partition(tmp_path):
    pool = _seed_copy(tmp_path, TYPED + [("DefMemPerGPU=120000", "DefMemPerGPU=120000\nDefCpuPerGPU=4")])
    wl = _jobs(tmp_path, [("-A ml-research -t 1 --gres=gpu:2", 0.0, 20.0)], "alice")
    result = gpupool.simulate(pool, load_workload_folder(wl), "bridge")
    ledger = as_ledger(str(tmp_path / "ledger.db"))
    facts = record_run(ledger, result, pool, "test", "bridge")
    with ledger.read() as conn:
        (row,) = conn.execute(s.jobs.select().where(s.jobs.c.origin == facts["origin"])).mappings().all()
    ledger.close()
    # 1 CPU + 1000000 MB × 0.25/1024 + 2 GPUs × 2, as under --policy slurm (not 1 CPU: no weights)
    assert row["req_tres"] == "billing=249,cpu=1,gres/gpu=2,mem=1000000M,node=1"
    assert row["alloc_tres"] == "billing=70,cpu=8,gres/gpu:h100=2,gres/gpu=2,mem=240000M,node=1"


def test_the_live_daemons_req_tres_reads_what_slurmctld_recorded():
    from gpupool.ledger.record import requested_counts
    from gpupool.model.workload import PodSet, Workload

    wl = Workload(1, "j", (PodSet(count=1, cpu_m=8000, memory_mib=240000, gpus=2),), req_cpu_mem=(1, 1000000))
    assert requested_counts(wl) == {"cpu": 1, "mem": 1000000, "gres/gpu": 2, "node": 1}
