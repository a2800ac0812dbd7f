"""A workload folder: sbatch scripts and Kubernetes manifests plus when each is submitted.

The folder holds ``*.sbatch`` / ``*.sh`` scripts, ``*.yaml`` / ``*.yml`` manifests and,
optionally, ``arrivals.csv`` (see :mod:`gpupool.formats.arrivals`). Other files are not read.

* Each arrivals row submits its file ``count`` times. A file no row names is submitted once
  at time 0 when it carries a ``#GPUPOOL runtime=…`` comment (a manifest whose workloads all
  carry a ``gpupool.io/runtime`` annotation is submitted as those annotations say);
  otherwise loading fails, since a replay cannot invent how long a job runs.
* Without ``arrivals.csv`` every file is submitted once at 0 with its ``#GPUPOOL`` runtime.
* Workloads are numbered 1..n in submit order; ties go by file name, then arrivals row, then
  copy. An array takes one id per task.
* gpupool extension: ``--dependency=afterok:<stem>`` may name another file of the folder by
  its stem (``pretrain-run`` for ``pretrain-run.sbatch``); it becomes the id of that file's
  latest submission before this one. Numeric job ids pass through unchanged.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from gpupool.errors import InputError
from gpupool.formats.arrivals import Arrival, arrivals_epoch, parse_arrivals
from gpupool.formats.sbatch import (
    Dependency,
    DependencyClause,
    SbatchJob,
    parse_gpupool_comments,
    parse_sbatch,
    sbatch_to_workload,
)
from gpupool.model.workload import Workload

ARRIVALS_FILE = "arrivals.csv"
SCRIPT_SUFFIXES = (".sbatch", ".sh")
MANIFEST_SUFFIXES = (".yaml", ".yml")
_RUNTIME_HINT = ("add a '#GPUPOOL runtime=<duration>' comment (for example '#GPUPOOL runtime=10:30:00') "
                 f"or a row to {ARRIVALS_FILE} (source,submit_time,runtime)")


@dataclass
class _Entry:
    """One workload file of the folder, parsed once."""

    path: Path
    facts: dict[str, object]
    job: SbatchJob | None = None  # sbatch scripts
    manifest: list[Workload] | None = None  # Kubernetes manifests

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def stem(self) -> str:
        return self.path.stem


@dataclass(frozen=True)
class _Submission:
    """One submission of one file, before ids are given."""

    time: float
    name: str
    row: int  # arrivals row (line), or 0 for files submitted from their comments
    copy: int
    runtime: float
    outcome: str
    checkpoint_interval: float | None
    #: For a manifest submitted from its own ``gpupool.io/*`` annotations: which of its
    #: workloads this is (None = all of the file's workloads).
    member: int | None = None
    #: The submitting user from the arrivals row (None: the script's or manifest's own).
    user: str | None = None

    def key(self) -> tuple[float, str, int, int]:
        return (self.time, self.name, self.row, self.copy)


def load_workload_folder(path: Path, *, epoch: datetime | None = None) -> list[Workload]:
    """Every workload the folder submits, numbered 1..n in submit order.

    ``epoch`` is the wall-clock instant of time 0, used for ``--begin`` dates; by default the
    earliest arrivals timestamp when the arrivals file uses timestamps.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise InputError(str(folder), "expected a workload folder (a directory of sbatch scripts, "
                         "manifests and arrivals.csv)")
    entries = _read_entries(folder)
    arrivals_path = folder / ARRIVALS_FILE
    arrivals = parse_arrivals(arrivals_path) if arrivals_path.is_file() else []
    if epoch is None:
        epoch = arrivals_epoch(arrivals)
    submissions = _submissions(folder, entries, arrivals, arrivals_path)
    return _build(entries, sorted(submissions, key=_Submission.key), epoch)


def _read_entries(folder: Path) -> dict[str, _Entry]:
    """Parse every script and manifest, in file-name order."""
    entries: dict[str, _Entry] = {}
    for file in sorted(p for p in folder.iterdir() if p.is_file()):
        suffix = file.suffix.lower()
        if suffix in SCRIPT_SUFFIXES:
            job = parse_sbatch(file)
            facts = {k: getattr(job, k) for k in ("runtime", "outcome", "checkpoint_interval")
                     if getattr(job, k) is not None}
            entries[file.name] = _Entry(file, facts, job=job)
        elif suffix in MANIFEST_SUFFIXES:
            entries[file.name] = _read_manifest(file)
    return entries


def _read_manifest(file: Path) -> _Entry:
    """A Kubernetes manifest through the kube formats (imported here: they are optional)."""
    from gpupool.formats.kube_workloads import workloads_from_documents
    from gpupool.formats.kube_yaml import load_yaml_documents

    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(str(file), f"cannot read the manifest: {exc}") from None
    facts = parse_gpupool_comments(text, str(file))
    workloads = list(workloads_from_documents(load_yaml_documents(file)))
    for item in workloads:
        if not isinstance(item, Workload):
            raise InputError(str(file), f"a workload folder takes batch workloads; this manifest "
                             f"gives a {type(item).__name__}")
    if not workloads:
        raise InputError(str(file), "the manifest holds no workload (expected a Job, JobSet, "
                         "RayJob or similar batch object)")
    return _Entry(file, facts, manifest=workloads)


