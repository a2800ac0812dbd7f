"""A partition's own QOS (slurm.conf ``QOS=``), the QOS flags OverPartQOS and DenyOnLimit,
against a real Slurm 22.05.8 (Debian packages, ``gpupool.conformance.real_slurm`` with
slurmdbd and a x10 clock, 2026-12-04).

The probe's cluster: the seed pool with ``train`` on gpu[01-02] and ``limited`` on gpu[03-04]
with QOS=partlim (MaxTRESPerUser=gres/gpu=2, MaxWall=30), a QOS ``over`` (OverPartQOS,
MaxTRESPerUser=gres/gpu=3) and a QOS ``deny`` (DenyOnLimit, MaxTRESPerJob=gres/gpu=2,
MaxWall=60). What it showed, job by job, is asserted below; so is a second probe's, on a
partition's MaxNodes and MaxTime and the QOS flags that lift them."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.errors import InputError
from gpupool.formats.pool_dir import load_pool
from gpupool.model.slurm import Qos
from gpupool.policy.slurm import limits
from gpupool.policy.slurm.limits import MSG_SUBMIT_LIMIT
from gpupool.policy.slurm.submit_check import submit_rejection
from tests.unit.sbatch_plans import workload
from tests.unit.test_slurm_req_tres import _edit, _seed_copy

_QOS = ("QOS - 'partlim':Description='partition qos':MaxTRESPerUser=gres/gpu=2:MaxWallDurationPerJob=30\n"
        "QOS - 'over':Description='over':Flags='OverPartQOS':MaxTRESPerUser=gres/gpu=3\n"
        "QOS - 'deny':Description='deny':Flags='DenyOnLimit':MaxTRESPerJob=gres/gpu=2:MaxWallDurationPerJob=60\n"
        "QOS - 'scavenger'")


def _pool(tmp_path, part_qos: str = "partlim", max_time: str = "2-00:00:00"):
    pool_dir = _seed_copy(tmp_path, [("PartitionName=train Nodes=gpu[01-04] Default=YES",
                                      "PartitionName=train Nodes=gpu[01-02] Default=YES")])
    with open(pool_dir / "slurm.conf", "a") as f:
        f.write(f"PartitionName=limited Nodes=gpu[03-04] MaxTime={max_time} QOS={part_qos} State=UP\n")
    _edit(pool_dir / "accounts.cfg", [("QOS - 'scavenger'", _QOS),
                                      ("QOS='normal,high,scavenger'", "QOS='normal,high,scavenger,partlim,over,deny'")])
    return load_pool(pool_dir)


def _run(pool, specs):
    """Run (options, submit time) jobs of alice's, each running 600 s; jobs by id."""
    wls = [replace(workload(f"j{k}", f"-A ml-research --mem=100 {opts}", at, k, runtime=600.0), user="alice")
           for k, (opts, at) in enumerate(specs, 1)]
    out = Engine(pool, wls, make_policy("slurm", pool), record_events=True).run()
    return {j.id: j for j in out.jobs}


def test_a_partition_qos_limits_jobs_of_another_qos(tmp_path):
    """Three one-GPU jobs of QOS normal in ``limited``: two run, the third waits
    (QOSMaxGRESPerUser) until one ends."""
    jobs = _run(_pool(tmp_path), [("-p limited --gres=gpu:1 -t 15", 0.0)] * 3)
    assert [jobs[k].first_start for k in (1, 2)] == [0.0, 0.0]
    assert jobs[3].first_start == 600.0


def test_over_part_qos_puts_the_jobs_own_limit_first(tmp_path):
    """QOS ``over`` (OverPartQOS, MaxTRESPerUser=gres/gpu=3) in ``limited``: three run, the
    fourth waits; the partition QOS's limit of 2 is not read."""
    jobs = _run(_pool(tmp_path), [("-p limited --qos=over --gres=gpu:1 -t 15", 0.0)] * 4)
    assert [jobs[k].first_start for k in (1, 2, 3)] == [0.0, 0.0, 0.0]
    assert jobs[4].first_start == 600.0
    assert jobs[4].state == "COMPLETED"


