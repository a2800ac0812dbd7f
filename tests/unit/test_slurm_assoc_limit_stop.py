"""SchedulerParameters=assoc_limit_stop: a job held by a QOS or association limit.

Probe p131 (2026-12-05, a real 22.05.8, the seed pool's four 8-GPU nodes, slurmdbd,
bf_interval=10, bf_resolution=60): gpu01 and gpu02 held by ml-serving (its GrpTRES=gres/gpu=16
used up), gpu03 by ml-research, gpu04 with four GPUs free; then A (ml-serving, ``--gres=gpu:4
-t 10``), B5 (ml-research, ``--gres=gpu:4 -t 10``) and B4 (``--gres=gpu:4 -t 5``), in that
priority order, two seconds apart. What it showed, and 22.05.8's source with it:

- Backfill tests A although its limit holds it (``acct_policy_job_runnable_pre_select`` is
  skipped under assoc_limit_stop). A fits now, so ``_start_job`` fails on the limit and A is
  planned 500 s on (``now + 500``: "to start at 20:37:13" from a cycle at 20:28:53), or at
  ``later_start`` where its window showed one, and reserved there on will-run's nodes: B5 (10
  minutes) then tried later, B4 (5 minutes, before the reservation) started on gpu04
  (SchedBackfill). Without assoc_limit_stop B5 started at once and A had no plan.
- The main pass stops the partition at A at every pass, since AssocGrpGRES is no reason
  ``acct_policy_job_runnable_state`` knows; a job held by a job count (GrpJobs=2 on
  ml-serving: AssocGrpJobsLimit) is passed over untouched once it has that reason, and B5 then
  started at its submission (SchedMain).
- A QOS group limit (scavenger with GrpTRES=gres/gpu=8, 6 in use; A of that QOS asking 4):
  B5 of the same QOS, within the limit with 2 GPUs and fitting gpu03 now, was planned at A's
  planned start (the QOS's blocked_until), not started; B4 of QOS normal started on gpu03.
"""
from __future__ import annotations

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from tests.unit.sbatch_plans import slurm_pool, team_accounts, workload

_CONF = """ClusterName=t
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerGPU=120000
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=10,bf_resolution=60,bf_continue{stop}
PriorityType=priority/basic
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageEnforce=associations,limits,qos
AccountingStorageTRES=gres/gpu
GresTypes=gpu
NodeName=gpu[01-04] CPUs=128 Sockets=2 CoresPerSocket=32 ThreadsPerCore=2 RealMemory=1000000 Gres=gpu:8
PartitionName=p Nodes=gpu[01-04] Default=YES MaxTime=60 State=UP
"""

#: teamA as ml-serving (GrpTRES=gres/gpu=16, and ``{jobs}``), teamB as ml-research, QOS scav
#: as the probe's scavenger (GrpTRES=gres/gpu=8)
_ACCOUNTS = """QOS - 'normal':Priority=0
QOS - 'scav':Priority=0:GrpTRES=gres/gpu=8
Cluster - 't':Fairshare=1:QOS='normal'
Parent - 'root'
Account - 'teamA':Fairshare=1:GrpTRES=gres/gpu=16{jobs}:QOS='normal,scav':DefaultQOS='normal'
Account - 'teamB':Fairshare=1:QOS='normal,scav':DefaultQOS='normal'
Parent - 'teamA'
User - 'root':DefaultAccount='teamA':Fairshare=1
Parent - 'teamB'
User - 'root':DefaultAccount='teamA':Fairshare=1
"""

_HOLDERS = [("S1", "-A teamA -w gpu01 --gres=gpu:8 -t 20"), ("S2", "-A teamA -w gpu02 --gres=gpu:8 -t 30"),
            ("R3", "-A teamB -w gpu03 --gres=gpu:8 -t 30"), ("R4", "-A teamB -w gpu04 --gres=gpu:4 -t 30")]
_LATER = [("A", "-A teamA --gres=gpu:4 -t 10"), ("B5", "-A teamB --gres=gpu:4 -t 10"),
          ("B4", "-A teamB --gres=gpu:4 -t 5")]
#: the job X of the probe's variants with a higher job waiting for gpu01 (S1's end at 1200 s)
_X = ("X", "-A teamB --gres=gpu:8 -t 10")


