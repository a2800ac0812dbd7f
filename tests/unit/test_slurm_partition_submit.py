"""Jobs listed in several partitions, and partitions that take no submissions (probe p132).

Probe p132 (2026-12-05, a real 22.05.8, the seed pool's four 8-GPU nodes split into p =
gpu01-02 and q = gpu03-04, both PriorityTier=1, q with MaxTime=00:05:00; slurmdbd):

- prio: all four nodes held; H (``-p q``, the highest priority) waiting for Resources; then J1
  ``-p p,q`` and J2 ``-p q,p``. Both showed Priority throughout: slurmctld keeps one record per
  job, and the main pass's last test of it (J1 in q, behind H) sets what squeue shows.
- state: p DOWN, q INACTIVE. ``-p q`` was refused ("Required partition not available (inactive
  or drain)"); ``-p p,q`` and ``-p q,p`` were queued as ``p`` and waited with PartitionDown.
- drain: with p DRAIN, ``-p p`` was refused; ``-p p,q`` and ``-p q,p`` were queued as ``q``;
  with p's Alternate=q, ``-p p`` and ``-p p,q`` were queued as ``q``; once q was INACTIVE too,
  both were refused. A job queued in p before it was drained ran there (SchedMain).
"""
from __future__ import annotations

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.model.slurm import Partition
from gpupool.policy.slurm import limits
from gpupool.policy.slurm.part_submit import MSG_PART_NOT_AVAIL, submit_partitions
from tests.unit.sbatch_plans import NODES_EPL_CONF, slurm_pool, workload

_CONF = """ClusterName=t
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerGPU=1000
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=10,bf_resolution=60,bf_continue
PriorityType=priority/basic
GresTypes=gpu
NodeName=gpu[01-04] CPUs=128 Sockets=2 CoresPerSocket=32 ThreadsPerCore=2 RealMemory=1000000 Gres=gpu:8
PartitionName=p Nodes=gpu[01-02] Default=YES MaxTime=60 PriorityTier=1 State={p}{p_extra}
PartitionName=q Nodes=gpu[03-04] MaxTime=5 PriorityTier={q_tier} State={q}{q_extra}
"""

_FILL = [("S1", "-p p -w gpu01 --gres=gpu:8 -t 20"), ("S2", "-p p -w gpu02 --gres=gpu:8 -t 30"),
         ("R3", "-p q -w gpu03 --gres=gpu:8 -t 5"), ("R4", "-p q -w gpu04 --gres=gpu:8 -t 5")]


def _run(tmp_path, jobs, *, p="UP", q="UP", p_extra="", q_tier=1, until=60.0, conf_extra="", q_extra=""):
    """``jobs`` (name, sbatch options) submitted a second apart from 0 s (ids from 1): the engine
    and name -> job."""
    pool = slurm_pool(tmp_path, _CONF.format(p=p, q=q, p_extra=p_extra, q_tier=q_tier, q_extra=q_extra) + conf_extra)
    wls = [workload(n, o, float(k), k + 1, runtime=3000.0) for k, (n, o) in enumerate(jobs)]
    engine = Engine(pool, wls, make_policy("slurm", pool), until=until)
    engine.run()
    return engine, {n: engine.jobs[k + 1] for k, (n, _o) in enumerate(jobs)}


def test_a_job_in_two_partitions_shows_its_last_tests_reason(tmp_path):
    """p132 prio: J1 waits for Resources in p, then behind H in q (Priority): squeue shows the
    last. J2 (q first) waits behind H in q, then in p, failed by J1: Priority too."""
    later = [("H", "-p q --gres=gpu:8 -t 4 --nice=-100"), ("J1", "-p p,q --gres=gpu:8 -t 4"),
             ("J2", "-p q,p --gres=gpu:8 -t 4")]
    _engine, jobs = _run(tmp_path, _FILL + later)
    assert jobs["H"].reason == "Resources"
    assert (jobs["J1"].state, jobs["J1"].reason) == ("PENDING", "Priority")
    assert (jobs["J2"].state, jobs["J2"].reason) == ("PENDING", "Priority")


def test_a_failed_partition_keeps_a_reason_set_earlier_in_the_pass(tmp_path):
    """J1 waits for the one license in p's test (Licenses), then reaches q, failed by H: only no
    reason or Resources gives way to Priority, so Licenses stays."""
    later = [("L", "-p p -w gpu01 -L lic:1 -t 4"), ("H", "-p q --gres=gpu:8 -t 4 --nice=-100"),
             ("J1", "-p p,q --gres=gpu:8 -L lic:1 -t 4")]
    _engine, jobs = _run(tmp_path, _FILL[1:] + later, conf_extra="Licenses=lic:1\n")
    assert jobs["L"].state == "RUNNING"  # on gpu01 (S1 left out), holding the license
    assert jobs["J1"].reason == "Licenses"


