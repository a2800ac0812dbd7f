"""topology.conf: leaf switch = rack, its parent = block; BlockName lines give blocks."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.errors import InputError, MissingReferenceError
from gpupool.formats.topology_conf import parse_topology_conf

SEED = Path(__file__).resolve().parents[2] / "examples" / "seed-pool" / "topology.conf"


def parse(tmp_path: Path, text: str):
    path = tmp_path / "topology.conf"
    path.write_text(text)
    return parse_topology_conf(path)


def test_seed_pool() -> None:
    assert parse_topology_conf(SEED) == {
        "gpu01": ("block1", "rack1"), "gpu02": ("block1", "rack1"),
        "gpu03": ("block1", "rack2"), "gpu04": ("block1", "rack2"),
    }


def test_deeper_tree_and_leaf_without_parent(tmp_path: Path) -> None:
    result = parse(tmp_path, """
# spine above two blocks; one leaf hangs loose
SwitchName=spine Switches=b[1-2] LinkSpeed=400
SwitchName=b1 Switches=l1
SwitchName=b2 Switches=l2
switchname=l1 nodes=n[1-2]
SwitchName=l2 Nodes=n3
SwitchName=lonely Nodes=n4
""")
    assert result == {"n1": ("b1", "l1"), "n2": ("b1", "l1"), "n3": ("b2", "l2"), "n4": (None, "lonely")}


def test_block_topology(tmp_path: Path) -> None:
    result = parse(tmp_path, "BlockName=bA Nodes=n[1-2]\nBlockName=bB Nodes=n3\nBlockSizes=2,4\n")
    assert result == {"n1": ("bA", "bA"), "n2": ("bA", "bA"), "n3": ("bB", "bB")}


@pytest.mark.parametrize(
    ("text", "line", "message", "cls"),
    [
        ("SwitchName=a Nodes=n1\nSwitchName=b Nodes=n[1-2]\n", 2,
         "node 'n1' is listed by leaf switches 'a' and 'b'; a node hangs off one leaf", InputError),
        ("SwitchName=top Switches=ghost\n", 1,
         "switch 'top' lists switch 'ghost', which no SwitchName line defines", MissingReferenceError),
        ("SwitchName=a Nodes=n1\nSwitchName=a Nodes=n2\n", 2, "switch 'a' is defined twice (first at {path}:1)",
         InputError),
        ("SwitchName=a Nodes=n1 Switches=b\n", 1,
         "switch 'a' lists both Nodes= and Switches=; a switch is a leaf or a parent", InputError),
        ("SwitchName=a Nodes=n1\nBlockName=b Nodes=n2\n", 2,
         "BlockName= (topology/block) cannot be mixed with SwitchName= (topology/tree)", InputError),
        ("Nodes=n1\n", 1, "expected a SwitchName= or BlockName= line", InputError),
        ("SwitchName=a Nodes=n[1-\n", 1, "Nodes: hostlist 'n[1-': '[' is never closed", InputError),
        ("SwitchName=a Ports=3\n", 1, "unknown topology.conf key 'Ports' (not a Slurm 22.05 topology.conf key)",
         InputError),
        ("SwitchName=a Nodes=n1\nSwitchName=b Nodes=n2\nSwitchName=t1 Switches=a\nSwitchName=t2 Switches=a,b\n", 4,
         "switch 'a' is listed under both 't1' and 't2'", InputError),
        ("BlockName=x Nodes=n1\nBlockName=y Nodes=n1\n", 2,
         "node 'n1' is in blocks 'x' and 'y'; a node belongs to one block", InputError),
    ],
)
def test_errors(tmp_path: Path, text: str, line: int, message: str, cls: type) -> None:
    path = tmp_path / "topology.conf"
    with pytest.raises(cls) as info:
        parse(tmp_path, text)
    assert str(info.value) == f"{path}:{line}: " + message.format(path=path)
