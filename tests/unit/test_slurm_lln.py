"""Least-loaded node choice: a partition's ``LLN=YES`` or SelectTypeParameters ``CR_LLN`` puts
jobs on the nodes with the most free CPUs, as a real 22.05.8 did
(``tests/differential/test_real_slurm_lln.py`` runs the same submissions on both)."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.engine.nodes import NodeTable
from gpupool.errors import GpupoolError
from gpupool.formats.pool_dir import load_pool
from gpupool.policy.slurm.config import partition_infos
from gpupool.policy.slurm.select import Free, PartNodes, place

from tests.unit.sbatch_plans import run_spaced, slurm_pool, workload

CONF = """\
ClusterName=lln
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=30
SelectType=select/cons_tres
SelectTypeParameters={select}
DefMemPerCPU=100
PriorityType=priority/basic
GresTypes=gpu
NodeName=gpu[01-03] CPUs=16 RealMemory=64000 Gres=gpu:8 {weight}
PartitionName=p Nodes=gpu[01-03] Default=YES MaxTime=60
PartitionName=q Nodes=gpu[01-03] MaxTime=60 LLN={lln}
"""
HOLD = ["-c8 -w gpu01", "-c4 -w gpu02"]


def _pool(tmp_path: Path, select: str = "CR_Core_Memory", lln: str = "YES", weight: str = ""):
    return slurm_pool(tmp_path, CONF.format(select=select, lln=lln, weight=weight))


def _rows(pool, jobs: list[str]):
    engine, _pol = run_spaced(pool, jobs, 2.0, 2.0 * len(jobs) + 8)
    return [(sum(p[2] for p in j.placement) // 1000, sorted({p[0] for p in j.placement}))
            for j in sorted(engine.jobs.values(), key=lambda j: j.id)]


def test_an_lln_partition_puts_jobs_on_the_least_loaded_nodes(tmp_path: Path) -> None:
    # real: two -c2 jobs in q on idle gpu03, -c2 in p by best fit on gpu01, -N2 -c2 in q on
    # gpu02-03, -n3 -c4 in q as two tasks on gpu02 (10 free) and one on gpu03
    rows = _rows(_pool(tmp_path), HOLD + ["-p q -c2", "-p q -c2", "-c2", "-p q -N2 -c2", "-p q -n3 -c4"])
    assert rows[2:] == [(2, [2]), (2, [2]), (2, [0]), (4, [1, 2]), (12, [1, 2])]


def test_cr_lln_makes_every_partition_least_loaded(tmp_path: Path) -> None:
    rows = _rows(_pool(tmp_path, select="CR_Core_Memory,CR_LLN", lln="NO"), HOLD + ["-c2", "-N2 -c2", "-n3 -c4"])
    assert rows[2:] == [(2, [2]), (4, [1, 2]), (12, [2])]


def test_lower_weight_comes_before_fewer_loaded(tmp_path: Path) -> None:
    # gpu01-03 all Weight=1 here; put gpu03 (idle) at a higher weight: the least loaded of the
    # lowest weight wins
    (tmp_path / "slurm.conf").write_text(CONF.format(select="CR_Core_Memory", lln="YES", weight="Weight=1")
                                         .replace("NodeName=gpu[01-03] CPUs=16 RealMemory=64000 Gres=gpu:8 Weight=1",
                                                  "NodeName=gpu[01-02] CPUs=16 RealMemory=64000 Gres=gpu:8 Weight=1\n"
                                                  "NodeName=gpu03 CPUs=16 RealMemory=64000 Gres=gpu:8 Weight=5"))
    rows = _rows(load_pool(tmp_path), HOLD + ["-p q -c2"])
    assert rows[2] == (2, [1])


def test_only_lln_partitions_are_marked(tmp_path: Path) -> None:
    pool = _pool(tmp_path)
    nodes = NodeTable(pool)
    parts = partition_infos(pool.slurm, nodes, pool)
    assert getattr(parts["q"].nodes, "least_loaded", False) and not getattr(parts["p"].nodes, "least_loaded", False)
    assert parts["q"].nodes == parts["p"].nodes == (0, 1, 2)


def test_busy_first_wins_over_least_loaded_for_a_later_start(tmp_path: Path) -> None:
    nodes = NodeTable(_pool(tmp_path))
    free = Free(nodes)
    free.cpu[0] -= 8000
    wl = workload("x", "-c2", 0.0, 1)
    cand = PartNodes((0, 1, 2), least_loaded=True)
    assert place(wl, cand, free)[0][0] == 1  # most free CPUs, lowest index
    assert place(wl, cand, free, busy=1 << 0)[0][0] == 0  # bf_busy_nodes: busy first


@pytest.mark.parametrize("value", ["maybe", "2"])
def test_a_bad_lln_value_names_the_line(tmp_path: Path, value: str) -> None:
    (tmp_path / "slurm.conf").write_text(CONF.format(select="CR_Core_Memory", lln=value, weight=""))
    with pytest.raises(GpupoolError, match="LLN must be YES or NO") as err:
        load_pool(tmp_path)
    assert ":11" in str(err.value)


def test_least_loaded_nodes_follow_the_required_ones(tmp_path: Path) -> None:
    rows = _rows(_pool(tmp_path), HOLD + ["-p q -N2 -c2 -w gpu01"])
    assert rows[2] == (4, [0, 2])  # gpu01 as asked, then gpu03 (16 free) before gpu02 (12)
