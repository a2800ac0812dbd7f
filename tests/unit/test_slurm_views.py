"""sacct / squeue / sprio / sshare views of a simulated run (gpupool/report/slurm_views.py)."""
import math

import pytest
import typer
from typer.testing import CliRunner

from gpupool.cli.slurm_views import register
from gpupool.formats.pool_dir import load_pool
from gpupool.model.workload import PodSet, Workload
from gpupool.report import slurm_views as sv

SLURM_CONF = """\
ClusterName=tiny
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=30,bf_resolution=60
SelectType=select/cons_tres
GresTypes=gpu
PriorityType=priority/multifactor
PriorityDecayHalfLife=7-0
PriorityCalcPeriod=1
PriorityMaxAge=1-0
PriorityWeightAge=1000
PriorityWeightFairshare=10000
PriorityWeightJobSize=0
PriorityWeightPartition=1000
PriorityWeightQOS=10000
PriorityWeightTRES=GRES/gpu=1000
AccountingStorageTRES=gres/gpu
PreemptType=preempt/qos
PreemptMode=REQUEUE
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageEnforce=associations,limits,qos
NodeName=g[1-2] CPUs=16 RealMemory=64000 Gres=gpu:4 State=UNKNOWN
PartitionName=gpu Nodes=g[1-2] Default=YES DefaultTime=01:00:00 MaxTime=1-00:00:00 State=UP
"""
GRES_CONF = "NodeName=g[1-2] Name=gpu File=/dev/nvidia[0-3]\n"
ACCOUNTS = """\
QOS - 'normal':Priority=0
QOS - 'high':Priority=100:Preempt='normal':PreemptMode='REQUEUE'
Cluster - 'tiny':Fairshare=1:QOS='normal'
Parent - 'root'
User - 'root':DefaultAccount='root':AdminLevel='Administrator':Fairshare=1
Account - 'research':Fairshare=60:QOS='normal,high':DefaultQOS='normal'
Account - 'serving':Fairshare=40:QOS='normal,high':DefaultQOS='normal'
Parent - 'research'
User - 'alice':DefaultAccount='research':Fairshare=1
Parent - 'serving'
User - 'bob':DefaultAccount='serving':Fairshare=1
"""


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    (d / "slurm.conf").write_text(SLURM_CONF)
    (d / "gres.conf").write_text(GRES_CONF)
    (d / "accounts.cfg").write_text(ACCOUNTS)
    return load_pool(d)


def _wl(i, user, gpus, submit, run, tl=3600.0, **kw):
    ps = PodSet(count=1, cpu_m=2000 * gpus, memory_mib=8192 * gpus, gpus=gpus, one_per_node=True)
    return Workload(i, f"job{i}", (ps,), submit_time=submit, runtime=run, time_limit=tl, user=user, **kw)


# Two 4-GPU nodes. alice and bob fill them at t=0; alice's job3 waits for Resources, bob's
# job4 behind it for Priority; bob's high-QOS job5 preempts (requeues) alice's job1 at 300.
WORKLOAD = [_wl(1, "alice", 4, 0, 1000), _wl(2, "bob", 4, 0, 2000), _wl(3, "alice", 4, 100, 500, 1200),
            _wl(4, "bob", 2, 100, 300), _wl(5, "bob", 4, 300, 600, qos="high")]

FIELDS = "JobID,State,Submit,Eligible,Start,End,Elapsed,Timelimit,AllocTRES,NodeList,Reason,Flags,Priority"


@pytest.fixture(scope="module")
def at600(pool):
    return sv.instant(pool, WORKLOAD, "slurm", 600)


