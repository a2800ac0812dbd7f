"""Association limits a user inherits from its accounts, and MaxSubmitJobs, against a real Slurm
22.05.8 (Debian packages, ``gpupool.conformance.real_slurm`` with slurmdbd, 2026-12-04).

slurmdbd propagates an account's per-user limits (MaxJobs, MaxSubmitJobs, MaxTRESPerJob, MaxWall)
to the associations below it that set none: ``sacctmgr show assoc`` listed ml-platform's
MaxJobs=20, MaxSubmitJobs=5 and MaxWall=30 on each of its users, and dave's own MaxJobs=2. Under
MaxSubmitJobs=3, sbatch refused a fourth job ("Job violates accounting/QOS policy (job submit
limit, user's size and/or time limits)"), a four-task array beside one running job, and took a
two-task one and a job once the earlier ones had ended."""
from __future__ import annotations

from collections import Counter
from dataclasses import replace

from gpupool.formats.pool_dir import load_pool
from gpupool.model.slurm import Association
from gpupool.policy.slurm.limits import MSG_SUBMIT_LIMIT, inherited_limits
from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from tests.unit.sbatch_plans import workload, workloads
from tests.unit.test_slurm_req_tres import _edit, _seed_copy


def _run(pool, wls):
    out = Engine(pool, wls, make_policy("slurm", pool), record_events=True).run()
    return {j.id: j for j in out.jobs}, out.events


def _accounts(tmp_path, *edits: tuple[str, str]):
    """The seed pool with its accounts.cfg edited (each (old, new) replaced)."""
    pool_dir = _seed_copy(tmp_path, [])
    _edit(pool_dir / "accounts.cfg", edits)
    return load_pool(pool_dir)


def test_an_accounts_max_jobs_holds_each_of_its_users():
    """The seed pool's ml-platform sets MaxJobs=20 on the account: dave runs 20 at a time."""
    pool = load_pool("examples/seed-pool")
    wls = [replace(workload(f"j{k}", "-A ml-platform -n1 --mem=100 -t 10", 0.0, k + 1, runtime=300.0), user="dave")
           for k in range(25)]
    jobs, events = _run(pool, wls)
    assert Counter(e[1] for e in events if e[0] == 0.0)["started"] == 20
    assert {jobs[k].reason for k in range(21, 26)} == {"AssocMaxJobsLimit"}
    assert all(jobs[k].first_start == 300.0 for k in range(21, 26))


def test_max_submit_jobs_refuses_at_submit_counting_pending_and_running_jobs(tmp_path):
    pool = _accounts(tmp_path, ("Account - 'ml-platform':Description='Platform and tooling'",
                                "Account - 'ml-platform':Description='Platform and tooling':MaxSubmitJobs=3"))
    opts = "-A ml-platform -t 2 --mem=100"
    wls = [replace(workload(f"n{k}", opts, 0.0, k, runtime=60.0), user="dave") for k in (1, 2, 3, 4)]
    wls.append(replace(workload("r1", "-A ml-research -t 2 --mem=100", 0.0, 5, runtime=60.0), user="alice"))
    wls.append(replace(workload("n6", opts, 80.0, 6, runtime=60.0), user="dave"))
    wls += [replace(w, user="dave") for w in workloads("arr", opts + " --array=0-3", 80.0, 7, runtime=5.0)]
    wls += [replace(w, user="dave") for w in workloads("arr2", opts + " --array=0-1", 80.0, 11, runtime=5.0)]
    jobs, _events = _run(pool, wls)
    refused = {k for k, j in jobs.items() if j.state == "REJECTED"}
    assert refused == {4, 7, 8, 9, 10}  # the fourth job and the whole four-task array
    assert {jobs[k].reason for k in refused} == {MSG_SUBMIT_LIMIT}
    assert all(jobs[k].first_start is not None for k in (1, 2, 3, 5, 6, 11, 12))


