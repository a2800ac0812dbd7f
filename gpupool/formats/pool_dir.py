"""A pool directory -> one ``Pool``: every real file in it parsed and cross-checked.

Which file is what:
- ``slurm.conf`` (with its ``Include`` files), ``gres.conf``, ``topology.conf``;
- ``*.cfg``: a ``sacctmgr dump`` file;
- ``*.yaml`` / ``*.yml``: Kubernetes and Kueue objects (``gpupool.yaml`` holds pool settings);
- anything else at the top level is listed as ignored (sub-folders hold workloads).

When Kubernetes Node objects are absent, the slurm.conf nodes stand for them, with labels
from a fixed mapping (``docs/formats.md``): hostname, GPU product, topology block and rack
from topology.conf, and Slurm features. The load either returns a whole Pool or raises.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gpupool.errors import InputError
from gpupool.model.pool import DEFAULT_TOPOLOGY_LEVELS, GPU_PRODUCT_LABEL, HOSTNAME_LABEL, Node, Pool
from gpupool.model.slurm import qos_name
from gpupool.formats.pool_settings import SETTINGS_FILE, load_pool_settings

SLURM_FILES = ("slurm.conf", "gres.conf", "topology.conf")
YAML_SUFFIXES = (".yaml", ".yml")
FEATURE_LABEL_PREFIX = "feature.node.gpupool.io/"
DEFAULT_BLOCK = "block-0"
DEFAULT_RACK = "rack-0"


def load_pool(path: str | Path) -> Pool:
    """Parse every pool file in the directory ``path`` into a Pool (or raise InputError)."""
    root = Path(path)
    if not root.is_dir():
        raise InputError(str(root), "expected a pool directory (slurm.conf, gres.conf, a sacctmgr dump, Kueue YAML)")
    pool = Pool(name=root.resolve().name, path=str(root))
    ignored: list[str] = []
    slurm_nodes: list[Node] = []
    topo_map: dict[str, tuple[str | None, str]] = {}
    yaml_files: list[Path] = []
    dump_files: list[Path] = []
    for entry in sorted(root.iterdir()):
        if entry.is_dir() or entry.name in SLURM_FILES:
            continue
        if entry.name == SETTINGS_FILE:
            settings = load_pool_settings(entry)
            pool.name = settings.name
            pool.default_workload = settings.default_workload
            pool.sources.append(str(entry))
        elif entry.suffix in YAML_SUFFIXES:
            yaml_files.append(entry)
        elif entry.suffix == ".cfg":
            dump_files.append(entry)
        else:
            ignored.append(entry.name)

    slurm_conf = root / "slurm.conf"
    if slurm_conf.exists():
        from gpupool.formats.slurm_conf import load_slurm_conf

        result = load_slurm_conf(slurm_conf)
        pool.slurm = result.config
        slurm_nodes = result.nodes
        pool.not_modelled.extend(result.not_modelled)
        pool.sources.extend(result.config.sources or [str(slurm_conf)])
        gres = root / "gres.conf"
        if gres.exists():
            from gpupool.formats.gres_conf import apply_gres, parse_gres_conf

            entries = parse_gres_conf(gres)
            for note in apply_gres(slurm_nodes, entries, str(gres)) or ():
                pool.notes.append(note)
            pool.slurm.gres = entries
            pool.sources.append(str(gres))
        topo = root / "topology.conf"
        if topo.exists():
            from gpupool.formats.topology_conf import parse_topology_conf

            topo_map = parse_topology_conf(topo)
            pool.sources.append(str(topo))
            unknown = sorted(set(topo_map) - {n.name for n in slurm_nodes})
            if unknown:
                raise InputError(str(topo), f"names node {unknown[0]!r}, which no NodeName line in {slurm_conf} defines")
    else:
        for name in ("gres.conf", "topology.conf"):
            if (root / name).exists():
                raise InputError(str(root / name), f"found without a slurm.conf in {root} to apply it to")

    if pool.slurm is not None and not dump_files:
        for part in pool.slurm.partitions.values():
            for kind in _QOS_LIST:
                if getattr(part, kind):
                    _drop_qos_list(pool, part, kind)
    if dump_files:
        if pool.slurm is None:
            raise InputError(str(dump_files[0]), f"a sacctmgr dump needs a slurm.conf in {root}")
        if len(dump_files) > 1:
            raise InputError(str(dump_files[1]), f"second sacctmgr dump; the pool already has {dump_files[0].name}")
        from gpupool.formats.sacctmgr import parse_sacctmgr_dump

        pool.slurm.accounting = parse_sacctmgr_dump(dump_files[0])
        pool.not_modelled.extend(pool.slurm.accounting.not_modelled)
        pool.sources.append(str(dump_files[0]))
        _check_partition_refs(pool)
        # first: ``validate`` prints the first notes, and an ignored limit matters most
        pool.notes[:0] = _untracked_limits(pool, dump_files[0].name)

    kube_nodes: list[Node] = []
    if yaml_files:
        from gpupool.formats.kube_yaml import load_yaml_documents
        from gpupool.formats.kueue_objects import parse_pool_objects

        docs = [doc for f in yaml_files for doc in load_yaml_documents(f)]
        objects = parse_pool_objects(docs)
        if objects.workload_docs:
            doc = objects.workload_docs[0]
            raise InputError(doc.source, f"is a {doc.body.get('kind')}: workloads belong in a workload folder "
                             "(e.g. workloads/) or are given with --workload, not among the pool's files",
                             document=doc.index)
        kube_nodes = objects.nodes
        pool.kueue = objects.kueue
        pool.not_modelled.extend(objects.not_modelled)
        pool.sources.extend(str(f) for f in yaml_files)
        if objects.kueue.topologies:
            pool.topology_levels = next(iter(objects.kueue.topologies.values())).levels

    nodes = _label_slurm_nodes(slurm_nodes, topo_map, pool.topology_levels)
    pool.nodes = _merge_nodes(nodes, kube_nodes)
    pool.not_modelled.extend((str(root / name), "file not read by gpupool") for name in ignored)
    if not pool.nodes:
        raise InputError(str(root), "the pool has no nodes: expected NodeName lines in slurm.conf or Node objects")
    return pool


def _untracked_limits(pool: Pool, dump: str) -> list[str]:
    """Notes for TRES limits on a TRES slurm.conf does not track: slurmctld keeps only its
    default TRES and AccountingStorageTRES, so such a limit binds nobody (the common case:
    ``GrpTRES=gres/gpu=8`` without ``AccountingStorageTRES=gres/gpu``). The policy does the
    same; the note says so instead of leaving the limit ignored in silence."""
    from gpupool.formats.slurm_conf import tracked_tres, tres_name

    tracked = tracked_tres(pool.slurm.params)
    acct = pool.slurm.accounting
    owners = [(f"QOS {q.name!r}", q, ("grp_tres", "max_tres_per_user", "max_tres_per_job", "max_tres_per_account",
                                      "min_tres_per_job")) for q in acct.qos.values()]
    owners += [(f"account {a.account!r}", a, ("grp_tres", "max_tres_per_job")) for a in acct.accounts.values()]
    owners += [(f"user {a.user!r} in account {a.account!r}", a, ("grp_tres", "max_tres_per_job"))
               for a in acct.user_associations]
    names = {"grp_tres": "GrpTRES", "max_tres_per_user": "MaxTRESPerUser", "max_tres_per_job": "MaxTRESPerJob",
             "max_tres_per_account": "MaxTRESPerAccount", "min_tres_per_job": "MinTRESPerJob"}
    notes = []
    for q in acct.qos.values():
        if "billing" in q.min_tres_per_job:
            notes.append(f"{dump}: QOS {q.name!r} MinTRESPerJob=billing is not modelled: the Slurm policy does not "
                         "hold a job whose billing is below it")
    for who, obj, fields in owners:
        for f in fields:
            for key in getattr(obj, f):
                if tres_name(key).lower() not in tracked:
                    notes.append(f"{dump}: {who} {names[f]}={key} limits a TRES slurm.conf does not track "
                                 f"(AccountingStorageTRES): slurmctld ignores it, and so does the Slurm policy")
    return notes


def _check_partition_refs(pool: Pool) -> None:
    """Partition AllowAccounts/AllowQos and QOS= must name accounts and QOS the dump defines.
    A partition QOS it lacks stops slurmctld ("Partition ... has an invalid qos") where
    AccountingStorageEnforce has ``qos``; without it slurmctld runs the partition with no QOS
    (``assoc_mgr_fill_in_qos`` does not fail), and so does the Slurm policy: noted."""
    from gpupool.formats.slurm_conf import accounting_enforce  # local: pool_dir reads slurm.conf lazily

    acct = pool.slurm.accounting
    qos_enforced = "qos" in accounting_enforce(pool.slurm.params)
    for part in pool.slurm.partitions.values():
        if part.qos:  # slurmctld finds a QOS by its name in any case (``assoc_mgr_fill_in_qos``)
            part.qos = qos_name(acct.qos, part.qos)
        if part.qos and part.qos not in acct.qos:
            if qos_enforced:
                raise InputError(part.source or "slurm.conf",
                                 f"partition {part.name!r} has QOS={part.qos}, which {acct.source} does not define "
                                 "(slurmctld stops: AccountingStorageEnforce has qos)")
            pool.notes.append(f"{part.source or 'slurm.conf'}: partition {part.name!r} has QOS={part.qos}, which "
                              f"{acct.source} does not define: without AccountingStorageEnforce=qos slurmctld runs "
                              "the partition with no QOS, and so does the Slurm policy")
        for name in part.allow_accounts or ():
            if name not in acct.accounts:
                raise InputError(part.source or "slurm.conf",
                                 f"partition {part.name!r} allows account {name!r}, which {acct.source} does not define")
        # AllowQos/DenyQos: slurmctld finds each name in any case and skips one it does not know
        # ("Ignoring invalid Allow/DenyQOS value", ``qos_list_build``): noted, kept as written
        for kind in _QOS_LIST:
            names = getattr(part, kind)
            if not names:
                continue
            if not acct.qos:
                _drop_qos_list(pool, part, kind)
                continue
            setattr(part, kind, tuple(qos_name(acct.qos, name) for name in names))
            for name in getattr(part, kind):
                if name not in acct.qos:
                    pool.notes.append(f"{part.source or 'slurm.conf'}: partition {part.name!r} {_QOS_LIST[kind]} "
                                      f"names QOS {name!r}, which {acct.source} does not define: slurmctld ignores "
                                      "it, and so does the Slurm policy")


#: a partition's QOS list fields and their slurm.conf keys
_QOS_LIST = {"allow_qos": "AllowQos", "deny_qos": "DenyQos"}


def _drop_qos_list(pool: Pool, part, kind: str) -> None:
    """With no QOS on the system (no accounting, or a dump defining none) slurmctld ignores a
    partition's AllowQos/DenyQos ("We have no QOS on the system Ignoring invalid Allow/DenyQOS
    value(s)", ``qos_list_build``): dropped, with a note."""
    pool.notes.append(f"{part.source or 'slurm.conf'}: partition {part.name!r} {_QOS_LIST[kind]}="
                      f"{','.join(getattr(part, kind))}: with no QOS defined slurmctld ignores it, and so does "
                      "the Slurm policy")
    setattr(part, kind, None if kind == "allow_qos" else ())


