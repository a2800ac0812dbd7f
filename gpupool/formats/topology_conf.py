"""topology.conf: which rack (leaf switch) and block each node sits in.

gpupool's pool topology has three levels: block, rack, host (``DEFAULT_TOPOLOGY_LEVELS``).
Slurm's topology/tree describes switches: a leaf switch lists ``Nodes=``, a switch above it
lists ``Switches=``. gpupool reads the leaf that lists a node as its rack and that leaf's
parent switch as its block (None when the leaf has no parent). Higher switches are checked
but not modelled. topology/block files (``BlockName=… Nodes=…``) give a block and no rack:
the block name then stands for the rack level too, so rack-level grouping equals blocks.

Keys (case-insensitive): ``SwitchName``, ``Nodes``, ``Switches``, ``LinkSpeed`` (kept by Slurm
for the user only; gpupool accepts and does not use it), ``BlockName``, ``BlockSizes``
(accepted, not used).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpupool.errors import InputError, MissingReferenceError
from gpupool.formats.hostlist import HostlistError, expand_hostlist
from gpupool.formats.slurm_conf import canonical_key, logical_lines, tokenize_line

__all__ = ["parse_topology_conf"]

_KEYS = {k.lower(): k for k in ("SwitchName", "Nodes", "Switches", "LinkSpeed", "BlockName", "BlockSizes")}


@dataclass(slots=True)
class _Switch:
    name: str
    where: str
    line: object
    nodes: tuple[str, ...] = ()
    children: tuple[str, ...] = ()


def _expand(line, key: str, value: str) -> tuple[str, ...]:  # noqa: ANN001
    try:
        return tuple(expand_hostlist(value))
    except HostlistError as exc:
        raise line.error(f"{key}: {exc}") from None


def parse_topology_conf(path: Path) -> dict[str, tuple[str | None, str]]:
    """Map node name -> (block switch or None, leaf/rack switch); errors carry file:line."""
    switches: dict[str, _Switch] = {}
    blocks: dict[str, tuple[str, ...]] = {}
    block_lines: dict[str, str] = {}
    style: str | None = None
    for line in logical_lines(Path(path)):
        opts: dict[str, str] = {}
        for key, value in tokenize_line(line):
            canon = canonical_key(key, _KEYS, line, "topology.conf")
            if canon in opts:
                raise line.error(f"{canon} is given twice on this line")
            opts[canon] = value
        if "SwitchName" in opts:
            if style == "block":
                raise line.error("SwitchName= (topology/tree) cannot be mixed with BlockName= (topology/block)")
            style = "tree"
            _switch_line(line, opts, switches)
        elif "BlockName" in opts:
            if style == "tree":
                raise line.error("BlockName= (topology/block) cannot be mixed with SwitchName= (topology/tree)")
            style = "block"
            name = opts["BlockName"]
            if name in blocks:
                raise line.error(f"block {name!r} is defined twice (first at {block_lines[name]})")
            extra = set(opts) - {"BlockName", "Nodes"}
            if extra:
                raise line.error(f"a BlockName line takes Nodes=, not {', '.join(sorted(extra))}")
            blocks[name] = _expand(line, "Nodes", opts["Nodes"]) if "Nodes" in opts else ()
            block_lines[name] = line.where
        elif set(opts) == {"BlockSizes"}:
            continue  # a topology/block sizing hint; placement does not depend on it
        else:
            raise line.error("expected a SwitchName= or BlockName= line")
    if style == "block":
        return _block_map(blocks, block_lines)
    return _tree_map(switches)


def _switch_line(line, opts: dict[str, str], switches: dict[str, _Switch]) -> None:  # noqa: ANN001
    name = opts["SwitchName"]
    if not name:
        raise line.error("SwitchName needs a name")
    if name in switches:
        raise line.error(f"switch {name!r} is defined twice (first at {switches[name].where})")
    if "BlockName" in opts or "BlockSizes" in opts:
        raise line.error("BlockName/BlockSizes do not belong on a SwitchName line")
    if "Nodes" in opts and "Switches" in opts:
        raise line.error(f"switch {name!r} lists both Nodes= and Switches=; a switch is a leaf or a parent")
    switch = _Switch(name, line.where, line)
    if "Nodes" in opts:
        switch.nodes = _expand(line, "Nodes", opts["Nodes"])
    if "Switches" in opts:
        switch.children = _expand(line, "Switches", opts["Switches"])
    switches[name] = switch


def _tree_map(switches: dict[str, _Switch]) -> dict[str, tuple[str | None, str]]:
    parent: dict[str, str] = {}
    for switch in switches.values():
        for child in switch.children:
            if child not in switches:
                path, _, number = switch.where.rpartition(":")
                raise MissingReferenceError(
                    path, f"switch {switch.name!r} lists switch {child!r}, which no SwitchName line defines",
                    line=int(number),
                )
            if child in parent:
                raise switch.line.error(  # type: ignore[attr-defined]
                    f"switch {child!r} is listed under both {parent[child]!r} and {switch.name!r}"
                )
            parent[child] = switch.name
    out: dict[str, tuple[str | None, str]] = {}
    for switch in switches.values():
        for node in switch.nodes:
            if node in out:
                raise switch.line.error(  # type: ignore[attr-defined]
                    f"node {node!r} is listed by leaf switches {out[node][1]!r} and {switch.name!r}; "
                    "a node hangs off one leaf"
                )
            out[node] = (parent.get(switch.name), switch.name)
    return out


def _block_map(blocks: dict[str, tuple[str, ...]], where: dict[str, str]) -> dict[str, tuple[str | None, str]]:
    out: dict[str, tuple[str | None, str]] = {}
    for name, nodes in blocks.items():
        for node in nodes:
            if node in out:
                path, _, number = where[name].rpartition(":")
                raise InputError(path, f"node {node!r} is in blocks {out[node][0]!r} and {name!r}; "
                                       "a node belongs to one block", line=int(number))
            out[node] = (name, name)
    return out