def test_sacct_parsable2_at_an_instant_with_duplicates(at600):
    text = sv.sacct_text(sv.sacct_records(at600, duplicates=True), FIELDS, parsable2=True)
    assert text.splitlines() == [
        "JobID|State|Submit|Eligible|Start|End|Elapsed|Timelimit|AllocTRES|NodeList|Reason|Flags|Priority",
        ("1|PREEMPTED|2026-01-05T00:00:00|2026-01-05T00:00:00|2026-01-05T00:00:00|2026-01-05T00:05:00|00:05:00|"
        "01:00:00|billing=8,cpu=8,gres/gpu=4,mem=32G,node=1|g1|None|SchedMain|"),
        # requeued: Submit reset to the preemption, BeginTime = +121 s, pending behind job 3
        ("1|PENDING|2026-01-05T00:05:00|2026-01-05T00:07:01|Unknown|Unknown|00:00:00|01:00:00||None assigned|"
        "Priority||8168"),
        ("2|RUNNING|2026-01-05T00:00:00|2026-01-05T00:00:00|2026-01-05T00:00:00|Unknown|00:10:00|01:00:00|"
        "billing=8,cpu=8,gres/gpu=4,mem=32G,node=1|g2|None|SchedMain|"),
        ("3|PENDING|2026-01-05T00:01:40|2026-01-05T00:01:40|Unknown|Unknown|00:00:00|00:20:00||None assigned|"
        "Resources||8172"),
        ("4|PENDING|2026-01-05T00:01:40|2026-01-05T00:01:40|Unknown|Unknown|00:00:00|01:00:00||None assigned|"
        "Priority||4589"),
        ("5|RUNNING|2026-01-05T00:05:00|2026-01-05T00:05:00|2026-01-05T00:05:00|Unknown|00:05:00|01:00:00|"
        "billing=8,cpu=8,gres/gpu=4,mem=32G,node=1|g1|None|SchedMain|"),
    ]
    # without -D only the newest record of job 1
    rows = sv.sacct_records(at600)
    assert [(r["job_id"], r["state"]) for r in rows] == [
        ("1", "PENDING"), ("2", "RUNNING"), ("3", "PENDING"), ("4", "PENDING"), ("5", "RUNNING")]


def test_sacct_fixed_width_at_the_end(pool):
    inst = sv.instant(pool, WORKLOAD, "slurm")
    text = sv.sacct_text(sv.sacct_records(inst, duplicates=True), "JobID,JobName%-8,State,ExitCode,Elapsed,NodeList%6")
    assert text.splitlines() == [
        "       JobID JobName       State ExitCode    Elapsed NodeL+",
        "------------ -------- ---------- -------- ---------- ------",
        "           1 job1      PREEMPTED      0:0   00:05:00     g1",
        "           1 job1      COMPLETED      0:0   00:16:40     g1",
        "           2 job2      COMPLETED      0:0   00:33:20     g2",
        "           3 job3      COMPLETED      0:0   00:08:20     g1",
        "           4 job4      COMPLETED      0:0   00:05:00     g2",
        "           5 job5      COMPLETED      0:0   00:10:00     g1",
    ]


def test_replay_until_t_is_the_finished_runs_prefix(pool):
    full = sv.instant(pool, WORKLOAD, "slurm")
    part = sv.instant(pool, WORKLOAD, "slurm", 600)
    assert part.events == [e for e in full.events if e[0] <= 600]


def test_squeue_at_an_instant_shows_pending_reasons(at600):
    assert sv.squeue_text(sv.squeue_rows(at600)).splitlines() == [
        "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)",
        "                 3       gpu     job3    alice PD       0:00      1 (Resources)",
        "                 1       gpu     job1    alice PD       0:00      1 (Priority)",
        "                 4       gpu     job4      bob PD       0:00      1 (Priority)",
        "                 2       gpu     job2      bob  R      10:00      1 g2",
        "                 5       gpu     job5      bob  R       5:00      1 g1",
    ]


def test_squeue_start_uses_the_backfill_plan(at600):
    rows = sv.squeue_rows(at600, start=True)
    assert [r["id"] for r in rows] == [3, 1, 4]
    assert all(r["planned_start_s"] == at600.slurm.planned.get(r["id"]) for r in rows)
    assert sv.squeue_text(rows, start=True).splitlines()[:2] == [
        "             JOBID PARTITION     NAME     USER ST          START_TIME  NODES SCHEDNODES           NODELIST(REASON)",
        "                 3       gpu     job3    alice PD 2026-01-05T01:00:00      1 (null)               (Resources)",
    ]


def test_squeue_time_format():
    assert [sv.squeue_time(s) for s in (0, 59, 600, 3600, 90061)] == ["0:00", "0:59", "10:00", "1:00:00", "1-01:01:01"]


def test_sprio_factors_sum_to_the_policys_priority(at600):
    pol = at600.slurm
    rows = sv.sprio_rows(at600)
    assert [(r["job_id"], r["priority"]) for r in rows] == [(1, 8168), (3, 8172), (4, 4589)]
    for r in rows:
        w = r["weighted"]
        total = w["site"] + w["age"] + w["assoc"] + w["fairshare"] + w["job_size"] + w["partition"] + w["qos"]
        total += sum(w["tres"].values())
        assert r["priority"] == max(1, int(total - r["nice"]))
        job = at600.jobs[r["job_id"]]
        assert r["priority"] == pol.priority(job, pol.parts[r["partition"]], r["accrue"], 600)
    assert sv.sprio_text(rows).splitlines() == [
        ("          JOBID PARTITION     USER   PRIORITY       SITE        AGE      ASSOC  FAIRSHARE    JOBSIZE"
        "  PARTITION        QOS   NICE                 TRES"),
        ("              1 gpu          alice       8168          0          2          0       6667          0"
        "       1000          0      0         gres/gpu=500"),
        ("              3 gpu          alice       8172          0          6          0       6667          0"
        "       1000          0      0         gres/gpu=500"),
        ("              4 gpu            bob       4589          0          6          0       3333          0"
        "       1000          0      0         gres/gpu=250"),
    ]


