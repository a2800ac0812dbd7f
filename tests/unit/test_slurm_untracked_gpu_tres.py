"""GPUs are a TRES only where AccountingStorageTRES tracks them (22.05.8 source: assoc_mgr
keeps the database's TRES filtered by the configured list, ``_get_assoc_mgr_tres_list``): without
``gres/gpu`` there, a ``GrpTRES=gres/gpu=N`` limit binds nobody, jobs' GPUs count for no usage or
billing, and a TRES weight on GPUs stops slurmctld at start ("TRES weight 'gres:gpu' is not a
configured TRES type"). The well-known slip this models: GPU limits that "do not work"."""
from __future__ import annotations

import pytest

from gpupool.errors import InputError
from gpupool.formats.pool_dir import load_pool
from gpupool.policy.slurm.tres import alloc_counts
from tests.unit.test_slurm_typed_gpu_limits import _pool, _run

LIMIT = "GrpTRES=gres/gpu=4"
JOBS = ["--gres=gpu:3", "--gres=gpu:2", "--gres=gpu:1"]


def _untracked(tmp_path, weights: bool):
    _pool(tmp_path, limit=LIMIT)
    conf = tmp_path / "pool" / "slurm.conf"
    text = conf.read_text()
    text = text.replace("AccountingStorageTRES=gres/gpu,gres/gpu:a100,gres/gpu:t4\n", "")
    if not weights:
        text = text.replace("PriorityWeightTRES=GRES/gpu=1000\n", "")
    conf.write_text(text)
    return tmp_path / "pool"


def test_a_gpu_limit_binds_where_gres_gpu_is_tracked(tmp_path):
    pool = _pool(tmp_path, tres="AccountingStorageTRES=gres/gpu", limit=LIMIT)
    assert not [n for n in pool.notes if "does not track" in n]
    got = _run(pool, JOBS)
    assert [got[k][:2] for k in (1, 2, 3)] == [("RUNNING", ""), ("PENDING", "AssocGrpGRES"), ("RUNNING", "")]


def test_a_gpu_limit_binds_nobody_where_gres_gpu_is_not_tracked(tmp_path):
    pool = load_pool(_untracked(tmp_path, weights=False))
    assert "AccountingStorageTRES" not in pool.slurm.params
    # said when the pool is read (``gpupool validate`` prints the notes), not left silent
    notes = [n for n in pool.notes if "does not track" in n]
    assert ("accounts.cfg: account 'ml-platform' GrpTRES=gres/gpu limits a TRES slurm.conf does not track "
            "(AccountingStorageTRES): slurmctld ignores it, and so does the Slurm policy") in notes
    assert len(notes) >= 4 and all("=gres/gpu limits" in n for n in notes)  # the seed pool's QOS limits too
    got = _run(pool, JOBS)
    assert [got[k][:2] for k in (1, 2, 3)] == [("RUNNING", "")] * 3


def test_untracked_gpus_count_for_no_tres():
    placement = ((0, 0b11, 4000, 1000),)
    assert alloc_counts(placement, [], gpu_tracked=False) == {"cpu": 4, "mem": 1000, "node": 1}
    assert alloc_counts(placement, [], gpu_tracked=True)["gres/gpu"] == 2


def test_a_weight_on_untracked_gpus_is_refused_with_its_line(tmp_path):
    path = _untracked(tmp_path, weights=True)
    with pytest.raises(InputError) as err:
        load_pool(path)
    text = str(err.value)
    assert "slurm.conf" in text and ":42" in text and "PriorityWeightTRES weighs 'gres/gpu'" in text
    assert "not a configured TRES type" in text and "AccountingStorageTRES" in text


def test_a_billing_weight_on_an_untracked_gpu_type_is_refused(tmp_path):
    pool = _pool(tmp_path, tres="AccountingStorageTRES=gres/gpu", limit="")
    conf = tmp_path / "pool" / "slurm.conf"
    conf.write_text(conf.read_text().replace(
        "PartitionName=train Nodes=gpu[01-04] Default=YES",
        'PartitionName=train Nodes=gpu[01-04] Default=YES TRESBillingWeights="CPU=1,GRES/gpu:a100=4"'))
    with pytest.raises(InputError, match=r"PartitionName=train TRESBillingWeights weighs 'GRES/gpu:a100'"):
        load_pool(tmp_path / "pool")
    assert pool.slurm.params["AccountingStorageTRES"] == ("gres/gpu",)