def test_a_partition_qos_max_wall_gives_the_limit_and_holds_longer_jobs(tmp_path):
    """Without DenyOnLimit: ``-t 60`` waits for ever (QOSMaxWallDurationPerJobLimit), a job
    without ``--time`` gets the partition QOS's 30 minutes, ``--gres=gpu:3`` (over the per-user
    2 on its own) waits too: nothing is refused."""
    jobs = _run(_pool(tmp_path), [("-p limited --gres=gpu:1 -t 60", 0.0), ("-p limited --gres=gpu:1", 0.0),
                                  ("-p limited --gres=gpu:3 -t 5", 0.0)])
    assert jobs[1].first_start is None and jobs[1].reason == "QOSMaxWallDurationPerJobLimit"
    assert jobs[2].first_start == 0.0 and jobs[2].time_limit == 1800.0
    assert jobs[3].first_start is None and jobs[3].reason == "QOSMaxGRESPerUser"


def test_deny_on_limit_refuses_at_submit_what_breaks_a_limit_alone(tmp_path):
    pool = _pool(tmp_path)
    specs = [("-p train --qos=deny --gres=gpu:4 -t 5", 0.0),       # MaxTRESPerJob
             ("-p train --qos=deny --gres=gpu:1 -t 120", 0.0),     # MaxWall
             ("-p train --qos=deny --gres=gpu:1", 0.0),            # DefaultTime 4:00:00 over MaxWall
             ("-p train --qos=deny --gres=gpu:1 -t 30", 0.0),      # within: runs
             ("-p limited --qos=deny --gres=gpu:3 -t 5", 0.0),     # partition QOS MaxTRESPerUser alone
             ("-p limited --qos=deny --gres=gpu:1 -t 40", 0.0)]    # partition QOS MaxWall=30 first
    jobs = _run(pool, specs)
    assert {k for k, j in jobs.items() if j.state == "REJECTED"} == {1, 2, 3, 5, 6}
    assert {jobs[k].reason for k in (1, 2, 3, 5, 6)} == {MSG_SUBMIT_LIMIT}
    assert jobs[4].first_start == 0.0
    # the live daemon asks the same question before it accepts a script
    assert submit_rejection(pool, workload("a", "-A ml-research --mem=100 -p train --qos=deny --gres=gpu:4 -t 5",
                                           0.0, 1), user="alice") == MSG_SUBMIT_LIMIT
    assert submit_rejection(pool, workload("b", "-A ml-research --mem=100 -p train --qos=deny --gres=gpu:1 -t 5",
                                           0.0, 2), user="alice") is None


def test_deny_on_limit_ignores_job_counts_and_what_others_use():
    """Job counts are not validated at submit, and the per-user and group TRES limits hold the
    request alone, not with what runs."""
    from gpupool.policy.slurm.jobinfo import JobReq
    q = Qos("d", flags=("DenyOnLimit",), max_jobs_per_user=0, max_tres_per_user={"gres/gpu": 4},
            grp_tres={"gres/gpu": 6})
    req = JobReq(("p",), "u", "a", "d", 1, 1, 4, 100, {"gres/gpu": 4}, 60.0, {})
    assert limits.deny_on_limit(req, 60.0, (q, None), []) is None
    assert limits.deny_on_limit(replace(req, tres={"gres/gpu": 5}), 60.0, (q, None), []) == "QOSMaxGRESPerUser"
    assert limits.deny_on_limit(replace(req, tres={"gres/gpu": 5}), 60.0, (replace(q, flags=()), None), []) is None


def test_qos_order_and_the_first_qos_limits_win():
    job, part = Qos("job", max_tres_per_user={"gres/gpu": 3}), Qos("part", max_tres_per_user={"gres/gpu": 2})
    assert limits.qos_order(job, part) == (part, job)
    over = replace(job, flags=("OverPartQOS",))
    assert limits.qos_order(over, part) == (over, part)
    assert limits.qos_order(job, job) == (job, None)
    assert limits.qos_order(None, part) == (part, None)


