"""Reading multi-document Kubernetes YAML files, keeping where each object came from.

Every later step (Kueue objects, Nodes, Jobs) reports errors as ``file (document N, field
x.y): message``; for that each object needs its file, its document number and the line its
document starts on. ``kubectl get -o yaml`` writes ``kind: List`` wrappers; they are
flattened here so the rest of gpupool only ever sees single objects.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpupool.errors import InputError

try:  # the C loader is several times faster on large object dumps
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Loader = yaml.SafeLoader

__all__ = ["YamlDoc", "load_yaml_documents", "load_yaml_text", "field_path"]


@dataclass(slots=True)
class YamlDoc:
    """One Kubernetes object as read from a file.

    ``index`` is the 1-based number of the YAML document in its file (counting empty
    documents too, so it matches what a reader counts between ``---`` lines); ``line`` is
    the first line of the object. Objects that came out of a ``List`` share the List's
    document number and carry ``prefix`` (``items[3]``) so field paths in errors point
    into the right item.
    """

    source: str
    index: int
    line: int
    body: dict
    prefix: str = ""

    @property
    def kind(self) -> str:
        return str(self.body.get("kind", ""))

    @property
    def api_version(self) -> str:
        return str(self.body.get("apiVersion", ""))

    @property
    def where(self) -> str:
        """``file (document N)`` — how workloads and nodes name their origin."""
        inner = f"document {self.index}" + (f", {self.prefix}" if self.prefix else "")
        return f"{self.source} ({inner})"

    def error(self, message: str, field: str | None = None) -> InputError:
        """An InputError at field path ``field`` of this object (prefixed for List items)."""
        if field and self.prefix:
            full = self.prefix + (field if field.startswith("[") else "." + field)
        else:
            full = field or self.prefix or None
        return InputError(self.source, message, document=self.index, field=full)


def field_path(parent: str, key: str | int) -> str:
    """Join a field path the way kubectl explains fields: ``a.b[0].c``, ``labels["x/y"]``."""
    if isinstance(key, int):
        return f"{parent}[{key}]"
    if not parent:
        return key
    if key.startswith("["):
        return parent + key
    if any(c in key for c in "./ "):
        return f'{parent}["{key}"]'
    return f"{parent}.{key}"


def load_yaml_documents(path: Path) -> list[YamlDoc]:
    """Read every Kubernetes object from a (multi-document) YAML file.

    Empty documents are skipped; ``List`` wrappers are flattened into their items.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(str(path), f"cannot read file: {exc}") from exc
    return load_yaml_text(text, str(path))


def load_yaml_text(text: str, source: str) -> list[YamlDoc]:
    """Like :func:`load_yaml_documents`, for text already in memory (``source`` names it)."""
    docs: list[YamlDoc] = []
    for index, node, body in _iter_documents(text, source):
        if body is None:
            continue
        line = node.start_mark.line + 1
        doc = YamlDoc(source, index, line, body) if isinstance(body, dict) else None
        if doc is None:
            raise InputError(
                source,
                f"expected a Kubernetes object (a mapping with apiVersion and kind), "
                f"got {_type_name(body)}",
                document=index,
            )
        _check_object(doc)
        docs.extend(_flatten_list(doc, node))
    return docs


