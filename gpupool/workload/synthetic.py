"""A seeded synthetic workload calibrated to public GPU traces (spec/traces.md §1.8).

Why: the public traces are either too large to ship or miss fields a replay needs (queues,
time limits, services), and none can be scaled to the user's pool. The generator draws
training jobs and inference replicas whose *shape* matches the traces — sizes, heavy-tailed
durations, outcomes, diurnal and weekly arrivals — and whose *amount* matches a target load on
the given pool. Every figure and its source: docs/synthetic.md.

Determinism: only ``numpy.random.default_rng(spec.seed)`` is used, with draws in a fixed
order, so the same pool and spec give an identical list. Speed: everything is drawn as numpy
arrays; ``Workload`` objects are built once at the end (100 k jobs well under 2 s).

How the amount is hit: training jobs are drawn i.i.d. until their offered GPU-time
(GPUs × min(runtime, time limit)) reaches ``(1 − inference_share) × target_load × pool GPUs ×
duration_s``; the job that crosses the budget is trimmed to fill it exactly. A heavy-tailed
sum of a few hundred jobs would otherwise miss its target by ±50 % on a small pool. Given the
count, arrival times are i.i.d. from the normalised hourly intensity — a non-homogeneous
Poisson process conditioned on its count. Inference replicas fill their share the same way.
``jobs=N`` fixes the training job count instead (the load is then whatever N jobs offer).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from urllib.parse import parse_qsl

import numpy as np

from gpupool.errors import InputError
from gpupool.model.resources import GPU
from gpupool.model.pool import Node, Pool
from gpupool.model.workload import GANG_ALL, GANG_NONE, KIND_BATCH, KIND_SERVICE, PodSet, Workload

HOUR = 3600.0
DAY = 86400.0
WEEK = 7 * DAY

#: Training job sizes in GPUs (spec §1.8 rec. 1: powers of two, P(1) ≈ 0.75).
SIZES = (1, 2, 4, 8, 16, 32)
#: Relative probabilities of the sizes above 1 (scaled to 1 − single_gpu_share). Philly's ≥1 h
#: sample has 2/4/8 GPUs = 2.0/9.3/12.5 %; 16 and 32 extend the tail as Helios/Acme show.
TAIL_WEIGHTS = {2: 0.05, 4: 0.08, 8: 0.09, 16: 0.02, 32: 0.01}
#: Median-duration multiplier per size: larger jobs run longer (Philly ≥1 h sample: 1-GPU median
#: 3 h vs 18–28 h for 2–8 GPUs); kept milder so the overall median stays in minutes. With
#: TAIL_WEIGHTS it gives 8+-GPU jobs ≈ 75 % of GPU-time (Philly: 8-GPU jobs 59 %).
SIZE_FACTOR = {1: 1.0, 2: 1.5, 4: 2.0, 8: 3.0, 16: 3.5, 32: 4.0}
OUTCOMES = ("COMPLETED", "FAILED", "CANCELLED")
#: Median-duration multiplier per outcome: failures are skewed short (most failed jobs die
#: early), cancelled jobs hold large GPU-time (Helios: 39 % of GPU-time is cancelled jobs).
OUTCOME_FACTOR = {"COMPLETED": 1.0, "FAILED": 0.3, "CANCELLED": 1.5}
#: Share of GPU-job submissions per local hour 0..23, shaped on Helios Venus (min ≈0.8 % at
#: 06:00, max ≈7.2–7.6 % at 16:00, 10:00–22:00 ≈ 72 %, peak/trough 9.0 before rescaling).
HOURLY_PROFILE = (3.3, 2.5, 1.9, 1.4, 1.1, 0.95, 0.8, 1.1, 1.8, 2.9, 4.2, 4.9,
                  4.7, 5.2, 6.0, 6.6, 7.2, 6.9, 6.0, 5.5, 5.5, 5.6, 4.8, 4.0)
#: Share of submissions Mon..Sun on Helios Venus (%); the weekend is rescaled to the spec's
#: weekday/weekend ratio (Venus itself: 15.8 / 10.5 ≈ 1.5).
WEEKDAY_PROFILE = (14.7, 15.3, 18.3, 17.3, 13.6, 9.8, 11.1)
#: Wall-time values users typically ask for (s): a request is the runtime times an
#: over-estimate factor, rounded up to the next of these.
LIMIT_LADDER = (300, 600, 900, 1800, 3600, 7200, 14400, 28800, 43200, 86400, 172800, 259200,
                432000, 604800, 1209600, 2592000)
_TRAIN_WORDS = ("train",)
_INFER_WORDS = ("infer", "serv")
_TRAIN_PRIORITY_WORDS = ("train", "batch", "low")
_INFER_PRIORITY_WORDS = ("infer", "serv", "high", "prod")
SERVICE_LABEL = "gpupool.io/service"


@dataclass(frozen=True)
class SyntheticSpec:
    """What to generate. Defaults are the calibrated values of docs/synthetic.md."""

    duration_s: float = WEEK
    target_load: float = 0.8
    inference_share: float = 0.2
    single_gpu_share: float = 0.75
    duration_median_s: float = 600.0
    duration_mean_ratio: float = 10.0
    failure_rate: float = 0.25
    cancel_rate: float = 0.15
    diurnal_peak_trough: float = 9.0
    weekday_weekend_ratio: float = 1.5
    timeout_rate: float = 0.04
    checkpoint_share: float = 0.5
    checkpoint_interval_s: float = 1800.0
    max_runtime_s: float = 30 * DAY
    service_lifetime_median_s: float = 6 * HOUR
    service_lifetime_p90_s: float = 3 * DAY
    standing_fleet_share: float = 0.5
    start_weekday: int = 0
    jobs: int | None = None
    #: Largest training job in GPUs as a share of the pool (before the queue cap below):
    #: real pools rarely let one job take more than half of them.
    max_job_share: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("duration_s", "duration_median_s", "checkpoint_interval_s", "max_runtime_s",
                     "service_lifetime_median_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("target_load", "inference_share", "single_gpu_share", "failure_rate", "cancel_rate",
                     "timeout_rate", "checkpoint_share", "standing_fleet_share", "max_job_share"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, got {value!r}")
        if self.failure_rate + self.cancel_rate > 1.0:
            raise ValueError("failure_rate + cancel_rate must be <= 1")
        for name in ("duration_mean_ratio", "diurnal_peak_trough", "weekday_weekend_ratio"):
            if not getattr(self, name) >= 1.0:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        if self.service_lifetime_p90_s < self.service_lifetime_median_s:
            raise ValueError("service_lifetime_p90_s must be >= service_lifetime_median_s")
        if self.jobs is not None and self.jobs < 0:
            raise ValueError(f"jobs must be >= 0, got {self.jobs!r}")
        if not 0 <= self.start_weekday <= 6:
            raise ValueError(f"start_weekday must be 0 (Monday) .. 6, got {self.start_weekday!r}")


PRESETS: dict[str, SyntheticSpec] = {
    "day": SyntheticSpec(duration_s=DAY),
    "week": SyntheticSpec(duration_s=WEEK),
    "month": SyntheticSpec(duration_s=30 * DAY),
}

#: ``parse_synthetic_spec`` query keys → SyntheticSpec fields.
QUERY_KEYS = {
    "load": "target_load",
    "inference": "inference_share",
    "seed": "seed",
    "jobs": "jobs",
    "duration": "duration_s",
    "single": "single_gpu_share",
    "median": "duration_median_s",
    "mean_ratio": "duration_mean_ratio",
    "failed": "failure_rate",
    "cancelled": "cancel_rate",
    "peak_trough": "diurnal_peak_trough",
    "weekend": "weekday_weekend_ratio",
    "timeout": "timeout_rate",
    "checkpoint": "checkpoint_share",
    "start_weekday": "start_weekday",
    "max_job_share": "max_job_share",
}
_UNITS = {"s": 1.0, "m": 60.0, "h": HOUR, "d": DAY, "w": WEEK}


def _seconds(text: str) -> float:
    unit = _UNITS.get(text[-1:].lower()) if text and text[-1:].isalpha() else None
    return float(text[:-1]) * unit if unit else float(text)


def parse_synthetic_spec(text: str) -> SyntheticSpec:
    """``synthetic[:preset][?key=value&…]`` → SyntheticSpec.

    Presets: day, week (default), month. Keys (see :data:`QUERY_KEYS`): load, inference, seed,
    jobs (fix the training job count instead of solving for load), duration and median
    (seconds, or with s/m/h/d/w), single, mean_ratio, failed, cancelled, peak_trough, weekend,
    timeout, checkpoint, start_weekday. An unknown preset or key, or a bad value, is an
    InputError naming it.
    """
    source = text
    head, _, query = text.strip().partition("?")
    kind, _, preset = head.partition(":")
    if kind.strip().lower() != "synthetic":
        raise InputError(source, "expected 'synthetic[:preset][?key=value&...]'")
    preset = preset.strip().lower() or "week"
    if preset not in PRESETS:
        raise InputError(source, f"unknown preset '{preset}'; known presets: {', '.join(PRESETS)}", field=preset)
    changes: dict[str, object] = {}
    for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        if key not in QUERY_KEYS:
            raise InputError(source, f"unknown key '{key}'; known keys: {', '.join(QUERY_KEYS)}", field=key)
        name = QUERY_KEYS[key]
        try:
            if name in ("seed", "jobs", "start_weekday"):
                changes[name] = int(value)
            elif name in ("duration_s", "duration_median_s"):
                changes[name] = _seconds(value.strip())
            else:
                changes[name] = float(value)
        except ValueError:
            expected = "a whole number" if name in ("seed", "jobs", "start_weekday") else "a number"
            raise InputError(source, f"key '{key}': expected {expected}, got {value!r}", field=key) from None
    try:
        return replace(PRESETS[preset], **changes)
    except ValueError as exc:
        raise InputError(source, str(exc)) from None


# --------------------------------------------------------------------------- calibration maths


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _mu_for_median(weights: list[float], logs: list[float], median: float, sigma: float) -> float:
    """μ such that the mixture Σ w·LogNormal(μ + a, σ) has the given median (bisection)."""
    target = math.log(median)
    lo, hi = target - max(logs) - 12 * sigma, target - min(logs) + 12 * sigma
    for _ in range(80):
        mid = (lo + hi) / 2
        cdf = sum(w * _phi((target - mid - a) / sigma) for w, a in zip(weights, logs))
        lo, hi = (mid, hi) if cdf > 0.5 else (lo, mid)
    return (lo + hi) / 2


def solve_lognormal_mixture(weights: list[float], logs: list[float], median: float,
                            mean_ratio: float) -> tuple[float, float]:
    """(μ, σ) of a log-normal mixture with component log-shifts ``logs`` whose median is
    ``median`` and whose mean is ``mean_ratio × median`` (σ shared; nested bisection).

    Solved analytically so the calibration holds in expectation for any seed; when the size
    and outcome shifts alone already spread the mixture beyond the ratio, σ stays at its floor.
    """
    def ratio(sigma: float) -> tuple[float, float]:
        mu = _mu_for_median(weights, logs, median, sigma)
        mean = sum(w * math.exp(mu + a + sigma * sigma / 2) for w, a in zip(weights, logs))
        return mean / median, mu

    lo, hi = 0.01, 4.0
    if ratio(lo)[0] >= mean_ratio:
        return ratio(lo)[1], lo
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ratio(mid)[0] < mean_ratio else (lo, mid)
    sigma = (lo + hi) / 2
    return ratio(sigma)[1], sigma


def hourly_intensity(spec: SyntheticSpec) -> np.ndarray:
    """Relative arrival intensity for each hour of the window (piecewise constant).

    The Helios hourly shape is raised to the power k = ln(peak_trough)/ln(9) so its
    peak/trough ratio is exactly the spec's; weekend days are scaled so that the mean weekday
    over the mean weekend day is ``weekday_weekend_ratio``.
    """
    base = np.asarray(HOURLY_PROFILE)
    k = math.log(spec.diurnal_peak_trough) / math.log(base.max() / base.min())
    hourly = base**k
    hourly /= hourly.sum()
    week = np.asarray(WEEKDAY_PROFILE)
    weekdays, weekend = week[:5], week[5:]
    week = np.concatenate([weekdays, weekend * (weekdays.mean() / weekend.mean()) / spec.weekday_weekend_ratio])
    hours = int(math.ceil(spec.duration_s / HOUR))
    index = np.arange(hours)
    day = (spec.start_weekday + index // 24) % 7
    lengths = np.minimum(HOUR, spec.duration_s - index * HOUR)
    return hourly[index % 24] * week[day] * lengths


# --------------------------------------------------------------------------- the pool side


@dataclass(frozen=True)
class _Layout:
    size: int
    pods: int
    gpus: int
    pod: PodSet


def _share(nodes: list[Node], gpus: int, attr: str, unit: int) -> int:
    """Per-pod CPU (millicores) or memory (MiB) for ``gpus`` GPUs: 3/4 of the GPU-proportional
    share of the smallest node that could host the pod, so it fits every such node."""
    hosts = [n for n in nodes if n.gpu_count >= gpus]
    if attr == "cpu":
        values = [n.cpus * 1000 * gpus / n.gpu_count for n in hosts]
    else:
        values = [n.memory_mib * gpus / n.gpu_count for n in hosts]
    value = 0.75 * min(values)
    rounded = int(value // unit) * unit
    return rounded if rounded > 0 else int(value)


def max_training_gpus(pool: Pool, spec: SyntheticSpec) -> int:
    """The largest training job worth generating: ``max_job_share`` of the pool (at least one
    node), and no more than a training ClusterQueue can ever admit (nominal + borrowingLimit
    over its flavors), so no generated job is inadmissible by construction in either world."""
    per_node = max((n.gpu_count for n in pool.nodes.values()), default=0)
    cap = max(per_node, int(pool.gpu_count * spec.max_job_share))
    kueue = pool.kueue
    if kueue is not None:
        for cq in kueue.cluster_queues.values():
            if not any(w in cq.name.lower() for w in _TRAIN_WORDS):
                continue
            total = 0
            for rg in cq.resource_groups:
                for fq in rg.flavors:
                    q = fq.resources.get(GPU)
                    if q is None:
                        continue
                    borrow = q.borrowing_limit if q.borrowing_limit is not None else pool.gpu_count
                    total += q.nominal + (borrow if cq.cohort else 0)
            if total:
                cap = min(cap, max(per_node, total))
    return cap


def _layouts(nodes: list[Node], max_gpus: int | None = None) -> list[_Layout]:
    """The sizes of SIZES this pool can hold, each with its pod layout (one pod per node beyond
    the largest node's GPU count, as 8-GPU servers are used), up to ``max_gpus``."""
    per_node = max(n.gpu_count for n in nodes)
    out = []
    for size in SIZES:
        if max_gpus is not None and size > max_gpus:
            continue
        pods = 1 if size <= per_node else math.ceil(size / per_node)
        gpus = size if pods == 1 else math.ceil(size / pods)
        if sum(1 for n in nodes if n.gpu_count >= gpus) < pods:
            continue
        pod = PodSet(count=pods, gpus=gpus, cpu_m=_share(nodes, gpus, "cpu", 100),
                     memory_mib=_share(nodes, gpus, "memory", 1024), one_per_node=pods > 1)
        out.append(_Layout(pods * gpus, pods, gpus, pod))
    return out


@dataclass
class _Submitter:
    """Everything a job inherits from who submits it, in both worlds."""

    weight: float
    account: str | None = None
    user: str | None = None
    qos: str | None = None
    partition: str | None = None
    max_time: float | None = None
    namespace: str | None = None
    queue_name: str | None = None
    priority_class: str | None = None
    priority: int | None = None


def _leaf_shares(pool: Pool) -> dict[str, float]:
    """Leaf accounts and their normalised share of the tree (product of Fairshare fractions
    down the path, as Slurm's shares compose); 'parent' counts as the siblings' mean."""
    acct = pool.slurm.accounting if pool.slurm else None
    if acct is None or not acct.accounts:
        return {}

    def value(a) -> float:
        return float(a.fairshare) if isinstance(a.fairshare, int) or str(a.fairshare).isdigit() else float("nan")

    shares: dict[str, float] = {}

    def walk(name: str, share: float) -> None:
        kids = acct.children(name)
        if not kids:
            if name != "root":
                shares[name] = share
            return
        raw = [value(k) for k in kids]
        known = [r for r in raw if not math.isnan(r)]
        fill = sum(known) / len(known) if known else 1.0
        raw = [fill if math.isnan(r) else r for r in raw]
        total = sum(raw) or 1.0
        for kid, r in zip(kids, raw):
            walk(kid.account, share * r / total)

    roots = [a for a in acct.accounts.values()
             if not a.parent or a.parent not in acct.accounts or a.parent == a.account]
    for root in roots:
        walk(root.account, 1.0 / len(roots))
    return {k: v for k, v in shares.items() if v > 0} or {k: 1.0 for k in shares}


def _pick(names, words) -> str | None:
    """The name matching most of ``words`` (first in order on ties): 'inference-high' beats
    'training-high' for inference, 'training-low' beats 'training-high' for training."""
    best, score = None, 0
    for name in names:
        hits = sum(w in name.lower() for w in words)
        if hits > score:
            best, score = name, hits
    return best


def _partition(pool: Pool, account: str | None, words, qos: str | None = None) -> tuple[str | None, float | None]:
    """A partition whose AllowAccounts/DenyAccounts and AllowQos/DenyQos take the submitter's
    account and QOS (where known), named after the job kind where one is, else the default."""
    if pool.slurm is None or not pool.slurm.partitions:
        return None, None

    def allows_account(p) -> bool:
        if account is None:
            return True
        return (p.allow_accounts is None or account in p.allow_accounts) and account not in p.deny_accounts

    def allows(p) -> bool:
        if qos is not None and ((p.allow_qos is not None and qos not in p.allow_qos) or qos in p.deny_qos):
            return False
        return allows_account(p)

    up = [p for p in pool.slurm.partitions.values() if p.state == "UP"]
    parts = [p for p in up if allows(p)] or [p for p in up if allows_account(p)] or \
        list(pool.slurm.partitions.values())
    chosen = next((p for p in parts if any(w in p.name.lower() for w in words)), None)
    if chosen is None:
        default = pool.slurm.default_partition()
        chosen = default if default in parts else parts[0]
    return chosen.name, (float(chosen.max_time) if chosen.max_time else None)


def _effective_qos(pool: Pool, account: str | None, user: str | None, qos: str | None) -> str | None:
    """The QOS the Slurm policy gives a job of this submitter naming ``qos`` (or none:
    ``jobinfo.default_qos``), in the dump's spelling, for choosing a partition that takes it."""
    from gpupool.model.slurm import qos_name
    from gpupool.policy.slurm.jobinfo import default_qos  # local: the generator needs no policy else

    acct = pool.slurm.accounting if pool.slurm else None
    if acct is None or not acct.qos:
        return qos
    if qos is None:
        return default_qos(acct, user or "root", account or "") if account is not None else None
    return qos_name(acct.qos, qos)


def _qos(pool: Pool, account: str | None, user: str | None, inference: bool) -> str | None:
    acct = pool.slurm.accounting if pool.slurm else None
    if acct is None or account is None:
        return None
    assoc = next((a for a in acct.user_associations if a.account == account and a.user == user), None)
    owner = acct.accounts.get(account)
    allowed = tuple(assoc.qos if assoc and assoc.qos else (owner.qos if owner else ()))
    if inference:
        special = _pick(allowed, _INFER_PRIORITY_WORDS)
        if special:
            return special
    return (assoc.default_qos if assoc else None) or (owner.default_qos if owner else None)


def _local_queue(pool: Pool, account: str | None, index: int, words) -> tuple[str | None, str | None]:
    if pool.kueue is None or not pool.kueue.local_queues:
        return None, None
    queues = list(pool.kueue.local_queues.values())
    matching = [q for q in queues if any(w in q.name.lower() or w in q.cluster_queue.lower() for w in words)]
    candidates = matching or queues[:1]
    if account:
        named = [q for q in candidates if q.namespace == account or account in q.namespace or q.namespace in account]
        if named:
            return named[0].namespace, named[0].name
    chosen = candidates[index % len(candidates)]
    return chosen.namespace, chosen.name


def _priority_class(pool: Pool, words) -> tuple[str | None, int | None]:
    if pool.kueue is None or not pool.kueue.priority_classes:
        return None, None
    name = _pick(pool.kueue.priority_classes, words)
    return (name, pool.kueue.priority_classes[name].value) if name else (None, None)


def _submitters(pool: Pool, inference: bool) -> list[_Submitter]:
    """(account, user) pairs weighted by Fairshare, each with its QOS, partition, namespace and
    LocalQueue for the job kind — so one workload runs under the Slurm and the Kueue world."""
    words = _INFER_WORDS if inference else _TRAIN_WORDS
    shares = _leaf_shares(pool)
    serving = {a: s for a, s in shares.items() if any(w in a.lower() for w in _INFER_WORDS)}
    if inference:
        shares = serving or shares
    else:  # serving accounts do not submit training jobs, unless they are all there is
        shares = {a: s for a, s in shares.items() if a not in serving} or shares
    acct = pool.slurm.accounting if pool.slurm else None
    pairs: list[tuple[str | None, str | None, float]] = []
    for account, share in shares.items():
        users = [a for a in acct.user_associations if a.account == account and a.user] if acct else []
        weights = [float(u.fairshare) if isinstance(u.fairshare, int) else 1.0 for u in users]
        total = sum(weights) or 1.0
        pairs += [(account, u.user, share * w / total) for u, w in zip(users, weights)]
    if not pairs:  # no users anywhere: accounts alone, or nothing at all
        pairs = [(a, None, s) for a, s in shares.items()] or [(None, None, 1.0)]
    pclass, prio = _priority_class(pool, _INFER_PRIORITY_WORDS if inference else _TRAIN_PRIORITY_WORDS)
    account_index = {a: i for i, a in enumerate(dict.fromkeys(p[0] for p in pairs))}
    out = []
    for account, user, weight in pairs:
        qos = _qos(pool, account, user, inference)
        partition, max_time = _partition(pool, account, words, _effective_qos(pool, account, user, qos))
        namespace, queue = _local_queue(pool, account, account_index[account], words)
        out.append(_Submitter(weight, account, user, qos, partition, max_time, namespace, queue, pclass, prio))
    return out


def _eligible_nodes(pool: Pool, submitters: list[_Submitter]) -> list[Node]:
    """GPU nodes training jobs can land on: those of their partitions when the partitions name
    pool nodes, else every GPU node."""
    gpu_nodes = [n for n in pool.nodes.values() if n.gpu_count]
    if pool.slurm is None:
        return gpu_nodes
    names = set()
    for s in submitters:
        part = pool.slurm.partitions.get(s.partition) if s.partition else None
        if part is not None:
            names.update(part.nodes)
    subset = [n for n in gpu_nodes if n.name in names]
    return subset or gpu_nodes


# --------------------------------------------------------------------------- drawing


def _categorical(rng: np.random.Generator, probs: np.ndarray, n: int) -> np.ndarray:
    cum = np.cumsum(probs)
    cum /= cum[-1]
    return np.minimum(np.searchsorted(cum, rng.random(n), side="right"), len(probs) - 1)


@dataclass
class _Training:
    layout: np.ndarray
    outcome: np.ndarray
    runtime: np.ndarray
    limit: np.ndarray
    submitter: np.ndarray
    checkpoint: np.ndarray


def _draw_training(rng, n, size_p, size_log, outcome_p, mu, sigma, spec, sub_p, sub_max) -> _Training:
    layout = _categorical(rng, size_p, n)
    outcome = _categorical(rng, outcome_p, n)
    log_shift = size_log[layout] + np.log([OUTCOME_FACTOR[o] for o in OUTCOMES])[outcome]
    runtime = np.exp(mu + log_shift + sigma * rng.standard_normal(n))
    runtime = np.clip(np.round(runtime), 1.0, spec.max_runtime_s)
    submitter = _categorical(rng, sub_p, n)
    # Users over-estimate: request = runtime × ~2.5 (log-normal), rounded up to a usual value.
    over = np.maximum(1.2, np.exp(math.log(2.5) + 0.6 * rng.standard_normal(n)))
    ladder = np.asarray(LIMIT_LADDER, dtype=float)
    want = runtime * over
    pos = np.searchsorted(ladder, want)
    limit = np.where(pos < len(ladder), ladder[np.minimum(pos, len(ladder) - 1)], np.ceil(want / DAY) * DAY)
    cap = sub_max[submitter]
    limit = np.where(np.isnan(cap), limit, np.minimum(limit, cap))
    # Some under-estimate and hit their limit (TIMEOUT in a run): limit = 50–90 % of runtime.
    short = (rng.random(n) < spec.timeout_rate) & (runtime >= 120) & (outcome == 0)
    cut = np.maximum(60.0, np.floor(runtime * rng.uniform(0.5, 0.9, n) / 60) * 60)
    limit = np.where(short, np.minimum(limit, cut), limit)
    checkpoint = (rng.random(n) < spec.checkpoint_share) & (np.minimum(runtime, limit) > HOUR)
    return _Training(layout, outcome, runtime, limit, submitter, checkpoint)


def _concat(parts: list[_Training]) -> _Training:
    return _Training(*(np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(_Training)))


def _fill(draw, cost, budget: float) -> tuple[list, float]:
    """Draw blocks until their cumulative cost reaches ``budget``; returns the blocks."""
    blocks, total, chunk = [], 0.0, 2048
    while total < budget:
        block = draw(chunk)
        blocks.append(block)
        total += float(cost(block).sum())
        chunk = min(chunk * 2, 1 << 18)
    return blocks, total


def _training(rng, spec: SyntheticSpec, layouts: list[_Layout], subs: list[_Submitter], budget: float) -> _Training:
    sizes = np.asarray([lay.size for lay in layouts], dtype=float)
    tail = np.asarray([TAIL_WEIGHTS.get(lay.size, 0.0) for lay in layouts])
    single = np.asarray([lay.size == 1 for lay in layouts])
    if tail.sum() > 0:
        size_p = np.where(single, spec.single_gpu_share, tail / tail.sum() * (1 - spec.single_gpu_share))
    else:
        size_p = single.astype(float)
    size_p = size_p / size_p.sum()
    size_log = np.log([SIZE_FACTOR[lay.size] if lay.size in SIZE_FACTOR else SIZE_FACTOR[max(SIZE_FACTOR)]
                       for lay in layouts])
    outcome_p = np.asarray([1 - spec.failure_rate - spec.cancel_rate, spec.failure_rate, spec.cancel_rate])
    weights, logs = [], []
    for i, ps in enumerate(size_p):
        for j, po in enumerate(outcome_p):
            if ps * po > 0:
                weights.append(ps * po)
                logs.append(size_log[i] + math.log(OUTCOME_FACTOR[OUTCOMES[j]]))
    mu, sigma = solve_lognormal_mixture(weights, logs, spec.duration_median_s, spec.duration_mean_ratio)
    sub_p = np.asarray([s.weight for s in subs])
    sub_max = np.asarray([s.max_time if s.max_time else np.nan for s in subs], dtype=float)

    def draw(n: int) -> _Training:
        return _draw_training(rng, n, size_p, size_log, outcome_p, mu, sigma, spec, sub_p, sub_max)

    def cost(t: _Training) -> np.ndarray:
        return sizes[t.layout] * np.minimum(t.runtime, t.limit)

    if spec.jobs is not None:
        return draw(spec.jobs)
    if budget <= 0:
        return draw(0)
    blocks, _ = _fill(draw, cost, budget)
    jobs = _concat(blocks)
    spent = np.cumsum(cost(jobs))
    last = int(np.searchsorted(spent, budget))  # the job that crosses the budget
    before = float(spent[last - 1]) if last else 0.0
    seconds = (budget - before) / sizes[jobs.layout[last]]
    keep = last + 1 if seconds >= 1.0 else last
    jobs = _Training(*(getattr(jobs, f.name)[:keep] for f in fields(_Training)))
    if keep > last:  # trim the crossing job so the offered GPU-time equals the budget
        jobs.runtime[last] = seconds
        jobs.checkpoint[last] &= seconds > HOUR
    return jobs


def _services(rng, spec: SyntheticSpec, budget: float) -> np.ndarray:
    """Replica lifetimes (s), 1 GPU each, filling ``budget`` GPU-seconds (last one trimmed)."""
    if budget <= 0:
        return np.zeros(0)
    sigma = max(0.01, math.log(spec.service_lifetime_p90_s / spec.service_lifetime_median_s) / 1.2815515655446004)
    mu = math.log(spec.service_lifetime_median_s)

    def draw(n: int) -> np.ndarray:
        return np.clip(np.round(np.exp(mu + sigma * rng.standard_normal(n))), HOUR, 14 * DAY)

    blocks, _ = _fill(draw, lambda b: b, budget)
    lifetimes = np.concatenate(blocks)
    spent = np.cumsum(lifetimes)
    last = int(np.searchsorted(spent, budget))
    before = float(spent[last - 1]) if last else 0.0
    rest = budget - before
    if rest >= 60.0:
        lifetimes = lifetimes[: last + 1]
        lifetimes[last] = rest
    else:
        lifetimes = lifetimes[:last]
    return lifetimes


def standing_fleet(spec: SyntheticSpec, budget: float, replicas: int) -> int:
    """How many replicas already run at t = 0: ``standing_fleet_share`` of the inference GPU
    level the budget implies (GPU-seconds over the window, 1 GPU a replica), and no more than
    that share of the replicas, so a window shorter than their lifetimes still deploys some
    later.

    A share of the replicas *by count* alone (the first rule) made the fleet grow with the
    window: a month's budget holds ~2,000 replicas of ~30 h mean lifetime, whose half at t = 0
    asked twice a 512-GPU pool before any training job arrived, where the whole window
    averages 0.16 of it; the level is what a pool running these services already carries."""
    share = spec.standing_fleet_share
    return min(int(round(share * replicas)), int(round(share * budget / spec.duration_s)))


def _deploy_times(rng, spec: SyntheticSpec, lifetimes: np.ndarray, budget: float) -> np.ndarray:
    """Deploy times of the replicas: a standing fleet (``standing_fleet``, replicas drawn at
    random) at t = 0, the rest uniformly over the window."""
    n = len(lifetimes)
    times = rng.random(n) * spec.duration_s
    standing = standing_fleet(spec, budget, n)
    if standing:
        times[rng.choice(n, size=standing, replace=False)] = 0.0
    return times


def _arrivals(rng, spec: SyntheticSpec, n: int) -> np.ndarray:
    """n arrival times of the non-homogeneous Poisson process, given its count (sorted)."""
    if n == 0:
        return np.zeros(0)
    weights = hourly_intensity(spec)
    hour = _categorical(rng, weights, n)
    length = np.minimum(HOUR, spec.duration_s - hour * HOUR)
    return np.sort(hour * HOUR + rng.random(n) * length)


# --------------------------------------------------------------------------- generate


def generate(pool: Pool, spec: SyntheticSpec) -> list[Workload]:
    """Training jobs and inference replicas for ``pool`` per ``spec``; ids 1..n in submit order,
    first submit at 0.0. Deterministic: same pool and spec → identical list."""
    gpu_nodes = [n for n in pool.nodes.values() if n.gpu_count]
    if not gpu_nodes:
        raise InputError(pool.path or pool.name, "the pool has no GPUs: nothing to generate a GPU workload for")
    rng = np.random.default_rng(spec.seed)
    train_subs = _submitters(pool, inference=False)
    infer_subs = _submitters(pool, inference=True)
    cap = max_training_gpus(pool, spec)
    layouts = _layouts(_eligible_nodes(pool, train_subs), cap)
    if not layouts:
        layouts = _layouts(gpu_nodes, cap)
    total = pool.gpu_count * spec.duration_s * spec.target_load
    train = _training(rng, spec, layouts, train_subs, total * (1 - spec.inference_share))
    train_times = _arrivals(rng, spec, len(train.runtime))
    if spec.jobs is not None:
        offered = float((np.asarray([lay.size for lay in layouts])[train.layout] *
                         np.minimum(train.runtime, train.limit)).sum())
        infer_budget = (offered * spec.inference_share / (1 - spec.inference_share)
                        if spec.inference_share < 1 else total)
    else:
        infer_budget = total * spec.inference_share
    lifetimes = _services(rng, spec, infer_budget)
    infer_times = _deploy_times(rng, spec, lifetimes, infer_budget)
    infer_subs_idx = _categorical(rng, np.asarray([s.weight for s in infer_subs]), len(lifetimes))
    services = max(1, int(round(math.sqrt(len(lifetimes))))) if len(lifetimes) else 0
    service_of = _categorical(rng, 1.0 / np.arange(1, services + 1), len(lifetimes)) if services else np.zeros(0, int)
    return _build(pool, spec, layouts, train, train_times, train_subs, lifetimes, infer_times, infer_subs_idx,
                  service_of, infer_subs, gpu_nodes)


def _build(pool, spec, layouts, train, train_times, train_subs, lifetimes, infer_times, infer_subs_idx,
           service_of, infer_subs, gpu_nodes) -> list[Workload]:
    """Workload objects, once, at the end; ids follow submit order (training first on ties)."""
    n_train = len(train.runtime)
    times = np.concatenate([train_times, infer_times])
    order = np.argsort(times, kind="stable")
    if len(times):
        times = times - times[order[0]]  # the first submit is at 0.0
    service_pod = PodSet(count=1, gpus=1, cpu_m=_share(gpu_nodes, 1, "cpu", 100),
                         memory_mib=_share(gpu_nodes, 1, "memory", 1024))
    t_layout, t_outcome = train.layout.tolist(), train.outcome.tolist()
    t_runtime, t_limit = train.runtime.tolist(), train.limit.tolist()
    t_sub, t_ckpt = train.submitter.tolist(), train.checkpoint.tolist()
    i_sub, i_service, i_life = infer_subs_idx.tolist(), service_of.tolist(), lifetimes.tolist()
    time_list = times.tolist()
    out: list[Workload] = []
    source = f"synthetic:seed={spec.seed}"
    for number, index in enumerate(order.tolist(), start=1):
        if index < n_train:
            lay, sub = layouts[t_layout[index]], train_subs[t_sub[index]]
            out.append(Workload(
                id=number, name=f"train-{number}", pod_sets=(lay.pod,), submit_time=time_list[index],
                runtime=t_runtime[index], time_limit=t_limit[index], outcome=OUTCOMES[t_outcome[index]],
                gang=GANG_ALL, checkpoint_interval=spec.checkpoint_interval_s if t_ckpt[index] else None,
                kind=KIND_BATCH, user=sub.user, account=sub.account, qos=sub.qos, partition=sub.partition,
                namespace=sub.namespace, queue_name=sub.queue_name, priority_class=sub.priority_class,
                priority=sub.priority, source=source,
            ))
        else:
            k = index - n_train
            sub, service = infer_subs[i_sub[k]], f"infer-{i_service[k] + 1}"
            out.append(Workload(
                id=number, name=f"{service}-{number}", pod_sets=(service_pod,), submit_time=time_list[index],
                runtime=i_life[k], time_limit=None, outcome="COMPLETED", gang=GANG_NONE, kind=KIND_SERVICE,
                user=sub.user, account=sub.account, qos=sub.qos, partition=sub.partition,
                namespace=sub.namespace, queue_name=sub.queue_name, priority_class=sub.priority_class,
                priority=sub.priority, labels={SERVICE_LABEL: service}, source=source,
            ))
    return out


def offered_load(workloads: list[Workload], pool: Pool, duration_s: float) -> float:
    """Offered GPU-time (GPUs × min(runtime, time limit)) over pool GPUs × duration — the
    quantity ``target_load`` sets."""
    used = sum(w.total_gpus * (min(w.runtime, w.time_limit) if w.time_limit else w.runtime) for w in workloads)
    return used / (pool.gpu_count * duration_s)
