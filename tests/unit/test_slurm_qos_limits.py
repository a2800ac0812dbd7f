"""QOS GrpJobs, MaxJobsPA, MaxTRESPerAccount and MinTRESPerJob, and a QOS GrpTRES that
overrides the association's, against a real Slurm 22.05.8 (Debian packages,
``gpupool.conformance.real_slurm`` with slurmdbd and a x10 clock, 2026-12-04).

The probe's cluster: the seed pool (ml-research has GrpTRES=gres/gpu=24) with QOS ``gj``
(GrpJobs=2), ``pa`` (MaxJobsPA=1), ``pt`` (MaxTRESPerAccount=gres/gpu=3), ``mn``
(MinTRESPerJob=gres/gpu=2) and ``big`` (GrpTRES=gres/gpu=32). squeue 40 s after the
submissions showed what each test below asserts, reasons included."""
from __future__ import annotations

from dataclasses import replace

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool
from gpupool.model.slurm import Association, Qos
from gpupool.policy.slurm import limits
from gpupool.policy.slurm.jobinfo import JobReq
from tests.unit.sbatch_plans import workload
from tests.unit.test_slurm_req_tres import _edit, _seed_copy

_QOS = ("QOS - 'gj':Description='gj':GrpJobs=2\n"
        "QOS - 'pa':Description='pa':MaxJobsPA=1\n"
        "QOS - 'pt':Description='pt':MaxTRESPerAccount=gres/gpu=3\n"
        "QOS - 'mn':Description='mn':MinTRESPerJob=gres/gpu=2\n"
        "QOS - 'big':Description='big':GrpTRES=gres/gpu=32\n"
        "QOS - 'scavenger'")


def _pool(tmp_path):
    pool_dir = _seed_copy(tmp_path, [])
    _edit(pool_dir / "accounts.cfg", [("QOS - 'scavenger'", _QOS),
                                      ("QOS='normal,high,scavenger'", "QOS='normal,high,scavenger,gj,pa,pt,mn,big'"),
                                      ("QOS='normal,scavenger'", "QOS='normal,scavenger,gj,pa,pt,mn,big'")])
    return load_pool(pool_dir)


def _at_40s(pool, specs):
    """(options, account) jobs submitted a second apart, 600 s each: per job, "RUNNING" or
    its pending reason 40 s in."""
    wls = [replace(workload(f"j{k}", f"-A {acct} --mem=100 -t 10 {opts}", float(k), k, runtime=600.0),
                   user="alice" if acct == "ml-research" else "dave")
           for k, (opts, acct) in enumerate(specs, 1)]
    out = Engine(pool, wls, make_policy("slurm", pool), record_events=True).run()
    return {j.id: "RUNNING" if j.first_start is not None and j.first_start < 40 else j.reason for j in out.jobs}


def test_qos_job_counts_per_account_tres_and_least_tres_as_the_real_system_gave_them(tmp_path):
    r, p = "ml-research", "ml-platform"
    got = _at_40s(_pool(tmp_path), [
        ("--qos=gj --gres=gpu:1", r), ("--qos=gj --gres=gpu:1", r), ("--qos=gj --gres=gpu:1", r),
        ("--qos=pa --gres=gpu:1", r), ("--qos=pa --gres=gpu:1", r), ("--qos=pa --gres=gpu:1", p),
        ("--qos=pt --gres=gpu:2", r), ("--qos=pt --gres=gpu:2", r), ("--qos=pt --gres=gpu:2", p),
        ("--qos=mn --gres=gpu:1", r), ("--qos=mn --gres=gpu:2", r), ("--qos=mn", r)])
    assert got == {1: "RUNNING", 2: "RUNNING", 3: "QOSGrpJobsLimit",
                   4: "RUNNING", 5: "MaxJobsPerAccount", 6: "RUNNING",
                   7: "RUNNING", 8: "MaxGRESPerAccount", 9: "RUNNING",
                   10: "QOSMinGRES", 11: "RUNNING", 12: "QOSMinGRES"}


def test_a_qos_grp_tres_overrides_the_accounts(tmp_path):
    """Four 8-GPU jobs of QOS big (GrpTRES=gres/gpu=32) in ml-research (GrpTRES=gres/gpu=24):
    all four ran; the account's GPU limit is not read where the QOS sets one."""
    got = _at_40s(_pool(tmp_path), [("--qos=big -N1 --gres=gpu:8", "ml-research")] * 4)
    assert set(got.values()) == {"RUNNING"}