def _submissions(folder: Path, entries: dict[str, _Entry], arrivals: list[Arrival],
                 arrivals_path: Path) -> list[_Submission]:
    """Rows of the arrivals file, then files no row names (from their #GPUPOOL comments)."""
    out: list[_Submission] = []
    named: set[str] = set()
    for row in arrivals:
        entry = entries.get(row.source)
        if entry is None:
            raise _missing_file(folder, row, arrivals_path)
        named.add(row.source)
        outcome = row.outcome or str(entry.facts.get("outcome", "COMPLETED"))
        checkpoint = row.checkpoint_interval
        if checkpoint is None:
            checkpoint = entry.facts.get("checkpoint_interval")  # type: ignore[assignment]
        for copy, time in enumerate(row.submit_times()):
            out.append(_Submission(time, row.source, row.line, copy, row.runtime, outcome, checkpoint,
                                   user=row.user))
    for name, entry in entries.items():
        if name in named:
            continue
        if "runtime" not in entry.facts and entry.manifest and all(w.runtime > 0 for w in entry.manifest):
            out.extend(_from_annotations(entry))
        else:
            out.append(_from_comments(entry, arrivals_path if arrivals else None))
    return out


def _from_annotations(entry: _Entry) -> list[_Submission]:
    """A manifest whose workloads carry their own ``gpupool.io/runtime`` (and submit-time)."""
    assert entry.manifest is not None
    return [_Submission(w.submit_time, entry.name, 0, i, w.runtime, w.outcome, w.checkpoint_interval,
                        member=i) for i, w in enumerate(entry.manifest)]


def _missing_file(folder: Path, row: Arrival, arrivals_path: Path) -> InputError:
    target = folder / row.source
    what = ("is not a script or manifest (expected *.sbatch, *.sh, *.yaml or *.yml)"
            if target.exists() else "does not exist")
    return InputError(str(arrivals_path), f"row names {row.source!r}, but {target} {what}",
                      line=row.line, field="source")


def _from_comments(entry: _Entry, arrivals_path: Path | None) -> _Submission:
    """A file no arrivals row names: once at 0, with the runtime its comment gives."""
    runtime = entry.facts.get("runtime")
    if runtime is None:
        if arrivals_path is None:
            message = f"the runtime is missing: {_RUNTIME_HINT}"
        else:
            message = (f"not named in {arrivals_path} and no '#GPUPOOL runtime=' comment, so its "
                       f"runtime is unknown: {_RUNTIME_HINT}")
        raise InputError(str(entry.path), message)
    return _Submission(0.0, entry.name, 0, 0, float(runtime),  # type: ignore[arg-type]
                       str(entry.facts.get("outcome", "COMPLETED")),
                       entry.facts.get("checkpoint_interval"))  # type: ignore[arg-type]


def _build(entries: dict[str, _Entry], submissions: list[_Submission],
           epoch: datetime | None) -> list[Workload]:
    """Give ids in submit order and resolve script-name dependencies to those ids."""
    stems = {entry.stem: entry.name for entry in entries.values()}
    first_ids: dict[str, list[int]] = {}
    out: list[Workload] = []
    for sub in submissions:
        entry = entries[sub.name]
        next_id = len(out) + 1
        if entry.job is not None:
            dependency = _resolve_dependency(entry.job, stems, first_ids)
            made = sbatch_to_workload(
                entry.job, id=next_id, submit_time=sub.time, runtime=sub.runtime,
                outcome=sub.outcome, checkpoint_interval=sub.checkpoint_interval, epoch=epoch,
                dependency=dependency)
        else:
            made = _manifest_copies(entry, sub, next_id)
        if sub.user is not None:
            made = [replace(w, user=sub.user) for w in made]
        first_ids.setdefault(sub.name, []).append(next_id)
        out.extend(made)
    return out


def _manifest_copies(entry: _Entry, sub: _Submission, next_id: int) -> list[Workload]:
    assert entry.manifest is not None
    members = entry.manifest if sub.member is None else [entry.manifest[sub.member]]
    return [
        replace(w, id=next_id + i, submit_time=sub.time, runtime=sub.runtime, outcome=sub.outcome,
                checkpoint_interval=sub.checkpoint_interval, labels=dict(w.labels),
                source=w.source or str(entry.path))
        for i, w in enumerate(members)
    ]


_NUMERIC_ID = re.compile(r"\d+(?:_\d+)?(?:\+\d+)?")


def _resolve_dependency(job: SbatchJob, stems: dict[str, str],
                        first_ids: dict[str, list[int]]) -> str | None:
    """Dependency text with folder names replaced by the ids already given to them."""
    if job.dependency is None:
        return None
    clauses = []
    for clause in job.dependency.clauses:
        ids = tuple(_resolve_id(job, token, stems, first_ids) for token in clause.job_ids)
        clauses.append(DependencyClause(clause.type, ids))
    return Dependency(tuple(clauses), job.dependency.any_of).text()


def _resolve_id(job: SbatchJob, token: str, stems: dict[str, str],
                first_ids: dict[str, list[int]]) -> str:
    if _NUMERIC_ID.fullmatch(token):
        return token
    name, plus, delay = token.partition("+")
    line = job.lines.get("dependency")
    if name not in stems:
        known = ", ".join(sorted(stems)) or "none"
        raise InputError(job.source, f"--dependency names {name!r}, which is neither a job id nor "
                         f"the stem of a script or manifest in this folder (stems: {known})", line=line)
    ids = first_ids.get(stems[name])
    if not ids:
        raise InputError(job.source, f"--dependency names {name!r} ({stems[name]}), which is not "
                         "submitted before this job; submit it earlier in arrivals.csv", line=line)
    return f"{ids[-1]}{plus}{delay}"