def test_no_partition_can_run_the_job_the_last_ones_reason_shows(tmp_path):
    """p DOWN, q's MaxTime (5 min) under the job's 10: the reason is the last partition's in
    the list (PartitionDown for p, PartitionTimeLimit for q). A DOWN partition's own size and
    time limits are not tested (``_part_access_check`` tests them only where the partition
    schedules jobs): its state shows."""
    jobs = [("A", "-p p,q --gres=gpu:1 -t 10"), ("B", "-p q,p --gres=gpu:1 -t 10"),
            ("C", "-p p --gres=gpu:1 -t 61")]
    _engine, got = _run(tmp_path, jobs, p="DOWN")
    assert got["A"].reason == "PartitionTimeLimit"
    assert got["B"].reason == "PartitionDown"
    assert got["C"].reason == "PartitionDown"


def test_a_partition_that_cannot_run_the_job_sets_its_reason_at_every_queue_build(tmp_path):
    """q DOWN; S1, S2 fill p and H (``-p p``, the highest) waits there. J ``-p p,q``: the queue
    build tests p (it can) then q (PartitionDown), and the main pass, p failed by H, keeps
    that reason; K ``-p q,p``: p's test clears q's reason, which the failed p turns into
    Priority, and which a backfill cycle, building its own queue and setting no Priority,
    leaves cleared (None). At every pass, the queue's cached records notwithstanding."""
    jobs = _FILL[:2] + [("H", "-p p --gres=gpu:8 -t 4 --nice=-100"), ("J", "-p p,q --gres=gpu:8 -t 4"),
                        ("K", "-p q,p --gres=gpu:8 -t 4")]
    pool = slurm_pool(tmp_path, _CONF.format(p="UP", q="DOWN", p_extra="", q_tier=1, q_extra=""))
    wls = [workload(n, o, float(k), k + 1) for k, (n, o) in enumerate(jobs)]
    engine = Engine(pool, wls, make_policy("slurm", pool), until=200.0)
    h, j, k = engine.jobs[3], engine.jobs[4], engine.jobs[5]
    seen = []
    for t in (4.5, 9.5, 10.5, 59.5, 119.5, 120.5):
        engine.run_until(t)
        seen.append((t, h.reason, j.reason, k.reason))
    assert seen == [(4.5, "Resources", "PartitionDown", "Priority"),  # the main pass at K's submission
                    (9.5, "Resources", "PartitionDown", "Priority"),
                    (10.5, "Resources", "PartitionDown", ""),  # the backfill cycle at 10 s
                    (59.5, "Resources", "PartitionDown", ""),
                    (119.5, "Resources", "PartitionDown", ""),  # (main pass and backfill at 60 s)
                    (120.5, "Resources", "PartitionDown", "")]


def test_an_account_a_down_partition_refuses_under_enforce_part_limits(tmp_path):
    """EnforcePartLimits=ANY: ``_part_access_check`` tests q's AllowAccounts whatever q's state,
    and its refusal reads PartitionConfig, which p's test does not clear (p failed by H)."""
    jobs = _FILL[:2] + [("H", "-p p --gres=gpu:8 -t 4 --nice=-100"), ("J", "-p p,q --gres=gpu:8 -t 4")]
    _engine, got = _run(tmp_path, jobs, q="DOWN", q_extra=" AllowAccounts=other",
                        conf_extra="EnforcePartLimits=ANY\n")
    assert got["J"].reason == "PartitionConfig"
    _engine, got = _run(tmp_path, jobs, q="DOWN", q_extra=" AllowAccounts=other")
    assert got["J"].reason == "PartitionDown"  # without it, the state comes first


def test_the_list_is_read_in_priority_tier_order(tmp_path):
    """q of tier 2 comes first whatever the order asked: its reason, then p's, shows p's."""
    jobs = [("A", "-p p,q --gres=gpu:1 -t 10"), ("B", "-p q,p --gres=gpu:1 -t 10")]
    _engine, got = _run(tmp_path, jobs, p="DOWN", q_tier=2)
    assert got["A"].reason == got["B"].reason == "PartitionDown"


def test_inactive_and_drained_partitions_refuse_or_drop_at_submit(tmp_path):
    """p132 state: p DOWN, q INACTIVE."""
    jobs = [("J1", "-p p,q --gres=gpu:8 -t 4"), ("J2", "-p q,p --gres=gpu:8 -t 4"),
            ("J3", "-p p --gres=gpu:8 -t 4"), ("J4", "-p q --gres=gpu:8 -t 4")]
    _engine, got = _run(tmp_path, jobs, p="DOWN", q="INACTIVE")
    for name in ("J1", "J2", "J3"):
        assert (got[name].state, got[name].reason, got[name].wl.partition) == ("PENDING", "PartitionDown", "p")
    assert (got["J4"].state, got["J4"].reason) == ("REJECTED", MSG_PART_NOT_AVAIL)