def _run(tmp_path, later, *, stop: bool = True, holders=_HOLDERS, jobs_limit: str = "", record: bool = True,
         until: float = 100.0, edits: tuple = ()):
    """The holders at 0 s, then ``later`` two seconds apart from 8 s (ids in that order, from
    1); (engine, policy, name -> id). ``edits``: (old, new) texts replaced in slurm.conf and
    accounts.cfg."""
    conf = _CONF.format(stop=",assoc_limit_stop" if stop else "")
    accounts = _ACCOUNTS.format(jobs=jobs_limit)
    for old, new in edits:
        assert old in conf or old in accounts, old
        conf, accounts = conf.replace(old, new), accounts.replace(old, new)
    (tmp_path / "accounts.cfg").write_text(accounts)
    pool = slurm_pool(tmp_path, conf)
    subs = [(n, o, 0.0) for n, o in holders] + [(n, o, 8.0 + 2 * k) for k, (n, o) in enumerate(later)]
    wls = [workload(n, o, t, k + 1) for k, (n, o, t) in enumerate(subs)]
    pol = make_policy("slurm", pool, {"record": record})
    engine = Engine(pool, wls, pol, until=until)
    engine.run()
    return engine, pol, {n: k + 1 for k, (n, _o, _t) in enumerate(subs)}


def _reserved(pol, at: float, jid: int):
    """The (nodes, begin, end) backfill reserved for ``jid`` in its cycle at ``at``."""
    return [(nodes, b, e) for j, nodes, b, e in pol.resv_log[at] if j == jid]


def test_a_job_its_limit_holds_is_planned_500_s_on_and_reserves_its_nodes(tmp_path):
    engine, pol, ids = _run(tmp_path, _LATER)
    a, b5, b4 = ids["A"], ids["B5"], ids["B4"]
    # the cycle at 10 s: A fits gpu04 now, its start fails on AssocGrpGRES
    assert pol.plan_log[10.0][a] == 510.0
    assert _reserved(pol, 10.0, a) == [([3], 480.0, 1080.0)]
    # at 20 s: again (now + 500), B5's ten minutes reach the reservation, B4's five do not
    assert pol.plan_log[20.0][a] == 520.0
    assert pol.plan_log[20.0][b5] == 1080.0  # after A's reservation, as the probe's 20:47:00
    assert engine.jobs[b4].start == 20.0 and engine.jobs[b4].placement[0][0] == 3
    assert engine.jobs[b4].via == "SchedBackfill"
    # from then on A waits for B4's end (no start now to fail) and B5 after it
    assert pol.plan_log[30.0][a] == 320.0 and pol.plan_log[30.0][b5] == 900.0
    assert engine.jobs[a].reason == "AssocGrpGRES"
    assert engine.jobs[b5].state == "PENDING"


def test_without_assoc_limit_stop_the_held_job_is_not_tested(tmp_path):
    engine, pol, ids = _run(tmp_path, _LATER, stop=False)
    assert engine.jobs[ids["B5"]].start == 10.0  # the main pass at its submission
    assert all(ids["A"] not in plans for plans in pol.plan_log.values())
    assert engine.jobs[ids["B4"]].state == "PENDING"


def test_the_plan_moves_with_every_cycle_even_where_nothing_changed(tmp_path):
    """Nothing starts or ends after 20 s in the variant without B4: each cycle plans A 500 s
    on from its own instant (a cycle is not skipped for want of a change)."""
    _engine, pol, ids = _run(tmp_path, _LATER[:2])
    assert [pol.plan_log[t][ids["A"]] for t in (30.0, 60.0, 90.0)] == [530.0, 560.0, 590.0]


def test_a_higher_jobs_reservation_gives_later_start(tmp_path):
    """stopx: X waits for gpu01 (reserved from S1's end, 1200 s, to 1800 s); A's window shows a
    node freed at 1800 s (``later_start``), so A is planned there (the probe: "to start at
    20:59:00", X's end) and B5 starts at once before it (SchedBackfill)."""
    engine, pol, ids = _run(tmp_path, [_X] + _LATER)
    a, b5 = ids["A"], ids["B5"]
    assert pol.plan_log[10.0][ids["X"]] == 1200.0
    assert pol.plan_log[10.0][a] == 1800.0
    assert _reserved(pol, 10.0, a) == [([3], 1800.0, 2400.0)]
    assert (engine.jobs[b5].start, engine.jobs[b5].via) == (20.0, "SchedBackfill")
    assert engine.jobs[ids["B4"]].state == "PENDING"


