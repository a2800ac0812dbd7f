"""GPU choice with gres.conf ``Cores=`` (policy/slurm/affinity.py, cores.py).

The expected cores and GPU indices are what a real Slurm 22.05.8 gave the same jobs on
2026-12-02 (2 sockets × 8 cores, 8 GPUs; the differential test
``tests/differential/test_real_slurm_gpu_affinity.py`` replays them on a real cluster)."""
from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings, strategies as st

from gpupool.conformance.affinity_probe import simulate, write_pool
from gpupool.formats.pool_dir import load_pool
from gpupool.model.pool import Gpu, Node
from gpupool.policy.slurm import affinity
from gpupool.policy.slurm.cores import CoreBook

HALVES = {(0, 3): "0-7", (4, 7): "8-15"}

#: (sbatch arguments, real cores, real GPU indices), jobs submitted 10 s apart and left running
REAL_HALVES = [
    [("-N1 -n1 --gres=gpu:1", "0", "0"), ("-N1 -n1 --gres=gpu:1", "8", "4"),
     ("-N1 -n4 --gres=gpu:2", "1-4", "1-2"), ("-N1 -n1 -c6 --gres=gpu:3", "9-14", "5-7"),
     ("-N1 -n2 --gres=gpu:1", "5-6", "3")],
    [("-N1 -n4", "0-1,8-9", ""), ("-N1 -n1 --gres=gpu:1", "2", "0"),
     ("-N1 -n1 -c10 --gres=gpu:1", "3-6,10-15", "1"), ("-N1 -n1 --gres=gpu:2", "7", "2-3")],
    [("-N1 -n2 -c3 --gres=gpu:2", "0-5", "0-1"), ("-N1 --gres=gpu:1", "8", "4"),
     ("-N1 -n5 --gres=gpu:4", "6-7,9-11", "2-3,5-6"), ("-N1 -n1 -c2 --gres=gpu:1", "12-13", "7")],
]
#: GPUs 2, 3, 6 and 7 bound to no socket
REAL_SOME_UNBOUND = [
    [("-N1 -n1 --gres=gpu:1", "8", "2"), ("-N1 -n1 --gres=gpu:2", "9", "3-4"),
     ("-N1 -n3 --gres=gpu:1", "0,10-11", "6"), ("-N1 -n1 --gres=gpu:3", "12", "0,5,7")],
]


#: the same node with ThreadsPerCore=2 (cores, not CPU ids)
REAL_TWO_THREADS = [
    [("-N1 -n1 --gres=gpu:1", "0", "0"), ("-N1 -n1 --gres=gpu:1", "8", "4"),
     ("-N1 -n4 --gres=gpu:2", "1-2", "1-2"), ("-N1 -n1 -c6 --gres=gpu:3", "9-11", "5-7"),
     ("-N1 -n2 --gres=gpu:1", "3", "3")],
    [("-N1 -n3", "0,8", ""), ("-N1 -n1 -c4 --gres=gpu:2", "1-2", "0-1"),
     ("-N1 -n1 -c9 --gres=gpu:1", "9-13", "4")],
]


#: ``--gpus`` and ``--gpus-per-task`` with one node (the halves layout)
REAL_ONE_NODE_PER_JOB = [
    [("-N1 -n1 --gpus=1", "0", "0"), ("-N1 -n1 --gpus=1", "8", "4"), ("-N1 -n4 --gpus=2", "1-4", "1-2"),
     ("-N1 -n1 -c6 --gpus=3", "9-14", "5-7")],
    [("-N1 -n1 --gres=gpu:1", "0", "0"), ("-N1 -n2 --gpus-per-task=1", "8-9", "4-5"),
     ("-N1 -n1 --gpus=2", "1", "1-2")],
]


