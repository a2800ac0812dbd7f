"""bf_max_job_test bounds how far a backfill cycle that records no plans looks for a record
that might still start (``backfill._Startable``'s ``reach``).

A cycle without plans to record ends once no later record can start now. On a deep queue the
latest record that might start often lies beyond the bf_max_job_test-th record tested, where
the cycle never gets: it then went on testing and reserving for records that start nothing.
Until the next start or preemption the records the cycle will certainly count against the limit
are known in advance, so the last one it can test bounds the search. These tests hold the
bounded cycle to the full one (the one that records plans, which never prunes): the same jobs
start, at the same times, on the same GPUs, with every limit, array and license test that
decides what counts against bf_max_job_test.
"""
from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy

from tests.unit.sbatch_plans import slurm_pool, workloads

_CONF = """ClusterName=t
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=30,sched_interval=60,bf_resolution=60{params}
PriorityType=priority/multifactor
PriorityWeightAge=1000
PriorityWeightQOS=10000
PreemptType=preempt/qos
PreemptMode=REQUEUE
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageEnforce=associations,limits,qos
AccountingStorageTRES=gres/gpu
GresTypes=gpu
Licenses=lic:2
NodeName=n[1-4] CPUs=16 RealMemory=64000 Gres=gpu:8
PartitionName=p Nodes=n[1-4] Default=YES MaxTime=60 State=UP
"""

#: teamA is held to 12 GPUs at once; QOS high preempts scav, which is held to 8
_ACCOUNTS = """QOS - 'normal':Priority=0
QOS - 'scav':Priority=0:GrpTRES=gres/gpu=8
QOS - 'high':Priority=100:Preempt='scav':PreemptMode='REQUEUE'
Cluster - 't':Fairshare=1:QOS='normal'
Parent - 'root'
Account - 'teamA':Fairshare=1:GrpTRES=gres/gpu=12:QOS='normal,scav,high':DefaultQOS='normal'
Account - 'teamB':Fairshare=1:QOS='normal,scav,high':DefaultQOS='normal'
Parent - 'teamA'
User - 'root':DefaultAccount='teamA':Fairshare=1
Parent - 'teamB'
User - 'root':DefaultAccount='teamA':Fairshare=1
"""

#: the shapes the random queues draw from: whole-node and multi-node jobs that wait behind the
#: holders, small ones that backfill, jobs a group limit or a license holds, arrays (whose
#: reservations count against bf_max_job_array_resv), preemptors and preemptable ones
_SHAPES = [
    "-A teamB -N2 --gres=gpu:8 -t 20",
    "-A teamB --gres=gpu:8 -t 30",
    "-A teamB --gres=gpu:1 -t 5",
    "-A teamB --gres=gpu:2 -t 10",
    "-A teamA --gres=gpu:4 -t 10",
    "-A teamA --gres=gpu:1 -t 3",
    "-A teamB -n4 -t 7",
    "-A teamB -L lic:1 --gres=gpu:1 -t 5",
    "-A teamB --array=1-3 --gres=gpu:2 -t 5",
    "-A teamB --array=1-4%2 -N2 --gres=gpu:8 -t 10",
    "-A teamB --qos=scav --gres=gpu:4 -t 30",
    "-A teamB --qos=high --gres=gpu:8 -t 10",
    # a walk for GPUs per node (two nodes, 8 GPUs on teamA's limit): its limits test before a
    # reservation leaves its GPUs on the job for the next main pass (``walk_gres``)
    "-A teamA -n2 -c16 --gres=gpu:4 -t 10",
    "-A teamA --gres=gpu:8 -t 60",
    "-A teamB -c16 -t 10",
    "-A teamB -n1 -t 5",
]