def test_a_job_count_limit_is_passed_over_once_it_is_the_reason(tmp_path):
    """stopjobs: GrpJobs=2 on teamA; A's first main pass stops the partition (its limit fails in
    select_nodes), later passes pass it over (AssocGrpJobsLimit is a limit state and the count
    is tested before the selection): B5 starts at its submission (SchedMain)."""
    engine, _pol, ids = _run(tmp_path, _LATER, jobs_limit=":GrpJobs=2")
    assert engine.jobs[ids["A"]].reason == "AssocGrpJobsLimit"
    assert (engine.jobs[ids["B5"]].start, engine.jobs[ids["B5"]].via) == (10.0, "SchedMain")
    assert engine.jobs[ids["B4"]].state == "PENDING"


def test_a_qos_group_limit_holds_its_qos_back_until_the_planned_start(tmp_path):
    """qosx: scav holds 6 of its 8 GPUs (R3 on gpu03); A of scav asks 4 (QOSGrpGRES), is planned
    at X's end (1800 s); B5 of scav asks 2, within the limit and fitting gpu03 now, is planned
    there too, not started; B4 of QOS normal starts on gpu03."""
    holders = _HOLDERS[:2] + [("R3", "-A teamB --qos=scav -w gpu03 --gres=gpu:6 -t 30"), _HOLDERS[3]]
    later = [_X, ("A", "-A teamB --qos=scav --gres=gpu:4 -t 10"), ("B5", "-A teamB --qos=scav --gres=gpu:2 -t 5"),
             ("B4", "-A teamB --gres=gpu:2 -t 5")]
    engine, pol, ids = _run(tmp_path, later, holders=holders)
    a, b5, b4 = ids["A"], ids["B5"], ids["B4"]
    assert engine.jobs[a].reason == "QOSGrpGRES"
    assert pol.plan_log[20.0][a] == 1800.0
    assert pol.plan_log[20.0][b5] == 1800.0
    assert engine.jobs[b5].state == "PENDING"
    assert (engine.jobs[b4].start, engine.jobs[b4].placement[0][0]) == (20.0, 2)


@pytest.mark.parametrize("later", [_LATER, [_X] + _LATER], ids=["stop", "stopx"])
def test_plans_kept_or_not_the_same_jobs_start(tmp_path, later):
    """Without plans to record, backfill ends a cycle once nothing more can start
    (``backfill._Startable``): the starts are the same."""
    (tmp_path / "kept").mkdir()
    (tmp_path / "not").mkdir()
    kept, _pol, _ids = _run(tmp_path / "kept", later, until=400.0)
    plain, _pol, _ids = _run(tmp_path / "not", later, record=False, until=400.0)
    assert [(j.id, j.start, j.via) for j in kept.jobs.values()] == [(j.id, j.start, j.via) for j in plain.jobs.values()]


@pytest.mark.parametrize("stop", [False, True], ids=["plain", "assoc_limit_stop"])
def test_a_held_job_stops_co_allocation_in_its_partition_too(tmp_path, stop):
    """sched/builtin, PreemptMode=GANG, OverSubscribe=FORCE:2 with every CPU held by teamB (gang
    time-slices the rows; gpupool co-allocates after the main pass): teamA's ``-n8`` over
    its GrpTRES=cpu=4 and a later teamB ``-n2`` that fits a second row. The main pass stops the
    partition at the held job under assoc_limit_stop (from the source: select_nodes fails on
    the TRES limit at every pass), so the co-allocation gpupool tries after it does too;
    without it the teamB job shares CPUs at once."""
    subs = ["-A teamB -w n01 -n16 -t 30", "-A teamB -w n02 -n16 -t 30", "-A teamA -n8 -t 10", "-A teamB -n2 -t 10"]
    engine = _cpu_run(tmp_path, "assoc_limit_stop" if stop else "default_queue_depth=100", "cpu=4",
                      [(o, 3.0 * k) for k, o in enumerate(subs)], extra="PreemptMode=GANG",
                      parts=_ONE_PART + " OverSubscribe=FORCE:2")
    assert (engine.jobs[3].state, engine.jobs[3].reason) == ("PENDING", "AssocGrpCpuLimit")
    assert engine.jobs[4].start == (None if stop else 9.0)


_ONE_PART = "PartitionName=p Nodes=n[01-02] Default=YES MaxTime=60 State=UP"