def test_a_qos_max_submit_jobs_per_user_counts_the_users_jobs_in_that_qos(tmp_path):
    pool = _accounts(tmp_path, ("QOS - 'scavenger':Description='Low priority, half-price usage'",
                                "QOS - 'scavenger':Description='Low priority, half-price usage':MaxSubmitJobsPU=2"))
    opts = "-A ml-research --qos=scavenger -t 2 --mem=100"
    wls = [replace(workload(f"q{k}", opts, 0.0, k, runtime=60.0), user="alice") for k in (1, 2, 3)]
    wls.append(replace(workload("n", "-A ml-research -t 2 --mem=100", 0.0, 4, runtime=60.0), user="alice"))
    wls.append(replace(workload("b", opts, 0.0, 5, runtime=60.0), user="bob"))
    jobs, _events = _run(pool, wls)
    assert {k for k, j in jobs.items() if j.state == "REJECTED"} == {3}


def test_inherited_limits_take_the_nearest_setting_and_keep_the_users_own():
    team = Association("team", parent="dept", max_jobs=20, max_wall=1800)
    dept = Association("dept", parent="root", max_submit_jobs=5, max_jobs=50, max_tres_per_job={"cpu": 8})
    dave = Association("team", user="dave", max_jobs=2)
    got = inherited_limits(dave, [team, dept])
    assert (got.max_jobs, got.max_wall, got.max_submit_jobs, got.max_tres_per_job) == (2, 1800, 5, {"cpu": 8})
    assert inherited_limits(Association("team", user="eve", max_tres_per_job={"cpu": 16}), [team, dept]) \
        .max_tres_per_job == {"cpu": 16}


def test_inherited_max_tres_per_job_and_a_users_own_as_the_real_system_held_them(tmp_path):
    """ml-platform MaxSubmitJobs=5, MaxTRESPerJob=cpu=8 with root's own cpu=16 under it,
    ml-serving MaxTRESPerJob=cpu=8, scavenger MaxSubmitJobsPU=2: the real run refused the third
    scavenger job (QOSMaxSubmitJobPerUserLimit), ran -n12 for root in ml-platform and held -n20
    there and -n12 in ml-serving with AssocMaxCpuPerJobLimit."""
    pool = _accounts(
        tmp_path,
        ("Account - 'ml-platform':Description='Platform and tooling'",
         "Account - 'ml-platform':Description='Platform and tooling':MaxSubmitJobs=5:MaxTRESPerJob=cpu=8"),
        ("Account - 'ml-serving':Description='Model serving'",
         "Account - 'ml-serving':Description='Model serving':MaxTRESPerJob=cpu=8"),
        ("User - 'dave':DefaultAccount='ml-platform':Fairshare=1",
         "User - 'dave':DefaultAccount='ml-platform':Fairshare=1\nUser - 'root':Fairshare=1:MaxTRESPerJob=cpu=16"),
        ("QOS - 'scavenger':Description='Low priority, half-price usage'",
         "QOS - 'scavenger':Description='Low priority, half-price usage':MaxSubmitJobsPU=2"))
    scav = "-A ml-research --qos=scavenger -t 2 --mem=100"
    subs = [(scav, "alice"), (scav, "alice"), (scav, "alice"), ("-A ml-research -t 2 --mem=100", "alice"),
            ("-A ml-platform -t 2 -n12 --mem=100", "root"), ("-A ml-platform -t 2 -n20 --mem=100", "root"),
            ("-A ml-serving -t 2 -n12 --mem=100", "carol")]
    wls = [replace(workload(f"j{k}", opts, 0.0, k, runtime=60.0), user=user) for k, (opts, user) in enumerate(subs, 1)]
    jobs, _events = _run(pool, wls)
    assert jobs[3].state == "REJECTED" and jobs[3].reason == MSG_SUBMIT_LIMIT
    assert [jobs[k].first_start for k in (1, 2, 4, 5)] == [0.0] * 4
    assert (jobs[6].first_start, jobs[7].first_start) == (None, None)
    assert {jobs[6].reason, jobs[7].reason} == {"AssocMaxCpuPerJobLimit"}


