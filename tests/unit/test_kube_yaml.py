"""Reading Kubernetes YAML files: documents, lines, Lists, and errors that say where."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.errors import InputError
from gpupool.formats.kube_yaml import Fields, YamlDoc, load_yaml_documents, load_yaml_text


def write(tmp_path: Path, text: str, name: str = "objects.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_documents_keep_number_and_first_line(tmp_path):
    path = write(tmp_path, (
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n"
        "---\n"
        "---\n"
        "# a comment\n"
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: b}\n"
    ))
    docs = load_yaml_documents(path)
    assert [(d.index, d.line, d.body["metadata"]["name"]) for d in docs] == [(1, 1, "a"), (3, 7, "b")]
    assert docs[1].source == str(path)
    assert docs[1].where == f"{path} (document 3)"


def test_empty_file_has_no_documents(tmp_path):
    assert load_yaml_documents(write(tmp_path, "# nothing here\n---\n")) == []


def test_list_is_flattened_with_item_paths(tmp_path):
    path = write(tmp_path, (
        "apiVersion: v1\n"
        "kind: List\n"
        "items:\n"
        "- apiVersion: v1\n"
        "  kind: Namespace\n"
        "  metadata: {name: a}\n"
        "- apiVersion: batch/v1\n"
        "  kind: Job\n"
        "  metadata: {name: j}\n"
    ))
    docs = load_yaml_documents(path)
    assert [(d.kind, d.index, d.line, d.prefix) for d in docs] == [
        ("Namespace", 1, 4, "items[0]"), ("Job", 1, 7, "items[1]")]
    err = docs[1].error("bad", "spec.parallelism")
    assert str(err) == f"{path} (document 1, field items[1].spec.parallelism): bad"


def test_typed_list_items_get_kind_from_the_list():
    docs = load_yaml_text("apiVersion: v1\nkind: NodeList\nitems:\n- metadata: {name: n1}\n", "dump.yaml")
    assert docs[0].kind == "Node" and docs[0].api_version == "v1"


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    path = write(tmp_path, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n bad: 1\n")
    with pytest.raises(InputError) as exc:
        load_yaml_documents(path)
    assert str(exc.value) == (
        f"{path}:5: YAML syntax error: did not find expected key (while parsing a block mapping)")
    assert exc.value.line == 5


def test_duplicate_key_is_an_error():
    with pytest.raises(InputError) as exc:
        load_yaml_text("apiVersion: v1\nkind: Pod\nkind: Job\n", "x.yaml")
    assert str(exc.value) == "x.yaml:3: duplicate key 'kind' (first on line 2)"


def test_document_that_is_not_a_mapping():
    with pytest.raises(InputError) as exc:
        load_yaml_text("apiVersion: v1\nkind: Pod\n---\n- a\n- b\n", "x.yaml")
    assert str(exc.value) == (
        "x.yaml (document 2): expected a Kubernetes object (a mapping with apiVersion and kind), got a list")


@pytest.mark.parametrize("text, message", [
    ("kind: Pod\n", "a Kubernetes object needs apiVersion and kind; this one has no apiVersion"),
    ("apiVersion: v1\n", "a Kubernetes object needs apiVersion and kind; this one has no kind"),
])
def test_missing_api_version_or_kind(text, message):
    with pytest.raises(InputError) as exc:
        load_yaml_text(text, "x.yaml")
    assert str(exc.value) == f"x.yaml (document 1): {message}"


def test_kind_must_be_a_string():
    with pytest.raises(InputError) as exc:
        load_yaml_text("apiVersion: v1\nkind: 3\n", "x.yaml")
    assert str(exc.value) == "x.yaml (document 1, field kind): expected a non-empty string, got 3"


def test_unreadable_file(tmp_path):
    with pytest.raises(InputError) as exc:
        load_yaml_documents(tmp_path / "missing.yaml")
    assert str(exc.value).startswith(f"{tmp_path / 'missing.yaml'}: cannot read file:")


def test_fields_name_nested_paths():
    doc = YamlDoc("x.yaml", 2, 1, {"metadata": {"labels": {"a.io/b": 3}}, "spec": {"n": "x", "l": [1]}})
    root = Fields.root(doc)
    with pytest.raises(InputError) as exc:
        root.mapping("metadata").string_map("labels")
    assert str(exc.value) == (
        'x.yaml (document 2, field metadata.labels["a.io/b"]): expected a string, got a number (3) '
        "(quote numbers and booleans)")
    with pytest.raises(InputError) as exc:
        root.mapping("spec").integer("n")
    assert str(exc.value) == "x.yaml (document 2, field spec.n): expected a whole number, got a string ('x')"
    with pytest.raises(InputError) as exc:
        root.mapping("spec").items("l")
    assert str(exc.value) == "x.yaml (document 2, field spec.l): item 0: expected a mapping, got a number (1)"
