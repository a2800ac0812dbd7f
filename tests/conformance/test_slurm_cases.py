"""Every Slurm case, each variant, through --policy slurm.

The cases are the project's own copy of ``../shared/spec/cases/slurm`` in ``tests/conformance/slurm``,
so the suite runs where the shared folder is absent, plus gpupool's own cases in the same format
(``*-gp-*.yaml``, expected values derived by hand from slurm.md; see ``slurm/GPUPOOL.md``).
"""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from gpupool.conformance.slurm_cases import load_case, run_case, run_variant, variants_of

CASES = Path(__file__).resolve().parent / "slurm"


@pytest.fixture(autouse=True, scope="module")
def _slurm_registered():
    """"slurm" is registered for these tests; afterwards it is removed again unless
    ``policy_api._load_builtin`` imports gpupool.policy.slurm (other tests list the registry)."""
    import inspect

    from gpupool.engine import policy_api
    from gpupool.policy.slurm import policy as slurm_policy

    policy_api._REGISTRY.setdefault("slurm", (slurm_policy._slurm, slurm_policy.__doc__.split("\n")[0]))
    yield
    if "gpupool.policy.slurm" not in inspect.getsource(policy_api._load_builtin):
        policy_api._REGISTRY.pop("slurm", None)

#: Cases that still fail, with the precise reason. strict=True: they must keep failing
#: until the feature lands (then remove the entry).
XFAIL: dict[tuple[str, str], str] = {}


def _params():
    if not CASES.is_dir():
        return [pytest.param(None, None, marks=pytest.mark.skip(reason=f"{CASES} is absent"))]
    out = []
    for path in sorted(CASES.glob("*.yaml")):
        case = load_case(path)
        for name, _over, _exp in variants_of(case):
            marks = []
            why = XFAIL.get((str(case.get("id")), name))
            if why:
                marks.append(pytest.mark.xfail(strict=True, reason=why))
            out.append(pytest.param(path, name, id=f"{case.get('id')}[{name}]", marks=marks))
    return out


@pytest.mark.parametrize("path,variant", _params())
def test_case(path, variant):
    case = load_case(path)
    (over, exp), = [(o, e) for n, o, e in variants_of(case) if n == variant]
    result = run_variant(case, variant, over, exp)
    if result.not_checked:
        warnings.warn(f"{result.case_id} [{variant}] not checked: {', '.join(result.not_checked)}", stacklevel=1)
    assert result.ok, result.report()


SPEC_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "spec" / "cases" / "slurm"


@pytest.mark.skipif(not SPEC_DIR.is_dir(), reason=f"{SPEC_DIR} absent: nothing to compare the copy with")
def test_copy_matches_spec():
    """The project's copy is the spec's cases verbatim; a new spec case is copied, never edited."""
    for spec_case in sorted(SPEC_DIR.glob("*.yaml")):
        copy = CASES / spec_case.name
        assert copy.is_file(), f"{spec_case.name} is in the spec but not in {CASES}"
        assert copy.read_bytes() == spec_case.read_bytes(), f"{copy} differs from {spec_case}"


def test_own_cases_sit_beside_the_copy():
    """gpupool's own cases (``-gp-`` in the name) cover what the spec lists but does not ship:
    partition_prio SUSPEND,GANG (preempt-002) and a longer gang rotation (gang-002)."""
    own = sorted(p.name for p in CASES.glob("*-gp-*.yaml"))
    assert any(n.startswith("preempt-gp-") for n in own) and any(n.startswith("gang-gp-") for n in own)
    for name in own:
        case = load_case(CASES / name)
        assert "-gp-" in str(case["id"]) and "derived" in case["source"], name


def test_gang_keys_are_checked_not_skipped():
    """running_slices, suspended_s and sacct_elapsed are compared, and a wrong value fails."""
    case = load_case(CASES / "gang-001-two-job-timeslice.yaml")
    (result,) = run_case(CASES / "gang-001-two-job-timeslice.yaml")
    assert {"running_slices", "suspended_s", "sacct_elapsed"} <= set(result.checked)
    assert not result.not_checked
    exp = dict(case["expected"])
    exp["running_slices"] = {3: [[0, 30]] + exp["running_slices"][3][1:]}
    exp["suspended_s"] = {3: 270}
    exp["sacct_elapsed"] = {4: 288}
    bad = run_variant(case, "base", {}, exp)
    assert not bad.ok
    assert [f.split(":")[0] for f in bad.failures] == ["running_slices[3]", "suspended_s[3]", "sacct_elapsed[4]"]