def _ids(text: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(out)


def _check(tmp_path: Path, layout: dict, runs: list, threads: int = 1) -> None:
    pool_dir = write_pool(tmp_path / "pool", layout, threads=threads)
    for run in runs:
        got = simulate(pool_dir, [args for args, _c, _g in run])
        assert got == [(_ids(c), _ids(g)) for _a, c, g in run], run


def test_halves_as_real_slurm(tmp_path):
    _check(tmp_path, HALVES, REAL_HALVES)


def test_two_threads_per_core_as_real_slurm(tmp_path):
    _check(tmp_path, HALVES, REAL_TWO_THREADS, threads=2)


def test_unbound_gpus_first_as_real_slurm(tmp_path):
    _check(tmp_path, {(0, 1): "0-7", (4, 5): "8-15"}, REAL_SOME_UNBOUND)


def test_a_gpu_bound_to_every_socket_counts_as_bound_to_none():
    node = Node("n", cpus=16, memory_mib=1000, sockets=2, cores_per_socket=8,
                gpus=(Gpu(0, cores=tuple(range(16))), Gpu(1, cores=tuple(range(8)))))
    topo = affinity.topology_of(node)
    assert topo is not None and topo.gpu_sockets == (0, 1)
    assert affinity.topology_of(Node("m", cpus=16, memory_mib=1000, gpus=(Gpu(0), Gpu(1)))) is None


def test_pools_without_cores_keep_lowest_index(tmp_path):
    """No ``Cores=``: no book, GPUs by lowest free index (the second job gets GPU 1)."""
    pool_dir = write_pool(tmp_path / "plain", {})
    assert CoreBook.for_nodes(list(load_pool(pool_dir).nodes.values())) is None
    got = simulate(pool_dir, ["-N1 -n1 --gres=gpu:1", "-N1 -n1 --gres=gpu:1"])
    assert [g for _c, g in got] == [(0,), (1,)]


def test_one_node_gpus_and_gpus_per_task_are_picked_as_per_node_counts(tmp_path):
    """On one node ``--gpus`` and ``--gpus-per-task`` got what ``--gres`` gets (real 22.05.8)."""
    _check(tmp_path, HALVES, REAL_ONE_NODE_PER_JOB)


def test_gpus_over_several_nodes_are_not_steered(tmp_path):
    """``--gpus`` spread over several nodes keeps the lowest free indices (not modelled)."""
    from gpupool.formats.sbatch import job_pod_set, parse_sbatch

    path = tmp_path / "j.sh"
    path.write_text("#!/bin/bash\n#SBATCH -N2\n#SBATCH --gpus=4\nsleep 1\n")
    assert job_pod_set(parse_sbatch(path))[0].slurm_tasks is None
    path.write_text("#!/bin/bash\n#SBATCH -N2\n#SBATCH --gpus-per-node=2\nsleep 1\n")
    assert job_pod_set(parse_sbatch(path))[0].slurm_tasks == (1, 0, 1)


_seq_st = st.lists(st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(0, 4), st.integers(5, 60)),
                   min_size=1, max_size=10)


@settings(max_examples=30, deadline=None)
@given(_seq_st, st.sampled_from([HALVES, {(0, 1): "0-7", (4, 5): "8-15"}, {(0, 7): "0-3"}]))
def test_property_no_core_or_gpu_is_held_twice(tmp_path_factory, seq, layout):
    """Random jobs on an affinity node: the engine's checks (no GPU given twice) hold, and the
    cores the book records for jobs running at the same time never overlap."""
    pool_dir = write_pool(tmp_path_factory.mktemp("p"), layout)
    entries = [f"-N1 -n{n} -c{c}" + (f" --gres=gpu:{g}" if g else "") + f" @{r}" for n, c, g, r in seq]
    import gpupool.policy.slurm  # noqa: F401
    from gpupool.engine.core import Engine
    from gpupool.engine.policy_api import make_policy
    from gpupool.formats.sbatch import parse_sbatch, sbatch_to_workload

    pool = load_pool(pool_dir)
    wls = []
    for k, entry in enumerate(entries):
        args = entry.split()[:-1]
        path = pool_dir / f"j{k}.sh"
        path.write_text("#!/bin/bash\n" + "".join(f"#SBATCH {a}\n" for a in args) + "sleep 1\n")
        wls += sbatch_to_workload(parse_sbatch(path), id=k + 1, submit_time=3.0 * k, runtime=float(seq[k][3]))
    policy = make_policy("slurm", pool, {"record": True})
    out = Engine(pool, wls, policy, check=True).run()
    log = policy.cores.log
    for a in out.jobs:
        for b in out.jobs:
            if a.id < b.id and a.start < b.end and b.start < a.end:
                assert not set(log[a.id][0]) & set(log[b.id][0]), (a.id, b.id)
    for job in out.jobs:
        cpus = -(-job.placement[0][2] // 1000)
        assert len(log[job.id][0]) == cpus