def parse_embedded_yaml(text: str, source: str, document: int, field: str) -> Any:
    """Parse YAML held in a string field (a ConfigMap value); errors name the field."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f" at line {mark.line + 1} of the embedded text" if mark else ""
        raise InputError(source, f"YAML syntax error{at}: {exc.problem or exc}", document=document,
                         field=field) from exc
    except yaml.YAMLError as exc:
        raise InputError(source, f"YAML error: {exc}", document=document, field=field) from exc


def _iter_documents(text: str, source: str):
    """Yield ``(document number, root node, constructed value)`` for each YAML document."""
    loader = _Loader(text)
    index = 0
    try:
        while loader.check_node():
            node = loader.get_node()
            index += 1
            if node is None:
                continue
            _check_duplicate_keys(node, source, index)
            yield index, node, loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or str(exc)
        context = f" ({exc.context})" if exc.context and exc.problem else ""
        raise InputError(
            source, f"YAML syntax error: {problem}{context}", line=mark.line + 1 if mark else None
        ) from exc
    except yaml.YAMLError as exc:
        raise InputError(source, f"YAML error: {exc}") from exc
    finally:
        loader.dispose()


def _check_duplicate_keys(node: yaml.Node, source: str, index: int) -> None:
    """PyYAML keeps the last of two equal keys without a word; Kubernetes rejects them."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key_node, value_node in current.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                    key = key_node.value
                    if key in seen:
                        raise InputError(
                            source,
                            f"duplicate key '{key}' (first on line {seen[key]})",
                            line=key_node.start_mark.line + 1,
                        )
                    seen[key] = key_node.start_mark.line + 1
                stack.append(value_node)
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)


def _check_object(doc: YamlDoc) -> None:
    """Every Kubernetes object names its apiVersion and kind, as non-empty strings."""
    for key in ("apiVersion", "kind"):
        value = doc.body.get(key)
        if value is None:
            raise doc.error(f"a Kubernetes object needs apiVersion and kind; this one has no {key}")
        if not isinstance(value, str) or not value:
            raise doc.error(f"expected a non-empty string, got {value!r}", key)


def _is_list(body: dict) -> bool:
    kind = body.get("kind", "")
    return isinstance(kind, str) and (kind == "List" or kind.endswith("List")) and "items" in body


def _flatten_list(doc: YamlDoc, node: yaml.Node) -> list[YamlDoc]:
    """``kind: List`` / ``*List`` → its items, each located at ``items[i]`` of the document."""
    if not _is_list(doc.body):
        return [doc]
    items = doc.body["items"]
    if items is None:
        return []
    if not isinstance(items, list):
        raise doc.error(f"expected a list of objects, got {_type_name(items)}", "items")
    lines = _item_lines(node)
    out: list[YamlDoc] = []
    for i, item in enumerate(items):
        prefix = f"items[{i}]"
        line = lines[i] if i < len(lines) else doc.line
        if not isinstance(item, dict):
            raise doc.error(f"expected a Kubernetes object, got {_type_name(item)}", prefix)
        child = YamlDoc(doc.source, doc.index, line, item, prefix)
        if _is_list(item):
            raise child.error("a List inside a List is not a Kubernetes object")
        # A typed list (e.g. NodeList) may leave apiVersion/kind off its items.
        if "kind" not in item and doc.kind.endswith("List") and doc.kind != "List":
            item["kind"] = doc.kind[: -len("List")]
            item.setdefault("apiVersion", doc.api_version)
        _check_object(child)
        out.append(child)
    return out


def _item_lines(node: yaml.Node) -> list[int]:
    """First line of each entry of the document's ``items`` sequence."""
    if not isinstance(node, yaml.MappingNode):
        return []
    for key_node, value_node in node.value:
        if getattr(key_node, "value", None) == "items" and isinstance(value_node, yaml.SequenceNode):
            return [child.start_mark.line + 1 for child in value_node.value]
    return []