def test_sshare_at_an_instant_matches_the_policys_fair_share(at600):
    rows = sv.sshare_rows(at600)
    assert sv.sshare_text(rows, parsable2=True).splitlines() == [
        "Account|User|RawShares|NormShares|RawUsage|NormUsage|EffectvUsage|FairShare|LevelFS|GrpTRESMins|TRESRunMins",
        "root|||0.000000|9596|1.000000|1.000000||||",
        " root|root|1|0.009901|0|0.000000|0.000000|1.000000|inf||",
        " research||60|0.594059|2398|0.249957|0.249957||2.376646||",
        "  research|alice|1|1.000000|2398|0.249957|1.000000|0.666667|1.000000||",
        " serving||40|0.396040|7197|0.750043|0.750043||0.528023||",
        "  serving|bob|1|1.000000|7197|0.750043|1.000000|0.333333|1.000000||",
    ]
    assert sv.fairshare_by_user(at600) == at600.slurm._fs


def test_sshare_seed_accounts():
    inst = sv.instant("examples/seed-pool", "examples/seed-pool/workloads", "slurm")
    rows = {(r["Account"], r["User"]): r for r in sv.sshare_rows(inst)}
    assert {k: (r["RawShares"], round(r["NormShares"], 6)) for k, r in rows.items() if not r["User"]} == {
        ("root", ""): ("", 0.0), ("ml-research", ""): ("50", 0.49505), ("ml-serving", ""): ("30", 0.29703),
        ("ml-platform", ""): ("20", 0.19802)}
    # Every seed job is ml-research's (alice: both pretraining runs; bob: fine-tune and evals).
    assert rows[("ml-research", "")]["RawUsage"] == rows[("root", "")]["RawUsage"] > 0
    alice, bob = rows[("ml-research", "alice")], rows[("ml-research", "bob")]
    assert alice["RawUsage"] + bob["RawUsage"] == pytest.approx(rows[("ml-research", "")]["RawUsage"])
    assert alice["RawUsage"] > bob["RawUsage"] > 0 and alice["LevelFS"] < bob["LevelFS"]
    assert rows[("root", "root")]["RawUsage"] == 0.0 and rows[("ml-serving", "carol")]["LevelFS"] == math.inf


def test_parse_at():
    assert sv.parse_at("3600") == 3600.0
    assert sv.parse_at("1:00:00") == 3600.0
    assert sv.parse_at("1-0") == 86400.0
    assert sv.parse_at("2026-01-05T00:10:00") == 600.0
    with pytest.raises(sv.ViewError):
        sv.parse_at("soon")


def _cli():
    app = typer.Typer()
    register(app)

    @app.callback()
    def _main():  # keep sub-commands as sub-commands
        pass

    return app


def test_cli_sacct_parsable2_on_the_seed():
    r = CliRunner().invoke(_cli(), ["sacct", "examples/seed-pool", "-w", "examples/seed-pool/workloads", "-P",
                                    "-o", "JobID,JobName,State,Start,End,Elapsed,AllocTRES,NodeList,Flags"])
    assert r.exit_code == 0, r.output
    lines = [x for x in r.output.splitlines() if not x.startswith("note:")]
    assert lines == [
        "JobID|JobName|State|Start|End|Elapsed|AllocTRES|NodeList|Flags",
        ("1|pretrain-run|COMPLETED|2026-01-05T00:00:00|2026-01-05T10:30:00|10:30:00|"
         "billing=128,cpu=128,gres/gpu=16,mem=1000G,node=2|gpu[01-02]|SchedMain"),
        ("2|finetune-lora|COMPLETED|2026-01-05T00:30:00|2026-01-05T02:45:00|02:15:00|"
         "billing=16,cpu=16,gres/gpu=1,mem=120G,node=1|gpu03|SchedMain"),
        # ml-research's GrpTRES gres/gpu=24 holds the second 16-GPU run until the first ends.
        ("3|pretrain-run|COMPLETED|2026-01-05T10:30:00|2026-01-05T21:00:00|10:30:00|"
         "billing=128,cpu=128,gres/gpu=16,mem=1000G,node=2|gpu[01-02]|SchedMain"),
        ("4_0|eval-sweep|COMPLETED|2026-01-05T02:45:00|2026-01-05T03:25:00|00:40:00|"
         "billing=32,cpu=32,gres/gpu=8,mem=400G,node=1|gpu03|SchedMain"),
        ("4_1|eval-sweep|COMPLETED|2026-01-05T03:25:00|2026-01-05T04:05:00|00:40:00|"
         "billing=32,cpu=32,gres/gpu=8,mem=400G,node=1|gpu03|SchedMain"),
        ("4_2|eval-sweep|COMPLETED|2026-01-05T04:05:00|2026-01-05T04:45:00|00:40:00|"
         "billing=32,cpu=32,gres/gpu=8,mem=400G,node=1|gpu03|SchedMain"),
        ("4_3|eval-sweep|COMPLETED|2026-01-05T04:45:00|2026-01-05T05:25:00|00:40:00|"
         "billing=32,cpu=32,gres/gpu=8,mem=400G,node=1|gpu03|SchedMain"),
    ]