def topology_labels(name: str, levels: tuple[str, ...], block: str | None, rack: str | None) -> dict[str, str]:
    """Labels that place a slurm.conf node in the pool's topology levels.

    The last level is the hostname; the one before it the rack (topology.conf leaf switch);
    the one before that the block (the leaf's parent switch). Deeper levels get the block.
    """
    labels: dict[str, str] = {}
    if not levels:
        return labels
    labels[levels[-1]] = name
    if len(levels) >= 2:
        labels[levels[-2]] = rack or DEFAULT_RACK
    for key in levels[:-2]:
        labels[key] = block or DEFAULT_BLOCK
    return labels


def _label_slurm_nodes(nodes: list[Node], topo: dict, levels: tuple[str, ...]) -> list[Node]:
    out = []
    for node in nodes:
        block, rack = topo.get(node.name, (None, None))
        labels = {HOSTNAME_LABEL: node.name}
        labels.update(topology_labels(node.name, levels or DEFAULT_TOPOLOGY_LEVELS, block, rack))
        if node.gpu_type:
            labels[GPU_PRODUCT_LABEL] = node.gpu_type
        for feature in node.features:
            labels[FEATURE_LABEL_PREFIX + feature] = "true"
        labels.update(node.labels)
        out.append(replace(node, labels=labels))
    return out


def _merge_nodes(slurm_nodes: list[Node], kube_nodes: list[Node]) -> dict[str, Node]:
    """One node list: Kubernetes Node objects add labels and taints to slurm.conf nodes of the
    same name; their GPU counts must agree."""
    merged = {n.name: n for n in slurm_nodes}
    for kn in kube_nodes:
        sn = merged.get(kn.name)
        if sn is None:
            merged[kn.name] = kn
            continue
        if kn.gpu_count != sn.gpu_count:
            raise InputError(kn.source or "Node object",
                             f"Node {kn.name} has {kn.gpu_count} nvidia.com/gpu but slurm.conf ({sn.source}) gives it {sn.gpu_count} GPUs")
        merged[kn.name] = replace(sn, labels={**sn.labels, **kn.labels}, taints=kn.taints or sn.taints)
    return merged
