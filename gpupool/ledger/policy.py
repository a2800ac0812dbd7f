"""Policy versions: content-addressed snapshots of a pool directory, their log, and a
semantic diff of two versions (the parsed model, not the text).

A version's ``tree`` is the SHA-256 over the sorted (path, file hash) list of the pool's own
files (top-level files and any file the pool loaded from below it, e.g. a slurm.conf
``Include``; workload folders are not policy). File contents are stored once each in
``policy_blobs``. Committing an unchanged tree makes no new version.
"""
from __future__ import annotations

import getpass
import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from gpupool.ledger import schema as s
from gpupool.ledger.db import LedgerError
from gpupool.ledger.store import Ledger, insert_ignore
from gpupool.model.pool import Pool


@dataclass(frozen=True)
class PolicyVersion:
    version: str
    pool: str
    tree: str
    parent: str | None
    author: str
    message: str
    committed_at: float
    files: dict[str, str]

    @property
    def short(self) -> str:
        return self.version[:12]

    def as_dict(self) -> dict:
        from gpupool.ledger.timefmt import format_ts

        return {"version": self.version, "short": self.short, "pool": self.pool, "tree": self.tree,
                "parent": self.parent, "author": self.author, "message": self.message,
                "committed_at": format_ts(self.committed_at), "files": sorted(self.files)}


def pool_files(pool_dir: str | Path, pool: Pool | None = None) -> dict[str, bytes]:
    """The pool's own files as {relative path: bytes}."""
    root = Path(pool_dir)
    files: dict[str, bytes] = {}
    for entry in sorted(root.iterdir()):
        if entry.is_file() and not entry.name.startswith("."):
            files[entry.name] = entry.read_bytes()
    for src in (pool.sources if pool is not None else ()):
        p = Path(src)
        try:
            rel = p.resolve().relative_to(root.resolve())
        except ValueError:
            continue
        if p.is_file():
            files[rel.as_posix()] = p.read_bytes()
    return files


def tree_hash(files: dict[str, bytes]) -> tuple[str, dict[str, str]]:
    manifest = {path: hashlib.sha256(data).hexdigest() for path, data in sorted(files.items())}
    h = hashlib.sha256()
    for path, sha in manifest.items():
        h.update(f"{path}\0{sha}\n".encode())
    return h.hexdigest(), manifest


def pool_tree(pool_dir: str | Path, pool: Pool | None = None) -> str:
    return tree_hash(pool_files(pool_dir, pool))[0]


def _row_to_version(row) -> PolicyVersion:
    return PolicyVersion(row.version, row.pool, row.tree, row.parent, row.author, row.message,
                         row.committed_at, json.loads(row.manifest))


def default_author() -> str:
    for var in ("GPUPOOL_AUTHOR", "GIT_AUTHOR_NAME", "USER"):
        if os.environ.get(var):
            return os.environ[var]
    try:
        return getpass.getuser()
    except Exception:  # pragma: no cover
        return "unknown"


def commit(ledger: Ledger, pool_dir: str | Path, message: str, *, author: str | None = None,
           at: float | None = None, pool: Pool | None = None) -> tuple[PolicyVersion, bool]:
    """Snapshot ``pool_dir`` (which must load as a pool); returns (version, created).

    When the tree equals the pool's newest version, nothing is written and that version is
    returned with ``created=False``.
    """
    from gpupool.formats.pool_dir import load_pool

    pool = pool or load_pool(pool_dir)
    files = pool_files(pool_dir, pool)
    tree, manifest = tree_hash(files)
    author = author or default_author()
    at = time.time() if at is None else at
    with ledger.transaction() as conn:
        head = _head(conn, pool.name)
        if head is not None and head.tree == tree:
            return head, False
        parent = head.version if head else None
        version = hashlib.sha256(json.dumps([tree, parent, author, message, at]).encode()).hexdigest()
        sha_of = {sha: files[path] for path, sha in manifest.items()}
        insert_ignore(conn, s.policy_blobs, [{"sha": k, "content": v} for k, v in sha_of.items()], ("sha",))
        conn.execute(s.policy_versions.insert().values(
            version=version, pool=pool.name, tree=tree, parent=parent, author=author, message=message,
            committed_at=at, manifest=json.dumps(manifest, sort_keys=True)))
    return PolicyVersion(version, pool.name, tree, parent, author, message, at, manifest), True


def _head(conn, pool: str) -> PolicyVersion | None:
    v = s.policy_versions.c
    row = conn.execute(sa.select(s.policy_versions).where(v.pool == pool)
                       .order_by(v.committed_at.desc(), v.seq.desc()).limit(1)).first()
    return _row_to_version(row) if row else None


def find_by_tree(conn, pool: str, tree: str) -> PolicyVersion | None:
    v = s.policy_versions.c
    row = conn.execute(sa.select(s.policy_versions).where(v.pool == pool, v.tree == tree)
                       .order_by(v.committed_at.desc(), v.seq.desc()).limit(1)).first()
    return _row_to_version(row) if row else None