def test_a_drained_partition_gives_way_to_the_other_one_in_the_list(tmp_path):
    """p132 drain: p DRAIN; ``-p p,q`` and ``-p q,p`` run in q, ``-p p`` is refused."""
    jobs = [("J1", "-p p --gres=gpu:1 -t 4"), ("J2", "-p p,q --gres=gpu:1 -t 4"),
            ("J2b", "-p q,p --gres=gpu:1 -t 4")]
    _engine, got = _run(tmp_path, jobs, p="DRAIN")
    assert (got["J1"].state, got["J1"].reason) == ("REJECTED", MSG_PART_NOT_AVAIL)
    for name in ("J2", "J2b"):
        assert got[name].state == "RUNNING" and got[name].wl.partition == "q"
        assert got[name].placement[0][0] in (2, 3)


def test_an_alternate_takes_the_jobs_of_a_drained_partition(tmp_path):
    """p132 drain, p with Alternate=q: ``-p p`` and ``-p p,q`` (listed once) run in q, and so
    does a job that names no partition (p is the default)."""
    jobs = [("J3", "-p p --gres=gpu:1 -t 4"), ("J4", "-p p,q --gres=gpu:1 -t 4"), ("D", "--gres=gpu:1 -t 4")]
    _engine, got = _run(tmp_path, jobs, p="DRAIN", p_extra=" Alternate=q")
    for name in ("J3", "J4", "D"):
        assert got[name].state == "RUNNING" and got[name].wl.partition == "q", name


def _parts(**states) -> dict[str, Partition]:
    out = {}
    for name, spec in states.items():
        state, _, alt = spec.partition(">")
        out[name] = Partition(name, ("n1",), state=state, extra={"Alternate": alt} if alt else {})
    return out


@pytest.mark.parametrize(("asked", "parts", "default", "expected"), [
    ("p", {"p": "UP"}, "p", ("p", None)),
    ("p", {"p": "DOWN"}, "p", ("p", None)),  # DOWN takes submissions
    ("p", {"p": "DRAIN"}, "p", ("p", MSG_PART_NOT_AVAIL)),
    ("p", {"p": "INACTIVE>q", "q": "UP"}, "p", ("q", None)),
    ("p", {"p": "DRAIN>q", "q": "DRAIN>r", "r": "DOWN"}, "p", ("r", None)),  # followed on
    ("p", {"p": "DRAIN>q", "q": "DRAIN>p"}, "p", ("p", MSG_PART_NOT_AVAIL)),  # back at p
    ("p", {"p": "DRAIN>q", "q": "DRAIN>r", "r": "DRAIN>q"}, "p", ("p", MSG_PART_NOT_AVAIL)),
    ("p", {"p": "DRAIN>nope"}, "p", ("p", limits.MSG_PARTITION)),
    ("p,q", {"p": "DRAIN", "q": "UP"}, "p", ("q", None)),
    ("q,p", {"p": "INACTIVE", "q": "UP"}, "p", ("q", None)),
    ("p,q", {"p": "DRAIN>q", "q": "UP"}, "p", ("q", None)),  # once
    ("p,q,r", {"p": "UP", "q": "DRAIN>r", "r": "UP"}, "p", ("p,r", None)),
    ("p,q", {"p": "DRAIN", "q": "INACTIVE"}, "p", ("p,q", MSG_PART_NOT_AVAIL)),
    ("p,x", {"p": "DRAIN"}, "p", ("p,x", None)),  # an unknown name: the submit check's refusal
    (None, {"p": "DRAIN>q", "q": "UP"}, "p", ("q", None)),  # the default partition
    (None, {"p": "DRAIN"}, "p", (None, MSG_PART_NOT_AVAIL)),
    (None, {"p": "UP"}, "p", (None, None)),
])
def test_submit_partitions(asked, parts, default, expected):
    assert submit_partitions(asked, _parts(**parts), default) == expected


def test_an_array_too_large_is_refused_for_that_first(tmp_path):
    """slurmctld tests the array's spec before the partitions (``validate_job_create_req``)."""
    jobs = [("A", "-p p --gres=gpu:1 -t 4 --array=1001"), ("B", "-p p --gres=gpu:1 -t 4 --array=3")]
    _engine, got = _run(tmp_path, jobs, p="DRAIN")
    assert (got["A"].state, got["A"].reason) == ("REJECTED", limits.MSG_ARRAY)
    assert (got["B"].state, got["B"].reason) == ("REJECTED", MSG_PART_NOT_AVAIL)