def _run(tmp_path, params: str, subs, record: bool, until: float = 2400.0, limits: bool = True):
    """(policy, job table) of the submissions ``subs`` ((shape index, submit time, runtime))
    under ``params`` added to SchedulerParameters. ``limits`` False: no limit is enforced and
    the cluster has no licenses (a ``-L`` job is refused at submit), so that only starts and
    preemptions change which records a cycle counts (``backfill._Budget``'s sums)."""
    (tmp_path / "accounts.cfg").write_text(_ACCOUNTS)
    conf = _CONF.format(params=params)
    if not limits:
        conf = conf.replace("AccountingStorageEnforce=associations,limits,qos\n", "").replace("Licenses=lic:2\n", "")
    pool = slurm_pool(tmp_path, conf)
    wls = []
    for k, (shape, at, runtime) in enumerate(subs):
        wls += workloads(f"j{k}", _SHAPES[shape], float(at), len(wls) + 1, runtime=float(runtime))
    pol = make_policy("slurm", pool, {"record": record})
    out = Engine(pool, wls, pol, check=True, until=until).run()
    return pol, sorted((j.id, j.state, j.first_start, j.start, j.end, j.placement, j.requeues, j.reason, j.via,
                        j.preemptions) for j in out.jobs)


#: four holders take every GPU until 600 s (and n4 until 900 s); then, at 10 s, six jobs that
#: want two whole nodes and one small job S that fits n4's free CPUs now
_HELD = [(1, 0, 600), (1, 0, 600), (1, 0, 600), (1, 0, 900)]
_DEEP = _HELD + [(0, 10, 1000)] * 6 + [(6, 11, 300)]


def test_a_record_past_the_last_test_no_longer_keeps_the_cycle_going(tmp_path):
    # bf_max_job_test=3 (and a map large enough not to end the cycle first): the cycle at 30 s
    # tests three of the two-node jobs and stops; S, the only record that might start, lies
    # beyond them, so the bounded cycle ends at once
    params = ",bf_max_job_test=3,bf_node_space_size=100"
    full, table = _run(tmp_path, params, _DEEP, True, until=31.0)
    bounded, bounded_table = _run(tmp_path, params, _DEEP, False, until=31.0)
    assert bounded_table == table
    s = table[-1][0]  # S: the last id
    # the full cycle plans three two-node jobs (reserving for nothing that starts), not S
    assert full.planned == {5: 1800.0, 6: 1800.0, 7: 3000.0}
    assert bounded.planned == {}
    assert table[-1][1] == "PENDING" and s == 11


def test_a_record_within_reach_still_starts(tmp_path):
    # bf_max_job_test=7 reaches S, the seventh record: both cycles start it (n4's CPUs are
    # free now), after planning the six two-node jobs
    params = ",bf_max_job_test=7,bf_node_space_size=100"
    full, table = _run(tmp_path, params, _DEEP, True, until=31.0)
    _bounded, bounded_table = _run(tmp_path, params, _DEEP, False, until=31.0)
    assert bounded_table == table
    assert (table[-1][1], table[-1][8]) == ("RUNNING", "SchedBackfill")
    assert len(full.planned) == 6


#: teamA holds 8 of its 12 GPUs on n1, n2-n4 have no CPU free until 600 s; at 10 s W walks for
#: 4 GPUs per node over two nodes (8 GPUs: over teamA's limit once selected); then S, which
#: fits n1's free CPUs now, at ``s_at``
def _walk_then_small(s_at: int) -> list:
    return [(13, 0, 3000), (14, 0, 600), (14, 0, 600), (14, 0, 600), (12, 10, 100), (15, s_at, 100)]


def test_a_walk_for_gpus_per_node_is_tested_though_nothing_after_it_starts(tmp_path):
    # W is the only record bf_max_job_test=1 reaches (S lies beyond it). The full cycle at 30 s
    # tests W before its reservation, which leaves its 8 GPUs on it; the main pass at 60 s
    # then reads W's failed selection as AssocGrpGRES, which holds no partition back, and
    # starts S. A cycle that skipped W left it at Resources, holding p back (found by a review)
    params = ",bf_max_job_test=1"
    _full, table = _run(tmp_path, params, _walk_then_small(11), True, until=400.0)
    _bounded, bounded_table = _run(tmp_path, params, _walk_then_small(11), False, until=400.0)
    assert bounded_table == table
    w, s = table[4], table[5]
    assert w[1] == "PENDING" and w[7] == "AssocGrpGRES"
    assert (s[3], s[8]) == (60.0, "SchedMain")