def test_a_partition_qos_the_dump_lacks_is_an_error(tmp_path):
    with pytest.raises(InputError, match="partition 'limited' has QOS=nosuch"):
        _pool(tmp_path, part_qos="nosuch")


def test_accounting_storage_enforce_words_imply_associations(tmp_path):
    """22.05's slurmctld: ``limits`` enforces associations too (an unknown account is refused
    at submit), ``safe`` limits, ``all`` everything but nojobs/nosteps; an unknown word stops it."""
    from gpupool.formats.slurm_conf import accounting_enforce

    assert accounting_enforce({"AccountingStorageEnforce": ("limits",)}) == {"associations", "limits"}
    assert accounting_enforce({"AccountingStorageEnforce": ("safe",)}) == {"associations", "limits", "safe"}
    assert accounting_enforce({"AccountingStorageEnforce": ("all",)}) == {
        "associations", "limits", "safe", "qos", "wckeys"}
    assert accounting_enforce({"AccountingStorageEnforce": ("2",)}) == {"associations", "limits"}
    pool_dir = _seed_copy(tmp_path, [("AccountingStorageEnforce=associations,limits,qos,safe",
                                      "AccountingStorageEnforce=limits")])
    pool = load_pool(pool_dir)
    wls = [replace(workload("x", "-A ml-serving --mem=100 -t 5", 0.0, 1, runtime=60.0), user="alice"),
           replace(workload("y", "-A ml-research --mem=100 -t 5", 0.0, 2, runtime=60.0), user="alice")]
    out = Engine(pool, wls, make_policy("slurm", pool)).run()
    jobs = {j.id: j for j in out.jobs}
    assert jobs[1].state == "REJECTED" and jobs[1].reason == limits.MSG_ACCOUNT  # alice has no ml-serving association
    assert jobs[2].state == "COMPLETED"
    _edit(pool_dir / "slurm.conf", [("AccountingStorageEnforce=limits", "AccountingStorageEnforce=limits,quotas")])
    with pytest.raises(InputError, match="AccountingStorageEnforce: 'quotas' is not one of"):
        load_pool(pool_dir)


# ---------------------------------------------------------------- partition limits and QOS flags
#: a second probe (same day): ``train`` on gpu[03-04], ``short`` on gpu[01-02] with MaxTime=60
#: and MaxNodes=1 and no DefaultTime; QOS ``ptl`` (PartitionTimeLimit), ``wall`` (MaxWall=120),
#: ``pmn`` (PartitionMaxNodes); real Slurm ran with EnforcePartLimits=ALL
_FLAG_QOS = ("QOS - 'ptl':Description='ptl':Flags='PartitionTimeLimit'\n"
             "QOS - 'wall':Description='wall':MaxWallDurationPerJob=120\n"
             "QOS - 'pmn':Description='pmn':Flags='PartitionMaxNodes'\n"
             "QOS - 'scavenger'")


def _short_pool(tmp_path, enforce: str):
    pool_dir = _seed_copy(tmp_path, [("PartitionName=train Nodes=gpu[01-04] Default=YES",
                                      "PartitionName=train Nodes=gpu[03-04] Default=YES")])
    conf = pool_dir / "slurm.conf"
    conf.write_text(f"EnforcePartLimits={enforce}\n" + conf.read_text()
                    + "PartitionName=short Nodes=gpu[01-02] MaxTime=60 MaxNodes=1 State=UP\n")
    _edit(pool_dir / "accounts.cfg", [("QOS - 'scavenger'", _FLAG_QOS),
                                      ("QOS='normal,high,scavenger'", "QOS='normal,high,scavenger,ptl,wall,pmn'")])
    return load_pool(pool_dir)