def test_the_live_daemons_submit_check_refuses_alike(tmp_path):
    from gpupool.policy.slurm.submit_check import submit_rejection

    pool = slurm_pool(tmp_path, _CONF.format(p="DRAIN", q="UP", p_extra="", q_tier=1, q_extra=""))
    assert submit_rejection(pool, workload("A", "-p p --gres=gpu:1 -t 4", 0.0, 1)) == MSG_PART_NOT_AVAIL
    assert submit_rejection(pool, workload("B", "-p p,q --gres=gpu:1 -t 4", 0.0, 2)) is None
    assert submit_rejection(pool, workload("C", "-p p --gres=gpu:1 -t 4 --array=1001", 0.0, 3)) == limits.MSG_ARRAY


#: four 8-GPU nodes under EnforcePartLimits={epl}, before their partitions
_NODES_EPL = NODES_EPL_CONF
_TIERED = _NODES_EPL + """PartitionName=p Nodes=gpu[01-04] Default=YES MaxTime=60 PriorityTier=1 State=UP
PartitionName=q Nodes=gpu[03-04] MaxTime=3 PriorityTier={q_tier} State=UP
"""


@pytest.mark.parametrize(("epl", "q_tier", "expected"), [
    # probe p134: p = gpu[01-04] tier 1, q = gpu[03-04] tier 2, MaxTime 3 minutes
    ("NO", 2, {"J1": "q,p", "J2": "q,p", "J3": "p,q", "J4": "p,q", "J5": "q,p", "J6": "q,p"}),
    ("ANY", 2, {"J1": "q,p", "J2": "q,p", "J3": "p,q", "J4": "p,q", "J5": "p,q", "J6": "p,q"}),
    ("ALL", 2, {"J1": "p,q", "J2": "p,q"}),  # (J3-J6 refused at submit under ALL)
    # probe p132: equal tiers under ALL, the last as submitted first
    ("ALL", 1, {"J1": "q,p", "J2": "p,q"}),
])
def test_the_pending_partition_text_follows_the_submit_time_test(tmp_path, epl, q_tier, expected):
    pool = slurm_pool(tmp_path, _TIERED.format(epl=epl, q_tier=q_tier))
    jobs = [("S1", "-p p -w gpu01 --gres=gpu:8 -t 20"), ("S2", "-p p -w gpu02 --gres=gpu:8 -t 20"),
            ("S3", "-p p -w gpu03 --gres=gpu:8 -t 20"), ("S4", "-p p -w gpu04 --gres=gpu:8 -t 20"),
            ("J1", "-p p,q --gres=gpu:8 -t 2"), ("J2", "-p q,p --gres=gpu:8 -t 2"),
            ("J3", "-p p,q -N3 --gres=gpu:8 -t 2"), ("J4", "-p q,p -N3 --gres=gpu:8 -t 2"),
            ("J5", "-p p,q --gres=gpu:8 -t 5"), ("J6", "-p q,p --gres=gpu:8 -t 5")]
    wls = [workload(n, o, float(k), k + 1) for k, (n, o) in enumerate(jobs)]
    pol = make_policy("slurm", pool)
    engine = Engine(pool, wls, pol, until=60.0)
    engine.run()
    got = {engine.jobs[k + 1].wl.name: pol.pending_partition_text(engine.jobs[k + 1])
           for k in range(4, len(jobs)) if engine.jobs[k + 1].state == "PENDING"}
    assert got == expected
    assert engine.jobs[1].wl.partition == "p"  # a job of one partition: as given


@pytest.mark.parametrize(("epl", "p_state", "q_state", "asked", "expected"), [
    # the submit-time test ends in an error (a DOWN partition where it stops): the text stays
    # as submitted (``job_allocate`` returns before ``rebuild_job_part_list``); a review of
    # finding 85, from the source
    ("ALL", "DOWN", "UP", "q,p", "q,p"),  # p, the last in tier order, DOWN
    ("ALL", "UP", "DOWN", "q,p", "p,q"),  # the last, p, is UP: it comes first
    ("NO", "UP", "DOWN", "p,q", "p,q"),  # q, the first in tier order, DOWN: stops there in error
    ("ANY", "UP", "DOWN", "q,p", "p,q"),  # under ANY a DOWN q is passed over
    ("ANY", "DOWN", "DOWN", "q,p", "q,p"),  # none: as submitted
])
def test_a_submit_time_test_ending_in_error_keeps_the_text_as_submitted(tmp_path, epl, p_state, q_state, asked,
                                                                          expected):
    conf = _TIERED.format(epl=epl, q_tier=2).replace("PriorityTier=1 State=UP", f"PriorityTier=1 State={p_state}")
    conf = conf.replace("PriorityTier=2 State=UP", f"PriorityTier=2 State={q_state}")
    pool = slurm_pool(tmp_path, conf)
    jobs = [("S1", "-p p -w gpu01 --gres=gpu:8 -t 20"), ("J", f"-p {asked} --gres=gpu:8 -t 2")]
    pol = make_policy("slurm", pool)
    engine = Engine(pool, [workload(n, o, float(k), k + 1) for k, (n, o) in enumerate(jobs)], pol, until=30.0)
    engine.run()
    # fixed at the job's first queue build, its submission, whether it then starts or waits
    assert pol.pending_partition_text(engine.jobs[2]) == expected


