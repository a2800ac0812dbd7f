"""slurm.conf's MaxArraySize: sbatch refuses a whole array whose spec reaches it ("Invalid job
array specification"), as a real 22.05.8 did (default 1001: indices 0-1000;
``tests/differential/test_real_slurm_array_size.py`` submits the same specs to both)."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool
from gpupool.formats.sbatch import sbatch_to_workload

from tests.unit.sbatch_plans import script
from tests.unit.test_slurm_job_defaults import CONF

#: (slurm.conf line, --array spec, refused), as the real runs went
CASES = [
    ("", "0-1000", False),
    ("", "1001", True),
    ("", "5-1001", True),
    ("MaxArraySize=10", "0-9", False),
    ("MaxArraySize=10", "10", True),
]


@pytest.mark.parametrize("globals_, spec, refused", CASES + [("MaxArraySize=0", "0", True)])  # 0: no arrays
def test_arrays_reaching_max_array_size_are_refused_whole(tmp_path: Path, globals_: str, spec: str,
                                                          refused: bool) -> None:
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)
    from gpupool.formats.sbatch import parse_sbatch_text
    from gpupool.policy.slurm.submit_check import submit_rejection

    (tmp_path / "slurm.conf").write_text(CONF.format(select="CR_Core_Memory", globals=globals_ + "\nDefMemPerCPU=100", q=""))
    pool = load_pool(tmp_path)
    wls = sbatch_to_workload(parse_sbatch_text(script(f"--array={spec} -c1"), "a.sbatch"), id=1, submit_time=0.0,
                             runtime=5.0)
    out = Engine(pool, wls, make_policy("slurm", pool), until=1.0).run()
    states = {j.state for j in out.jobs}
    if refused:
        assert states == {"REJECTED"}
        assert {j.reason for j in out.jobs} == {"Invalid job array specification"}
        assert submit_rejection(pool, wls[0]) == "Invalid job array specification"
    else:
        assert "REJECTED" not in states and "RUNNING" in states
        assert submit_rejection(pool, wls[-1]) is None