def test_an_untyped_request_counts_for_the_first_type_where_only_types_are_tracked(tmp_path):
    """AccountingStorageTRES=gres/gpu:a100,gres/gpu:t4 (no plain gres/gpu): slurmctld charges an
    untyped request to the first tracked type (``_set_type_tres_cnt`` "pick some valid type"),
    so a typed limit holds it; with gres/gpu tracked too it counts for gres/gpu only."""
    jobs = ["--gres=gpu:3", "--gres=gpu:2", "--gres=gpu:t4:4"]
    _pool(tmp_path / "a", limit="GrpTRES=gres/gpu:a100=4")
    conf = tmp_path / "a" / "pool" / "slurm.conf"
    conf.write_text(conf.read_text().replace("AccountingStorageTRES=gres/gpu,", "AccountingStorageTRES=")
                    .replace("PriorityWeightTRES=GRES/gpu=1000\n", "PriorityWeightTRES=GRES/gpu:a100=1000\n"))
    typed_only = _run(load_pool(tmp_path / "a" / "pool"), jobs)
    assert [typed_only[k][:2] for k in (1, 2, 3)] == [("RUNNING", ""), ("PENDING", "AssocGrpGRES"), ("RUNNING", "")]
    both = _run(_pool(tmp_path / "b", tres="AccountingStorageTRES=gres/gpu,gres/gpu:a100,gres/gpu:t4",
                      limit="GrpTRES=gres/gpu:a100=4"), jobs)
    assert [both[k][:2] for k in (1, 2, 3)] == [("RUNNING", "")] * 3


def test_tres_weights_are_checked_only_where_slurmctld_reads_them(tmp_path):
    """Only priority/multifactor reads PriorityWeightTRES (basic starts with it set); a
    PartitionName=DEFAULT line's billing weights are reported at that line."""
    from gpupool.formats.slurm_conf import load_slurm_conf

    head = "ClusterName=x\nGresTypes=gpu\nNodeName=n1 CPUs=8 RealMemory=1000 Gres=gpu:1\n"
    basic = tmp_path / "basic.conf"
    basic.write_text(head + "PriorityType=priority/basic\nPriorityWeightTRES=GRES/gpu=1000\n")
    assert load_slurm_conf(basic).config.params["PriorityWeightTRES"] == {"gres/gpu": 1000}
    multi = tmp_path / "multi.conf"
    multi.write_text(head + "PriorityType=priority/multifactor\nPriorityWeightTRES=GRES/gpu=1000\n")
    with pytest.raises(InputError, match=r"multi.conf:5: PriorityWeightTRES weighs 'gres/gpu'"):
        load_slurm_conf(multi)
    default = tmp_path / "default.conf"
    default.write_text(head + "PartitionName=DEFAULT TRESBillingWeights=CPU=1,GRES/gpu=2\n"
                              "PartitionName=p Nodes=n1\nPartitionName=DEFAULT TRESBillingWeights=CPU=1\n"
                              "PartitionName=q Nodes=n1\n")
    with pytest.raises(InputError, match=r"default.conf:4: PartitionName=DEFAULT TRESBillingWeights weighs 'GRES/gpu'"):
        load_slurm_conf(default)
    tracked = tmp_path / "tracked.conf"
    tracked.write_text(head + "AccountingStorageTRES=GRES/GPU\nPartitionName=DEFAULT TRESBillingWeights=CPU=1,gres/gpu=2\n"
                              "PartitionName=p Nodes=n1\n")
    assert load_slurm_conf(tracked).config.partitions["p"].extra["TRESBillingWeights"] == "CPU=1,gres/gpu=2"


def test_devices_of_no_type_are_charged_to_the_first_tracked_type(tmp_path):
    """Untyped nodes (the seed pool's) where only a type is tracked: the allocation entry has no
    type, so slurmctld charges it to the first tracked type too (``_set_type_tres_cnt``; source
    only): 3 running + 2 asked > GrpTRES=gres/gpu:a100=4."""
    from tests.unit.test_slurm_typed_gpu_limits import SEED_POOL  # untyped gres.conf there
    import shutil

    d = tmp_path / "pool"
    shutil.copytree(SEED_POOL, d)
    conf = d / "slurm.conf"
    conf.write_text(conf.read_text().replace("AccountingStorageTRES=gres/gpu\n", "AccountingStorageTRES=gres/gpu:a100\n")
                    .replace("PriorityWeightTRES=GRES/gpu=1000\n", ""))
    accounts = d / "accounts.cfg"
    accounts.write_text(accounts.read_text().replace("Fairshare=20:MaxJobs=20:",
                                                     "Fairshare=20:MaxJobs=20:GrpTRES=gres/gpu:a100=4:"))
    got = _run(load_pool(d), ["--gres=gpu:3", "--gres=gpu:2", "--gres=gpu:1"])
    assert [got[k][:2] for k in (1, 2, 3)] == [("RUNNING", ""), ("PENDING", "AssocGrpGRES"), ("RUNNING", "")]


def test_an_ignored_limit_is_among_the_notes_validate_prints_first(tmp_path):
    from typer.testing import CliRunner

    from gpupool.cli.main import app

    path = _untracked(tmp_path, weights=False)
    res = CliRunner().invoke(app, ["validate", str(path)])
    assert res.exit_code == 0
    assert "does not track" in res.output.replace("\n", " ")


def test_limit_names_are_matched_case_insensitively(tmp_path):
    _pool(tmp_path, tres="AccountingStorageTRES=gres/gpu,license/matlab", limit="GrpTRES=license/Matlab=2")
    pool = load_pool(tmp_path / "pool")
    assert not [n for n in pool.notes if "does not track" in n]
