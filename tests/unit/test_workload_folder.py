"""Workload folders: scripts and manifests plus arrivals become numbered workloads."""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from gpupool.errors import InputError
from gpupool.workload.folder import load_workload_folder

SEED = Path(__file__).resolve().parents[2] / "examples/seed-pool/workloads"


def script(folder: Path, name: str, *directives: str, runtime: str | None = None) -> Path:
    lines = ["#!/bin/bash", *(f"#SBATCH {d}" for d in directives)]
    if runtime is not None:
        lines.append(f"#GPUPOOL runtime={runtime}")
    lines.append("srun hostname")
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    return path


def arrivals(folder: Path, *rows: str, header: str = "source,submit_time,runtime") -> Path:
    path = folder / "arrivals.csv"
    path.write_text("\n".join((header, *rows)) + "\n")
    return path


def load_error(folder: Path) -> str:
    with pytest.raises(InputError) as info:
        load_workload_folder(folder)
    return str(info.value).replace(str(folder) + "/", "")


def test_without_arrivals_each_script_once_at_zero(tmp_path: Path) -> None:
    script(tmp_path, "b.sbatch", "-N 1", "--gpus-per-node=8", runtime="1:00:00")
    script(tmp_path, "a.sh", "--gres=gpu:1", runtime="600")
    (tmp_path / "README.md").write_text("not read\n")
    wls = load_workload_folder(tmp_path)
    assert [(w.id, w.name, w.submit_time, w.runtime, w.total_gpus) for w in wls] == [
        (1, "a", 0.0, 600.0, 1), (2, "b", 0.0, 3600.0, 8)]


def test_missing_runtime_without_arrivals(tmp_path: Path) -> None:
    script(tmp_path, "a.sbatch", "-N 1")
    assert load_error(tmp_path) == (
        "a.sbatch: the runtime is missing: add a '#GPUPOOL runtime=<duration>' comment (for example "
        "'#GPUPOOL runtime=10:30:00') or a row to arrivals.csv (source,submit_time,runtime)")


def test_arrivals_order_ids_counts_and_outcomes(tmp_path: Path) -> None:
    script(tmp_path, "train.sbatch", "-N 2", "--gpus-per-node=8", "--time=12:00:00")
    script(tmp_path, "tune.sbatch", "--gres=gpu:1", runtime="99")
    script(tmp_path, "extra.sbatch", "--gres=gpu:2", runtime="30:00")
    arrivals(tmp_path, "tune.sbatch,100,2:00:00,FAILED,2,50", "train.sbatch,0,10:30:00,,,",
             "tune.sbatch,100,60,,1,", header="source,submit_time,runtime,outcome,count,interval")
    wls = load_workload_folder(tmp_path)
    assert [(w.id, w.name, w.submit_time, w.runtime, w.outcome) for w in wls] == [
        (1, "extra", 0.0, 1800.0, "COMPLETED"),
        (2, "train", 0.0, 37800.0, "COMPLETED"),
        (3, "tune", 100.0, 7200.0, "FAILED"),
        (4, "tune", 100.0, 60.0, "COMPLETED"),
        (5, "tune", 150.0, 7200.0, "FAILED"),
    ]
    assert wls[1].time_limit == 43200.0 and wls[1].source == str(tmp_path / "train.sbatch")


def test_comment_outcome_and_checkpoint_fill_empty_cells(tmp_path: Path) -> None:
    path = tmp_path / "a.sbatch"
    path.write_text("#!/bin/bash\n#SBATCH -N 1\n#GPUPOOL outcome=CANCELLED checkpoint_interval=900\ntrue\n")
    arrivals(tmp_path, "a.sbatch,0,60")
    (wl,) = load_workload_folder(tmp_path)
    assert (wl.outcome, wl.checkpoint_interval) == ("CANCELLED", 900.0)


def test_array_takes_one_id_per_task(tmp_path: Path) -> None:
    script(tmp_path, "eval.sbatch", "--array=0-3", "-N 1", "--gres=gpu:8")
    script(tmp_path, "late.sbatch", "-N 1")
    arrivals(tmp_path, "eval.sbatch,0,600", "late.sbatch,10,60")
    wls = load_workload_folder(tmp_path)
    assert [(w.id, w.array_job_id, w.array_task_id) for w in wls] == [
        (1, 1, 0), (2, 1, 1), (3, 1, 2), (4, 1, 3), (5, None, None)]