def test_cli_views_need_the_slurm_policy_and_parquet_path(tmp_path):
    runner = CliRunner()
    r = runner.invoke(_cli(), ["sprio", "examples/seed-pool", "--policy", "fifo"])
    assert r.exit_code == 2 and "needs a run under --policy slurm" in r.output
    import gpupool

    res = gpupool.simulate("examples/seed-pool", "examples/seed-pool/workloads", "slurm")
    res.write(tmp_path)
    fields = "JobID,State,Start,End,NodeList,Flags"
    a = runner.invoke(_cli(), ["sacct", "examples/seed-pool", "--run", str(tmp_path), "-P", "-o", fields, "--at", "7200"])
    b = runner.invoke(_cli(), ["sacct", "examples/seed-pool", "-w", "examples/seed-pool/workloads", "-P", "-o",
                               fields, "--at", "7200"])
    assert a.exit_code == b.exit_code == 0
    strip = lambda out: [x for x in out.splitlines() if not x.startswith("note:")]
    assert strip(a.output) == strip(b.output) == [
        "JobID|State|Start|End|NodeList|Flags",
        "1|RUNNING|2026-01-05T00:00:00|Unknown|gpu[01-02]|SchedMain",
        "2|RUNNING|2026-01-05T00:30:00|Unknown|gpu03|SchedMain",
        "3|PENDING|Unknown|Unknown|None assigned|",
        "4_0|PENDING|Unknown|Unknown|None assigned|",
        "4_1|PENDING|Unknown|Unknown|None assigned|",
        "4_2|PENDING|Unknown|Unknown|None assigned|",
        "4_3|PENDING|Unknown|Unknown|None assigned|"]
    r = runner.invoke(_cli(), ["sshare", "examples/seed-pool", "--json", "--at", "1:00:00"])
    assert r.exit_code == 0 and '"Account": "ml-research"' in r.output


def test_squeue_shows_the_node_count_of_the_idle_selection(pool):
    """A pending job shows the nodes a selection on the idle partition picks (slurmctld's
    ``node_cnt_wag``, set by the test-only selection at submit and by every failed one):
    ``--gpus=6`` over 4-GPU nodes walks two, waiting for Resources or behind another job for
    Priority (a real 22.05.8 showed pending ``--gpus=12 --cpus-per-gpu=4`` and ``-n4 --gpus=12
    --cpus-per-gpu=4`` on 2 of its 8-GPU nodes, ``-n2 --gpus=6`` on 1; probes p102-p120; and
    on 2 with ``--begin`` an hour on, BeginTime, probe p122); a held job, which
    ``select_nodes`` turns away first, shows the nodes it asked for (p122: 1, JobHeldUser)."""
    from dataclasses import replace

    from tests.unit.sbatch_plans import workload

    def sb(i, opts, submit):
        return replace(workload(f"s{i}", f"-A research -t 30 --mem=100 {opts}", submit, i), user="alice")

    wls = [_wl(1, "alice", 4, 0, 1000), _wl(2, "bob", 4, 0, 1000), sb(3, "--gpus=6", 10), sb(4, "--gpus=6", 20),
           replace(sb(5, "--gpus=6", 25), priority=0), sb(6, "--gpus=2", 30), sb(7, "--gpus=6 --begin=now+3600", 40)]
    rows = {r["id"]: r for r in sv.squeue_rows(sv.instant(pool, wls, "slurm", 100)) if r["state"] == "PENDING"}
    assert {jid: (r["NODES"], r["NODELIST(REASON)"]) for jid, r in rows.items()} == {
        3: ("2", "(Resources)"), 4: ("2", "(Priority)"), 5: ("1", "(JobHeldUser)"), 6: ("1", "(Priority)"),
        7: ("2", "(BeginTime)")}