def test_under_all_the_node_count_comes_before_the_time_limit(tmp_path):
    """``_part_access_check`` tests a partition's node count before its MaxTime; a DOWN
    partition's neither (it tests them only where the partition schedules jobs)."""
    from gpupool.policy.slurm.submit_check import submit_rejection

    pool = slurm_pool(tmp_path, _TIERED.format(epl="ALL", q_tier=2))
    assert submit_rejection(pool, workload("A", "-p p,q -N3 --gres=gpu:1 -t 5", 0.0, 1)) == limits.MSG_NODE_COUNT
    down = slurm_pool(tmp_path, _TIERED.format(epl="ALL", q_tier=2).replace("PriorityTier=2 State=UP",
                                                                            "PriorityTier=2 State=DOWN"))
    assert submit_rejection(down, workload("B", "-p p,q -N3 --gres=gpu:1 -t 2", 0.0, 2)) is None


#: the probes' pool (p135, p136): four 8-GPU nodes all in p, UP, MaxTime 3 minutes; the
#: DOWN partitions follow
_UP_P = _NODES_EPL + "PartitionName=p Nodes=gpu[01-04] Default=YES DefaultTime=1 MaxTime=3 PriorityTier=1 State=UP\n"
_DOWN_LIMITS = _UP_P + "PartitionName=d Nodes=gpu[01-02] DefaultTime=1 MaxTime=1 MaxNodes=1 PriorityTier=1 State=DOWN\n"

_TIME = "Requested time limit is invalid (missing or exceeds some limit)"
_COUNT = "Node count specification invalid"
_CONFIG = "Requested partition configuration not available now"
#: probe p135 (2026-12-06, a real 22.05.8; every node held, each job --gres=gpu:8): sbatch's
#: refusal, or None where the job was queued, per EnforcePartLimits
_P135 = {
    "-p d -t 5": {"ALL": _TIME, "ANY": _TIME, "NO": None},
    "-p p,d -t 2": {"ALL": None, "ANY": None, "NO": None},
    "-p p,d -N2 -t 1": {"ALL": _CONFIG, "ANY": None, "NO": None},
    "-p d -N2 -t 1": {"ALL": _COUNT, "ANY": _COUNT, "NO": None},
    "-p d -t 1": {"ALL": None, "ANY": None, "NO": None},
    "-p p,d -t 5": {"ALL": _TIME, "ANY": _TIME, "NO": None},
    "-p d,p -t 2": {"ALL": None, "ANY": None, "NO": None},
    "-p d,p -N2 -t 1": {"ALL": _CONFIG, "ANY": None, "NO": None},
    "-p d -N3 -t 1": {"ALL": _COUNT, "ANY": _COUNT, "NO": None},
    "-p p,d -N3 -t 1": {"ALL": _CONFIG, "ANY": None, "NO": None},
}


@pytest.mark.parametrize("epl", ["ALL", "ANY", "NO"])
def test_a_down_partitions_limits_at_submit(tmp_path, epl):
    """Probe p135: a DOWN partition's own limits are not tested per partition
    (``_part_access_check`` tests them only where the partition schedules jobs), but the
    list's widest limits are (``_valid_job_part``: d alone, MaxTime=1 and MaxNodes=1, refuses
    ``-t 5`` and ``-N2``; beside p, MaxTime=3, ``-t 2`` passes), and under ALL the DOWN
    partition's select test refuses node counts its MaxNodes leaves no room for ("Requested
    partition configuration not available now"). Before: gpupool tested d's limits as any
    partition's, refusing ``-p p,d -t 2`` with the time message and ``-p p,d -N2`` with the
    node count one."""
    from gpupool.policy.slurm.submit_check import submit_rejection

    pool = slurm_pool(tmp_path, _DOWN_LIMITS.format(epl=epl))
    got = {o: submit_rejection(pool, workload(f"J{k}", o + " --gres=gpu:8", 0.0, k + 1))
           for k, o in enumerate(_P135)}
    assert got == {o: answers[epl] for o, answers in _P135.items()}


def test_time_min_is_held_against_the_lists_longest_max_time(tmp_path):
    """``_valid_job_part`` tests ``--time-min`` against the largest MaxTime of the job's
    partitions (here p's 3 minutes beside d's 1), not the first one's (read from the 22.05.8
    source, not probed; before, d's limit refused A)."""
    from gpupool.policy.slurm.submit_check import submit_rejection

    pool = slurm_pool(tmp_path, _DOWN_LIMITS.format(epl="ALL"))
    assert submit_rejection(pool, workload("A", "-p d,p --time-min=2 -t 3 --gres=gpu:8", 0.0, 1)) is None
    assert submit_rejection(pool, workload("B", "-p d,p --time-min=4 --gres=gpu:8", 0.0, 2)) == limits.MSG_TIME_MIN


