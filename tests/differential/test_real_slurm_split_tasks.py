"""``--nodes=N --ntasks=T`` (or ``--nodes=A-B``) without ``--ntasks-per-node`` on a real Slurm
22.05 and in gpupool: the CPUs, memory and GPUs each node gets (the rules:
``gpupool/policy/slurm/split_tasks.py``; more cases without a real Slurm:
``tests/unit/test_slurm_split_tasks.py`` and ``tests/unit/test_slurm_range_tasks.py``).

One cluster of four 16-core 64000 MB nodes (CR_Core_Memory, DefMemPerCPU=100) runs each case
in turn: its holders, then the job; the job's CPU_IDs, memory and GPU indices per node are read from
``scontrol -d show job``, then everything is cancelled and the nodes left idle before the next
case; a second cluster does the same in an LLN partition. gpupool replays each case on the cluster's own slurm.conf. Skipped where Slurm is not
installed. Run alone with
``python -m pytest tests/differential/test_real_slurm_split_tasks.py -o addopts=""``.
"""
from __future__ import annotations

import re

import pytest

from gpupool.formats.hostlist import expand_hostlist

from tests.differential.real_cluster import gpu_cluster, need, replay, submit_each, two_partitions

pytestmark = [pytest.mark.slurm_real, pytest.mark.slow]

GAP_S = 2.0
SETTLE_S = 6.0

#: (holders, the job): the cases that tell the rule apart (first fit in index order, the last
#: node holding all that is left, a retry without the nodes with the fewest free CPUs, one at a
#: time, memory per CPU capping a node's share, a larger run that cannot hold the job chosen
#: over a smaller one that can)
CASES = [
    ([], "-N3 -n4"),
    (["-w gpu01 -c14", "-w gpu02 -c14"], "-N2 -n6"),
    (["-w gpu01 -c14", "-w gpu02 -c14"], "-N2 -n20"),
    (["-w gpu01 -c1 --mem=63000"], "-N2 -n6 --mem-per-cpu=500"),
    (["-w gpu01 -c15", "-w gpu03 -c13"], "-N3 -n6"),
    (["-w gpu01 -c15", "-w gpu02 -c15", "-w gpu03 -c12", "-w gpu04 -c12"], "-N3 -n8"),
    (["-w gpu01 -c12", "-w gpu02 -c12", "-w gpu03 -c16"], "-N2 -n6"),
    # the same choice of runs for an even job (finding 48)
    (["-w gpu01 -c14", "-w gpu02 -c14", "-w gpu03 -c16"], "-N2 -c2"),
    (["-w gpu01 -c14", "-w gpu02 -c14"], "-N3 -w gpu04"),
    (["-w gpu02 -c2", "-w gpu03 -c16", "-w gpu04 -c12"], "-N2 -n6 -w gpu01"),
    # --nodelist nodes first, then up from them, then down
    (["-w gpu01 -c14", "-w gpu02 -c14"], "-N3 -n6 -w gpu04"),
    # GPUs per task follow the tasks; nodes offering fewer GPUs are walked later (findings 52, 55)
    ([], "-N2 -n10 --gpus-per-task=1"),
    (["-w gpu01 -c1 --gres=gpu:6"], "-N2 -n6 --gpus-per-task=1"),
    # a node range: up to its largest count, each node leaving a task for each node still to
    # come up to its least count only, the tasks dealt out; --exclusive whole nodes; GPUs per task
    # from the least count up (finding 89)
    ([], "-N2-3 -n8"),
    ([], "-N2-4 -n40"),
    (["-w gpu01 -c14", "-w gpu02 -c14"], "-N1-2 -n6"),
    (["-w gpu01 -c12", "-w gpu02 -c4", "-w gpu03 -c16"], "-N1-3 -n14"),
    (["-w gpu01 -c1", "-w gpu03 -c1"], "-N1-3 -n20 --exclusive"),
    ([], "-N1-2 -n12 --gpus-per-task=1"),
    (["-w gpu01 -c1 --gres=gpu:7"], "-N1-2 -n6 --gres=gpu:2"),
]


def _cpu_count(ids: str) -> int:
    """``0-4,8`` -> 6 (CPU or GPU indices)."""
    total = 0
    for part in ids.split(","):
        lo, _, hi = part.partition("-")
        total += int(hi or lo) - int(lo) + 1
    return total


def _pods(rs, jid: int) -> list[tuple[int, int, int, int]] | str:
    """(node index, CPUs, MB, GPUs) per node of a running job, else its state."""
    text = rs.run(["scontrol", "-d", "show", "job", str(jid)]).stdout
    state = re.search(r"JobState=(\S+)", text).group(1)
    if state != "RUNNING":
        return state
    names = rs.node_names
    out = []
    for nodes, cpus, mem, gres in re.findall(r"Nodes=(\S+) CPU_IDs=(\S+) Mem=(\d+) GRES=(\S*)", text):
        idx = re.search(r"IDX:([\d,-]+)", gres)
        gpus = _cpu_count(idx.group(1)) if idx else 0
        out += [(names.index(n), _cpu_count(cpus), int(mem), gpus) for n in expand_hostlist(nodes)]
    return sorted(out)


def _idle(rs, ids: list) -> None:
    """Cancel ``ids`` and wait (real seconds) until no job is left and every node is idle (a
    node that is not fails here, named, rather than as a differing placement next case)."""
    rs.run(["scancel", *(str(i) for i in ids if isinstance(i, int))], check=False)
    rs.wait_idle(timeout=120)
    rs.wait_nodes_idle(timeout=60)


#: an LLN partition q: the nodes with the most free CPUs first (gpu01-04: 8, 12, 16, 1 free)
LLN_CASES = [
    (["-w gpu01 -c8", "-w gpu02 -c4", "-w gpu04 -c15"], "-p q -N3 -n30"),
    (["-w gpu01 -c8", "-w gpu02 -c4", "-w gpu04 -c15"], "-p q -N3 -n6"),
]


def _both(rs, cases) -> tuple[list, list]:
    """Each case on the started cluster ``rs`` (stopped at the end), then on gpupool with the
    cluster's slurm.conf: the last job's pods per case, (ours, real)."""
    real = []
    try:
        for holders, job in cases:
            ids = submit_each(rs, holders + [job], GAP_S)
            rs.sleep(SETTLE_S)
            real.append(_pods(rs, ids[-1]))
            _idle(rs, ids)
    finally:
        rs.stop()
    ours = []
    for holders, job in cases:
        engine, _ = replay(rs.etc, holders + [job], GAP_S, GAP_S * len(holders) + SETTLE_S)
        last = engine.jobs[len(holders) + 1]
        ours.append(sorted((n, cpu // 1000, mem, mask.bit_count()) for n, mask, cpu, mem in last.placement)
                    if last.state == "RUNNING" else last.state)
    return ours, real


def test_tasks_split_over_nodes_as_on_a_real_slurm(tmp_path) -> None:
    need("none")
    ours, real = _both(gpu_cluster(tmp_path / "real", 4, "bf_interval=30", {"p": (0, 1, 2, 3)}), CASES)
    assert ours == real


def test_least_loaded_nodes_take_tasks_first_as_on_a_real_slurm(tmp_path) -> None:
    need("none")
    ours, real = _both(two_partitions(tmp_path / "real", 4, {"DefMemPerCPU": "100"}, {"LLN": "YES"}), LLN_CASES)
    assert ours == real