def test_row_naming_missing_file(tmp_path: Path) -> None:
    script(tmp_path, "a.sbatch", "-N 1")
    arrivals(tmp_path, "a.sbatch,0,60", "gone.sbatch,0,60")
    assert load_error(tmp_path) == (
        "arrivals.csv:3 (field source): row names 'gone.sbatch', but gone.sbatch does not exist")
    (tmp_path / "notes.txt").write_text("x")
    arrivals(tmp_path, "notes.txt,0,60")
    assert load_error(tmp_path).endswith(
        "row names 'notes.txt', but notes.txt is not a script or manifest "
        "(expected *.sbatch, *.sh, *.yaml or *.yml)")


def test_script_not_in_arrivals(tmp_path: Path) -> None:
    script(tmp_path, "a.sbatch", "-N 1")
    script(tmp_path, "b.sbatch", "-N 1", runtime="120")
    arrivals(tmp_path, "a.sbatch,30,60")
    wls = load_workload_folder(tmp_path)
    assert [(w.name, w.submit_time, w.runtime) for w in wls] == [("b", 0.0, 120.0), ("a", 30.0, 60.0)]
    script(tmp_path, "c.sbatch", "-N 1")
    assert load_error(tmp_path) == (
        "c.sbatch: not named in arrivals.csv and no '#GPUPOOL runtime=' comment, so its "
        "runtime is unknown: add a '#GPUPOOL runtime=<duration>' comment (for example "
        "'#GPUPOOL runtime=10:30:00') or a row to arrivals.csv (source,submit_time,runtime)")


def test_dependencies_on_script_names(tmp_path: Path) -> None:
    script(tmp_path, "prep.sbatch", "-N 1")
    script(tmp_path, "train.sbatch", "-N 1", "--dependency=afterok:prep:17?afterany:prep+5")
    arrivals(tmp_path, "prep.sbatch,0,60", "prep.sbatch,500,60", "train.sbatch,100,60,2,500",
             header="source,submit_time,runtime,count,interval")
    wls = load_workload_folder(tmp_path)
    assert [(w.id, w.name, w.submit_time) for w in wls] == [
        (1, "prep", 0.0), (2, "train", 100.0), (3, "prep", 500.0), (4, "train", 600.0)]
    # each resolves to the latest submission of prep before it
    assert wls[1].dependency == "afterok:1:17?afterany:1+5"
    assert wls[3].dependency == "afterok:3:17?afterany:3+5"


def test_dependency_errors(tmp_path: Path) -> None:
    script(tmp_path, "train.sbatch", "-N 1", "--dependency=afterok:prepare")
    arrivals(tmp_path, "train.sbatch,0,60")
    assert load_error(tmp_path) == (
        "train.sbatch:3: --dependency names 'prepare', which is neither a job id nor the stem of a "
        "script or manifest in this folder (stems: train)")
    script(tmp_path, "prepare.sbatch", "-N 1")
    arrivals(tmp_path, "train.sbatch,0,60", "prepare.sbatch,10,60")
    assert load_error(tmp_path) == (
        "train.sbatch:3: --dependency names 'prepare' (prepare.sbatch), which is not submitted "
        "before this job; submit it earlier in arrivals.csv")


def test_self_dependency_chains_copies_but_not_the_first(tmp_path: Path) -> None:
    script(tmp_path, "chain.sbatch", "-N 1", "--dependency=afterok:chain")
    arrivals(tmp_path, "chain.sbatch,0,60")
    assert load_error(tmp_path) == (
        "chain.sbatch:3: --dependency names 'chain' (chain.sbatch), which is not submitted "
        "before this job; submit it earlier in arrivals.csv")


