"""Slurm hostlists: expansion, compression and their round trip."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.formats.hostlist import HostlistError, compress_hostlist, expand_hostlist


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("gpu[01-04]", ["gpu01", "gpu02", "gpu03", "gpu04"]),
        ("n[1-3,7]", ["n1", "n2", "n3", "n7"]),
        ("r[1-2]n[1-3]", ["r1n1", "r1n2", "r1n3", "r2n1", "r2n2", "r2n3"]),
        ("a,b[1-2]", ["a", "b1", "b2"]),
        ("n[8-10]", ["n8", "n9", "n10"]),
        ("n[098-101]", ["n098", "n099", "n100", "n101"]),
        ("gpu[1-2]-ib", ["gpu1-ib", "gpu2-ib"]),
        ("single", ["single"]),
        ("a, b  c", ["a", "b", "c"]),
        ("[1-2]", ["1", "2"]),
        ("n[3]", ["n3"]),
    ],
)
def test_expand(text: str, names: list[str]) -> None:
    assert expand_hostlist(text) == names


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected a hostlist such as 'gpu[01-04]', got an empty string"),
        ("gpu[01-04", "hostlist 'gpu[01-04': '[' is never closed"),
        ("gpu01]", "hostlist 'gpu01]': ']' without a matching '[' (at position 6)"),
        ("gpu[a-b]", "hostlist 'gpu[a-b]': expected numbers or ranges such as '1-4' or '01-04' inside brackets, "
                     "got 'a-b'"),
        ("gpu[4-1]", "hostlist 'gpu[4-1]': range '4-1' ends before it starts"),
        ("a,,b", "hostlist 'a,,b' has an empty entry (two commas in a row, or a trailing comma)"),
        ("n[[1]]", "hostlist 'n[[1]]': brackets cannot nest (at position 3)"),
        ("n[1-2000000]", "hostlist 'n[1-2000000]': range '1-2000000' names more than 1000000 hosts"),
    ],
)
def test_expand_errors(text: str, message: str) -> None:
    with pytest.raises(HostlistError) as info:
        expand_hostlist(text)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("names", "text"),
    [
        (["gpu01", "gpu02", "gpu03", "gpu04"], "gpu[01-04]"),
        (["gpu01", "gpu02", "gpu03", "gpu07"], "gpu[01-03,07]"),
        (["n9", "n10", "n11"], "n[9-11]"),
        (["a", "b1", "b2"], "a,b[1-2]"),
        (["gpu01"], "gpu01"),
        (["r1n1", "r1n2", "r2n1"], "r1n[1-2],r2n1"),
        (["n3", "n1", "n2"], "n[3,1-2]"),
        (["n1-ib", "n2-ib"], "n[1-2]-ib"),
        ([], ""),
    ],
)
def test_compress(names: list[str], text: str) -> None:
    assert compress_hostlist(names) == text


@pytest.mark.parametrize("bad", ["", "a b", "x[1]", "a,b"])
def test_compress_refuses_names_a_hostlist_cannot_hold(bad: str) -> None:
    with pytest.raises(HostlistError) as info:
        compress_hostlist(["ok", bad])
    assert str(info.value) == (
        f"cannot write {bad!r} in a hostlist: host names must be non-empty and contain "
        "no whitespace, commas or brackets"
    )


_prefix = st.sampled_from(["gpu", "n", "r1n", "node-", "", "a.b", "x"])
_suffix = st.sampled_from(["", "", "-ib", "b"])
_number = st.tuples(st.integers(0, 120), st.integers(0, 3)).map(lambda p: str(p[0]).zfill(p[1] + len(str(p[0]))))
_name = st.one_of(
    st.builds(lambda p, n, s: f"{p}{n}{s}", _prefix, _number, _suffix),
    st.sampled_from(["login", "ctl", "a-b"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_name, max_size=40))
def test_compress_then_expand_gives_the_same_names(names: list[str]) -> None:
    text = compress_hostlist(names)
    assert (expand_hostlist(text) if names else []) == names


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 300), min_size=1, max_size=60, unique=True).map(sorted))
def test_sorted_runs_compress_into_one_group(numbers: list[int]) -> None:
    names = [f"gpu{n:03d}" for n in numbers]
    text = compress_hostlist(names)
    assert text.count("gpu") == 1
    assert expand_hostlist(text) == names
