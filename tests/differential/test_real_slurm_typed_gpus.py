"""GPU requests naming a type on nodes of several GPU types, on a real Slurm 22.05 and in
gpupool, side by side: the cluster's own slurm.conf and gres.conf (``load_pool(rs.etc)``) and
the same sbatch scripts, submitted 5 s apart; once the last was submitted and a backfill cycle
has passed, every job must be RUNNING on the same device indices, or PENDING for the same
reason, in both. Node 1 has ``a100`` on devices 0-3 and ``t4`` on 4-7; node 2 ``a100`` on 0,
MIG-style ``a100_3g.20gb`` on 1-2 and ``v100`` on 3-4 (the harness cannot emulate real MIG
device files; a MIG slice is a typed device to the scheduler). Skipped where Slurm is not
installed. Run alone with
``python -m pytest tests/differential/test_real_slurm_typed_gpus.py -o addopts=""``.
"""
from __future__ import annotations

import re

import pytest

from gpupool.conformance.real_slurm import RealSlurm
from gpupool.engine.core import Engine
from gpupool.engine.nodes import mask_indices
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool
from gpupool.formats.sbatch import parse_sbatch_text, sbatch_to_workload
from gpupool.model import Gpu
from gpupool.model.slurm import Partition

from tests.differential.real_cluster import need, started
from tests.unit.test_slurm_typed_gpus import REAL

pytestmark = [pytest.mark.slurm_real, pytest.mark.slow]

GAP_S = 5.0
SETTLE_S = 40.0


def _script(out: str, partition: str, gpus: str) -> str:
    return (f"#!/bin/bash\n#SBATCH -p {partition}\n#SBATCH -n1\n#SBATCH -t 30\n#SBATCH {gpus}\n"
            f"#SBATCH -o {out}\nsleep 3000\n")


def test_typed_gpu_requests_match_real_slurm(tmp_path):
    need("none")
    rs = RealSlurm(tmp_path / "typed", nodes=2, gpus_per_node=8, cpus_per_node=16, memory_mb=64000,
                   speedup=10, overrides={"SelectTypeParameters": "CR_Core_Memory", "DefMemPerCPU": "100"},
                   scheduler_parameters="bf_interval=30,sched_interval=60")
    n1, n2 = rs.node_names
    rs._nodes[0].gpus = tuple(Gpu(i, "a100") for i in range(4)) + tuple(Gpu(i, "t4") for i in range(4, 8))
    rs._nodes[1].gpus = (Gpu(0, "a100"), Gpu(1, "a100_3g.20gb"), Gpu(2, "a100_3g.20gb"), Gpu(3, "v100"),
                         Gpu(4, "v100"))
    rs._config.partitions = {"p1": Partition("p1", (n1,), default=True, max_time=3600),
                             "p2": Partition("p2", (n2,), max_time=3600)}
    started(rs)
    scripts = []
    real: dict[str, tuple] = {}
    try:
        out = str(rs.out_dir / "%j.out")
        ids = []
        for k, (name, part, opt, _want) in enumerate(REAL):
            text = _script(out, part, opt)
            path = rs.dir / f"{name}.sbatch"
            path.write_text(text)
            scripts.append(text)
            ids.append(rs.sbatch([str(path)]))
            if k < len(REAL) - 1:
                rs.sleep(GAP_S)
        rs.sleep(SETTLE_S)
        for (name, *_x), jid in zip(REAL, ids):
            text = rs.run(["scontrol", "-d", "show", "job", str(jid)]).stdout
            state = re.search(r"JobState=(\S+)", text).group(1)
            if state == "RUNNING":
                idx = [int(i) for grp in re.findall(r"\(IDX:([0-9,-]+)\)", text) for i in _expand(grp)]
                real[name] = ("RUNNING", sorted(idx))
            else:
                real[name] = (state, re.search(r"Reason=(\S+)", text).group(1))
        pool = load_pool(rs.etc)
    finally:
        rs.stop()
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    wls = [sbatch_to_workload(parse_sbatch_text(text, f"{name}.sbatch"), id=k + 1, submit_time=GAP_S * k,
                              runtime=3000.0)[0] for k, ((name, *_x), text) in enumerate(zip(REAL, scripts))]
    run = Engine(pool, wls, make_policy("slurm", pool), check=True, until=GAP_S * len(REAL) + SETTLE_S).run()
    ours = {}
    for job in sorted(run.jobs, key=lambda j: j.id):
        name = REAL[job.id - 1][0]
        ours[name] = (("RUNNING", mask_indices(job.placement[0][1])) if job.state == "RUNNING"
                      else (job.state, job.reason))
    assert real == ours
    # and both are what the real run recorded when the unit test's table was written
    assert real == {name: ("RUNNING", want) if isinstance(want, list) else ("PENDING", want)
                    for name, _p, _o, want in REAL}


def _expand(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        if part:
            a, _, b = part.partition("-")
            out += range(int(a), int(b or a) + 1)
    return out