_SHORT_JOBS = [("-p short --qos=ptl -t 120 --gres=gpu:1", 0.0),   # 1: runs, TimeLimit 2:00:00
               ("-p short --qos=wall --gres=gpu:1", 0.0),         # 2: MaxWall 120 > MaxTime 60
               ("-p short --qos=pmn -N2 --gres=gpu:1 -t 5", 0.0),  # 3: runs on both nodes
               ("-p short -N2 --gres=gpu:1 -t 5", 0.0),            # 4: over MaxNodes
               ("-p short --gres=gpu:1 -t 120", 0.0),              # 5: over MaxTime
               ("-p short --qos=ptl --gres=gpu:1", 0.0),           # 6: MaxTime as its limit
               ("-p train --qos=wall --gres=gpu:1", 0.0)]          # 7: DefaultTime 4:00:00 over MaxWall


def test_partition_limits_and_the_qos_flags_that_lift_them_as_the_real_system_gave_them(tmp_path):
    jobs = _run(_short_pool(tmp_path, "ALL"), _SHORT_JOBS)
    assert jobs[1].first_start == 0.0 and jobs[1].time_limit == 7200.0
    assert (jobs[2].state, jobs[2].reason) == ("REJECTED", limits.MSG_PART_CONFIG)
    assert jobs[3].first_start == 0.0 and len({p[0] for p in jobs[3].placement}) == 2
    assert (jobs[4].state, jobs[4].reason) == ("REJECTED", limits.MSG_NODE_COUNT)
    assert (jobs[5].state, jobs[5].reason) == ("REJECTED", limits.MSG_TIME)
    assert jobs[6].first_start == 0.0 and jobs[6].time_limit == 3600.0
    assert jobs[7].first_start is None and jobs[7].reason == "QOSMaxWallDurationPerJobLimit"


def test_without_enforce_part_limits_the_same_jobs_wait_instead(tmp_path):
    """EnforcePartLimits=NO (Slurm's default): nothing is refused for partition limits; the
    jobs over them wait with the partition's reason (slurmctld's ``job_limits_check``)."""
    jobs = _run(_short_pool(tmp_path, "NO"), _SHORT_JOBS)
    assert not [k for k, j in jobs.items() if j.state == "REJECTED"]
    assert [jobs[k].reason for k in (2, 4, 5)] == ["PartitionTimeLimit", "PartitionNodeLimit", "PartitionTimeLimit"]
    assert all(jobs[k].first_start is None for k in (2, 4, 5))
    assert jobs[1].first_start == 0.0 and jobs[3].first_start == 0.0


#: probe p96 (same day, EnforcePartLimits=ALL): ``short`` on gpu[01-02] with MaxNodes=1, ``mn``
#: on gpu[03-04] with MinNodes=2; (options, what sbatch answered: a refusal or the nodes it ran on)
_P96 = [("-p short -N1-2", limits.MSG_NODE_COUNT),   # a range's largest count against MaxNodes
        ("-p short -N1", 1),
        ("-p short -N2", limits.MSG_NODE_COUNT),
        ("-p mn -N1-2", limits.MSG_NODE_COUNT),      # its least against MinNodes, at submit
        ("-p mn -N1-3", limits.MSG_NODE_COUNT),
        ("-p mn -N1", limits.MSG_NODE_COUNT)]


def _node_count_pool(tmp_path, enforce: str):
    pool_dir = _seed_copy(tmp_path, [])
    conf = pool_dir / "slurm.conf"
    conf.write_text(f"EnforcePartLimits={enforce}\n" + conf.read_text()
                    + "PartitionName=short Nodes=gpu[01-02] MaxNodes=1 MaxTime=60 State=UP\n"
                    + "PartitionName=mn Nodes=gpu[03-04] MinNodes=2 MaxTime=60 State=UP\n")
    return load_pool(pool_dir)


def test_node_ranges_against_max_and_min_nodes_as_the_real_system_gave_them(tmp_path):
    jobs = _run(_node_count_pool(tmp_path, "ALL"), [(f"{opts} -t 5", 0.0) for opts, _want in _P96])
    for k, (opts, want) in enumerate(_P96, 1):
        if isinstance(want, str):
            assert (jobs[k].state, jobs[k].reason) == ("REJECTED", want), opts
        else:
            assert jobs[k].first_start == 0.0 and len({p[0] for p in jobs[k].placement}) == want, opts


