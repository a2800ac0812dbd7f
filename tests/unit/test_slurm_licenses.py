"""Cluster licenses: slurm.conf ``Licenses=``, sbatch ``-L``, and the Slurm policy holding a job
until its licenses are free, as a real 22.05.8 did (``tests/differential/test_real_slurm_licenses.py``
runs the same submissions on both)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.errors import GpupoolError
from gpupool.formats.sbatch import parse_sbatch_text
from gpupool.policy.slurm.submit_check import submit_rejection

from tests.unit.sbatch_plans import SCENARIO_CONF, script, slurm_pool, workload

CONF = "ClusterName=lic\n" + SCENARIO_CONF + """\
Licenses={licenses}
GresTypes=gpu
NodeName=n[1-2] CPUs=16 RealMemory=64000 Gres=gpu:8
PartitionName=p Nodes=n[1-2] Default=YES MaxTime=60
"""


def _pool(tmp_path: Path, licenses: str = "lic:2,solo"):
    return slurm_pool(tmp_path, CONF.format(licenses=licenses))


def test_slurm_conf_licenses_are_counted_per_name(tmp_path: Path) -> None:
    assert _pool(tmp_path, "lic:2,solo,big:40,lic:1").slurm.params["Licenses"] == {"lic": 3, "solo": 1, "big": 40}


@pytest.mark.parametrize("value, message", [("lic:two", "NAME\\[:COUNT\\]"), ("lic:", "NAME\\[:COUNT\\]")])
def test_bad_slurm_conf_licenses_name_the_line(tmp_path: Path, value: str, message: str) -> None:
    with pytest.raises(GpupoolError, match=message) as err:
        _pool(tmp_path, value)
    assert ":8" in str(err.value)


def test_sbatch_reads_licenses_as_sbatch_does() -> None:
    def read(value: str):
        return parse_sbatch_text(script(f"-L {value}"), "j.sbatch").licenses

    assert parse_sbatch_text(script("-L lic:2,solo --licenses=x@db:3"), "j.sbatch").licenses == (("x@db", 3),)
    assert read("lic:2,solo,lic") == (("lic", 3), ("solo", 1))
    assert read("lic;solo*2,") == (("lic", 1), ("solo", 2))  # ';' and '*' as sbatch takes them, empty items skipped
    assert read("lic:0") == (("lic", 0),)  # refused at submit, as slurmctld does
    for bad in ("lic:x", "a|b", ",", "'lic:1, solo'"):
        with pytest.raises(GpupoolError, match="--licenses"):
            parse_sbatch_text(script(f"-L {bad}"), "j.sbatch")


def test_a_job_waits_for_its_licenses_without_holding_others_back(tmp_path: Path) -> None:
    # real: the third lic job pending (Licenses) until the first ended, then started at once;
    # -c1 started; lic:3 and other:1 refused; solo ran, and lic:1,solo and lic waited (Licenses)
    jobs = [("-L lic:1 -t 2", 60), ("-L lic:1", 3000), ("-L lic:1", 3000), ("-c1", 3000), ("-L lic:3", 10),
            ("-L other:1", 10), ("-L solo", 3000), ("-L lic:1,solo", 3000), ("-L lic", 3000)]
    pool = _pool(tmp_path)
    wls = [workload(f"j{k}", o, 2.0 * k, k + 1, runtime=float(r)) for k, (o, r) in enumerate(jobs)]
    pol = make_policy("slurm", pool)
    engine = Engine(pool, wls, pol, until=40.0)
    engine.run()
    got = {j.id: (j.state, j.reason if j.state != "RUNNING" else "") for j in engine.jobs.values()}
    assert got == {1: ("RUNNING", ""), 2: ("RUNNING", ""), 3: ("PENDING", "Licenses"), 4: ("RUNNING", ""),
                   5: ("REJECTED", "Invalid license specification"), 6: ("REJECTED", "Invalid license specification"),
                   7: ("RUNNING", ""), 8: ("PENDING", "Licenses"), 9: ("PENDING", "Licenses")}
    out = Engine(pool, wls, make_policy("slurm", pool), until=400.0).run()
    first, _, third = sorted(out.jobs, key=lambda j: j.id)[:3]
    assert third.start == first.end == 60.0


def test_a_licensed_job_gets_no_reservation(tmp_path: Path) -> None:
    # a whole-cluster job waiting for a license plans nothing (real: StartTime=Unknown, squeue
    # --start N/A) and holds nothing back: a later 60-minute job starts at once
    pool = _pool(tmp_path)
    wls = [workload("hold", "-L solo -c1", 0.0, 1, runtime=3000),
           workload("wide", "-L solo -N2 --exclusive", 1.0, 2, runtime=60),
           workload("late", "-N2 -c4 -t 60", 2.0, 3, runtime=600)]
    pol = make_policy("slurm", pool, {"record": True})  # plans are read, as squeue --start does
    engine = Engine(pool, wls, pol, until=100.0)
    engine.run()
    wide, late = engine.jobs[2], engine.jobs[3]
    assert (wide.state, wide.reason) == ("PENDING", "Licenses")
    assert late.start == 2.0
    assert 2 not in pol.planned


def test_suspended_jobs_keep_their_licenses(tmp_path: Path) -> None:
    pol = make_policy("slurm", _pool(tmp_path))
    jobs = {1: SimpleNamespace(wl=SimpleNamespace(licenses=(("lic", 1),))),
            2: SimpleNamespace(wl=SimpleNamespace(licenses=(("lic", 1), ("solo", 1))))}
    assert pol.licenses_free(jobs) == {"lic": 0, "solo": 0}


def test_the_live_submit_check_refuses_licenses_the_cluster_lacks(tmp_path: Path) -> None:
    pool = _pool(tmp_path)
    assert submit_rejection(pool, workload("a", "-L other", 0.0, 1)) == "Invalid license specification"
    assert submit_rejection(pool, workload("b", "-L lic:2", 0.0, 2)) is None
    assert submit_rejection(pool, workload("c", "-L lic:0", 0.0, 3)) == "Invalid license specification"
