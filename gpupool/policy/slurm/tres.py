"""TRES counts of an allocation and the billing TRES over them, as slurmctld counts them.

Why a module of its own: the policy (limits' usage, fair-share billing), the ``sacct`` and
``scontrol`` views and the ledger must count and bill a job alike, and each had its own copy.
"""
from __future__ import annotations

from gpupool.formats.slurm_conf import tres_name
from gpupool.policy.slurm.jobinfo import gpu_tres

#: the TRES PriorityFlags=MAX_TRES compares (22.05 ``assoc_mgr_tres_weighted``: cpu, mem, node
#: and every GRES); any other weighted TRES (licenses, ...) is added to the largest of them
_MAX_TRES_NODE = ("cpu", "mem", "node")


def parse_billing_weights(text: str) -> dict[str, float]:
    """``CPU=1.0,Mem=0.25G,GRES/gpu=2.0`` -> per-unit weights (memory per MiB)."""
    out: dict[str, float] = {}
    for item in str(text or "").split(","):
        name, eq, value = item.strip().partition("=")
        if not eq:
            continue
        key = tres_name(name)
        scale = 1.0
        v = value.strip()
        if v[-1:].upper() in ("K", "M", "G", "T"):
            # The suffix names the unit the weight is per: G = per GiB (÷1024 per MiB).
            scale = {"K": 1024.0, "M": 1.0, "G": 1 / 1024.0, "T": 1 / 1048576.0}[v[-1].upper()]
            v = v[:-1]
        out[key] = float(v) * scale
    return out


def tres_billing(counts: dict[str, int], weights: dict[str, float], max_tres: bool) -> float:
    """Slurm's billing TRES for TRES ``counts`` under a partition's TRESBillingWeights.

    Without weights it is the CPU count; else Σ count × weight over the weighted TRES (a typed
    GPU counts for ``gres/gpu`` and for its tracked ``gres/gpu:<type>``, as tres_alloc_cnt
    holds both), or with MAX_TRES the largest weighted cpu, mem, node or GRES value plus the
    others' sum."""
    if not weights:
        return float(counts.get("cpu", 0))
    node = total = 0.0
    for t, w in weights.items():
        if t == "billing":
            continue
        v = counts.get(t, 0) * w
        if max_tres and (t in _MAX_TRES_NODE or t.startswith("gres/")):
            if v > node:
                node = v
        else:
            total += v
    return node + total


def tracked_gpu_tres(params: dict) -> tuple[bool, frozenset[str], str | None]:
    """(whether ``gres/gpu`` is tracked, the typed ``gres/gpu:<type>`` TRES tracked, the TRES
    an untyped GPU request counts for where only types are), from slurm.conf's
    AccountingStorageTRES (``params``): slurmctld counts only configured TRES, and where it
    tracks no ``gres/gpu`` it charges an untyped request to the first tracked type (in
    AccountingStorageTRES order, the order it registers them in, so a fresh database's)."""
    tracked = [tres_name(str(t)) for t in (params.get("AccountingStorageTRES") or ())]
    typed = [t for t in tracked if t.startswith("gres/gpu:")]
    gpu = "gres/gpu" in tracked
    return gpu, frozenset(typed), (typed[0] if typed and not gpu else None)


def tracked_gpu_keys(nodes, tracked: frozenset[str], untyped_as: str | None = None) -> list:
    """Per node of ``nodes`` (a ``NodeTable``), its devices' tracked typed GPU TRES as
    ``(key, device mask)`` pairs, None where no type of it is tracked: built once per table so
    that counting an allocation per type is a few ANDs. Devices of no type count for
    ``untyped_as`` (where only types are tracked, slurmctld charges an allocation entry without
    a type to the first tracked type, ``_set_type_tres_cnt``)."""
    out: list = []
    for i in range(len(nodes)):
        types = nodes.gpu_types(i)
        pairs = tuple((k, m) for name, m in types.items() if (k := gpu_tres(name)) in tracked)
        if untyped_as is not None:
            untyped = nodes.full_mask[i]
            for m in types.values():
                untyped &= ~m
            if untyped:
                pairs += ((untyped_as, untyped),)
        out.append(pairs or None)
    return out


def alloc_counts(placement, typed_keys: list, gpu_tracked: bool = True) -> dict[str, int]:
    """The TRES a placement holds, as slurmctld's tres_alloc_cnt counts them for limits' usage
    and billing: CPUs, GPUs, memory (MiB), nodes, and the GPUs per tracked type by the devices
    held, whatever the request named (``gres_ctld.c``'s ``_job_alloc`` keeps one entry per type
    on the node). ``typed_keys``: ``tracked_gpu_keys`` of the run's node table (empty when no
    type is tracked); ``gpu_tracked``: whether AccountingStorageTRES tracks ``gres/gpu`` (else
    the GPUs count for no TRES but their tracked types)."""
    cpu = gpu = mem = 0
    for _node, mask, c, m in placement:
        cpu += c // 1000
        gpu += mask.bit_count()
        mem += m
    out = {"cpu": cpu, "mem": mem, "node": len({p[0] for p in placement})}
    if gpu_tracked:
        out["gres/gpu"] = gpu
    if gpu and typed_keys:
        for node, mask, _c, _m in placement:
            pairs = typed_keys[node]
            if not mask or pairs is None:
                continue
            for k, m in pairs:
                bits = mask & m
                if bits:
                    out[k] = out.get(k, 0) + bits.bit_count()
    return out


def mem_text(mib: int) -> str:
    """MB as a TRES string shows memory: in the largest unit that keeps it whole (``16G``,
    ``240000M``, ``1875G``)."""
    units = "MGTP"
    k = 0
    while mib and mib % 1024 == 0 and k < len(units) - 1:
        mib //= 1024
        k += 1
    return f"{mib}{units[k]}"


def tres_text(tres: dict) -> str:
    """TRES counts as sacct's ReqTRES/AllocTRES print them: ``name=count`` entries with
    memory in units (``mem_text``), counts of 0 left out, the entries sorted as strings (so
    ``gres/gpu:h100=2`` comes before ``gres/gpu=2``: a real 22.05.8 printed
    ``billing=10,cpu=4,gres/gpu:h100=2,gres/gpu=2,mem=10G,node=1``, and left out ``billing``
    where the weights gave 0). Fractional counts (billing) are cut to whole ones."""
    parts = []
    for name, v in tres.items():
        v = int(v)
        if v:
            parts.append(f"{name}={mem_text(v) if name == 'mem' else v}")
    return ",".join(sorted(parts))
