"""real_slurm's generated files and the differential harness's parsers, without running Slurm."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpupool.conformance.diff_slurm import (
    DiffReport,
    _scheduler_interval,
    accounts_of,
    compare,
)
from gpupool.conformance.diff_slurm_real import (
    RealRecord,
    parse_index_list,
    parse_job_gres,
    parse_jobcomp,
)
from gpupool.conformance.diff_slurm_workload import generate, sbatch_script
from gpupool.conformance.real_slurm import RealSlurm, free_ports
from gpupool.formats.pool_dir import load_pool
from gpupool.formats.sbatch import parse_sbatch_text, sbatch_to_workload

SEED_POOL = Path(__file__).resolve().parents[2] / "examples" / "seed-pool"


def _rendered(tmp_path: Path, **kw) -> RealSlurm:
    rs = RealSlurm(tmp_path, load_pool(SEED_POOL), **kw)
    ports = free_ports(1 + len(rs.node_names) + 2)
    rs.ports = {"slurmctld": ports[0], "slurmdbd": ports[-2], "mysql": ports[-1]}
    rs.ports.update({f"slurmd:{n}": ports[1 + i] for i, n in enumerate(rs.node_names)})
    return rs


def test_free_ports_are_distinct_and_bindable():
    import socket

    ports = free_ports(8)
    assert len(set(ports)) == 8
    for p in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))


def test_pool_conf_keeps_scheduling_keys_and_replaces_site_keys(tmp_path):
    rs = _rendered(tmp_path, accounting="dbd", scheduler_parameters="bf_interval=1,sched_interval=1",
                   overrides={"PriorityCalcPeriod": "1"})
    text = rs.render_slurm_conf()
    lines = text.splitlines()
    keys = [ln.split("=", 1)[0] for ln in lines if "=" in ln and not ln.startswith(("#", "NodeName", "PartitionName"))]
    assert len(keys) == len(set(keys)), "a key is written twice"
    assert "SchedulerParameters=bf_interval=1,sched_interval=1" in lines
    assert "PriorityCalcPeriod=1" in lines
    assert "DefMemPerGPU=120000" in lines and "SelectTypeParameters=CR_Core_Memory" in lines
    assert "PriorityWeightTRES=gres/gpu=1000" in lines  # kept: dbd provides gres/gpu TRES
    assert f"SlurmctldPort={rs.ports['slurmctld']}" in lines
    assert not any(ln.startswith(("TopologyPlugin", "SlurmctldHost=seed-ctl", "ProctrackType=proctrack/cgroup")) for ln in lines)
    nodes = [ln for ln in lines if ln.startswith("NodeName=")]
    assert len(nodes) == 4 and all("NodeAddr=127.0.0.1" in ln and "Gres=gpu:8" in ln for ln in nodes)
    assert {ln.split("Port=")[1].split()[0] for ln in nodes} == {str(rs.ports[f"slurmd:{n}"]) for n in rs.node_names}
    assert "TRESBillingWeights=GRES/gpu=1.0" in text


def test_the_pools_typed_gpu_tres_stay_tracked(tmp_path):
    """With AccountingStorageTRES naming GPU types the cluster tracks them too: slurmctld then
    registers them in slurmdbd at its start, and sacctmgr takes a limit on them afterwards (it
    refuses one on a TRES the database does not know: "no TRES known by type gres/gpu:a100")."""
    rs = _rendered(tmp_path, accounting="dbd")
    rs._config.params["AccountingStorageTRES"] = ("gres/gpu", "gres/gpu:a100", "license/x")
    lines = rs.render_slurm_conf().splitlines()
    assert [ln for ln in lines if ln.startswith("AccountingStorageTRES=")] == [
        "AccountingStorageTRES=gres/gpu,gres/gpu:a100"]


def test_accounting_none_drops_gres_tres_weights_with_a_note(tmp_path):
    rs = _rendered(tmp_path, accounting="none")
    text = rs.render_slurm_conf()
    assert "PriorityWeightTRES" not in text and "AccountingStorageType=accounting_storage/none" in text
    assert any("PriorityWeightTRES" in n for n in rs.notes)


def test_gres_conf_lists_fake_device_files(tmp_path):
    rs = RealSlurm(tmp_path, nodes=2, gpus_per_node=4)
    gres = rs.render_gres_conf().splitlines()
    assert gres[0] == f"NodeName=gpu01 Name=gpu File={','.join(str(tmp_path / 'dev' / f'gpu{i}') for i in range(4))}"
    assert len(gres) == 2


def test_sacctmgr_commands_load_tree_and_submit_user(tmp_path):
    rs = _rendered(tmp_path, accounting="dbd")
    cmds = [" ".join(c) for c in rs.sacctmgr_commands()]
    assert any(c.startswith("modify qos high set Priority=100") and "Preempt=normal" in c
               and "MaxTRESPerUser=gres/gpu=16" in c for c in cmds)
    assert any(c.startswith("add account ml-research Cluster=seed Parent=root Fairshare=50") and "GrpTRES=gres/gpu=24" in c
               for c in cmds)
    assert "add user alice Account=ml-research Cluster=seed Fairshare=1" in " | ".join(cmds)
    assert sorted(rs.submit_user_accounts()) == ["ml-platform", "ml-research", "ml-serving"]
    added = sorted(c.split()[3] for c in cmds if c.startswith("add user root") and "Account=root" not in c)
    assert added == ["Account=ml-platform", "Account=ml-research", "Account=ml-serving"]


def test_unavailable_is_raised_before_anything_starts(tmp_path, monkeypatch):
    from gpupool.conformance import real_slurm

    monkeypatch.setattr(real_slurm, "_which", lambda name: None)
    with pytest.raises(real_slurm.RealSlurmUnavailable, match="munge"):
        RealSlurm(tmp_path, nodes=1).start()
    assert not (tmp_path / "run").exists()


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 5)), max_size=6))
def test_index_list_round_trip(ranges):
    want: set[int] = set()
    parts = []
    for lo, width in ranges:
        parts.append(f"{lo}-{lo + width}" if width else str(lo))
        want |= set(range(lo, lo + width + 1))
    assert set(parse_index_list(",".join(parts))) == want


def test_job_gres_from_scontrol_text():
    text = ("   JOB_GRES=gpu:12\n     Nodes=gpu02 CPU_IDs=0-1 Mem=960000 GRES=gpu:8(IDX:0-7)\n"
            "     Nodes=gpu03 CPU_IDs=0 Mem=480000 GRES=gpu:4(IDX:0,2,5-6)\n")
    assert parse_job_gres(text) == {"gpu02": list(range(8)), "gpu03": [0, 2, 5, 6]}


def test_jobcomp_line():
    line = ("JobId=12 UserId=root(0) GroupId=root(0) Name=d011 JobState=TIMEOUT Partition=train TimeLimit=3 "
            "StartTime=2026-11-30T03:58:02 EndTime=2026-11-30T04:01:10 NodeList=gpu[01-02] NodeCnt=2 "
            "SubmitTime=2026-11-30T03:54:45 EligibleTime=2026-11-30T03:54:45")
    rec = parse_jobcomp(line)[12]
    assert (rec.state, rec.nodes, rec.end - rec.start, rec.start - rec.submit) == ("TIMEOUT", ["gpu01", "gpu02"], 188, 197)


def test_log_refines_times_and_reads_when_each_node_was_released():
    """slurmctld's log (verbose, DebugFlags=TraceJobs): millisecond submit/start/end, the kill
    at the limit, and when each node left COMPLETING: the batch host (first node) seconds
    after a kill at the limit, the other node at once."""
    from datetime import datetime

    from gpupool.conformance.diff_slurm_real import refine_from_log

    recs = parse_jobcomp(
        "JobId=7 UserId=root(0) GroupId=root(0) Name=d006 JobState=TIMEOUT Partition=train TimeLimit=1 "
        "StartTime=2026-12-01T21:49:52 EndTime=2026-12-01T21:51:11 NodeList=gpu[03-04] NodeCnt=2 "
        "SubmitTime=2026-12-01T21:47:49 EligibleTime=2026-12-01T21:47:49")
    log = "\n".join([
        "[2026-12-01T21:47:49.927] _slurm_rpc_submit_batch_job: JobId=7 InitPrio=5000 usec=6070",
        "[2026-12-01T21:49:52.704] sched/backfill: _start_job: Started JobId=7 in train on gpu[03-04]",
        "[2026-12-01T21:51:11.977] Time limit exhausted for JobId=7",
        "[2026-12-01T21:51:11.990] TRACE_JOBS: deallocate_nodes: JobId=7",
        "[2026-12-01T21:51:12.030] TRACE_JOBS: job_epilog_complete: enter JobId=7",
        "[2026-12-01T21:51:33.100] TRACE_JOBS: job_epilog_complete: enter JobId=7",
        "[2026-12-01T21:51:33.101] TRACE_JOBS: cleanup_completing: JobId=7",
        "[2026-12-01T21:51:34.000] TRACE_JOBS: cleanup_completing: JobId=70",  # another job: ignored
    ])
    refine_from_log(recs, log)
    r = recs[7]
    assert r.via == "backfill" and r.time_limit_hit == r.end
    # slurmctld's start_time stays jobcomp's whole second, a fraction before the log line
    assert r.start_time == datetime.fromisoformat("2026-12-01T21:49:52").timestamp() and round(r.start - r.start_time, 3) == 0.704
    assert round(r.end - r.start, 3) == 79.273 and round(r.released - r.end, 3) == 21.124
    rel = {n: round(t - r.end, 3) for n, t in r.node_released().items()}
    assert rel == {"gpu03": 21.124, "gpu04": 0.053}


def test_replay_executor_reports_completing_nodes():
    """A job started where real Slurm started it ends when it ended there, and the nodes that
    stayed COMPLETING after that end become the policy's holds; a job started elsewhere in
    time ends on its own and holds nothing."""
    from types import SimpleNamespace

    from gpupool.conformance.diff_slurm import ReplayExecutor

    ex = ReplayExecutor(0.0, [], {1: (10.0, 70.0, "TIMEOUT"), 2: (10.0, 40.0, "COMPLETED")},
                        released={1: {0: 91.0, 1: 70.05}, 2: {3: 40.0}}, killed=frozenset({1}))
    job = lambda jid: SimpleNamespace(id=jid, time_limit=60.0, remaining=100.0, wl=SimpleNamespace(outcome="COMPLETED"))
    assert ex.launch(job(1), 10.4) == (70.0, "TIMEOUT")
    assert ex.launch(job(2), 10.4) == (40.0, "COMPLETED")
    # job 1 was killed at its limit: its release calls the main scheduler
    assert ex.node_holds == [(0, 70.0, 91.0, 91.0, True), (1, 70.0, 70.05, 91.0, True)]
    assert ex.launch(job(1), 30.0) == (90.0, "TIMEOUT")  # 30 s off: its own kill, no holds
    assert len(ex.node_holds) == 2


@given(st.integers(0, 10_000), st.integers(1, 60))
def test_workload_is_deterministic_and_fits(seed, n):
    jobs = generate(seed, n, ["a", "b"], max_nodes=2, gpus_per_node=4)
    assert jobs == generate(seed, n, ["a", "b"], max_nodes=2, gpus_per_node=4)
    assert [j.arrival for j in jobs] == sorted(j.arrival for j in jobs)
    for j in jobs:
        assert j.nodes <= 2 and j.gpus_per_node <= 4 and 1 <= j.limit_min <= 5
        assert j.times_out == (j.runtime_s > j.limit_min * 60)
        if not j.times_out:
            assert j.runtime_s <= j.limit_min * 60 - 15 or j.runtime_s == 5


def test_script_reads_back_through_gpupools_sbatch_parser():
    job = generate(3, 1, ["ml-research"], max_nodes=4, gpus_per_node=8)[0]
    sb = parse_sbatch_text(sbatch_script(job, "/x/%j.out"), "t.sbatch")
    wl = sbatch_to_workload(sb, id=7, submit_time=1.0, runtime=float(job.runtime_s))[0]
    assert wl.time_limit == job.limit_min * 60 and wl.account == "ml-research"
    assert wl.pod_sets[0].count == job.nodes and wl.pod_sets[0].gpus == job.gpus_per_node


def _mix_read_back(seed: int, n: int, mix: str, same_shapes: bool = True) -> list:
    """(job, its script read back as a workload) of ``mix``'s draw, after checking that the draw
    repeats and keeps the plain draw's arrivals, limits and accounts, and (``same_shapes``) its
    shapes."""
    accounts = ["ml-research", "ml-serving"]
    plain = generate(seed, n, accounts, max_nodes=4, gpus_per_node=8)
    mixed = generate(seed, n, accounts, max_nodes=4, gpus_per_node=8, mix=mix)
    assert mixed == generate(seed, n, accounts, max_nodes=4, gpus_per_node=8, mix=mix)
    assert [(j.arrival, j.limit_min, j.runtime_s, j.account) for j in mixed] == [
        (j.arrival, j.limit_min, j.runtime_s, j.account) for j in plain]
    if same_shapes:
        assert [(j.nodes, j.gpus_per_node) for j in mixed] == [(j.nodes, j.gpus_per_node) for j in plain]
    else:  # a job without --nodes shows its GPUs as one node's, at most the plain shape's
        assert all(m.gpus <= p.gpus and (m.nodes_given or m.nodes == 1) for m, p in zip(mixed, plain))
    return [(j, sbatch_to_workload(parse_sbatch_text(sbatch_script(j, "/x/%j.out"), "t.sbatch"), id=1,
                                   submit_time=0.0, runtime=float(j.runtime_s))[0]) for j in mixed]


@given(st.integers(0, 10_000), st.integers(1, 60))
def test_rich_mix_adds_options_to_the_same_draws(seed, n):
    """``mix="rich"`` keeps arrivals, shapes, limits and accounts of the plain draw, and every
    script reads back through gpupool's sbatch parser with the job's GPUs and nodes."""
    for j, wl in _mix_read_back(seed, n, "rich"):
        assert wl.total_gpus == j.gpus
        assert j.gres == ("--gpus-per-task=1" not in j.options)
        if "--exclusive" in j.options:
            assert wl.pod_sets[0].exclusive


@given(st.integers(0, 10_000), st.integers(1, 60))
def test_gpus_job_mix_asks_some_multi_node_jobs_gpus_for_the_whole_job(seed, n):
    """``mix="gpus-job"`` keeps the plain draw and turns some multi-node jobs' ``--gres`` into
    ``--gpus=X`` with X from the node count to the shape's GPUs, which reads back as a spread
    pod set (``PodSet.spread_gpus``) of X GPUs."""
    for j, wl in _mix_read_back(seed, n, "gpus-job"):
        (ps,) = wl.pod_sets
        if j.gres:
            assert not j.options and wl.total_gpus == j.gpus
        else:
            (opt,) = j.options
            x = int(opt.removeprefix("--gpus="))
            assert j.nodes >= 2 and j.nodes <= x <= j.gpus
            assert ps.spread_gpus and ps.gpus_per_job == x and ps.gpus == -(-x // j.nodes)


def _without_nodes(seed: int, n: int, mix: str) -> list:
    """(job, its one pod set read back, its options' values) for each job of ``mix``'s draw
    that gives no ``--nodes``, after checking that the others keep the plain draw (no options,
    ``--gres``, the shape's GPUs) and that these ask one node's worth of GPUs from two up and no
    ``--gres``."""
    out = []
    for j, wl in _mix_read_back(seed, n, mix, same_shapes=False):
        if j.nodes_given:
            assert not j.options and j.gres and wl.total_gpus == j.gpus
            continue
        assert not j.gres and j.nodes == 1 and j.gpus_per_node >= 2
        out.append((j, wl.pod_sets[0], [int(o.split("=", 1)[1]) for o in j.options]))
    return out


@given(st.integers(0, 10_000), st.integers(1, 60))
def test_gpus_tasks_mix_asks_tasks_and_gpus_without_nodes(seed, n):
    """``mix="gpus-tasks"`` keeps the plain draw and turns some jobs of two GPUs or more into
    ``--ntasks=T --gpus=X`` with no ``--nodes`` (X up to the shape's GPUs, T dividing X with
    X/T on one node), which reads back as T task pods of X/T GPUs (walked from two tasks)."""
    for j, ps, (t, x) in _without_nodes(seed, n, "gpus-tasks"):
        assert j.gpus_per_node == x and x % t == 0 and x // t <= 8
        # two tasks or more walk nodes under the Slurm policy (``PodSet.walk_gpus``), one stays on one
        assert ps.count == t and ps.gpus == x // t and not ps.one_per_node and ps.walk_gpus == (t >= 2)


@given(st.integers(0, 10_000), st.integers(1, 60))
def test_gpus_per_task_mix_asks_tasks_and_their_gpus_without_nodes(seed, n):
    """``mix="gpus-per-task"`` turns some jobs of two GPUs or more into ``--ntasks=T
    --gpus-per-task=G`` with no ``--nodes`` (T·G up to the shape's GPUs, G on one node), which
    reads back as T task pods of G GPUs."""
    for j, ps, (t, g) in _without_nodes(seed, n, "gpus-per-task"):
        assert j.gpus_per_node == t * g and g <= 8
        assert ps.count == t and ps.gpus == g and not ps.one_per_node and not ps.walk_gpus


@given(st.integers(0, 10_000), st.integers(1, 60))
def test_gpus_walk_mix_asks_gpus_without_nodes(seed, n):
    """``mix="gpus-walk"`` turns some jobs of two GPUs or more into ``--gpus=X`` alone, which
    reads back as one walked pod of X GPUs (``PodSet.walk_gpus``)."""
    for j, ps, (x,) in _without_nodes(seed, n, "gpus-walk"):
        assert j.gpus_per_node == x
        assert ps.count == 1 and ps.gpus == x and ps.walk_gpus


def test_rich_mix_draws_every_kind_and_reads_back_from_scripts(tmp_path):
    from gpupool.conformance.diff_slurm import jobs_from_scripts

    jobs = generate(4, 300, ["ml-research"], max_nodes=4, gpus_per_node=8, mix="rich")
    kinds = {j.options[0].split("=")[0] if j.options else "" for j in jobs}
    assert kinds == {"", "--cpus-per-task", "--mem", "--ntasks-per-node", "--ntasks", "--exclusive",
                     "--cpus-per-gpu"}
    assert any(j.nodes >= 2 and any(o.startswith("--ntasks=") for o in j.options) and j.gres for j in jobs)
    (tmp_path / "scripts").mkdir()
    for j in jobs:
        (tmp_path / "scripts" / f"{j.name}.sbatch").write_text(sbatch_script(j, "/x/%j.out"))
    back = jobs_from_scripts(tmp_path)
    assert [(b.index, b.nodes, b.gpus_per_node, b.limit_min, b.runtime_s, b.account, b.options, b.gres) for b in back] == [
        (j.index, j.nodes, j.gpus_per_node, j.limit_min, j.runtime_s, j.account, j.options, j.gres) for j in jobs]
    with pytest.raises(ValueError, match="unknown workload mix 'odd'"):
        generate(1, 1, ["a"], max_nodes=1, gpus_per_node=1, mix="odd")


@pytest.mark.parametrize("mix", ["gpus-range", "gpus-few", "gpus-uneven", "gpus-cpg", "gpus-cpg-tasks"])
def test_walk_mixes_read_back_from_scripts(tmp_path, mix):
    """A finished run's scripts give back the workload drawn (``replay_workdir``): a node range
    stays one of the job's options, not its node count."""
    from gpupool.conformance.diff_slurm import jobs_from_scripts

    jobs = generate(2, 80, ["ml-research"], max_nodes=4, gpus_per_node=8, mix=mix)
    (tmp_path / "scripts").mkdir()
    for j in jobs:
        (tmp_path / "scripts" / f"{j.name}.sbatch").write_text(sbatch_script(j, "/x/%j.out"))
    back = jobs_from_scripts(tmp_path)
    fields = ("index", "nodes", "gpus_per_node", "limit_min", "runtime_s", "account", "options", "gres", "nodes_given")
    assert [tuple(getattr(b, f) for f in fields) for b in back] == [tuple(getattr(j, f) for f in fields) for j in jobs]


def test_scheduler_interval_and_accounts():
    assert _scheduler_interval("bf_interval=1,sched_interval=1") == 1
    assert _scheduler_interval("bf_continue") == 60
    assert sorted(accounts_of(load_pool(SEED_POOL))) == ["ml-platform", "ml-research", "ml-serving"]


def test_compare_counts_and_lists_disagreements():
    from types import SimpleNamespace

    from gpupool.conformance.diff_slurm_workload import DiffJob

    jobs = [DiffJob(0, "a", 0, 1, 1, 1, 10, "x"), DiffJob(1, "b", 0, 1, 1, 1, 10, "x")]
    real = {1: RealRecord(1, "a", 100.0, 100.0, 110.0, "COMPLETED", ["n1"], {"n1": [0]}),
            2: RealRecord(2, "b", 100.0, 105.0, 115.0, "COMPLETED", ["n1"], {"n1": [1]})}
    sim = {1: SimpleNamespace(placement=[(0, 0b1)], first_start=0.4, end=10.4, final_state="COMPLETED", state="COMPLETED"),
           2: SimpleNamespace(placement=[(0, 0b1)], first_start=9.0, end=19.0, final_state="COMPLETED", state="COMPLETED")}
    rep = DiffReport("p", 1, 2, "none", None, 1.0)
    compare(rep, jobs, real, {0: 1, 1: 2}, sim, ["n1"], 100.0)
    assert rep.order_agree == 1.0 and rep.start_within_interval == 0.5 and rep.gpus_agree == 0.5
    assert [d.name for d in rep.disagreements] == ["b"]
    assert any("GPUs" in p for p in rep.disagreements[0].problems)


def test_backfill_cuts_are_read_from_the_log():
    """A cycle that logs "reached end of job queue" (or another way out) was not cut; one that
    just stops ran out of bf_max_time: it stopped at its last "test for" job, which counts as
    tested only when something about it was logged after that line."""
    from datetime import datetime

    from gpupool.conformance.diff_slurm_real import backfill_cuts

    def at(s: str) -> float:
        return datetime.fromisoformat(s).timestamp()

    bf = "sched/backfill: _attempt_backfill: "
    log = "\n".join([
        f"[2026-12-01T22:00:00.100] {bf}beginning",
        f"[2026-12-01T22:00:00.101] {bf}BACKFILL: test for JobId=4 Prio=10 Partition=train Reservation=NONE",
        f"[2026-12-01T22:00:00.102] {bf}BACKFILL: reached end of job queue",
        f"[2026-12-01T22:00:00.103] {bf}completed testing 1(1) jobs, usec=50",
        f"[2026-12-01T22:00:01.900] {bf}beginning",
        f"[2026-12-01T22:00:01.950] {bf}BACKFILL: test for JobId=4 Prio=10 Partition=train Reservation=NONE",
        "[2026-12-01T22:00:01.960] sched/backfill: _start_job: Started JobId=4 in train on gpu01",
        f"[2026-12-01T22:00:01.990] {bf}BACKFILL: test for JobId=5 Prio=9 Partition=train Reservation=NONE",
        "[2026-12-01T22:00:02.000] sched/backfill: _dump_job_sched: JobId=5 to start at 2026-12-01T22:10:00, "
        "end at 2026-12-01T22:20:00 on nodes gpu02 in partition train",
        f"[2026-12-01T22:00:02.001] {bf}completed testing 2(2) jobs, usec=101000",
        f"[2026-12-01T22:00:03.950] {bf}beginning",
        f"[2026-12-01T22:00:03.990] {bf}BACKFILL: test for JobId=6 Prio=9 Partition=train Reservation=NONE",
        "[2026-12-01T22:00:04.010] _job_complete: JobId=3 done",
        f"[2026-12-01T22:00:04.011] {bf}completed testing 1(1) jobs, usec=61000",
        f"[2026-12-01T22:00:05.990] {bf}beginning",
        f"[2026-12-01T22:00:06.001] {bf}completed testing 0(0) jobs, usec=11000",
        f"[2026-12-01T22:00:08.000] {bf}beginning",
        f"[2026-12-01T22:00:08.001] {bf}BACKFILL: bf_max_job_test: limit of 1 reached",
        f"[2026-12-01T22:00:08.002] {bf}completed testing 1(1) jobs, usec=100",
    ])
    assert backfill_cuts(log) == {
        at("2026-12-01T22:00:01.900"): (((4, "train"), (5, "train")), True),
        at("2026-12-01T22:00:03.950"): (((6, "train"),), False),  # the log line after it is about job 3
        at("2026-12-01T22:00:05.990"): ((), False),
    }


def test_a_cut_backfill_cycle_walks_the_queue_only_to_its_cut():
    """With ``backfill_cut`` the cycle at that instant tests the records of the jobs the real
    cycle reached, in the policy's order (the one it stopped at only when it was tested); a
    job the real cycle reached that is not pending here is simply absent; other cycles walk the
    whole queue."""
    from types import SimpleNamespace

    from gpupool.engine.policy_api import make_policy
    from gpupool.formats.pool_dir import load_pool

    pool = load_pool(Path(__file__).resolve().parents[2] / "examples" / "seed-pool")
    pol = make_policy("slurm", pool, {"backfill_at": [5.0, 7.0, 9.0],
                                       "backfill_cut": {5.0: ((1, 2), False), 7.0: ((2, 1), True), 9.0: ((), False)}})
    train = SimpleNamespace(name="train")
    recs = [SimpleNamespace(job=SimpleNamespace(id=i), part=train) for i in (1, 2, 3)]
    assert [r.job.id for r in pol._bf_records(5.0, recs)] == [1]
    assert [r.job.id for r in pol._bf_records(7.0, recs)] == [1, 2]
    assert pol._bf_records(9.0, recs) == []
    assert pol._bf_records(6.0, recs) == recs
    assert [r.job.id for r in pol._bf_records(7.0, [recs[1], recs[2]])] == [2]  # job 1 not pending here


def test_a_cut_falls_between_the_records_of_a_job_in_two_partitions():
    """The parts mix's seed 52: the real cycle reached job 70's record in q and stopped before
    its record in p, which gpupool's cycle must not test (it started job 70 there)."""
    from types import SimpleNamespace

    from gpupool.engine.policy_api import make_policy
    from gpupool.formats.pool_dir import load_pool

    pool = load_pool(Path(__file__).resolve().parents[2] / "examples" / "seed-pool")
    pol = make_policy("slurm", pool, {"backfill_at": [5.0, 7.0],
                                       "backfill_cut": {5.0: (((72, "q"), (70, "q"), (67, "p")), True),
                                                        7.0: (((70, "q"), (70, "p")), False)}})
    p, q = SimpleNamespace(name="p"), SimpleNamespace(name="q")
    recs = [SimpleNamespace(job=SimpleNamespace(id=j), part=part)
            for j, part in ((72, q), (70, q), (67, p), (70, p), (68, p))]
    assert [(r.job.id, r.part.name) for r in pol._bf_records(5.0, recs)] == [(72, "q"), (70, "q"), (67, "p")]
    assert [(r.job.id, r.part.name) for r in pol._bf_records(7.0, recs)] == [(70, "q")]
    with pytest.raises(Exception, match="backfill_cuts"):
        make_policy("slurm", pool, {"backfill_cuts": {}})


def test_main_passes_and_the_replay_timing_are_read_from_the_log():
    """At SlurmctldDebug=debug each main scheduler pass logs a line; the replay options put every
    instant relative to t=0 and drop what came before it."""
    from datetime import datetime

    from gpupool.conformance.diff_slurm_real import main_passes, real_timing

    log = "\n".join([
        "[2026-12-01T22:00:00.500] debug:  sched: Running job scheduler for full queue.",
        "[2026-12-01T22:00:01.250] debug:  sched: Running job scheduler for default depth.",
        "[2026-12-01T22:00:01.300] sched/backfill: _attempt_backfill: beginning",
        "[2026-12-01T22:00:01.310] sched/backfill: _attempt_backfill: BACKFILL: reached end of job queue",
        "[2026-12-01T22:00:01.320] sched/backfill: _attempt_backfill: completed testing 0(0) jobs, usec=20",
    ])
    t = datetime.fromisoformat("2026-12-01T22:00:00.500").timestamp()
    assert main_passes(log) == [(t, True), (t + 0.75, False)]
    opts = real_timing(log).options(t + 0.1)
    assert [f for _t, f in opts["main_at"]] == [False] and round(opts["main_at"][0][0], 3) == 0.65
    assert [round(x, 3) for x in opts["backfill_at"]] == [0.7] and "backfill_cut" not in opts
    assert main_passes("[2026-12-01T22:00:00.500] sched: Allocate JobId=1 NodeList=gpu01") == []


def test_with_main_at_the_main_scheduler_runs_only_at_the_listed_passes():
    """A replay's ``main_at``: a job submitted at 10 s waits for the next listed main pass
    (12.5 s), not the submission instant; without the option it starts at 10 s."""
    from gpupool.engine.core import Engine
    from gpupool.engine.policy_api import make_policy
    from gpupool.model.workload import PodSet, Workload

    pool = load_pool(Path(__file__).resolve().parents[2] / "examples" / "seed-pool")
    jobs = [Workload(1, "j1", (PodSet(count=1, gpus=1),), submit_time=10.0, runtime=20.0, time_limit=600.0,
                     account="ml-platform", user="dave")]

    def first_start(options):
        return Engine(pool, jobs, make_policy("slurm", pool, options), check=True).run().jobs[0].first_start

    assert first_start({}) == 10.0
    assert first_start({"main_at": [(5.0, True), (12.5, False)]}) == 12.5


def test_a_verbose_log_shows_the_main_passes_that_started_jobs():
    """At ``verbose`` slurmctld logs no line per main pass, but a pass that starts jobs logs one
    "sched: Allocate" line each: a burst is one pass, taken to begin just before its first line;
    the replay gets them as ``main_seen`` (empty, not absent, when none started anything)."""
    from datetime import datetime

    from gpupool.conformance.diff_slurm_real import main_passes_seen, real_timing

    log = "\n".join([
        "[2026-12-01T22:00:00.500] sched: Allocate JobId=1 NodeList=gpu01 #CPUs=2 Partition=train",
        "[2026-12-01T22:00:00.520] sched: Allocate JobId=2 NodeList=gpu02 #CPUs=2 Partition=train",
        "[2026-12-01T22:00:03.000] sched: Allocate JobId=3 NodeList=gpu01 #CPUs=2 Partition=train",
    ])
    t = datetime.fromisoformat("2026-12-01T22:00:00.500").timestamp()
    assert [round(x - t, 4) for x in main_passes_seen(log)] == [-0.0005, 2.4995]
    opts = real_timing(log).options(t)
    assert "main_at" not in opts and [round(x, 4) for x in opts["main_seen"]] == [2.4995]
    quiet = "[2026-12-01T22:00:01.300] sched/backfill: _attempt_backfill: beginning"
    assert real_timing(quiet).options(t)["main_seen"] == []


def test_a_replay_of_a_verbose_log_runs_main_passes_on_the_ticks_and_where_the_log_shows_one():
    """slurmctld 22.05.8 runs no main pass at a submission: a replay with ``main_seen`` starts a
    job submitted at 10.4 s at the next tick (its stand-in for the background loop; 30 s in the
    seed pool, 1 s in the harness's), or at a pass the log shows before that; a simulation
    starts it at its submission."""
    from gpupool.engine.core import Engine
    from gpupool.engine.policy_api import make_policy
    from gpupool.model.workload import PodSet, Workload

    pool = load_pool(Path(__file__).resolve().parents[2] / "examples" / "seed-pool")
    jobs = [Workload(1, "j1", (PodSet(count=1, gpus=1),), submit_time=10.4, runtime=20.0, time_limit=600.0,
                     account="ml-platform", user="dave")]

    def first_start(options):
        out = Engine(pool, jobs, make_policy("slurm", pool, options), check=True).run().jobs[0]
        return out.first_start, out.via

    assert first_start({}) == (10.4, "SchedMain")
    assert first_start({"main_seen": []}) == (30.0, "SchedMain")
    assert first_start({"main_seen": [10.7]}) == (10.7, "SchedMain")


def test_fair_share_usage_counts_from_the_whole_second_of_the_start(monkeypatch):
    """slurmctld's start_time and end_time are whole epoch seconds, and fair-share usage accrues
    between them: with t=0 at epoch ...0.25 s, a job from 10.4 s to 60.4 s is charged from epoch
    ...10 s to ...60 s, which fair share's clock (passes at multiples of the period from t=0's
    whole second) reads as 10.0 and 60.0 (findings 24 and 54)."""
    from gpupool.engine.core import Engine
    from gpupool.engine.policy_api import make_policy
    from gpupool.model.workload import PodSet, Workload

    pool = load_pool(Path(__file__).resolve().parents[2] / "examples" / "seed-pool")
    jobs = [Workload(i, f"j{i}", (PodSet(count=1, gpus=1),), submit_time=at, runtime=50.0, time_limit=600.0,
                     account="ml-platform", user="dave") for i, at in ((1, 10.4), (2, 100.0))]
    from gpupool.policy.slurm.decay import UsageLedger

    closed = []
    close = UsageLedger.close
    monkeypatch.setattr(UsageLedger, "close", lambda self, key, s, e, w: (closed.append((s, e)), close(self, key, s, e, w)))
    policy = make_policy("slurm", pool, {"epoch": 1_800_000_000.25})
    job = Engine(pool, jobs, policy, check=True).run().jobs[0]
    assert job.first_start == 10.4 and job.end == 60.4 and closed[0] == (10.0, 60.0)  # closed at the next call (100 s)


def test_rich_mix_refuses_nodes_its_options_cannot_fit(tmp_path):
    from gpupool.conformance.diff_slurm_workload import rich_fits
    from gpupool.errors import InputError

    rich_fits(load_pool(SEED_POOL))  # the seed pool's 128-CPU, 1 TB nodes take every option
    (tmp_path / "slurm.conf").write_text(
        "ClusterName=small\nNodeName=n[1-2] CPUs=64 RealMemory=512000 Gres=gpu:8\n"
        "PartitionName=p Nodes=n[1-2] Default=YES State=UP\nGresTypes=gpu\n")
    with pytest.raises(InputError, match="at least 128 CPUs and 1000000 MB.*n1, n2"):
        rich_fits(load_pool(tmp_path))


@given(st.integers(0, 10_000), st.integers(1, 60))
def test_gres_tasks_mix_asks_tasks_beside_gpus_per_node_without_nodes(seed, n):
    """``mix="gres-tasks"`` keeps the plain draw's ``--gres=gpu:G`` and drops ``--nodes`` from
    some jobs, asking ``--ntasks=T`` instead (2-8 tasks for one node; N tasks of 96 CPUs or
    2N - 1 of 64 for N nodes), which reads back as one walked pod of the T tasks and G GPUs."""
    accounts = ["ml-research", "ml-serving"]
    plain = generate(seed, n, accounts, max_nodes=4, gpus_per_node=8)
    for (j, wl), p in zip(_mix_read_back(seed, n, "gres-tasks", same_shapes=False), plain):
        (ps,) = wl.pod_sets
        assert j.gres and j.gpus_per_node == p.gpus_per_node
        if j.nodes_given:
            assert not j.options and (j.nodes, wl.total_gpus) == (p.nodes, p.gpus)
            continue
        opts = dict(o.split("=", 1) for o in j.options)
        tasks, cpt = int(opts["--ntasks"]), int(opts.get("--cpus-per-task", 1))
        assert j.nodes == 1 and tasks >= 2
        assert -(-tasks // (128 // cpt)) == p.nodes  # idle 128-CPU nodes hold the tasks on the shape's nodes
        assert (ps.count, ps.gpus, ps.cpu_m, ps.one_per_node, ps.walk_gpus) == (1, p.gpus_per_node, tasks * cpt * 1000,
                                                                                False, True)


@given(st.integers(0, 10_000), st.integers(1, 60))
def test_gpus_uneven_mix_asks_tasks_and_gpus_not_a_multiple_without_nodes(seed, n):
    """``mix="gpus-uneven"`` turns some jobs of three GPUs or more into ``--ntasks=T --gpus=X``
    with no ``--nodes`` and X not a multiple of T (2 <= T < X), which reads back as one walked pod
    of the T tasks and the X GPUs."""
    for j, ps, (t, x) in _without_nodes(seed, n, "gpus-uneven"):
        assert j.gpus_per_node == x and 2 <= t < x and x % t
        assert (ps.count, ps.gpus, ps.cpu_m, ps.one_per_node, ps.walk_gpus) == (1, x, t * 1000, False, True)


@given(st.integers(0, 10_000), st.integers(1, 60))
def test_gpus_range_mix_asks_a_node_range_beside_gpus(seed, n):
    """``mix="gpus-range"`` turns some jobs of two GPUs or more into ``--nodes=A-B --gpus=X``
    (1 <= A <= X, A < B <= 4, B nodes enough for X), which reads back as one walked pod of the
    X GPUs with the range (``PodSet.walk_nodes``)."""
    for j, wl in _mix_read_back(seed, n, "gpus-range", same_shapes=False):
        if j.nodes_given:
            assert not j.options and j.gres and wl.total_gpus == j.gpus
            continue
        assert not j.gres and j.nodes == 1 and j.gpus_per_node >= 2
        nodes, gpus = (o.split("=", 1)[1] for o in j.options)
        least, most = map(int, nodes.split("-"))
        x = int(gpus)
        assert x == j.gpus_per_node and 1 <= least <= x and least < most <= 4 and x <= most * 8
        (ps,) = wl.pod_sets
        assert (ps.count, ps.gpus, ps.one_per_node, ps.walk_gpus, ps.walk_nodes) == (1, x, False, True, (least, most))


@given(st.integers(0, 10_000), st.integers(1, 60))
def test_gpus_cpg_mix_asks_cpus_per_gpu_or_exclusive_beside_gpus(seed, n):
    """``mix="gpus-cpg"`` turns some jobs of two GPUs or more into ``--gpus=X`` beside
    ``--cpus-per-gpu=C`` (1 <= C <= 16) or ``--exclusive``: over the shape's fixed node count
    (spread, ``--cpus-per-gpu`` only, X at least the nodes), or walked with a node range or none,
    each reading back as gpupool models it."""
    for j, wl in _mix_read_back(seed, n, "gpus-cpg", same_shapes=False):
        if not j.options:
            assert j.gres and wl.total_gpus == j.gpus
            continue
        opts = dict(o.split("=", 1) if "=" in o else (o, "") for o in j.options)
        x = int(opts["--gpus"])
        assert not j.gres and 2 <= x and ("--exclusive" in opts) != ("--cpus-per-gpu" in opts)
        if "--cpus-per-gpu" in opts:
            assert 1 <= int(opts["--cpus-per-gpu"]) <= 16
        (ps,) = wl.pod_sets
        assert ps.cpus_per_gpu_cap == ("--cpus-per-gpu" in opts)
        if j.nodes_given:
            assert "--nodes" not in opts and "--exclusive" not in opts and j.nodes >= 2
            assert j.nodes <= x <= j.nodes * j.gpus_per_node and ps.spread_gpus and ps.one_per_node
            continue
        assert j.nodes == 1 and j.gpus_per_node == x and ps.walk_gpus and (ps.count, ps.gpus) == (1, x)
        if "--nodes" in opts:
            least, most = map(int, opts["--nodes"].split("-"))
            assert 1 <= least <= x and least < most <= 4 and x <= most * 8 and ps.walk_nodes == (least, most)


@given(st.integers(0, 10_000), st.integers(1, 60))
def test_gpus_cpg_tasks_mix_asks_tasks_beside_gpus_and_cpus_per_gpu(seed, n):
    """``mix="gpus-cpg-tasks"`` turns some jobs of two GPUs or more into ``--ntasks=T --gpus=X
    --cpus-per-gpu=C`` (2 <= T <= X, 1 <= C <= 16, a third with ``--mem-per-gpu``) with no
    ``--nodes``, which reads back as a walk capped at T nodes (``PodSet.walk_tasks``)."""
    for j, wl in _mix_read_back(seed, n, "gpus-cpg-tasks", same_shapes=False):
        if j.nodes_given:
            assert not j.options and j.gres and wl.total_gpus == j.gpus
            continue
        opts = dict(o.split("=", 1) for o in j.options)
        x, t, c = int(opts["--gpus"]), int(opts["--ntasks"]), int(opts["--cpus-per-gpu"])
        assert not j.gres and j.nodes == 1 and j.gpus_per_node == x and 2 <= t <= x and 1 <= c <= 16
        assert set(opts) <= {"--gpus", "--ntasks", "--cpus-per-gpu", "--mem-per-gpu"}
        (ps,) = wl.pod_sets
        assert ps.walk_gpus and ps.walk_tasks == t and ps.cpus_per_gpu_cap and ps.cpus_total == c * x


@given(st.integers(0, 10_000), st.integers(1, 60))
def test_gpus_few_mix_asks_more_tasks_than_gpus_without_nodes(seed, n):
    """``mix="gpus-few"`` turns some GPU jobs into ``--ntasks=T --gpus=X`` with more tasks than
    GPUs (X <= 8, X < T <= X + 8) and no ``--nodes``, their CPUs within X + 1 idle nodes, which
    reads back as one walked pod of the T tasks and the X GPUs."""
    for j, wl in _mix_read_back(seed, n, "gpus-few", same_shapes=False):
        if j.nodes_given:
            assert not j.options and j.gres and wl.total_gpus == j.gpus
            continue
        opts = dict(o.split("=", 1) for o in j.options)
        tasks, x, cpt = int(opts["--ntasks"]), int(opts["--gpus"]), int(opts.get("--cpus-per-task", 1))
        assert not j.gres and j.nodes == 1 and j.gpus_per_node == x and x < tasks <= x + 8 and x <= 8
        assert tasks <= min(x + 1, 4) * (128 // cpt)  # whole tasks on X + 1 idle nodes
        (ps,) = wl.pod_sets
        assert (ps.count, ps.gpus, ps.cpu_m, ps.one_per_node, ps.walk_gpus) == (1, x, tasks * cpt * 1000, False, True)


def test_sacctmgr_commands_carry_a_qos_preempt_exempt_time(tmp_path):
    # sacctmgr reads PreemptExemptTime as a Slurm time (probe p127 set it so on a real 22.05.8)
    pool = load_pool(SEED_POOL)
    pool.slurm.accounting.qos["normal"].preempt_exempt_time = 240
    rs = RealSlurm(tmp_path, pool, accounting="dbd")
    cmds = [" ".join(c) for c in rs.sacctmgr_commands()]
    normal = next(c for c in cmds if c.startswith("modify qos normal set"))
    assert "PreemptExemptTime=00:04:00" in normal
    assert not any("PreemptExemptTime" in c for c in cmds if c.startswith("modify qos high"))