def test_begin_dates_use_the_epoch(tmp_path: Path) -> None:
    script(tmp_path, "a.sbatch", "-N 1", "--begin=2026-12-01T12:00:00")
    arrivals(tmp_path, "a.sbatch,2026-12-01T10:00:00,60")
    (wl,) = load_workload_folder(tmp_path)
    assert wl.begin_time == 7200.0
    (wl,) = load_workload_folder(tmp_path, epoch=datetime(2026, 12, 1, 11, 0, tzinfo=timezone.utc))
    assert wl.begin_time == 3600.0


def test_not_a_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="expected a workload folder"):
        load_workload_folder(tmp_path / "nothing")


def _kube_available() -> bool:
    try:
        import gpupool.formats.kube_workloads  # noqa: F401
        import gpupool.formats.kube_yaml  # noqa: F401
    except ImportError:
        return False
    return True


JOB_YAML = """\
# GPUPOOL runtime=1:00:00
apiVersion: batch/v1
kind: Job
metadata:
  name: tiny
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        resources:
          requests:
            cpu: "1"
            nvidia.com/gpu: "1"
          limits:
            nvidia.com/gpu: "1"
"""


@pytest.mark.skipif(not _kube_available(), reason="kube_yaml / kube_workloads not available")
def test_yaml_manifest(tmp_path: Path) -> None:
    (tmp_path / "tiny.yaml").write_text(JOB_YAML)
    script(tmp_path, "a.sbatch", "-N 1", runtime="60")
    wls = load_workload_folder(tmp_path)
    assert [w.id for w in wls] == [1, 2]
    tiny = wls[1]
    assert (tiny.submit_time, tiny.runtime, tiny.total_gpus) == (0.0, 3600.0, 1)
    arrivals(tmp_path, "tiny.yaml,50,120", "a.sbatch,0,60")
    wls = load_workload_folder(tmp_path)
    assert (wls[1].submit_time, wls[1].runtime) == (50.0, 120.0)


@pytest.mark.skipif(not _kube_available(), reason="kube_yaml / kube_workloads not available")
def test_yaml_manifest_runtime_from_annotations(tmp_path: Path) -> None:
    text = JOB_YAML.replace("# GPUPOOL runtime=1:00:00\n", "").replace(
        "  name: tiny\n", "  name: tiny\n  annotations:\n    gpupool.io/runtime: \"300\"\n"
        "    gpupool.io/submit-time: \"20\"\n")
    (tmp_path / "tiny.yml").write_text(text)
    (wl,) = load_workload_folder(tmp_path)
    assert (wl.id, wl.submit_time, wl.runtime) == (1, 20.0, 300.0)
    (tmp_path / "tiny.yml").write_text(text.replace('    gpupool.io/runtime: "300"\n', ""))
    assert load_error(tmp_path).startswith("tiny.yml: the runtime is missing")


def test_seed_folder() -> None:
    if not (SEED / "pretrain-run-job.yaml").exists() or not _kube_available():
        pytest.skip("the seed's pretrain-run-job.yaml or the kube formats are not there yet")
    wls = load_workload_folder(SEED)
    first = wls[0]
    assert (first.name, first.submit_time, first.runtime, first.pod_sets[0].count,
            first.pod_sets[0].gpus) == ("pretrain-run", 0.0, 37800.0, 2, 8)
    names = [w.name for w in wls]
    assert names.count("eval-sweep") == 4


def test_seed_scripts_without_manifest(tmp_path: Path) -> None:
    """The seed's sbatch scripts and their arrivals rows load on their own."""
    for path in SEED.glob("*.sbatch"):
        (tmp_path / path.name).write_text(path.read_text())
    rows = [line for line in (SEED / "arrivals.csv").read_text().splitlines() if ".yaml" not in line]
    (tmp_path / "arrivals.csv").write_text("\n".join(rows) + "\n")
    wls = load_workload_folder(tmp_path)
    assert [(w.id, w.name, w.submit_time) for w in wls] == [
        (1, "pretrain-run", 0.0), (2, "finetune-lora", 1800.0), (3, "eval-sweep", 7200.0),
        (4, "eval-sweep", 7200.0), (5, "eval-sweep", 7200.0), (6, "eval-sweep", 7200.0)]
    assert wls[2].dependency == "afterok:2"
    assert wls[0].total_gpus == 16 and wls[1].total_gpus == 1 and wls[2].total_gpus == 8