#: probe p135 under EnforcePartLimits=NO, about 80 s after the submissions (a main pass and
#: a queue build later; every node still held): each job's reason and Partition text ("":
#: squeue's None)
_P135_NO_LATE = {
    "-p d -t 5": ("PartitionDown", "d"), "-p p,d -t 2": ("PartitionDown", "p,d"),
    "-p p,d -N2 -t 1": ("PartitionDown", "p,d"), "-p d -N2 -t 1": ("PartitionDown", "d"),
    "-p d -t 1": ("PartitionDown", "d"), "-p p,d -t 5": ("PartitionDown", "p,d"), "-p d,p -t 2": ("", "d,p"),
    "-p d,p -N2 -t 1": ("", "p,d"), "-p d -N3 -t 1": ("PartitionDown", "d"),
    "-p p,d -N3 -t 1": ("PartitionDown", "p,d"),
}


def test_under_no_a_partition_leaving_no_node_count_is_passed_over_in_the_pending_text(tmp_path):
    """Probe p135 under EnforcePartLimits=NO: ``-p d,p -N2`` (d DOWN with MaxNodes=1) showed
    "p,d" (the submit-time test passed d over: select found no node count there), ``-p d,p
    -t 2`` "d,p" (it ended in error at the DOWN d: as submitted); before: "d,p" for both. The
    reasons a minute on: PartitionDown where the DOWN partition is tested last (or alone),
    none where the job was last tested in p behind the others."""
    pool = slurm_pool(tmp_path, _DOWN_LIMITS.format(epl="NO"))
    hold = [workload(f"S{k}", f"-p p -w gpu0{k} -t 3 --gres=gpu:8", 0.0, k, runtime=3000.0) for k in range(1, 5)]
    jobs = [workload(f"J{k}", o + " --gres=gpu:8", 5.0 + 0.1 * k, 10 + k, runtime=60.0)
            for k, o in enumerate(_P135_NO_LATE)]
    pol = make_policy("slurm", pool)
    engine = Engine(pool, hold + jobs, pol, until=70.0)
    engine.run()
    got = {o: (engine.jobs[10 + k].reason or "", pol.pending_partition_text(engine.jobs[10 + k]))
           for k, o in enumerate(_P135_NO_LATE)}
    assert got == _P135_NO_LATE


_TIERED_DOWN = _UP_P + ("PartitionName=d Nodes=gpu[01-02] DefaultTime=5 MaxTime=10 PriorityTier=2 State=DOWN\n"
                        "PartitionName=e Nodes=gpu[01-02] DefaultTime=5 MaxTime=10 PriorityTier=1 State=DOWN\n")