def test_a_job_without_time_gets_its_qos_max_wall_where_the_partition_has_no_default_time(tmp_path):
    """slurmctld gives a job without --time the partition's DefaultTime, else (limits enforced)
    the QOS MaxWall, else the association's (``acct_policy.c``'s ``_set_time_limit``): such a
    job runs under that limit instead of waiting on QOSMaxWallDurationPerJobLimit forever."""
    pool_dir = _seed_copy(tmp_path, [("DefaultTime=04:00:00 MaxTime=2-00:00:00", "MaxTime=2-00:00:00")])
    _edit(pool_dir / "accounts.cfg", [(":MaxWallDurationPerJob=2880", ":MaxWallDurationPerJob=60")])
    pool = load_pool(pool_dir)
    wls = [replace(workload("a", "-A ml-research --qos=high -n1 --mem=100", 0.0, 1, runtime=7200.0), user="alice"),
           replace(workload("b", "-A ml-platform -n1 --mem=100", 0.0, 2, runtime=7200.0), user="dave")]
    jobs, _events = _run(pool, wls)
    assert (jobs[1].first_start, jobs[1].state, jobs[1].end) == (0.0, "TIMEOUT", 3600.0)
    assert (jobs[2].state, jobs[2].end) == ("COMPLETED", 7200.0)  # no MaxWall: MaxTime (2 days)


def test_time_zero_is_unlimited_as_sbatch_reads_it(tmp_path):
    assert workload("a", "-t 0", 0.0, 1).time_limit == float("inf")
    assert workload("a", "--time-min=0 -t 10", 0.0, 1).time_min == float("inf")
    # and an UNLIMITED job runs in a partition with MaxTime=UNLIMITED (the policy used to fail
    # on it rounding infinity to minutes)
    pool = load_pool(_seed_copy(tmp_path, [("DefaultTime=04:00:00 MaxTime=2-00:00:00", "MaxTime=UNLIMITED")]))
    wls = [replace(workload("a", "-A ml-platform -t 0 --mem=100", 0.0, 1, runtime=30.0), user="dave"),
           replace(workload("b", "-A ml-platform -N4 --exclusive -t UNLIMITED", 0.0, 2, runtime=300.0), user="dave"),
           replace(workload("c", "-A ml-platform -t 0 --mem=100", 1.0, 3, runtime=30.0), user="dave")]
    jobs, _events = _run(pool, wls)
    assert [(jobs[k].first_start, jobs[k].end) for k in (1, 2, 3)] == [(0.0, 30.0), (30.0, 330.0), (330.0, 360.0)]


def test_a_qos_limit_overrides_the_associations_of_the_same_kind(tmp_path):
    """acct_policy.c checks an association's MaxSubmitJobs, MaxWall, MaxJobs and per-TRES
    MaxTRESPerJob only where the job's QOS leaves that limit unset (source, 22.05.8)."""
    pool = _accounts(tmp_path, ("Account - 'ml-platform':Description='Platform and tooling'",
                                "Account - 'ml-platform':Description='Platform and tooling':MaxSubmitJobs=3:MaxWall=30"),
                     ("QOS - 'scavenger':Description='Low priority, half-price usage'",
                      "QOS - 'scavenger':Description='Low priority, half-price usage':MaxSubmitJobsPU=10:MaxWall=120"))
    opts = "-A ml-platform --qos=scavenger -t 60 --mem=100"
    wls = [replace(workload(f"s{k}", opts, 0.0, k, runtime=30.0), user="dave") for k in range(1, 6)]
    jobs, _events = _run(pool, wls)
    assert [jobs[k].state for k in range(1, 6)] == ["COMPLETED"] * 5  # 5 > 3, and 60 min > 30