def _cpu_run(tmp_path, params: str, grp: str, subs, parts: str = _ONE_PART, extra: str = "", nodes: int = 2,
             until: float = 200.0):
    """sched/builtin on ``nodes`` 16-CPU nodes (``_cpu_conf``), teamA limited by ``grp``
    (team_accounts), the sbatch options and submit times ``subs`` (ids from 1): the engine
    after ``until``."""
    (tmp_path / "accounts.cfg").write_text(team_accounts(grp))
    pool = slurm_pool(tmp_path, _cpu_conf(params, parts, extra, nodes))
    wls = [workload(f"j{k}", o, t, k + 1) for k, (o, t) in enumerate(subs)]
    engine = Engine(pool, wls, make_policy("slurm", pool), until=until)
    engine.run()
    return engine


def _cpu_conf(params: str, parts: str = _ONE_PART, extra: str = "", nodes: int = 2) -> str:
    """slurm.conf of sched/builtin with SchedulerParameters ``params`` on ``nodes`` 16-CPU
    nodes, limits enforced, the partition lines ``parts``."""
    return f"""ClusterName=t
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
SchedulerType=sched/builtin
SchedulerParameters={params}
{extra}
PriorityType=priority/basic
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageEnforce=associations,limits,qos
NodeName=n[01-{nodes:02d}] CPUs=16 RealMemory=64000
{parts}
"""


@pytest.mark.parametrize("params", ["default_queue_depth=100", "assoc_limit_stop"])
def test_a_job_passed_over_takes_the_reason_of_the_count_that_holds_it(tmp_path, params):
    """teamA: GrpTRES=cpu=4, GrpJobs=2. j2 waits on AssocGrpCpuLimit (3 + 2 CPUs); once a teamA
    job runs in q the job count holds it too: _schedule's pre-select test, which passes it over,
    sets AssocGrpJobsLimit (a review of this change; before it kept AssocGrpCpuLimit)."""
    parts = ("PartitionName=p Nodes=n01 Default=YES MaxTime=60 State=UP\n"
             "PartitionName=q Nodes=n02 MaxTime=60 State=UP")
    engine = _cpu_run(tmp_path, params, "cpu=4:GrpJobs=2",
                      [("-A teamA -p p -n3 -t 30", 0.0), ("-A teamA -p p -n2 -t 10", 5.0),
                       ("-A teamA -p q -n1 -t 30", 10.0)], parts=parts, nodes=2)
    assert (engine.jobs[2].state, engine.jobs[2].reason) == ("PENDING", "AssocGrpJobsLimit")
    assert engine.jobs[3].start == 10.0


def test_a_limit_reason_stays_in_a_partition_a_higher_job_failed(tmp_path):
    """assoc_limit_stop, teamA GrpJobs=1 (R runs): A waits on AssocGrpJobsLimit; from 10 s H
    (higher, ``--begin``) fails the partition. 22.05 turns only no reason or Resources into
    Priority there, so A keeps its limit's and, once H starts at 120 s, is passed over: L
    starts in that pass (a review of this change: A had become Priority, then stopped the
    partition, and L started at 180 s)."""
    subs = [("-A teamA -w n01 -n16 -t 30", 0.0), ("-A teamB -w n02 -n16 -t 2", 0.0),
            ("-A teamB -N2 --ntasks-per-node=8 -t 10 --begin=now+10", 0.0), ("-A teamA -n1 -t 10", 5.0),
            ("-A teamB -n1 -t 10", 50.0)]
    engine = _cpu_run(tmp_path, "assoc_limit_stop", "cpu=1000:GrpJobs=1", subs, nodes=3,
                      parts="PartitionName=p Nodes=n[01-03] Default=YES MaxTime=60 State=UP", until=300.0)
    assert (engine.jobs[4].state, engine.jobs[4].reason) == ("PENDING", "AssocGrpJobsLimit")
    assert engine.jobs[3].start == 120.0
    assert engine.jobs[5].start == 120.0


def test_co_allocation_stops_where_the_main_pass_held_a_job_for_the_first_time(tmp_path):
    """PreemptMode=GANG, FORCE:2, teamA GrpJobs=1 (its job runs on n02): j3 of teamA and j4 of
    teamB come together at 6 s. The main pass's select_nodes fails j3 (no limit reason yet) and
    stops the partition; co-allocation, part of that pass in slurmctld, does not take j4 then
    (a review of this change: the co-allocation pass read j3's new reason as one to pass over
    and co-allocated j4 at 6 s)."""
    subs = [("-A teamB -w n01 -n16 -t 30", 0.0), ("-A teamA -w n02 -n16 -t 30", 0.0),
            ("-A teamA -n8 -t 10", 6.0), ("-A teamB -n2 -t 10", 6.0)]
    engine = _cpu_run(tmp_path, "assoc_limit_stop", "cpu=1000:GrpJobs=1", subs, extra="PreemptMode=GANG",
                      parts="PartitionName=p Nodes=n[01-02] Default=YES MaxTime=60 State=UP OverSubscribe=FORCE:2")
    assert engine.jobs[3].reason == "AssocGrpJobsLimit"
    assert engine.jobs[4].start is not None and engine.jobs[4].start > 6.0


