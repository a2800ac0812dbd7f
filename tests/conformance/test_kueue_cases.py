"""Every Kueue scenario case in the project's copy (``tests/conformance/kueue/``), run through
gpupool's Kueue core.

The copy holds the spec's cases (``../shared/spec/cases/kueue``, files ``NN-*.yaml``, kept
byte-identical: see ``test_copy_matches_spec``) plus gpupool's own cases (``4N-gp-*.yaml``) whose
expected outcomes were derived by hand from kueue.md. A case that still fails stays here as
``xfail(strict=True)`` with the precise reason; an expectation is never weakened. Expected
fields and input fields the runner cannot check are printed as "not checked" (visible with
``pytest -rA``), never silently passed.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

import gpupool.policy.kueue  # noqa: F401  (registers the policies)
from gpupool.conformance.kueue_cases import CaseError, run_case, run_dir, unread_fields

HERE = Path(__file__).resolve().parent
CASES_DIR = HERE / "kueue"
CASES = sorted(CASES_DIR.glob("*.yaml"))
SPEC_DIR = HERE.parents[1].parent / "shared" / "spec" / "cases" / "kueue"

#: case file stem -> precise reason it still fails (none at present).
XFAIL: dict[str, str] = {}


def _params():
    for path in CASES:
        marks = [pytest.mark.xfail(strict=True, reason=XFAIL[path.stem])] if path.stem in XFAIL else []
        yield pytest.param(path, id=path.stem, marks=marks)


@pytest.mark.parametrize("path", list(_params()))
def test_kueue_case(path: Path) -> None:
    result = run_case(path)
    print(result.summary())
    assert result.passed, result.summary()


def test_copy_has_the_spec_cases_and_our_own() -> None:
    own = [p for p in CASES if "-gp-" in p.name]
    spec = [p for p in CASES if "-gp-" not in p.name]
    assert len(spec) >= 18 and len(own) >= 4
    kinds = {yaml.safe_load(p.read_text())["kind"] for p in own}
    assert {"cycle", "preemption", "integration"} <= kinds


@pytest.mark.skipif(not SPEC_DIR.is_dir(), reason=f"{SPEC_DIR} absent: nothing to compare the copy with")
def test_copy_matches_spec() -> None:
    """The copy is the spec's cases verbatim; a new spec case is copied, never edited."""
    for spec_case in sorted(SPEC_DIR.glob("*.yaml")):
        copy = CASES_DIR / spec_case.name
        assert copy.is_file(), f"{spec_case.name} is in the spec but not in {CASES_DIR}"
        assert copy.read_bytes() == spec_case.read_bytes(), f"{copy} differs from {spec_case}"


def test_run_dir_runs_every_file(tmp_path: Path) -> None:
    for p in CASES[:3]:
        shutil.copy(p, tmp_path / p.name)
    results = run_dir(tmp_path)
    assert [Path(r.path).name for r in results] == [p.name for p in CASES[:3]]
    assert all(r.passed for r in results)


def test_unseen_fields_are_reported_not_ignored(tmp_path: Path) -> None:
    case = yaml.safe_load((CASES_DIR / "04-sched-lending-limit-flat.yaml").read_text())
    case["clusterQueues"][0]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "prov"}]}
    case["pending"][0]["podSets"][0]["topologyRequest"] = {"required": "rack"}
    case["expected"]["evictions"] = []
    path = tmp_path / "unseen.yaml"
    path.write_text(yaml.safe_dump(case))
    assert unread_fields(case) == ["clusterQueues[0].admissionChecksStrategy",
                                   "pending[0].podSets[0].topologyRequest"]
    result = run_case(path)
    assert result.passed  # the outcome still matches...
    notes = "\n".join(result.not_checked)  # ...but what was not modelled is said
    assert "admissionChecksStrategy" in notes and "topologyRequest" in notes and "expected.evictions" in notes


def test_an_unseen_case_is_judged_not_just_run(tmp_path: Path) -> None:
    """A wrong expectation in a case of the same format fails, naming what differs."""
    case = yaml.safe_load((CASES_DIR / "40-gp-hierarchical-borrowing-level-order.yaml").read_text())
    case["expected"]["admitted"] = [{"name": "b-wl", "clusterQueue": "b1"}]
    path = tmp_path / "wrong.yaml"
    path.write_text(yaml.safe_dump(case))
    result = run_case(path)
    assert not result.passed
    assert any("admitted: expected ['b-wl'], got ['a-wl']" in m for m in result.mismatches)


def test_stopped_cluster_queue_gives_no_head(tmp_path: Path) -> None:
    case = yaml.safe_load((CASES_DIR / "42-gp-strictfifo-vs-besteffort.yaml").read_text())
    case["clusterQueues"][1]["stopPolicy"] = "Hold"
    case["expected"] = {"admitted": [], "stillPending": ["b-big", "b-small", "s-big", "s-small"],
                        "queueState": {"b-big": "active", "b-small": "active"}}
    path = tmp_path / "stopped.yaml"
    path.write_text(yaml.safe_dump(case))
    result = run_case(path)
    assert result.passed, result.summary()


def test_bad_case_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("kind: nonsense\n")
    with pytest.raises(CaseError, match="bad.yaml: kind must be one of"):
        run_case(path)