def test_submit_limits_count_arrivals_in_time_order_not_id_order(tmp_path):
    pool = _accounts(tmp_path, ("Account - 'ml-platform':Description='Platform and tooling'",
                                "Account - 'ml-platform':Description='Platform and tooling':MaxSubmitJobs=3"))
    opts = "-A ml-platform -t 2 --mem=100"
    wls = [replace(workload(f"j{k}", opts, 10.0, k, runtime=60.0), user="dave") for k in (1, 2, 3, 4)]
    wls.append(replace(workload("early", opts, 0.0, 5, runtime=60.0), user="dave"))
    jobs, _events = _run(pool, wls)
    assert {k for k, j in jobs.items() if j.state == "REJECTED"} == {3, 4}


def test_max_tres_per_job_is_inherited_per_tres():
    team = Association("team", parent="dept", max_tres_per_job={"gres/gpu": 2})
    dept = Association("dept", parent="root", max_tres_per_job={"cpu": 8, "gres/gpu": 4})
    dave = Association("team", user="dave", max_tres_per_job={"cpu": 16})
    assert inherited_limits(dave, [team, dept]).max_tres_per_job == {"cpu": 16, "gres/gpu": 2}


def test_time_min_over_the_limit_is_refused_at_submit_and_unlimited_time_min_never_shortens(tmp_path):
    pool = load_pool("examples/seed-pool")
    wls = [replace(workload("a", "-A ml-platform -t 10 --time-min=0 --mem=100", 0.0, 1, runtime=30.0), user="dave"),
           replace(workload("b", "-A ml-platform -t 10 --time-min=20 --mem=100", 0.0, 2, runtime=30.0), user="dave"),
           replace(workload("c", "-A ml-platform -t 20 --time-min=10 --mem=100", 0.0, 3, runtime=30.0), user="dave")]
    jobs, _events = _run(pool, wls)
    assert [jobs[k].state for k in (1, 2, 3)] == ["REJECTED", "REJECTED", "COMPLETED"]
    assert jobs[1].reason == "Invalid time-min specification (exceeds job's time or other limits)"


def test_group_and_per_account_submit_limits_as_the_real_system_gave_them(tmp_path):
    """A real 22.05.8 (2026-12-04, slurmdbd, x10 clock) with QOS gs (GrpSubmitJobs=2), QOS spa
    (MaxSubmitJobsPA=1) and ml-platform's GrpSubmitJobs=3, three phases with the jobs cancelled
    between them: QOS gs refused a third job whatever its account ("QOSGrpSubmitJobsLimit");
    spa a second of ml-research's, not ml-platform's first ("MaxSubmitJobsPerAccount");
    ml-platform a two-task array beside two jobs ("AssocGrpSubmitJobsLimit"), then took a third
    job, and a fourth of QOS gs, whose GrpSubmitJobs replaces the account's."""
    pool = _accounts(tmp_path, ("QOS - 'scavenger'", "QOS - 'gs':Description='gs':GrpSubmitJobs=2\n"
                                "QOS - 'spa':Description='spa':MaxSubmitJobsPA=1\nQOS - 'scavenger'"),
                     ("QOS='normal,high,scavenger'", "QOS='normal,high,scavenger,gs,spa'"),
                     ("Fairshare=20:MaxJobs=20:QOS='normal,scavenger'",
                      "Fairshare=20:MaxJobs=20:GrpSubmitJobs=3:QOS='normal,scavenger,gs,spa'"))

    def refused(specs):
        wls, k = [], 1
        for opts, acct in specs:
            user = "alice" if acct == "ml-research" else "dave"
            for w in workloads(f"j{k}", f"-A {acct} -t 10 --mem=100 {opts}", float(k), k, runtime=600.0):
                wls.append(replace(w, user=user))
                k += 1
        jobs, _events = _run(pool, wls)
        return sorted(j for j, job in jobs.items() if job.state == "REJECTED")

    r, p = "ml-research", "ml-platform"
    assert refused([("--qos=gs", r), ("--qos=gs", p), ("--qos=gs", r)]) == [3]
    assert refused([("--qos=spa", r), ("--qos=spa", r), ("--qos=spa", p)]) == [2]
    # jobs 3-4 are the array's two tasks
    assert refused([("", p), ("", p), ("--array=0-1", p), ("", p), ("--qos=gs", p)]) == [3, 4]