def test_a_walk_for_gpus_per_node_before_the_cycles_last_start_is_tested_too(tmp_path):
    # the same with S arriving at 45 s, and the default bf_max_job_test: the cycle at 30 s has
    # nothing after W that can start (an older form of the early end skipped W there too), so
    # S starts in the main pass at its submission
    _full, table = _run(tmp_path, "", _walk_then_small(45), True, until=400.0)
    _bounded, bounded_table = _run(tmp_path, "", _walk_then_small(45), False, until=400.0)
    assert bounded_table == table
    assert (table[5][3], table[5][8]) == (45.0, "SchedMain")


_PARAMS = st.sampled_from([
    ",bf_max_job_test=1", ",bf_max_job_test=2", ",bf_max_job_test=3", ",bf_max_job_test=5",
    ",bf_max_job_test=8", ",bf_max_job_test=3,bf_max_job_user=2", ",bf_max_job_test=4,assoc_limit_stop",
    ",bf_max_job_test=2,bf_max_job_array_resv=1", ",bf_max_job_test=4,bf_node_space_size=3",
    ",bf_max_job_test=3,bf_node_space_size=100",
])
_SUBS = st.lists(st.tuples(st.integers(0, len(_SHAPES) - 1), st.integers(0, 900), st.integers(30, 2000)),
                 min_size=4, max_size=22)


#: in the cycle at 630 s, with bf_max_job_test=3, the second record (job 23, ``-L lic:1``)
#: starts and takes the last free license: the third (job 15, ``-L lic:1``) is then passed
#: over uncounted, so the fourth (job 24) is tested and starts too. The bound drawn before the
#: start ended at job 15; kept after it, the cycle ended there (an early version of the bound
#: did so, and job 24 started a cycle later)
_LICENSE_FREED_A_TEST = [(1, 496, 827), (7, 87, 273), (8, 415, 165), (11, 424, 1359), (10, 151, 244),
                         (2, 399, 882), (6, 150, 1977), (0, 376, 1987), (7, 209, 1491), (5, 363, 1736),
                         (10, 339, 780), (3, 496, 1046), (11, 244, 1240), (0, 876, 1067), (0, 77, 986),
                         (5, 283, 300), (7, 164, 1099), (5, 245, 1096), (5, 325, 853), (3, 298, 195)]


@settings(max_examples=60, deadline=None)
@given(params=_PARAMS, subs=_SUBS, limits=st.booleans())
@example(params=",bf_max_job_test=3,bf_node_space_size=100", subs=_LICENSE_FREED_A_TEST, limits=True)
def test_bounded_cycles_schedule_as_the_full_ones(tmp_path_factory, params, subs, limits):
    tmp = tmp_path_factory.mktemp("reach")
    _full, table = _run(tmp, params, _HELD + subs, True, limits=limits)
    _bounded, bounded_table = _run(tmp, params, _HELD + subs, False, limits=limits)
    assert bounded_table == table


@settings(max_examples=300, deadline=None)
@given(jobs=st.lists(st.tuples(st.integers(1, 12), st.booleans()), min_size=1, max_size=40),
       steps=st.lists(st.tuples(st.integers(0, 45), st.integers(0, 12), st.integers(0, 12), st.booleans()),
                      max_size=12),
       before=st.sets(st.integers(1, 12), max_size=3))
def test_summed_counts_draw_the_bound_a_fresh_count_draws(jobs, steps, before):
    """``_Budget`` sums the counts once and corrects them for the jobs started or preempting
    since; the bound must be the one a count of every record at that moment gives. ``jobs``:
    per record, its job id (a job may have several records, one per partition) and whether its
    other tests let it count; ``steps``: (index, tests left, a job that starts or preempts);
    ``before``: jobs started before the cycle's first bound."""
    from types import SimpleNamespace

    from gpupool.policy.slurm.backfill import _Budget

    records = [SimpleNamespace(job=SimpleNamespace(id=jid), ok=ok) for jid, ok in jobs]
    started: dict[int, object] = dict.fromkeys(before)
    preempting: set[int] = set()

    def counted(rec) -> bool:
        return rec.ok and rec.job.id not in started and rec.job.id not in preempting

    summed = _Budget(records, counted, started, preempting, True)
    for index, left, jid, preempts in steps:
        index = min(index, len(records) - 1)
        fresh = _Budget(records, counted, started, preempting, False)
        assert summed.reach(index, left) == fresh.reach(index, left)
        if preempts:
            preempting.add(jid)
        else:
            started[jid] = None