_NODES = "Requested node configuration is not available"
_TIME_MIN = "Invalid time-min specification (exceeds job's time or other limits)"
#: probe p136 (2026-12-06, a real 22.05.8, every node held): sbatch's refusal or None (queued)
_P136 = [
    # _DOWN_LIMITS (p UP MaxTime 3, d DOWN MaxTime 1 MaxNodes=1, both tier 1): the list's
    # limits and a DOWN partition's node counts come before the shape; a shape no partition
    # holds is queued where the select loop ends at a DOWN partition
    (_DOWN_LIMITS, "ALL", "-p p,d -N2 --gres=gpu:9 -t 1", _CONFIG),
    (_DOWN_LIMITS, "ANY", "-p p,d -N2 --gres=gpu:9 -t 1", None),
    (_DOWN_LIMITS, "ALL", "-p p,d -t 5 --gres=gpu:9", _TIME),
    (_DOWN_LIMITS, "ANY", "-p p,d -t 5 --gres=gpu:9", _TIME),
    (_DOWN_LIMITS, "ALL", "-p d,p --time-min=4 --gres=gpu:9", _TIME_MIN),
    (_DOWN_LIMITS, "ANY", "-p d,p --time-min=4 --gres=gpu:9", _TIME_MIN),
    (_DOWN_LIMITS, "ALL", "-p p,d --gres=gpu:9 -t 1", None),
    (_DOWN_LIMITS, "ANY", "-p p,d --gres=gpu:9 -t 1", None),
    (_DOWN_LIMITS, "ALL", "-p p,d -N3 --gres=gpu:9 -t 1", _CONFIG),
    (_DOWN_LIMITS, "ANY", "-p p,d -N3 --gres=gpu:9 -t 1", None),
    # a lone DOWN partition's limits are not the job's to wait on: a shape it cannot hold is
    # refused (before: queued under NO, its time limit holding it); in a list the loop's last
    # partition decides under ANY and NO
    (_DOWN_LIMITS, "NO", "-p d -t 5 --gres=gpu:9", _NODES),
    (_DOWN_LIMITS, "ANY", "-p d -t 5 --gres=gpu:9", _TIME),
    (_DOWN_LIMITS, "NO", "-p d --gres=gpu:9 -t 1", _NODES),
    (_DOWN_LIMITS, "ANY", "-p d --gres=gpu:9 -t 1", _NODES),
    (_DOWN_LIMITS, "NO", "-p d,p --gres=gpu:9 -t 1", _NODES),
    (_DOWN_LIMITS, "ANY", "-p d,p --gres=gpu:9 -t 1", _NODES),
    (_DOWN_LIMITS, "NO", "-p p,d --gres=gpu:9 -t 1", None),
    # _TIERED_DOWN: the limit from the first partition as submitted (d's and e's DefaultTime
    # of 5 minutes is over p's MaxTime), the select loop in PriorityTier order (d before p,
    # e beside p): under ANY a job no UP partition takes is refused unless the loop's last
    # partition is DOWN
    (_TIERED_DOWN, "ALL", "-p d,p --gres=gpu:8", _CONFIG),
    (_TIERED_DOWN, "ANY", "-p d,p --gres=gpu:8", _CONFIG),
    (_TIERED_DOWN, "ALL", "-p p,d --gres=gpu:8", None),
    (_TIERED_DOWN, "ANY", "-p p,d --gres=gpu:8", None),
    (_TIERED_DOWN, "ALL", "-p p,e -t 5 --gres=gpu:8", _TIME),
    (_TIERED_DOWN, "ANY", "-p p,e -t 5 --gres=gpu:8", None),
    (_TIERED_DOWN, "ALL", "-p e,p -t 5 --gres=gpu:8", _TIME),
    (_TIERED_DOWN, "ANY", "-p e,p -t 5 --gres=gpu:8", _CONFIG),
    (_TIERED_DOWN, "ALL", "-p p,e --gres=gpu:8", None),
    (_TIERED_DOWN, "ANY", "-p p,e --gres=gpu:8", None),
    (_TIERED_DOWN, "ALL", "-p e,p --gres=gpu:8", _CONFIG),
    (_TIERED_DOWN, "ANY", "-p e,p --gres=gpu:8", _CONFIG),
]


@pytest.mark.parametrize("conf,epl,options,expected", _P136)
def test_submit_checks_around_down_partitions_in_slurms_order(tmp_path, conf, epl, options, expected):
    """Probe p136: ``_valid_job_part``'s tests (each partition's, then the list's widest
    limits and --time-min) come before the select loop; in the loop a DOWN partition's node
    counts (under ALL) and a partition's limits on the job's stored time refuse before a shape
    no partition holds, which is queued where the loop ends at a DOWN partition. Before: the
    shape's refusal came first, and under ANY a job with a DOWN partition listed was never
    refused for its time limit."""
    from gpupool.policy.slurm.submit_check import submit_rejection

    pool = slurm_pool(tmp_path, conf.format(epl=epl))
    assert submit_rejection(pool, workload("J", options, 0.0, 1)) == expected


_SMALL_Q = _NODES_EPL + """PartitionName=p Nodes=gpu[01-04] Default=YES MaxTime=3 PriorityTier=1 State=UP
PartitionName=q Nodes=gpu[03-04] MaxTime=3 PriorityTier=1 State=UP
"""
_MIN_M = _NODES_EPL + """PartitionName=p Nodes=gpu[01-04] Default=YES MaxTime=3 PriorityTier=1 State=UP
PartitionName=m Nodes=gpu[03-04] MinNodes=2 MaxTime=3 PriorityTier=1 State=UP
"""
_NOT_IN = "Requested nodes not in this partition"
#: probes p137 and p138 (2026-12-06, a real 22.05.8, partitions all UP; jobs of --gres=gpu:1)
_P137_138 = [
    # more nodes than q has: refused under ALL, queued for ever under NO (PartitionConfig,
    # PartitionNodeLimit over MaxTime) where q is alone; in a list p takes it
    (_SMALL_Q, "ALL", "-p q -N3 -t 1", _COUNT), (_SMALL_Q, "NO", "-p q -N3 -t 1", None),
    (_SMALL_Q, "ALL", "-p p,q -N3 -t 1", _COUNT), (_SMALL_Q, "NO", "-p p,q -N3 -t 1", None),
    (_SMALL_Q, "ALL", "-p q,p -N3 -t 1", _COUNT), (_SMALL_Q, "NO", "-p q,p -N3 -t 1", None),
    (_SMALL_Q, "NO", "-p q -N3 -t 5", None),
    # a required node outside the partition: its own message under ALL, select's under NO
    (_SMALL_Q, "ALL", "-p q -w gpu01 -t 1", _NOT_IN), (_SMALL_Q, "NO", "-p q -w gpu01 -t 1", _NODES),
    # one node below m's MinNodes=2: under ALL the select loop's test of m refuses the job,
    # whichever partition comes first and whether the nodes are idle or held; under NO it runs in p
    (_MIN_M, "ALL", "-p m,p -n1 -t 1", _CONFIG), (_MIN_M, "ALL", "-p p,m -n1 -t 1", _CONFIG),
    (_MIN_M, "ALL", "-p p,m -N2 -t 1", None),
    (_MIN_M, "NO", "-p m,p -n1 -t 1", None), (_MIN_M, "NO", "-p p,m -n1 -t 1", None),
]