def log(ledger: Ledger, pool: str | None = None) -> list[PolicyVersion]:
    """Versions newest first (of one pool, or of all)."""
    v = s.policy_versions.c
    q = sa.select(s.policy_versions).order_by(v.committed_at.desc(), v.seq.desc())
    if pool:
        q = q.where(v.pool == pool)
    with ledger.read() as conn:
        return [_row_to_version(r) for r in conn.execute(q)]


def resolve(ledger: Ledger, ref: str, pool: str | None = None) -> PolicyVersion:
    """A version from a hash prefix (4+ characters), ``HEAD``, or ``HEAD~N``."""
    with ledger.read() as conn:
        v = s.policy_versions.c
        if ref.upper().startswith("HEAD"):
            back = 0
            if "~" in ref:
                try:
                    back = int(ref.split("~", 1)[1] or 1)
                except ValueError:
                    raise LedgerError(f"expected HEAD, HEAD~N or a version hash, got {ref!r}") from None
            versions = log(ledger, pool)
            if len(versions) <= back:
                raise LedgerError(f"{ref}: the ledger has {len(versions)} policy version(s)"
                                  + (f" of pool {pool}" if pool else ""))
            return versions[back]
        rows = conn.execute(sa.select(s.policy_versions).where(v.version.like(ref.lower() + "%"))).all()
    if not rows:
        raise LedgerError(f"no policy version {ref!r} in the ledger (see `gpupool policy log`)")
    if len(rows) > 1:
        raise LedgerError(f"policy version {ref!r} is ambiguous: {', '.join(r.version[:12] for r in rows)}")
    return _row_to_version(rows[0])


def get(ledger: Ledger, version: str) -> PolicyVersion | None:
    with ledger.read() as conn:
        row = conn.execute(sa.select(s.policy_versions).where(s.policy_versions.c.version == version)).first()
    return _row_to_version(row) if row else None


def checkout(ledger: Ledger, version: PolicyVersion, target: str | Path) -> Path:
    """Write a version's files into ``target`` (a directory named after the pool)."""
    root = Path(target)
    root.mkdir(parents=True, exist_ok=True)
    with ledger.read() as conn:
        blobs = dict(conn.execute(sa.select(s.policy_blobs.c.sha, s.policy_blobs.c.content)
                                  .where(s.policy_blobs.c.sha.in_(list(version.files.values())))).all())
    for rel, sha in version.files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes(blobs[sha]))
    return root


def load_version(ledger: Ledger, version: PolicyVersion) -> Pool:
    from gpupool.formats.pool_dir import load_pool

    with tempfile.TemporaryDirectory(prefix="gpupool-policy-") as tmp:
        pool = load_pool(checkout(ledger, version, Path(tmp) / version.pool))
    return pool


# ------------------------------------------------------------------------------------------
# Semantic diff


def diff_versions(ledger: Ledger, a: PolicyVersion, b: PolicyVersion) -> list[str]:
    return diff_pools(load_version(ledger, a), load_version(ledger, b))


def diff_pools(a: Pool, b: Pool) -> list[str]:
    """Lines such as ``ClusterQueue training: nvidia.com/gpu borrowingLimit 8 → 16`` and
    ``QOS high: Preempt += normal``; ``+ QOS urgent`` / ``- QOS urgent`` for whole objects."""
    from gpupool.ledger.model_facts import pool_objects

    left, right = pool_objects(a), pool_objects(b)
    lines: list[str] = []
    for obj in sorted(set(left) | set(right), key=_object_order):
        if obj not in right:
            lines.append(f"- {obj}")
            continue
        if obj not in left:
            lines.append(f"+ {obj}" + (f" ({_summary(right[obj])})" if right[obj] else ""))
            continue
        for fld in sorted(set(left[obj]) | set(right[obj])):
            old, new = left[obj].get(fld), right[obj].get(fld)
            if old == new:
                continue
            if isinstance(old, frozenset) or isinstance(new, frozenset):
                old_set, new_set = old or frozenset(), new or frozenset()
                added, removed = sorted(new_set - old_set), sorted(old_set - new_set)
                if added:
                    lines.append(f"{obj}: {fld} += {','.join(added)}")
                if removed:
                    lines.append(f"{obj}: {fld} -= {','.join(removed)}")
            else:
                lines.append(f"{obj}: {fld} {_show(old)} → {_show(new)}")
    return lines


_ORDER = ("slurm.conf", "Node", "Partition", "QOS", "Account", "User", "Kueue", "ResourceFlavor", "Topology",
          "Cohort", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass", "PoolSettings")


def _object_order(name: str) -> tuple:
    kind = name.split(" ", 1)[0]
    return (_ORDER.index(kind) if kind in _ORDER else len(_ORDER), name)


def _show(value) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, frozenset):
        return ",".join(sorted(value)) or "(none)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _summary(fields: dict) -> str:
    items = [f"{k}={_show(v)}" for k, v in sorted(fields.items()) if v not in (None, frozenset(), "")]
    text = ", ".join(items[:6])
    return text + (", …" if len(items) > 6 else "")