def test_without_enforce_part_limits_a_range_over_max_nodes_waits_and_one_reaching_min_nodes_runs(tmp_path):
    """``job_limits_check`` once the job exists: ``-N1-2`` waits in MaxNodes=1 for ever; in
    MinNodes=2 slurmctld raised ``-N1-2``'s least count to 2 at submit, so it runs on both
    nodes; ``-N1`` (its largest below MinNodes) waits."""
    jobs = _run(_node_count_pool(tmp_path, "NO"), [("-p short -N1-2 -t 5", 0.0), ("-p mn -N1-2 -t 5", 0.0),
                                                    ("-p mn -N1 -t 5", 0.0), ("-p mn,short -N1-2 -t 5", 0.0)])
    assert (jobs[1].first_start, jobs[1].reason) == (None, "PartitionNodeLimit")
    assert jobs[2].first_start == 0.0 and len({p[0] for p in jobs[2].placement}) == 2
    assert (jobs[3].first_start, jobs[3].reason) == (None, "PartitionNodeLimit")
    # two partitions: the least count is raised only to the least MinNodes of them (short's 1),
    # so it stays 1, below mn's MinNodes, and 2 is over short's MaxNodes (``_get_job_parts``,
    # source; a review found it)
    assert (jobs[4].first_start, jobs[4].reason) == (None, "PartitionNodeLimit")


def test_part_limit_tests_nodes_before_time_and_reads_each_flag():
    from gpupool.model.slurm import Partition

    part = Partition("p", ("n1", "n2", "n3"), max_nodes=1, min_nodes=None)
    assert limits.part_limit(7200.0, 2, 2, part, 3600.0, None) == "PartitionNodeLimit"
    assert limits.part_limit(7200.0, 1, 1, part, 3600.0, None) == "PartitionTimeLimit"
    assert limits.part_limit(7200.0, 1, 1, part, 3600.0, Qos("q", flags=("PartitionTimeLimit",))) is None
    assert limits.part_limit(60.0, 2, 2, part, 3600.0, Qos("q", flags=("PartitionMaxNodes",))) is None
    assert limits.part_limit(math.inf, 1, 1, part, 3600.0, None) == "PartitionTimeLimit"
    mins = Partition("p", ("n",), min_nodes=2)
    assert limits.part_limit(60.0, 1, 1, mins, None, None) == "PartitionNodeLimit"
    assert limits.part_limit(60.0, 1, None, mins, None, None) is None  # no --nodes: MinNodes not tested
    # a range: its largest count against MaxNodes, the count given for MinNodes (probe p96)
    assert limits.part_limit(60.0, 2, 1, part, None, None) == "PartitionNodeLimit"
    assert limits.part_limit(60.0, None, None, part, None, None) is None
    assert limits.part_limit(60.0, 1, 1, mins, None, Qos("q", flags=("PartitionMinNodes",))) is None
    # more nodes than the partition has: tested first, whatever the flags (probe p137)
    assert limits.part_limit(60.0, 4, 4, part, 3600.0, Qos("q", flags=("PartitionMaxNodes",))) == "PartitionNodeLimit"