def test_the_counts_come_before_the_tres_limits_whichever_qos_or_association_sets_them():
    """slurmctld tests the job counts and time limits of every QOS and association before a
    selection, and the TRES limits after it: a job over both a QOS MaxTRESPerJob and its
    association's MaxJobs waits for AssocMaxJobsLimit."""
    q = Qos("q", max_tres_per_job={"gres/gpu": 2})
    user = Association("acct", user="u", max_jobs=1)
    req = JobReq(("p",), "u", "acct", "q", 1, 1, 4, 100, {"gres/gpu": 4}, 60.0, {})
    usage = {("a", "acct", "u"): {"jobs": 1}}
    assert limits.check(req, 60.0, (q, None), [("a", user)], usage) == "AssocMaxJobsLimit"
    assert limits.check(req, 60.0, (q, None), [("a", user)], {}) == "QOSMaxGRESPerJob"
    # a QOS MaxJobsPA or MaxJobsPU lifts the association's MaxJobs
    assert limits.check(replace(req, tres={"gres/gpu": 1}), 60.0, (replace(q, max_jobs_per_account=5), None),
                        [("a", user)], usage) is None


def test_per_job_tres_limits_of_an_association_give_slurms_reason_names():
    """job_reason_string of 22.05.8: AssocMaxNodePerJobLimit (no plural), AssocMaxCpuPerJobLimit,
    AssocMaxGRESPerJob; before, the node's was written AssocMaxNodesPerJobLimit."""
    user = Association("acct", user="u", max_tres_per_job={"node": 1, "cpu": 8, "gres/gpu": 4})
    req = JobReq(("p",), "u", "acct", None, 2, 2, 2, 100, {"node": 2, "cpu": 2, "gres/gpu": 2}, 60.0, {})
    assert limits.check(req, 60.0, (None, None), [("a", user)], {}) == "AssocMaxNodePerJobLimit"
    req = replace(req, tres={"node": 1, "cpu": 16, "gres/gpu": 2})
    assert limits.check(req, 60.0, (None, None), [("a", user)], {}) == "AssocMaxCpuPerJobLimit"
    req = replace(req, tres={"node": 1, "cpu": 2, "gres/gpu": 8})
    assert limits.check(req, 60.0, (None, None), [("a", user)], {}) == "AssocMaxGRESPerJob"


def test_deny_on_limit_refuses_a_request_below_min_tres_or_over_the_accounts_share():
    q = Qos("d", flags=("DenyOnLimit",), min_tres_per_job={"gres/gpu": 2}, max_tres_per_account={"gres/gpu": 4},
            grp_jobs=0, max_jobs_per_account=0)
    req = JobReq(("p",), "u", "a", "d", 1, 1, 2, 100, {"gres/gpu": 2}, 60.0, {})
    assert limits.deny_on_limit(req, 60.0, (q, None), []) is None  # job counts are not validated
    assert limits.deny_on_limit(replace(req, tres={"gres/gpu": 1}), 60.0, (q, None), []) == "QOSMinGRES"
    assert limits.deny_on_limit(replace(req, tres={"gres/gpu": 5}), 60.0, (q, None), []) == "MaxGRESPerAccount"


def test_validate_lists_each_qos_limit_and_flag(tmp_path):
    from typer.testing import CliRunner

    from gpupool.cli.main import app

    _pool(tmp_path)  # writes the pool under tmp_path/pool
    res = CliRunner().invoke(app, ["validate", str(tmp_path / "pool"), "--json"])
    assert res.exit_code == 0, res.output
    import json

    qos = {q["name"]: q for q in json.loads(res.output)["qos"]}
    assert qos["gj"]["grp_jobs"] == 2 and qos["pa"]["max_jobs_per_account"] == 1
    assert qos["pt"]["max_tres_per_account"] == {"gres/gpu": 3} and qos["mn"]["min_tres_per_job"] == {"gres/gpu": 2}
    wide = CliRunner().invoke(app, ["validate", str(tmp_path / "pool")], terminal_width=200)
    assert "GrpJobs=2" in wide.output and "MinTRESPerJob=gres/gpu=2" in wide.output


def test_a_minimum_on_a_tres_the_request_does_not_count_holds_nobody():
    """MinTRESPerJob on a TRES slurm.conf does not track (or on billing, which the request
    does not count here: noted when the pool is read) holds no job; on GPUs it holds a job
    asking none."""
    q = Qos("mn", min_tres_per_job={"gres/gpu:a100": 1, "billing": 5})
    req = JobReq(("p",), "u", "a", "mn", 1, 4, 1, 100, {"cpu": 4, "gres/gpu": 1}, 60.0, {})
    assert limits.check(req, 60.0, (q, None), [], {}) is None
    gpus = Qos("mn", min_tres_per_job={"gres/gpu": 1})
    assert limits.check(replace(req, tres={"cpu": 4, "gres/gpu": 0}), 60.0, (gpus, None), [], {}) == "QOSMinGRES"