def _type_name(value: Any) -> str:
    """How a YAML value looks to a person reading the file."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, (int, float)):
        return f"a number ({value})"
    return f"a string ({value!r})"


type_name = _type_name


class Fields:
    """Typed reads from one mapping of an object, with errors that name the exact field.

    Kubernetes users fix files by field path (``spec.resourceGroups[0]...``), so every read
    knows its path and every wrong type says what was expected and what was found.
    """

    __slots__ = ("doc", "data", "path")

    def __init__(self, doc: YamlDoc, data: dict, path: str = "") -> None:
        self.doc = doc
        self.data = data
        self.path = path

    @classmethod
    def root(cls, doc: YamlDoc) -> Fields:
        return cls(doc, doc.body, "")

    def at(self, key: str | int) -> str:
        return field_path(self.path, key)

    def error(self, key: str | int | None, message: str) -> InputError:
        return self.doc.error(message, self.at(key) if key is not None else (self.path or None))

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def raw(self, key: str, default: Any = None) -> Any:
        value = self.data.get(key)
        return default if value is None else value

    def string(self, key: str, default: str | None = None, *, required: bool = False,
               choices: tuple[str, ...] | None = None) -> str | None:
        """A string field; ``choices`` lists the values Kubernetes accepts."""
        value = self.data.get(key)
        if value is None:
            if required:
                raise self.error(key, "required field is missing")
            return default
        if not isinstance(value, str):
            raise self.error(key, f"expected a string, got {_type_name(value)}")
        if choices is not None and value not in choices:
            raise self.error(key, f"expected one of {', '.join(choices)}, got {value!r}")
        return value

    def integer(self, key: str, default: int | None = None, *, required: bool = False,
                minimum: int | None = None, maximum: int | None = None) -> int | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise self.error(key, "required field is missing")
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"expected a whole number, got {_type_name(value)}")
        if minimum is not None and value < minimum:
            raise self.error(key, f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise self.error(key, f"must be at most {maximum}, got {value}")
        return value

    def boolean(self, key: str, default: bool | None = None) -> bool | None:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {_type_name(value)}")
        return value

    def mapping(self, key: str, *, required: bool = False) -> Fields | None:
        """A nested object (None when absent)."""
        value = self.data.get(key)
        if value is None:
            if required:
                raise self.error(key, "required field is missing")
            return None
        if not isinstance(value, dict):
            raise self.error(key, f"expected a mapping, got {_type_name(value)}")
        return Fields(self.doc, value, self.at(key))

    def mapping_or_empty(self, key: str) -> Fields:
        return self.mapping(key) or Fields(self.doc, {}, self.at(key))

    def items(self, key: str, *, required: bool = False) -> list[Fields]:
        """A list of objects."""
        value = self.data.get(key)
        if value is None:
            if required:
                raise self.error(key, "required field is missing")
            return []
        if not isinstance(value, list):
            raise self.error(key, f"expected a list, got {_type_name(value)}")
        out = []
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                raise self.error(key, f"item {i}: expected a mapping, got {_type_name(item)}")
            out.append(Fields(self.doc, item, field_path(self.at(key), i)))
        return out

    def string_list(self, key: str) -> list[str]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(key, f"expected a list of strings, got {_type_name(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise self.doc.error(f"expected a string, got {_type_name(item)}", field_path(self.at(key), i))
        return list(value)

    def string_map(self, key: str) -> dict[str, str]:
        """Labels, annotations, selectors: string keys and string values, as Kubernetes requires."""
        value = self.data.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(key, f"expected a mapping of strings, got {_type_name(value)}")
        for k, v in value.items():
            if not isinstance(k, str) or not isinstance(v, str):
                bad = k if not isinstance(k, str) else v
                raise self.doc.error(
                    f"expected a string, got {_type_name(bad)} (quote numbers and booleans)",
                    field_path(self.at(key), str(k)),
                )
        return dict(value)

    def check_keys(self, known: set[str] | frozenset[str], *, not_modelled: set[str] = frozenset(),
                   notes: list[tuple[str, str]] | None = None, owner: str = "",
                   renamed: dict[str, str] | None = None) -> None:
        """Refuse unknown fields (typos), record known fields gpupool does not act on.

        ``renamed`` maps a field of the other API version to its name in this one, so a
        ``cohort`` in a v1beta2 file gets a hint instead of a bare "unknown field".
        """
        for key, value in self.data.items():
            if key in known or value is None:
                continue
            if key in not_modelled:
                if notes is not None:
                    notes.append((self.doc.where, f"{owner}: {self.at(key)}"))
                continue
            hint = ""
            if renamed and key in renamed:
                hint = f"; in {self.doc.api_version} this field is called {renamed[key]}"
            allowed = ", ".join(sorted(known | set(not_modelled)))
            raise self.error(key, f"unknown field '{key}'{hint} (known fields: {allowed})")