def test_a_qos_job_count_holds_no_later_job_of_its_qos_back(tmp_path):
    """qosx's pool with scav at GrpJobs=1 (R3 of scav runs) and no X: A of scav fails its start
    on QOSGrpJobsLimit, which 22.05 tests before the selection, where no blocking QOS is
    recorded; B5 of scav (2 GPUs, fitting gpu03 now) fails its own start on the same count and
    is planned from its own window, at the end of A's reservation (1080 s), not from A's start
    (a review of this change: 520 s on gpu03)."""
    holders = _HOLDERS[:2] + [("R3", "-A teamB --qos=scav -w gpu03 --gres=gpu:6 -t 30"), _HOLDERS[3]]
    later = [("A", "-A teamB --qos=scav --gres=gpu:4 -t 10"), ("B5", "-A teamB --qos=scav --gres=gpu:2 -t 5")]
    engine, pol, ids = _run(tmp_path, later, holders=holders,
                            edits=(("'scav':Priority=0:GrpTRES=gres/gpu=8", "'scav':Priority=0:GrpJobs=1"),))
    assert engine.jobs[ids["A"]].reason == "QOSGrpJobsLimit"
    assert pol.plan_log[20.0][ids["A"]] == 520.0
    assert pol.plan_log[20.0][ids["B5"]] == 1080.0


def test_a_test_only_job_of_a_blocked_qos_keeps_the_blocked_start(tmp_path):
    """qosx with bf_min_age_reserve=600 (every job test-only): B5 of scav fits gpu03 now but its
    QOS is blocked until A's planned start, so it keeps that start with no reservation, as
    22.05's raised start_time ("StartTime set but no backfill reservation")."""
    holders = _HOLDERS[:2] + [("R3", "-A teamB --qos=scav -w gpu03 --gres=gpu:6 -t 30"), _HOLDERS[3]]
    later = [("A", "-A teamB --qos=scav --gres=gpu:4 -t 10"), ("B5", "-A teamB --qos=scav --gres=gpu:2 -t 5")]
    min_age = ("bf_continue,assoc_limit_stop", "bf_continue,bf_min_age_reserve=600,assoc_limit_stop")
    engine, pol, ids = _run(tmp_path, later, holders=holders, edits=(min_age,))
    assert pol.plan_log[20.0][ids["A"]] == 520.0
    assert pol.plan_log[20.0][ids["B5"]] == 520.0
    assert not _reserved(pol, 20.0, ids["B5"])
    assert engine.jobs[ids["B5"]].state == "PENDING"


def test_a_partition_qos_group_limit_holds_its_partitions_later_jobs_back(tmp_path):
    """Partition p with QOS=scav (GrpTRES=gres/gpu=8, 6 of it held by R3 in p) and partition q on
    the same nodes without one: A in p fails its start on QOSGrpGRES (its partition's QOS);
    B5 in p, within the limit, is planned at A's start (qos_part_blocked_until); B4 in q starts."""
    parts = ("PartitionName=p Nodes=gpu[01-04] Default=YES MaxTime=60 State=UP",
             "PartitionName=p Nodes=gpu[01-04] Default=YES MaxTime=60 State=UP QOS=scav\n"
             "PartitionName=q Nodes=gpu[01-04] MaxTime=60 State=UP")
    holders = [(n, "-p q " + o) for n, o in _HOLDERS[:2]] + [
        ("R3", "-A teamB -w gpu03 --gres=gpu:6 -t 30"), ("R4", "-A teamB -p q -w gpu04 --gres=gpu:4 -t 30")]
    later = [("A", "-A teamB --gres=gpu:4 -t 10"), ("B5", "-A teamB --gres=gpu:2 -t 5"),
             ("B4", "-A teamB -p q --gres=gpu:2 -t 5")]
    engine, pol, ids = _run(tmp_path, later, holders=holders, edits=(parts,))
    assert engine.jobs[ids["A"]].reason == "QOSGrpGRES"
    assert pol.plan_log[20.0][ids["A"]] == 520.0
    assert pol.plan_log[20.0][ids["B5"]] == 520.0
    assert engine.jobs[ids["B5"]].state == "PENDING"
    assert (engine.jobs[ids["B4"]].start, engine.jobs[ids["B4"]].placement[0][0]) == (20.0, 2)