@pytest.mark.parametrize("conf,epl,options,expected", _P137_138)
def test_node_counts_and_required_nodes_at_submit_as_slurm_answers(tmp_path, conf, epl, options, expected):
    """Probes p137 and p138. Before: under NO ``-p q -N3`` was refused ("Node count specification
    invalid", from the shape) and ``-w gpu01`` outside q "Requested nodes not in this
    partition"; under ALL ``-p m,p -n1`` and ``-p p,m -n1`` were taken."""
    from gpupool.policy.slurm.submit_check import submit_rejection

    pool = slurm_pool(tmp_path, conf.format(epl=epl))
    assert submit_rejection(pool, workload("J", options + " --gres=gpu:1", 0.0, 1)) == expected


def test_more_nodes_than_the_partition_has_waits_with_partition_node_limit(tmp_path):
    """Probe p137 under EnforcePartLimits=NO: ``-p q -N3 -t 5`` (q of two nodes, MaxTime=3)
    waited with PartitionNodeLimit, ``_part_access_check`` testing the node count before the
    time limit; ``-p q -N3 -t 1`` waits for ever too (before: the first showed
    PartitionTimeLimit, the second gpupool's text for a shape that never fits)."""
    pool = slurm_pool(tmp_path, _SMALL_Q.format(epl="NO"))
    wls = [workload("A", "-p q -N3 -t 1 --gres=gpu:1", 0.0, 1, runtime=30.0),
           workload("E", "-p q -N3 -t 5 --gres=gpu:1", 0.0, 2, runtime=30.0)]
    engine = Engine(pool, wls, make_policy("slurm", pool), until=200.0)
    engine.run()
    assert [(engine.jobs[i].state, engine.jobs[i].reason) for i in (1, 2)] == [("PENDING", "PartitionNodeLimit")] * 2


#: a fourth review's reading of the 22.05.8 source (not probed): select's own answer is the
#: node configuration message whatever the shape asks; it finds a required node outside the
#: partition before the node counts; ``job_limits_check`` tests the CPUs first; and a list the
#: submit rules shrink to one partition keeps the list's path
_REVIEW4 = [
    (_DOWN_LIMITS, "NO", "-p d -N2 -w gpu03 --gres=gpu:8 -t 1", _NODES),
    (_SMALL_Q, "NO", "-p q -n300 -t 1", None),
    (_SMALL_Q, "ANY", "-p p,q -N1 -n300 -t 1", _NODES),
    (_SMALL_Q, "NO", "-p p,q -N1 -n300 -t 1", _NODES),
    (_DOWN_LIMITS, "ALL", "-p d -n300 -t 1", _NODES),
    (_SMALL_Q + "PartitionName=dr Nodes=gpu[01-02] MaxTime=3 State=DRAIN\n", "NO", "-p dr,q -N3 -t 1 --gres=gpu:1",
     _NODES),
    (_SMALL_Q + "PartitionName=dr Nodes=gpu[01-02] MaxTime=3 State=DRAIN\n", "NO", "-p q -N3 -t 1 --gres=gpu:1", None),
]


@pytest.mark.parametrize("conf,epl,options,expected", _REVIEW4)
def test_select_answers_and_the_list_path_as_the_source_reads(tmp_path, conf, epl, options, expected):
    from gpupool.policy.slurm.submit_check import submit_rejection

    pool = slurm_pool(tmp_path, conf.format(epl=epl))
    assert submit_rejection(pool, workload("J", options, 0.0, 1)) == expected


def test_the_policy_keeps_the_list_path_of_a_list_the_submit_rules_shrink(tmp_path):
    """The same answer from the policy's own submit check (``SlurmPolicy.resolve_request``
    notes that the job was submitted with a list)."""
    pool = slurm_pool(tmp_path, (_SMALL_Q + "PartitionName=dr Nodes=gpu[01-02] MaxTime=3 State=DRAIN\n").format(epl="NO"))
    engine = Engine(pool, [workload("J", "-p dr,q -N3 -t 1 --gres=gpu:1", 0.0, 1, runtime=30.0)],
                    make_policy("slurm", pool), until=10.0)
    engine.run()
    assert (engine.jobs[1].state, engine.jobs[1].reason) == ("REJECTED", _NODES)
