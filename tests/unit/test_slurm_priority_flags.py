"""PriorityFlags SMALL_RELATIVE_TO_TIME and NO_NORMAL_*, and the association factor
(sacctmgr ``Priority`` with PriorityWeightAssoc), against a real Slurm 22.05.8 (Debian packages,
``gpupool.conformance.real_slurm`` with slurmdbd, 2026-12-04): eight jobs pending behind a job
holding every node, sprio's priorities less their fair-share part, per partition row.

The pool is the seed pool with DefCpuPerGPU=4, a 900000 MB gpu04, partitions p2 (gpu03-04,
PriorityJobFactor=5), p3 and p4, QOS ``high`` (Priority=100) without its preemption, and the
accounts ml-research Priority=20 and ml-platform Priority=7 (ml-serving none): a user's
association inherits its account's, normalised by the largest (20)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpupool.formats.pool_dir import load_pool
from gpupool.formats.sacctmgr import parse_sacctmgr_dump, render_sacctmgr_dump
from gpupool.policy.slurm.priority import job_size_factor
from tests.unit.test_slurm_req_tres import REQ, _edit, _jobs, _seed_copy
from tests.unit.test_slurm_views import _cli

JOBS = [("train", "ml-platform", "-t 1 --gres=gpu:2"), ("train", "ml-platform", "-t 10 --gres=gpu:2"),
        ("train", "ml-platform", "-t 60 -n8"), ("p2", "ml-platform", "-t 30 -N2 --gres=gpu:1"),
        ("train", "ml-research", "-t 5 --qos=high --gres=gpu:2"), ("train", "ml-research", "-t 2-00:00:00 -n64"),
        ("p2,train", "ml-platform", "-t 3 -n2"), ("train", "ml-serving", "-t 20 --gres=gpu:1")]
USERS = {"ml-platform": "dave", "ml-research": "alice", "ml-serving": "carol"}

#: job size relative to the time limit (favour large), partition and QOS factors unnormalised,
#: association 7/20 or 20/20 × 1000, TRES normalised
FLAGS_A = ("SMALL_RELATIVE_TO_TIME,NO_NORMAL_PART,NO_NORMAL_QOS", "NO", "GRES/gpu=1000",
           [[26412], [3912], [1766], [7141], [1007062], [2008], [13683, 9683], [2281]])
#: favouring small jobs, association and TRES unnormalised (7 × 1000, CPUs × 1, GPUs × 10)
FLAGS_B = ("SMALL_RELATIVE_TO_TIME,NO_NORMAL_ASSOC,NO_NORMAL_TRES", "YES", "CPU=1,GRES/gpu=10",
           [[82221], [104721], [106791], [106355], [120221], [120255], [99668, 98868], [98961]])


def _pool(tmp_path: Path, flags: str, favor_small: str, tres: str) -> tuple[Path, Path]:
    pool = _seed_copy(tmp_path, REQ + [
        ("PriorityWeightJobSize=0", "PriorityWeightJobSize=100000"),
        ("PriorityFavorSmall=NO", f"PriorityFavorSmall={favor_small}"),
        ("PriorityWeightTRES=GRES/gpu=1000,Mem=100000,CPU=1000",
         f"PriorityWeightTRES={tres}\nPriorityWeightAssoc=1000\nPriorityFlags={flags}"),
        ("PartitionName=p2 Nodes=gpu[03-04]", "PartitionName=p2 Nodes=gpu[03-04] PriorityJobFactor=5"),
    ])
    _edit(pool / "accounts.cfg", [
        (":Preempt='normal':PreemptMode='REQUEUE':MaxTRESPerUser=gres/gpu=16:MaxWallDurationPerJob=2880",
         ":MaxTRESPerUser=gres/gpu=16:MaxWallDurationPerJob=2880"),
        ("Account - 'ml-research':Description='ML research (training)'",
         "Account - 'ml-research':Description='ML research (training)':Priority=20"),
        ("Account - 'ml-platform':Description='Platform and tooling'",
         "Account - 'ml-platform':Description='Platform and tooling':Priority=7")])
    jobs = [("-A ml-platform -p train -N4 --exclusive -t 10", 0.0, 600.0)]
    jobs += [(f"-A {acct} -p {part} {opts}", 5.0, 20.0) for part, acct, opts in JOBS]
    users = ["dave"] + [USERS[acct] for _p, acct, _o in JOBS]
    return pool, _jobs(tmp_path, jobs, users)


@pytest.mark.parametrize("case", [FLAGS_A, FLAGS_B], ids=["relative-raw-part-qos", "small-raw-assoc-tres"])
def test_sprio_under_priority_flags_as_the_real_system_gave_it(tmp_path, case):
    flags, favor_small, tres, expected = case
    pool, wl = _pool(tmp_path, flags, favor_small, tres)
    r = CliRunner().invoke(_cli(), ["sprio", str(pool), "-w", str(wl), "--at", "10", "-P"])
    assert r.exit_code == 0, r.output
    got: dict[str, list[int]] = {}
    for row in (line.split("|") for line in r.output.splitlines()[1:]):
        got.setdefault(row[0], []).append(int(row[3]) - int(row[7]))  # PRIORITY − FAIRSHARE
    assert [got[str(k)] for k in range(2, 2 + len(JOBS))] == expected


def test_small_relative_to_time_divides_the_size_by_the_limit_in_minutes():
    # 4 nodes of 128 CPUs: one node's share is 128 CPUs; per minute, over 512
    assert job_size_factor(1, 1, 4, 512, False, relative_limit_min=10) == pytest.approx(0.025)
    assert job_size_factor(1, 64, 4, 512, False, relative_limit_min=2880) == pytest.approx(128 / 2880 / 512)
    assert job_size_factor(1, 300, 4, 512, True, relative_limit_min=1) == pytest.approx(1 - 300 / 512)
    assert job_size_factor(1, 600, 4, 512, True, relative_limit_min=1) == 0.0  # 1 − 600/512, clamped
    assert job_size_factor(2, 2, 4, 512, True, relative_limit_min=30) == pytest.approx(1 - 256 / 30 / 512)


def test_association_priority_is_read_written_and_unmodelled_flags_are_noted(tmp_path):
    pool_dir, _wl = _pool(tmp_path, "SMALL_RELATIVE_TO_TIME,INCR_ONLY,NO_SUCH_FLAG", "NO", "GRES/gpu=1000")
    pool = load_pool(pool_dir)
    acct = pool.slurm.accounting
    assert (acct.accounts["ml-research"].priority, acct.accounts["ml-platform"].priority) == (20, 7)
    assert acct.accounts["ml-serving"].priority is None
    again = parse_sacctmgr_dump(_written(tmp_path, render_sacctmgr_dump(acct)))
    assert again.accounts["ml-platform"].priority == 7
    noted = {key for _where, key in pool.not_modelled if key.startswith("PriorityFlags")}
    assert noted == {"PriorityFlags=INCR_ONLY",
                     "PriorityFlags=NO_SUCH_FLAG (not a flag of Slurm 22.05: slurmctld passes over it)"}


def _written(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "again.cfg"
    path.write_text(text)
    return path


def _age_pool(tmp_path: Path, flags: str) -> tuple[Path, Path]:
    """The real run's set-up (PriorityMaxAge=10 minutes): X holds three nodes for 400 s, A one
    for 60 s; B needs two nodes after A (afterok), C from 30 s on (--begin), E at once."""
    pool = _seed_copy(tmp_path, [
        ("PriorityMaxAge=7-0", "PriorityMaxAge=10"), ("PriorityWeightAge=1000", "PriorityWeightAge=60000"),
        ("PriorityWeightFairshare=10000", "PriorityWeightFairshare=0"), ("PriorityCalcPeriod=5", "PriorityCalcPeriod=1"),
        ("PriorityWeightTRES=GRES/gpu=1000", f"PriorityWeightTRES=GRES/gpu=1000{flags}")])
    jobs = [("-A ml-platform -N3 --exclusive -t 10", 0.0, 400.0), ("-A ml-platform -N1 --exclusive -t 10", 0.0, 60.0),
            ("-A ml-platform -N2 -t 5 --dependency=afterok:j02", 0.0, 10.0),
            ("-A ml-platform -N2 -t 5 --begin=now+30", 0.0, 10.0), ("-A ml-platform -N2 -t 5", 0.0, 10.0)]
    return pool, _jobs(tmp_path, jobs, "dave")


def _ages(pool: Path, wl: Path, at: str) -> dict[str, float]:
    r = CliRunner().invoke(_cli(), ["sprio", str(pool), "-w", str(wl), "--at", at, "--json"])
    assert r.exit_code == 0, r.output
    return {str(j["job_id"]): j["factors"]["age"] for j in json.loads(r.output)["jobs"]}


@pytest.mark.parametrize("flags", ["", "\nPriorityFlags=ACCRUE_ALWAYS"], ids=["eligible", "accrue-always"])
def test_accrue_always_ages_every_job_from_its_submission(tmp_path, flags):
    """A real 22.05.8 (×10 clock, with and without AccountingStorageEnforce=limits) aged B from
    A's end and C from its begin time, E from its submission; under ACCRUE_ALWAYS all three
    from their submission (0.1383 each at the pass 83.7 s after submitting)."""
    pool, wl = _age_pool(tmp_path, flags)
    ages = _ages(pool, wl, "90")  # the last priority pass: 60 s
    if flags:
        assert ages == {"3": pytest.approx(0.1), "4": pytest.approx(0.1), "5": pytest.approx(0.1)}
    else:
        assert ages == {"3": 0.0, "4": pytest.approx(0.05), "5": pytest.approx(0.1)}


@pytest.mark.parametrize("flags", ["", "\nPriorityFlags=ACCRUE_ALWAYS"], ids=["eligible", "accrue-always"])
def test_sprio_lists_jobs_not_yet_eligible_only_under_accrue_always(tmp_path, flags):
    """At 20 s B still waits for A and C for its begin time: 22.05's sprio picks jobs by their
    begin time (set once they are eligible), under ACCRUE_ALWAYS by their submit time
    (``priority_p_get_priority_factors_list``)."""
    pool, wl = _age_pool(tmp_path, flags)
    listed = set(_ages(pool, wl, "20"))
    assert listed == ({"3", "4", "5"} if flags else {"5"})


def test_priority_flags_are_found_in_the_text_as_slurmctld_finds_them(tmp_path):
    """read_config.c looks each flag name up with a substring search: NO_NORMAL_PARTITION sets
    NO_NORMAL_PART, NO_NORMAL_ALL the four NO_NORMAL_* flags; FAIR_TREE (the default) names none."""
    from gpupool.formats.slurm_conf import priority_flags

    assert priority_flags({"PriorityFlags": ("NO_NORMAL_PARTITION", "FAIR_TREE")}) == {"NO_NORMAL_PART"}
    assert priority_flags({"PriorityFlags": ("no_normal_all",)}) == {
        "NO_NORMAL_ALL", "NO_NORMAL_ASSOC", "NO_NORMAL_PART", "NO_NORMAL_QOS", "NO_NORMAL_TRES"}
    pool_dir, _wl = _pool(tmp_path, "SMALL_RELATIVE_TO_TIME,NO_NORMAL_PARTITION", "NO", "GRES/gpu=1000")
    pool = load_pool(pool_dir)
    assert ("PriorityFlags=NO_NORMAL_PARTITION (slurmctld reads it as NO_NORMAL_PART)"
            in {key for _where, key in pool.not_modelled})
    from gpupool.policy.slurm.config import load_settings

    assert "partition" in load_settings(pool.slurm).raw_factors


def test_a_partition_without_weights_bills_its_cpus_for_the_billing_factor(tmp_path):
    """A partition's billing total is its own summed TRES under its own weights
    (``_calc_part_tres``), its CPUs without weights, whatever other partitions on the same
    nodes weigh: a 64-CPU job in an unweighted 512-CPU partition gets 10000 × 64/512."""
    pool_dir = _seed_copy(tmp_path, [
        ("PriorityWeightTRES=GRES/gpu=1000", "PriorityWeightTRES=billing=10000"),
        ("PriorityTier=1 State=UP", 'PriorityTier=1 TRESBillingWeights="CPU=1.0,GRES/gpu=8.0" State=UP\n'
                                    "PartitionName=debug Nodes=gpu[01-04] MaxTime=2-00:00:00 State=UP")])
    wl = _jobs(tmp_path, [("-A ml-platform -p train -N4 --exclusive -t 10", 0.0, 600.0),
                          ("-A ml-platform -p debug -n64 --mem=100 -t 10", 5.0, 20.0)], "dave")
    r = CliRunner().invoke(_cli(), ["sprio", str(pool_dir), "-w", str(wl), "--at", "10", "--json"])
    assert r.exit_code == 0, r.output
    (job,) = [j for j in json.loads(r.output)["jobs"] if j["job_id"] == 2]
    assert job["weighted"]["tres"]["billing"] == pytest.approx(1250.0)
