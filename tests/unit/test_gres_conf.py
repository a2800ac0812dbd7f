"""gres.conf: parsing, merging with slurm.conf's Gres, and disagreements naming both files."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.errors import InputError, MissingReferenceError
from gpupool.formats.gres_conf import apply_gres, parse_core_list, parse_gres_conf
from gpupool.formats.slurm_conf import load_slurm_conf
from gpupool.model.pool import Gpu

SEED = Path(__file__).resolve().parents[2] / "examples" / "seed-pool"


def setup(tmp_path: Path, slurm: str, gres: str):
    (tmp_path / "slurm.conf").write_text("ClusterName=t\nGresTypes=gpu,nvme\n" + slurm)
    (tmp_path / "gres.conf").write_text(gres)
    nodes = load_slurm_conf(tmp_path / "slurm.conf").nodes
    entries = parse_gres_conf(tmp_path / "gres.conf")
    return nodes, entries


def test_seed_pool_autodetect_keeps_slurm_conf_counts() -> None:
    nodes = load_slurm_conf(SEED / "slurm.conf").nodes
    entries = parse_gres_conf(SEED / "gres.conf")
    assert len(entries) == 1 and entries[0].auto_detect == "nvml" and entries[0].count is None
    notes = apply_gres(nodes, entries, str(SEED / "gres.conf"))
    assert all(node.gpus == tuple(Gpu(i) for i in range(8)) for node in nodes)
    assert len(notes) == 4
    assert notes[0] == (
        f"node gpu01: 8 GPU(s) from slurm.conf ({SEED / 'slurm.conf'}:66); gres.conf has AutoDetect=nvml and no "
        "GPU lines for it, so slurm.conf's count stands (what NVML reports on the emulated pool)"
    )


def test_parse_lines(tmp_path: Path) -> None:
    path = tmp_path / "gres.conf"
    path.write_text(
        "AutoDetect=off\n"
        "NodeName=gpu[01-02] Name=gpu Type=h100 File=/dev/nvidia[0-3] Cores=0-31 Flags=nvidia_gpu_env\n"
        "NodeName=gpu[01-02] name=gpu type=h100 file=/dev/nvidia[4-7] count=4 cores=32-47,48-63 Links=-1,2\n"
        "Name=nvme Count=2\n"
    )
    auto, first, second, nvme = parse_gres_conf(path)
    assert (auto.auto_detect, auto.node_names, auto.count) == ("off", None, None)
    assert first.node_names == ("gpu01", "gpu02") and first.type == "h100"
    assert (first.file, first.count, first.cores, first.flags) == ("/dev/nvidia[0-3]", 4, tuple(range(32)),
                                                                   ("nvidia_gpu_env",))
    assert second.cores == tuple(range(32, 64)) and second.links == "-1,2"
    assert (nvme.name, nvme.count, nvme.node_names) == ("nvme", 2, None)
    assert first.source == f"{path}:2"


def test_apply_explicit_files_and_cores(tmp_path: Path) -> None:
    nodes, entries = setup(
        tmp_path,
        "NodeName=gpu[01-02] CPUs=64 Gres=gpu:h100:8,nvme:2\n",
        "NodeName=gpu[01-02] Name=gpu Type=h100 File=/dev/nvidia[0-3] Cores=0-15\n"
        "NodeName=gpu[01-02] Name=gpu Type=h100 File=/dev/nvidia[4-7] Cores=16-31\n"
        "NodeName=gpu[01-02] Name=nvme Count=2\n",
    )
    assert apply_gres(nodes, entries, str(tmp_path / "gres.conf")) == []
    gpus = nodes[0].gpus
    assert [g.index for g in gpus] == list(range(8))
    assert gpus[5] == Gpu(5, "h100", file="/dev/nvidia5", cores=tuple(range(16, 32)))


def test_untyped_slurm_conf_takes_the_gres_conf_type_and_file_numbers_give_indices(tmp_path: Path) -> None:
    nodes, entries = setup(
        tmp_path, "NodeName=n1 CPUs=8 Gres=gpu:2\n",
        "Name=gpu Type=a100 File=/dev/nvidia3\nName=gpu Type=a100 File=/dev/nvidia1\n",
    )
    apply_gres(nodes, entries, "gres.conf")
    assert nodes[0].gpus == (Gpu(1, "a100", file="/dev/nvidia1"), Gpu(3, "a100", file="/dev/nvidia3"))


def test_mig_slices_become_devices(tmp_path: Path) -> None:
    nodes, entries = setup(
        tmp_path,
        "NodeName=m1 CPUs=8 Gres=gpu:a100:1,gpu:a100_3g.20gb:2\n",
        "NodeName=m1 Name=gpu Type=a100 File=/dev/nvidia0\n"
        "NodeName=m1 Name=gpu Type=a100_3g.20gb MultipleFiles=/dev/nvidia1,/dev/nvidia-caps/nvidia-cap21\n"
        "NodeName=m1 Name=gpu Type=a100_3g.20gb MultipleFiles=/dev/nvidia1,/dev/nvidia-caps/nvidia-cap[30-31]\n",
    )
    assert entries[1].mig_profile == "3g.20gb"
    assert entries[2].multiple_files == ("/dev/nvidia1", "/dev/nvidia-caps/nvidia-cap30",
                                         "/dev/nvidia-caps/nvidia-cap31")
    apply_gres(nodes, entries, "gres.conf")
    whole, slice1, slice2 = nodes[0].gpus
    assert whole == Gpu(0, "a100", file="/dev/nvidia0")
    assert slice1 == Gpu(1, "a100_3g.20gb", mig_profile="3g.20gb", parent=1,
                         file="/dev/nvidia1,/dev/nvidia-caps/nvidia-cap21")
    assert (slice2.index, slice2.parent, slice2.mig_profile) == (2, 1, "3g.20gb")


def test_mig_type_without_multiple_files(tmp_path: Path) -> None:
    nodes, entries = setup(tmp_path, "NodeName=m1 CPUs=8 Gres=gpu:1g.10gb:2\n", "Name=gpu Type=1g.10gb Count=2\n")
    apply_gres(nodes, entries, "gres.conf")
    assert nodes[0].gpus == (Gpu(0, "1g.10gb", mig_profile="1g.10gb"), Gpu(1, "1g.10gb", mig_profile="1g.10gb"))


def test_nodes_without_lines_keep_slurm_conf_gpus_with_a_note(tmp_path: Path) -> None:
    nodes, entries = setup(tmp_path, "NodeName=a,b CPUs=8 Gres=gpu:2\n", "NodeName=a Name=gpu File=/dev/nvidia[0-1]\n")
    notes = apply_gres(nodes, entries, "gres.conf")
    assert nodes[0].gpus[1].file == "/dev/nvidia1"
    assert nodes[1].gpus == (Gpu(0), Gpu(1))
    assert notes == [f"node b: 2 GPU(s) from slurm.conf ({tmp_path / 'slurm.conf'}:3); gres.conf has no GPU lines "
                     "for it, so the GPUs have no device files or core affinity"]


def test_count_disagreement_names_both_files(tmp_path: Path) -> None:
    nodes, entries = setup(tmp_path, "NodeName=gpu01 CPUs=8 Gres=gpu:8\n",
                           "AutoDetect=nvml\nNodeName=gpu01 Name=gpu File=/dev/nvidia[0-3]\n")
    with pytest.raises(InputError) as info:
        apply_gres(nodes, entries, str(tmp_path / "gres.conf"))
    gres, slurm = tmp_path / "gres.conf", tmp_path / "slurm.conf"
    assert str(info.value) == (
        f"{gres}:2: node 'gpu01': gres.conf gives 4 GPU(s) ({gres}:2) but slurm.conf Gres gives 8 "
        f"({slurm}:3); make the counts agree"
    )


def test_type_disagreement_names_both_files(tmp_path: Path) -> None:
    nodes, entries = setup(tmp_path, "NodeName=gpu01 CPUs=8 Gres=gpu:h100:2\n", "Name=gpu Type=a100 Count=2\n")
    with pytest.raises(InputError) as info:
        apply_gres(nodes, entries, "gres.conf")
    gres, slurm = tmp_path / "gres.conf", tmp_path / "slurm.conf"
    assert str(info.value) == (
        f"{gres}:1: node 'gpu01': gres.conf GPU types a100:2 ({gres}:1) differ from slurm.conf Gres types "
        f"h100:2 ({slurm}:3)"
    )


def test_other_gres_count_disagreement(tmp_path: Path) -> None:
    nodes, entries = setup(tmp_path, "NodeName=n1 CPUs=8 Gres=nvme:1\n", "Name=nvme Count=2\n")
    with pytest.raises(InputError) as info:
        apply_gres(nodes, entries, "gres.conf")
    assert str(info.value) == (
        f"{tmp_path / 'gres.conf'}:1: node 'n1': gres.conf gives 2 'nvme' but slurm.conf Gres gives 1 "
        f"({tmp_path / 'slurm.conf'}:3); make them agree"
    )


def test_unknown_node(tmp_path: Path) -> None:
    nodes, entries = setup(tmp_path, "NodeName=n1 CPUs=8\n", "NodeName=n[1-2] Name=gpu Count=1\n")
    with pytest.raises(MissingReferenceError) as info:
        apply_gres(nodes, entries, "gres.conf")
    assert str(info.value) == (
        f"{tmp_path / 'gres.conf'}:1: gres.conf names node 'n2', which no slurm.conf NodeName line defines"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Name=gpu File=/dev/nvidia[0-3] Count=2\n", "Count=2 but File= names 4 device file(s); they must agree"),
        ("Name=gpu CPUs=0-3\n", "CPUs= is deprecated in gres.conf and not supported by gpupool; give Cores= (core ids)"),
        ("AutoDetect=magic\n", "AutoDetect must be one of nvml, rsmi, oneapi, nvidia, nrt, off, got 'magic'"),
        ("Type=h100 Count=2\n", "expected Name= (e.g. Name=gpu) on a line that sets Type, Count"),
        ("NodeName=n1\n", "expected Name= (e.g. Name=gpu File=/dev/nvidia[0-7]) or AutoDetect= on this line"),
        ("Name=gpu Count=two\n", "Count must be a whole number (optionally with K, M or G), got 'two'"),
        ("Name=gpu Cores=0-x\n", "Cores: expected core ids or ranges such as '0-31' or '0-15,32-47', got '0-x'"),
        ("Name=gpu Colour=red\n", "unknown gres.conf key 'Colour' (not a Slurm 22.05 gres.conf key)"),
        ("Name=gpu Flags=Shiny\n", "Flags: unknown flag 'Shiny'; expected some of all_sharing, amd_gpu_env, "
                                   "countonly, intel_gpu_env, no_gpu_env, nvidia_gpu_env, one_sharing, opencl_env"),
        ("Name=gpu File=/dev/nvidia0 MultipleFiles=/dev/nvidia0\n", "give File= or MultipleFiles=, not both"),
        ("Name=gpu MultipleFiles=/dev/nvidia0 Count=2\n", "MultipleFiles= describes one device, but Count=2"),
    ],
)
def test_parse_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "gres.conf"
    path.write_text("# header\n" + text)
    with pytest.raises(InputError) as info:
        parse_gres_conf(path)
    assert str(info.value) == f"{path}:2: {message}"


def test_core_list_forms() -> None:
    assert parse_core_list("[0-2,8]") == (0, 1, 2, 8)
    with pytest.raises(ValueError, match="ends before it starts"):
        parse_core_list("4-1")


def test_lines_without_count_or_file(tmp_path: Path) -> None:
    # Without AutoDetect a bare Name=gpu line is one device; with AutoDetect, NVML supplies the devices.
    nodes, entries = setup(tmp_path, "NodeName=n1 CPUs=8 Gres=gpu:1\n", "Name=gpu Type=a100\n")
    assert entries[0].count is None
    apply_gres(nodes, entries, "gres.conf")
    assert nodes[0].gpus == (Gpu(0, "a100"),)
    nodes, entries = setup(tmp_path, "NodeName=n1 CPUs=8 Gres=gpu:4\n", "AutoDetect=nvml\nName=gpu Type=a100\n")
    notes = apply_gres(nodes, entries, "gres.conf")
    assert nodes[0].gpus == tuple(Gpu(i) for i in range(4)) and len(notes) == 1


def test_comment_lines_ending_in_a_backslash_do_not_swallow_the_next_line(tmp_path: Path) -> None:
    path = tmp_path / "gres.conf"
    path.write_text("# a comment \\\nName=gpu Count=2\n")
    assert [e.count for e in parse_gres_conf(path)] == [2]
