"""slurm.conf's MaxArraySize on a real Slurm 22.05 and in gpupool: the same ``--array`` specs
submitted to both, compared by acceptance and sbatch's message (cases:
``tests/unit/test_slurm_array_size.py``). Skipped where Slurm is not installed. Run alone with
``python -m pytest tests/differential/test_real_slurm_array_size.py -o addopts=""``.
"""
from __future__ import annotations

import pytest

from gpupool.conformance.real_slurm import RealSlurm
from gpupool.formats.pool_dir import load_pool
from gpupool.formats.sbatch import parse_sbatch_text, sbatch_to_workload
from gpupool.policy.slurm.submit_check import submit_rejection

from tests.differential.real_cluster import need, started
from tests.unit.sbatch_plans import script
from tests.unit.test_slurm_array_size import CASES

pytestmark = [pytest.mark.slurm_real, pytest.mark.slow]

REFUSED = "Batch job submission failed: "


@pytest.mark.parametrize("line", sorted({g for g, _s, _r in CASES}))
def test_max_array_size_matches_real_slurm(tmp_path, line):
    need("none")
    overrides = {"SelectTypeParameters": "CR_Core_Memory", "DefMemPerCPU": "100", "PriorityType": "priority/basic"}
    if line:
        key, value = line.split("=")
        overrides[key] = value
    rs = started(RealSlurm(tmp_path / "real", nodes=1, gpus_per_node=8, cpus_per_node=16, memory_mb=64000,
                           speedup=10, overrides=overrides))
    specs = [spec for g, spec, _r in CASES if g == line]
    try:
        real = []
        for spec in specs:
            got = rs.run(["sbatch", "--parsable", "-o", "/dev/null", f"--array={spec}", "-c1", "--wrap", "sleep 30"],
                         check=False)
            real.append(None if got.returncode == 0 else got.stderr.split(REFUSED)[-1].strip())
    finally:
        rs.stop()
    pool = load_pool(rs.etc)
    ours = []
    for spec in specs:
        wls = sbatch_to_workload(parse_sbatch_text(script(f"--array={spec} -c1"), "a.sbatch"), id=1,
                                 submit_time=0.0, runtime=5.0)
        ours.append(submit_rejection(pool, wls[0]))
    assert ours == real
    assert real == [("Invalid job array specification" if r else None) for g, _s, r in CASES if g == line]
