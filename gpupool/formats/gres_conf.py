"""gres.conf: which device files, core affinity and MIG slices back each node's GPUs.

slurm.conf says how many GPUs a node has (``Gres=gpu:8``); gres.conf says which devices they
are. gpupool needs both to pick GPU indices the way Slurm does (lowest free index on the
job's sockets first), so ``apply_gres`` merges them into each node's ``gpus`` and refuses
files that disagree, naming both sides.

Lines (Slurm 22.05 keys, case-insensitive): ``AutoDetect=nvml|rsmi|oneapi|nvidia|nrt|off``;
``[NodeName=HOSTLIST] Name=gpu [Type=T] [File=/dev/nvidia[0-3] | MultipleFiles=F1,F2,…]
[Count=N] [Cores=0-31] [Links=…] [Flags=…]``. ``CPUs=`` (deprecated in Slurm) is refused:
its CPU ids are not the core ids gpupool uses.
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from gpupool.errors import InputError, MissingReferenceError
from gpupool.formats.hostlist import HostlistError, expand_hostlist
from gpupool.formats.slurm_conf import canonical_key, logical_lines, parse_gres_count, split_source, tokenize_line
from gpupool.model.pool import Gpu, Node
from gpupool.model.slurm import GresEntry

__all__ = ["parse_gres_conf", "apply_gres", "parse_core_list", "AUTODETECT_VALUES"]

AUTODETECT_VALUES = ("nvml", "rsmi", "oneapi", "nvidia", "nrt", "off")
_FLAGS = {"countonly", "nvidia_gpu_env", "amd_gpu_env", "intel_gpu_env", "opencl_env", "no_gpu_env",
          "one_sharing", "all_sharing"}
_KEYS = {k.lower(): k for k in ("AutoDetect", "Count", "Cores", "File", "Flags", "Links", "MultipleFiles",
                                "Name", "NodeName", "Type", "CPUs")}
_KEYS.update({"files": "File", "link": "Links"})
_MIG_RE = re.compile(r"\d+g\.\d+gb", re.IGNORECASE)
_NVIDIA_FILE_RE = re.compile(r"/dev/nvidia(\d+)$")


def parse_core_list(text: str) -> tuple[int, ...]:
    """``0-15,32-47`` (optionally in brackets) -> core ids; raises ValueError with the expected form."""
    body = text.strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1]
    cores: list[int] = []
    for part in body.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:-(\d+))?\s*", part)
        if not m:
            raise ValueError(f"Cores: expected core ids or ranges such as '0-31' or '0-15,32-47', got {text!r}")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        if hi < lo:
            raise ValueError(f"Cores: range {part.strip()!r} ends before it starts")
        cores.extend(range(lo, hi + 1))
    return tuple(cores)


def format_core_list(cores) -> str:
    """Core ids as gres.conf writes them, in ranges (``0-7,16-23``); the inverse of
    ``parse_core_list``."""
    ids = sorted(set(cores))
    parts: list[str] = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(parts)


def _expand_files(text: str) -> list[str]:
    return expand_hostlist(text)


def _entry(line, opts: dict[str, str]) -> GresEntry:  # noqa: ANN001 - _Line is private to slurm_conf
    """One gres.conf line -> GresEntry; every value is checked here so errors carry the line."""
    if "CPUs" in opts:
        raise line.error("CPUs= is deprecated in gres.conf and not supported by gpupool; give Cores= (core ids)")
    nodes: tuple[str, ...] | None = None
    if "NodeName" in opts:
        try:
            nodes = tuple(expand_hostlist(opts["NodeName"]))
        except HostlistError as exc:
            raise line.error(f"NodeName: {exc}") from None
    auto = opts.get("AutoDetect")
    if auto is not None and auto.lower() not in AUTODETECT_VALUES:
        raise line.error(f"AutoDetect must be one of {', '.join(AUTODETECT_VALUES)}, got {auto!r}")
    auto = auto.lower() if auto is not None else None
    described = [k for k in opts if k not in ("NodeName", "AutoDetect")]
    if not described:
        if auto is None:
            raise line.error("expected Name= (e.g. Name=gpu File=/dev/nvidia[0-7]) or AutoDetect= on this line")
        return GresEntry(name="gpu", node_names=nodes, auto_detect=auto, source=line.where)
    if "Name" not in opts or not opts["Name"]:
        raise line.error(f"expected Name= (e.g. Name=gpu) on a line that sets {', '.join(described)}")
    if "File" in opts and "MultipleFiles" in opts:
        raise line.error("give File= or MultipleFiles=, not both")
    gtype = opts.get("Type") or None
    count = None
    if "Count" in opts:
        count = parse_gres_count(opts["Count"])
        if count is None:
            raise line.error(f"Count must be a whole number (optionally with K, M or G), got {opts['Count']!r}")
    multiple: tuple[str, ...] = ()
    if "File" in opts:
        try:
            files = _expand_files(opts["File"])
        except HostlistError as exc:
            raise line.error(f"File: {exc}") from None
        if count is not None and count != len(files):
            raise line.error(f"Count={count} but File= names {len(files)} device file(s); they must agree")
        count = len(files)
    elif "MultipleFiles" in opts:
        try:
            multiple = tuple(_expand_files(opts["MultipleFiles"]))
        except HostlistError as exc:
            raise line.error(f"MultipleFiles: {exc}") from None
        if count not in (None, 1):
            raise line.error(f"MultipleFiles= describes one device, but Count={count}")
        count = 1
    cores: tuple[int, ...] = ()
    if "Cores" in opts:
        try:
            cores = parse_core_list(opts["Cores"])
        except ValueError as exc:
            raise line.error(str(exc)) from None
    flags = tuple(f for f in (p.strip() for p in opts.get("Flags", "").split(",")) if f)
    bad = [f for f in flags if f.lower() not in _FLAGS]
    if bad:
        raise line.error(f"Flags: unknown flag {bad[0]!r}; expected some of {', '.join(sorted(_FLAGS))}")
    mig = _MIG_RE.search(gtype or "")
    mig_profile = mig.group(0).lower() if mig else (gtype if multiple else None)
    return GresEntry(
        name=opts["Name"], type=gtype, file=opts.get("File"), count=count, cores=cores, node_names=nodes,
        auto_detect=auto, mig_profile=mig_profile, source=line.where, multiple_files=multiple, flags=flags,
        links=opts.get("Links"),
    )


def parse_gres_conf(path: Path) -> list[GresEntry]:
    """Read gres.conf into one GresEntry per line.

    ``count`` is None when a line gives neither Count=, File= nor MultipleFiles= (an
    AutoDetect line, or a line whose devices AutoDetect fills in); ``apply_gres`` decides.
    """
    entries: list[GresEntry] = []
    for line in logical_lines(Path(path)):
        opts: dict[str, str] = {}
        for key, value in tokenize_line(line):
            canon = canonical_key(key, _KEYS, line, "gres.conf")
            if canon in opts:
                raise line.error(f"{canon} is given twice on this line")
            opts[canon] = value
        entries.append(_entry(line, opts))
    return entries


def _is_explicit(entry: GresEntry, auto: str | None) -> bool:
    """A line lists devices itself unless it is AutoDetect-only or leaves the count to AutoDetect."""
    if entry.count is not None:
        return True
    if entry.auto_detect is not None and not entry.type and entry.name == "gpu" and not entry.cores:
        return False  # an AutoDetect line
    return not (auto and auto != "off")


def _error_at(entry: GresEntry, fallback: str, message: str, cls: type[InputError] = InputError) -> InputError:
    path, line = split_source(entry.source) if entry.source else (fallback, None)
    return cls(path, message, line=line)


def _devices(entries: list[GresEntry], node: Node, source: str) -> list[Gpu]:
    """Devices of one node from its explicit GPU lines, indexed as documented in ``apply_gres``."""
    raw: list[tuple[int | None, str | None, str | None, int | None, str | None, tuple[int, ...]]] = []
    for entry in entries:
        if entry.multiple_files:
            parent = next((int(m.group(1)) for f in entry.multiple_files if (m := _NVIDIA_FILE_RE.search(f))), None)
            profile = entry.mig_profile or entry.type
            raw.append((None, entry.type, profile, parent, ",".join(entry.multiple_files), entry.cores))
        elif entry.file:
            for file in _expand_files(entry.file):
                m = _NVIDIA_FILE_RE.search(file)
                number = int(m.group(1)) if m else None
                raw.append((number, entry.type, entry.mig_profile, None, file, entry.cores))
        else:
            count = 1 if entry.count is None else entry.count  # a bare Name=gpu line is one device
            raw.extend((None, entry.type, entry.mig_profile, None, None, entry.cores) for _ in range(count))
    by_file = all(r[0] is not None for r in raw) and not any(r[2] for r in raw)
    gpus = [
        Gpu(index=(r[0] if by_file else pos), type=r[1], mig_profile=r[2], parent=r[3], file=r[4], cores=r[5])
        for pos, r in enumerate(raw)
    ]
    seen: dict[int, Gpu] = {}
    for gpu in gpus:
        if gpu.index in seen:
            raise _error_at(entries[0], source,
                            f"node {node.name!r}: device file {gpu.file!r} is listed twice (GPU index {gpu.index})")
        seen[gpu.index] = gpu
    return sorted(gpus, key=lambda g: g.index)


def apply_gres(nodes: list[Node], entries: list[GresEntry], source: str) -> list[str]:
    """Replace each node's ``gpus`` with devices that agree with slurm.conf and gres.conf.

    * Whole GPUs take their index from ``/dev/nvidiaN``; on a node with MIG slices (or
      without device files) the index is the device's position, as Slurm numbers GRES.
    * A MIG slice (``MultipleFiles=`` or a type such as ``1g.10gb``) is its own device with
      ``mig_profile`` and ``parent`` (the ``/dev/nvidiaN`` it lives on).
    * With AutoDetect (not ``off``) and no explicit lines for a node, slurm.conf's GPUs are
      kept: that is what NVML reports on the emulated pool.
    * Counts (and types, when both files type them) must agree; otherwise InputError naming
      both files and lines.

    Returns notes (one per node whose GPUs came from slurm.conf alone) for ``validate``.
    """
    by_name = {node.name: node for node in nodes}
    for entry in entries:
        for name in entry.node_names or ():
            if name not in by_name:
                raise _error_at(entry, source,
                                f"gres.conf names node {name!r}, which no slurm.conf NodeName line defines",
                                MissingReferenceError)
    global_auto = next((e.auto_detect for e in reversed(entries) if e.auto_detect and e.node_names is None), None)
    notes: list[str] = []
    for node in nodes:
        mine = [e for e in entries if e.node_names is None or node.name in e.node_names]
        auto = next((e.auto_detect for e in reversed(mine) if e.auto_detect and e.node_names), global_auto)
        explicit = [e for e in mine if _is_explicit(e, auto)]
        _check_other_gres(node, [e for e in explicit if e.name != "gpu"], source)
        gpu_lines = [e for e in explicit if e.name == "gpu"]
        if not gpu_lines:
            if node.gpus:
                how = (f"gres.conf has AutoDetect={auto} and no GPU lines for it, so slurm.conf's count stands "
                       "(what NVML reports on the emulated pool)" if auto and auto != "off"
                       else "gres.conf has no GPU lines for it, so the GPUs have no device files or core affinity")
                notes.append(f"node {node.name}: {len(node.gpus)} GPU(s) from slurm.conf ({node.source}); {how}")
            continue
        devices = _devices(gpu_lines, node, source)
        where = ", ".join(e.source for e in gpu_lines)
        if len(devices) != len(node.gpus):
            raise _error_at(
                gpu_lines[0], source,
                f"node {node.name!r}: gres.conf gives {len(devices)} GPU(s) ({where}) but slurm.conf Gres gives "
                f"{len(node.gpus)} ({node.source}); make the counts agree",
            )
        conf_types = [g.type for g in node.gpus]
        gres_types = [d.type for d in devices]
        if all(conf_types) and all(gres_types) and Counter(conf_types) != Counter(gres_types):
            raise _error_at(
                gpu_lines[0], source,
                f"node {node.name!r}: gres.conf GPU types {_fmt_counts(gres_types)} ({where}) differ from "
                f"slurm.conf Gres types {_fmt_counts(conf_types)} ({node.source})",
            )
        node.gpus = tuple(
            d if d.type is not None else Gpu(d.index, conf_types[pos], d.mig_profile, d.parent, d.file, d.cores)
            for pos, d in enumerate(devices)
        )
    return notes


def _fmt_counts(types: list[str | None]) -> str:
    return ",".join(f"{t}:{n}" for t, n in Counter(types).items())


def _check_other_gres(node: Node, entries: list[GresEntry], source: str) -> None:
    """Non-GPU GRES (nvme, mps, shard) carry no devices in gpupool; only their counts are checked."""
    totals: Counter[str] = Counter()
    for entry in entries:
        totals[entry.name] += 1 if entry.count is None else entry.count
    for name, total in totals.items():
        configured = sum(v for k, v in node.extra.items() if k == f"gres/{name}" or k.startswith(f"gres/{name}:"))
        first = next(e for e in entries if e.name == name)
        if configured != total:
            raise _error_at(
                first, source,
                f"node {node.name!r}: gres.conf gives {total} {name!r} but slurm.conf Gres gives {configured} "
                f"({node.source}); make them agree",
            )