def test_a_requeued_job_waits_without_the_reason_it_had_before_it_ran(tmp_path):
    """assoc_limit_stop, teamA GrpJobs=2: J waited on AssocGrpJobsLimit before it started; n02
    fails at 200 s and requeues it while X1 and Y fill the count again. 22.05 cleared J's
    reason at its start, so its main pass goes to select_nodes, fails on the count and stops
    the partition: L (teamB, later) does not start in that pass (a review of this change: the
    stale reason made J look already held, and L started at 200 s)."""
    subs = [("-A teamA -w n01 -n16 -t 60", 0.0, 3000.0), ("-A teamA -w n02 -n8 -t 2", 0.0, 100.0),
            ("-A teamA -N1 -n16 -t 30", 1.0, 3000.0), ("-A teamA -N1 -n8 -t 10", 1.0, 3000.0),
            ("-A teamB -w n02 -n8 -t 60 --no-requeue", 0.0, 3000.0), ("-A teamB -w n03 -n16 -t 60", 0.0, 200.0),
            ("-A teamB -w n04 -n8 -t 60", 0.0, 3000.0), ("-A teamB -n1 -t 5", 200.0, 3000.0)]
    conf = _cpu_conf("assoc_limit_stop", "PartitionName=p Nodes=n[01-04] Default=YES MaxTime=120 State=UP",
                     nodes=4).replace("sched/builtin", "sched/backfill")
    (tmp_path / "accounts.cfg").write_text(team_accounts("cpu=1000:GrpJobs=2"))
    pool = slurm_pool(tmp_path, conf)
    wls = [workload(f"j{k}", o, t, k + 1, runtime=r) for k, (o, t, r) in enumerate(subs)]
    engine = Engine(pool, wls, make_policy("slurm", pool), until=205)
    engine.node_event("n02", "down", at=200.0)
    engine.run()
    assert engine.jobs[4].requeues == 1 and engine.jobs[4].state == "PENDING"
    assert engine.jobs[4].reason == "AssocGrpJobsLimit"
    assert (engine.jobs[8].state, engine.jobs[8].reason) == ("PENDING", "Priority")


def test_a_job_held_in_a_later_partition_counts_as_held_in_the_next(tmp_path):
    """assoc_limit_stop, J in p0,p1,p2 (p1 and p2 with partition QOS pq at GrpJobs=1, used up):
    (J,p0) fails on Resources, (J,p1) in select_nodes on QOSGrpJobsLimit, which stops p1 and
    becomes J's reason; (J,p2) is then passed over without stopping p2, so L in p3, on p2's
    node, starts at once (a review of this change: squeue's first reason, Resources, was read,
    p2 stopped and its node was withheld)."""
    parts = ("PartitionName=p0 Nodes=n01 Default=YES MaxTime=60 State=UP\n"
             "PartitionName=p1 Nodes=n02 MaxTime=60 State=UP QOS=pq\n"
             "PartitionName=p2 Nodes=n03 MaxTime=60 State=UP QOS=pq\n"
             "PartitionName=p3 Nodes=n03 MaxTime=60 State=UP")
    (tmp_path / "accounts.cfg").write_text(_ACCOUNTS.format(jobs="").replace("'scav':Priority=0:GrpTRES=gres/gpu=8",
                                                                             "'pq':Priority=0:GrpJobs=1")
                                           .replace("QOS='normal,scav'", "QOS='normal,pq'"))
    pool = slurm_pool(tmp_path, _cpu_conf("assoc_limit_stop", nodes=4, parts=parts))
    subs = ["-A teamB -p p0 -w n01 -n16 -t 30", "-A teamB -p p1 -w n02 -n8 -t 30",
            "-A teamA -p p0,p1,p2 -N1 -n16 -t 10", "-A teamB -p p3 -n1 -t 5"]
    wls = [workload(f"j{k}", o, t, k + 1) for k, (o, t) in enumerate(zip(subs, (0.0, 0.0, 1.0, 2.0)))]
    engine = Engine(pool, wls, make_policy("slurm", pool), until=10)
    engine.run()
    assert engine.jobs[3].state == "PENDING"
    assert engine.jobs[4].start == 2.0