def test_sprio_lists_a_job_its_partitions_limits_hold(tmp_path):
    """sprio's rows come from every pending eligible job and each partition it names, whatever
    that partition's limits (22.05's ``_filter_job`` filters by job, user and partition name)."""
    from gpupool.report import slurm_views as sv

    pool = _short_pool(tmp_path, "NO")
    wls = [replace(workload("j", "-A ml-research --mem=100 -p short,train --gres=gpu:1 -t 120", 0.0, 1,
                            runtime=600.0), user="alice"),
           replace(workload("k", "-A ml-research --mem=100 -p train -N2 --exclusive -t 5", 0.0, 2, runtime=600.0), user="alice")]
    inst = sv.instant(pool, wls, "slurm", 30)
    assert inst.jobs[1].state == "RUNNING"  # in train
    assert [(r["job_id"], r["partition"]) for r in sv.sprio_rows(inst)] == [(2, "train")]
    wls[0] = replace(wls[0], partition="short")
    inst = sv.instant(pool, wls, "slurm", 30)  # j waits for ever (PartitionTimeLimit), k runs
    assert inst.jobs[1].state == "PENDING" and inst.jobs[2].state == "RUNNING"
    assert [(r["job_id"], r["partition"]) for r in sv.sprio_rows(inst)] == [(1, "short")]


def test_a_job_in_several_partitions_holds_one_limit_from_the_first(tmp_path):
    """slurmctld stores one limit for a job without ``--time``: the DefaultTime of the first
    partition it names (``_valid_job_part``), tested in every partition (``job_limits_check``).
    train's 4:00:00 is over short's MaxTime of 60: the job may not run in short (a reviewer's
    reading of the 22.05.8 source, not probed)."""
    specs = [("-p train --exclusive -N2 -t 30", 0.0), ("-p train,short --gres=gpu:1", 1.0)]
    jobs = _run(_short_pool(tmp_path / "all", "ALL"), specs)
    assert (jobs[2].state, jobs[2].reason) == ("REJECTED", limits.MSG_PART_CONFIG)
    jobs = _run(_short_pool(tmp_path / "no", "NO"), specs)
    assert jobs[2].first_start == 600.0 and jobs[2].time_limit == 14400.0  # in train, once free


def test_unlimited_time_is_held_by_a_qos_max_wall(tmp_path):
    """slurmctld stores ``--time=UNLIMITED`` (and ``-t 0``) as INFINITE, over any MaxWall: in
    ``limited`` (QOS partlim, MaxWall=30, here MaxTime=UNLIMITED) such a job waits (source,
    read by a reviewer)."""
    jobs = _run(_pool(tmp_path, max_time="UNLIMITED"), [("-p limited --gres=gpu:1 -t UNLIMITED", 0.0), ("-p limited --gres=gpu:1 -t 0", 0.0),
                                  ("-p limited --gres=gpu:1 -t 30", 0.0)])
    assert [jobs[k].reason for k in (1, 2)] == ["QOSMaxWallDurationPerJobLimit"] * 2
    assert jobs[1].first_start is None and jobs[2].first_start is None and jobs[3].first_start == 0.0


def test_deny_on_limit_validates_the_first_partitions_default_time(tmp_path):
    """The limit a job without ``--time`` is validated with is the first partition's DefaultTime
    (``_valid_job_part`` sets it once): under QOS deny (MaxWall=60) ``-p limited,train`` (limited
    has none) is taken, ``-p train,limited`` (train's 4:00:00) refused."""
    pool = _pool(tmp_path)
    ok = workload("a", "-A ml-research --mem=100 -p limited,train --qos=deny --gres=gpu:1", 0.0, 1)
    bad = workload("b", "-A ml-research --mem=100 -p train,limited --qos=deny --gres=gpu:1", 0.0, 2)
    assert submit_rejection(pool, ok, user="alice") is None
    assert submit_rejection(pool, bad, user="alice") == MSG_SUBMIT_LIMIT


def test_a_range_raised_to_min_nodes_starts_on_no_fewer(tmp_path):
    """``-N1-2`` in a MinNodes=2 partition was stored with 2 as its least count: while one of
    the two nodes is held it waits, then runs on both (review of debedd4)."""
    jobs = _run(_node_count_pool(tmp_path, "NO"), [("-p train -N1 -w gpu03 --exclusive -t 15", 0.0),
                                                    ("-p mn -N1-2 -t 5", 1.0)])
    assert jobs[1].first_start == 0.0 and {p[0] for p in jobs[1].placement} == {2}
    assert jobs[2].first_start == 600.0 and len({p[0] for p in jobs[2].placement}) == 2
