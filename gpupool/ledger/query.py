"""Reading the ledger: sacct-like job records, sreport-like usage, sshare-like fair share,
and the audit trails of a job and of a set of GPUs."""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone

import sqlalchemy as sa

from gpupool.ledger import schema as s
from gpupool.ledger.db import LedgerError
from gpupool.ledger.sacct_fields import DEFAULT_FORMAT, WIDTHS, canonical, field_value
from gpupool.ledger.store import Ledger
from gpupool.ledger.timefmt import format_ts

UTC = timezone.utc

# ------------------------------------------------------------------------------------------
# acct


def _names(values) -> list[str]:
    out: list[str] = []
    for v in values or ():
        out.extend(x.strip() for x in str(v).split(",") if x.strip())
    return out


_STATE_ALIASES = {"ca": "CANCELLED", "cd": "COMPLETED", "f": "FAILED", "nf": "NODE_FAIL", "pd": "PENDING",
                  "pr": "PREEMPTED", "r": "RUNNING", "rq": "REQUEUED", "to": "TIMEOUT", "oom": "OUT_OF_MEMORY",
                  "bf": "BOOT_FAIL", "dl": "DEADLINE", "s": "SUSPENDED", "rs": "RESIZING"}


def acct_jobs(ledger: Ledger, *, starttime: float | None = None, endtime: float | None = None,
              accounts=None, users=None, states=None, clusters=None, jobs=None, partitions=None) -> list[dict]:
    """Job records like ``sacct -X``: a job is listed when it was eligible, running or ended
    inside [starttime, endtime] (no window: every job)."""
    j = s.jobs.c
    q = sa.select(s.jobs)
    if accounts:
        q = q.where(j.account.in_(_names(accounts)))
    if users:
        q = q.where(j.user.in_(_names(users)))
    if partitions:
        q = q.where(j.partition.in_(_names(partitions)))
    if clusters:
        q = q.where(j.origin.in_(_names(clusters)))
    if jobs:
        q = q.where(j.job_id.in_(_names(jobs)))
    if states:
        wanted = [_STATE_ALIASES.get(x.lower(), x.upper()) for x in _names(states)]
        q = q.where(sa.or_(*[j.state.like(w + "%") for w in wanted]))
    if starttime is not None:
        q = q.where(sa.or_(j.end.is_(None), j.end >= starttime))
    if endtime is not None:
        q = q.where(sa.func.coalesce(j.start, j.eligible, j.submit) <= endtime)
    q = q.order_by(j.origin, j.submit, j.job_id_raw, j.job_id)
    with ledger.read() as conn:
        return [dict(r) for r in conn.execute(q).mappings()]


def parse_format(fmt: str | None) -> list[tuple[str, int | None]]:
    """``JobID,JobName%30,State`` → [(field, width)]; ``ALL`` → every sacct field."""
    from gpupool.ledger.sacct_fields import SACCT_2205_FIELDS

    if not fmt:
        return [(f, WIDTHS.get(f, 10)) for f in DEFAULT_FORMAT]
    out = []
    for item in fmt.split(","):
        item = item.strip()
        if not item:
            continue
        if item.upper() == "ALL":
            out.extend((f, WIDTHS.get(f, 10)) for f in SACCT_2205_FIELDS)
            continue
        name, _, width = item.partition("%")
        canon = canonical(name)
        if canon is None:
            raise LedgerError(f"invalid field requested: {name!r} (see `gpupool acct --helpformat`)")
        out.append((canon, int(width) if width.lstrip("-").isdigit() else WIDTHS.get(canon, 10)))
    return out


def render_acct(rows: list[dict], fields: list[tuple[str, int | None]], *, parsable: str | None = None,
                noheader: bool = False) -> str:
    """sacct's text: ``parsable='|'`` for --parsable2 (no trailing |), ``'|+'`` for --parsable."""
    lines = []
    if parsable:
        sep = "|"
        tail = "|" if parsable == "|+" else ""
        if not noheader:
            lines.append(sep.join(f for f, _ in fields) + tail)
        for r in rows:
            lines.append(sep.join(field_value(r, f) for f, _ in fields) + tail)
        return "\n".join(lines) + ("\n" if lines else "")

    def cell(text: str, width: int) -> str:
        w = abs(width)
        text = text if len(text) <= w else text[: w - 1] + "+"
        return text.ljust(w) if width < 0 else text.rjust(w)

    if not noheader:
        lines.append(" ".join(cell(f, w) for f, w in fields))
        lines.append(" ".join("-" * abs(w) for _, w in fields))
    for r in rows:
        lines.append(" ".join(cell(field_value(r, f), w) for f, w in fields))
    return "\n".join(lines) + "\n"


def acct_json(rows: list[dict], fields) -> list[dict]:
    return [{f: field_value(r, f) for f, _ in fields} for r in rows]


# ------------------------------------------------------------------------------------------
# usage (sreport-like)

_BY = {"account": "account", "user": "user", "qos": "qos", "queue": "queue", "gpu-type": "gpu_type",
       "gpu_type": "gpu_type", "cluster": "origin", "origin": "origin", "tres": "tres"}
_PERIODS = ("hour", "day", "week", "month", "year", "all")


def _period_key(t: float, period: str) -> str:
    d = datetime.fromtimestamp(t, UTC)
    if period == "hour":
        return d.strftime("%Y-%m-%dT%H:00")
    if period == "day":
        return d.strftime("%Y-%m-%d")
    if period == "week":
        y, w, _ = d.isocalendar()
        return f"{y}-W{w:02d}"
    if period == "month":
        return d.strftime("%Y-%m")
    if period == "year":
        return d.strftime("%Y")
    return "all"


def usage_report(ledger: Ledger, *, by=("account",), period: str = "month", tres: str = "gres/gpu",
                 start: float | None = None, end: float | None = None, clusters=None,
                 weights: dict[str, float] | None = None) -> list[dict]:
    """TRES-hours per period and group, from the hourly roll-up. For ``gres/gpu`` each row
    also has ``billed_hours`` = GPU-hours × the weight of its GPU type (1 when not given;
    ``weights`` maps GPU type → weight, key ``*`` for the default)."""
    by = [b.strip() for b in _names(by)]
    bad = [b for b in by if b not in _BY]
    if bad:
        raise LedgerError(f"--by {bad[0]!r}: expected some of account, user, qos, queue, gpu-type, cluster")
    if period not in _PERIODS:
        raise LedgerError(f"--period {period!r}: expected one of {', '.join(_PERIODS)}")
    u = s.usage.c
    cols = [u[_BY[b]] for b in by]
    n = len(by)
    # The day rows (migration 0005) summed per origin, day, GPU type and group, one sum per
    # hour column: each is the sum the hourly rows of that hour and group gave (the same rows,
    # in the same key order). Grouped per origin as well, with the origins named: the key
    # starts (origin, tres, day, account, gpu_type), so the database reads each origin's rows
    # of this TRES in group order instead of sorting them.
    q = sa.select(u.origin, u.day_start, u.gpu_type, *(c.label(f"by{i}") for i, c in enumerate(cols)),
                  *(sa.func.sum(u[h]) for h in s.USAGE_HOURS)).where(u.tres == tres)
    lo = hi = None
    if start is not None:
        lo = math.floor(start / 3600) * 3600
        q = q.where(u.day_start >= math.floor(lo / 86400) * 86400)
    if end is not None:
        hi = end
        q = q.where(u.day_start < end)
    q = q.where(u.origin.in_(_names(clusters) if clusters else _usage_origins(ledger)))
    # each column once: a repeated one (``--by gpu-type``) keeps SQLite from reading the groups
    # in key order
    q = q.group_by(*{c.name: c for c in (u.origin, u.day_start, u.gpu_type, *cols)}.values())
    # (origin, hour, GPU type, groups…) -> seconds: what the hourly query gave, row by row
    hourly: list[tuple] = []
    with ledger.read() as conn:
        for row in conn.execute(q).all():
            origin, day, gpu_type, groups = row[0], row[1], row[2], tuple(row[3:3 + n])
            for k, secs in enumerate(row[3 + n:]):
                if secs is None:
                    continue
                hour = day + k * 3600.0
                if (lo is not None and hour < lo) or (hi is not None and hour >= hi):
                    continue
                hourly.append(((origin, hour, gpu_type) + groups, secs))
    hourly.sort(key=_first)
    if period == "hour":
        units = [(key[1], key[2], key[3:], secs) for key, secs in hourly]
    else:
        # every longer period is made of whole UTC days: the hours are added up per day, GPU
        # type and group, origin by origin and hour by hour (the order the hourly query's
        # rows were added in), and any hour of a day names the day's period
        days: dict[tuple, list] = {}
        for (origin, hour, gpu_type, *groups), secs in hourly:
            key = (math.floor(hour / 86400.0), gpu_type, *groups)
            acc = days.get(key)
            if acc is None:
                days[key] = [hour, secs]
            else:
                acc[1] += secs
        units = [(acc[0], key[1], tuple(key[2:]), acc[1]) for key, acc in sorted(days.items(), key=_first)]
    weights = weights or {}
    totals: dict[tuple, list[float]] = {}
    periods: dict[float, str] = {}  # hour -> period name, computed once per hour
    for hour, gpu_type, groups, secs in units:
        name = periods.get(hour)
        if name is None:
            name = periods[hour] = _period_key(hour, period)
        key = (name,) + groups
        acc = totals.get(key)
        if acc is None:
            acc = totals[key] = [0.0, 0.0]
        acc[0] += secs
        acc[1] += secs * weights.get(gpu_type, weights.get("*", 1.0))
    out = []
    for key, (secs, billed) in sorted(totals.items()):
        item = {"period": key[0]}
        item.update({b: v for b, v in zip(by, key[1:])})
        item["hours"] = round(secs / 3600.0, 6)
        if tres == "gres/gpu":
            item["billed_hours"] = round(billed / 3600.0, 6)
        out.append(item)
    return out


def _first(item: tuple):
    return item[0]


def _usage_origins(ledger: Ledger) -> list[str]:
    """The origins in the usage table, found by seeking the key from one to the next (as
    many index lookups as origins, not a scan of the roll-up)."""
    with ledger.read() as conn:
        return list(conn.execute(sa.text(
            "WITH RECURSIVE o(x) AS (SELECT min(origin) FROM usage UNION ALL "
            "SELECT (SELECT min(origin) FROM usage WHERE origin > o.x) FROM o WHERE o.x IS NOT NULL) "
            "SELECT x FROM o WHERE x IS NOT NULL")).scalars())


def parse_weights(text: str | None) -> dict[str, float]:
    """``h100=2,a100=1.5,*=1`` → {gpu type: weight}."""
    out: dict[str, float] = {}
    for item in _names([text] if text else []):
        k, eq, v = item.partition("=")
        if not eq:
            raise LedgerError(f"--weights: expected GPU_TYPE=WEIGHT items, got {item!r}")
        try:
            out[k.strip()] = float(v)
        except ValueError:
            raise LedgerError(f"--weights: {k}: expected a number, got {v!r}") from None
    return out


# ------------------------------------------------------------------------------------------
# audit


def _version_facts(conn, version: str | None) -> dict | None:
    if not version:
        return None
    row = conn.execute(sa.select(s.policy_versions).where(s.policy_versions.c.version == version)).first()
    if row is None:
        return {"version": version, "short": version[:12]}
    return {"version": row.version, "short": row.version[:12], "pool": row.pool, "author": row.author,
            "message": row.message, "committed_at": format_ts(row.committed_at)}


def audit_job(ledger: Ledger, job_id: str, cluster: str | None = None) -> list[dict]:
    """Each origin's record of ``job_id``: the job, its events with the policy version in
    force, and its allocations."""
    j, e, a = s.jobs.c, s.events.c, s.allocations.c
    out = []
    with ledger.read() as conn:
        q = sa.select(s.jobs).where(j.job_id == str(job_id))
        if cluster:
            q = q.where(j.origin == cluster)
        for job in conn.execute(q.order_by(j.origin)).mappings():
            events = conn.execute(sa.select(s.events).where(e.origin == job["origin"], e.job_id == job["job_id"])
                                  .order_by(e.time, e.id)).mappings().all()
            allocs = conn.execute(sa.select(s.allocations).where(a.origin == job["origin"], a.job_id == job["job_id"])
                                  .order_by(a.time_from, a.node, a.gpu_index)).mappings().all()
            versions = {ev["policy_version"] for ev in events} | {al["policy_version"] for al in allocs}
            vfacts = {v: _version_facts(conn, v) for v in versions if v}
            out.append({
                "cluster": job["origin"], "job_id": job["job_id"], "name": job["name"], "user": job["user"],
                "account": job["account"], "qos": job["qos"], "queue": job["queue"], "state": job["state"],
                "submit": format_ts(job["submit"]), "start": format_ts(job["start"]), "end": format_ts(job["end"]),
                "gpus": job["gpus"], "gpu_seconds": job["gpu_seconds"], "preemptions": job["preemptions"],
                "requeues": job["requeues"],
                "events": [{"time": format_ts(ev["time"]), "event": ev["kind"], "detail": ev["detail"],
                            "policy_version": vfacts.get(ev["policy_version"])} for ev in events],
                "allocations": [{"node": al["node"] or None, "gpu_index": None if al["gpu_index"] < 0 else al["gpu_index"],
                                 "gpus": al["gpu_count"], "gpu_type": al["gpu_type"], "from": format_ts(al["time_from"]),
                                 "to": format_ts(al["time_to"]) if al["time_to"] is not None else None}
                                for al in allocs],
            })
    return out


def parse_gpu_spec(spec: str) -> tuple[str, list[int] | None]:
    """``gpu01:0,1`` → ("gpu01", [0, 1]); ``gpu01`` → ("gpu01", None = every GPU)."""
    node, sep, idx = spec.partition(":")
    if not node:
        raise LedgerError(f"expected NODE:IDX[,IDX] such as gpu01:0,1, got {spec!r}")
    if not sep or not idx.strip():
        return node, None
    out = []
    for part in idx.split(","):
        part = part.strip()
        lo, dash, hi = part.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise LedgerError(f"expected GPU indices such as 0,1 or 0-3 after {node}:, got {idx!r}")
        out.extend(range(int(lo), int(hi) + 1) if dash else [int(lo)])
    return node, out


def audit_gpus(ledger: Ledger, spec: str, at: float, cluster: str | None = None) -> list[dict]:
    """Who held these GPUs at ``at``, under which policy version, committed when and by whom.
    Allocations recorded without device indices (sacct, Kueue) on the node are listed too,
    marked ``gpu_index: null``."""
    node, indices = parse_gpu_spec(spec)
    a, j = s.allocations.c, s.jobs.c
    end = sa.func.coalesce(a.time_to, a.as_of)
    q = (sa.select(s.allocations, j.name, j.user, j.account, j.qos, j.queue, j.partition, j.state)
         .join(s.jobs, (j.origin == a.origin) & (j.job_id == a.job_id))
         .where(a.node == node, a.time_from <= at, sa.or_(a.time_to.is_(None) & a.as_of.is_(None), end > at)))
    if indices is not None:
        q = q.where(sa.or_(a.gpu_index.in_(indices), a.gpu_index < 0))
    if cluster:
        q = q.where(a.origin == cluster)
    out = []
    with ledger.read() as conn:
        for r in conn.execute(q.order_by(a.origin, a.gpu_index, a.time_from)).mappings():
            version = r["policy_version"]
            if version is None:
                run = conn.execute(sa.select(s.runs.c.policy_version).where(s.runs.c.origin == r["origin"])).first()
                version = run[0] if run else None
            out.append({
                "cluster": r["origin"], "node": r["node"], "gpu_index": None if r["gpu_index"] < 0 else r["gpu_index"],
                "gpus": r["gpu_count"], "job_id": r["job_id"], "name": r["name"], "user": r["user"],
                "account": r["account"], "qos": r["qos"], "queue": r["queue"], "partition": r["partition"],
                "state": r["state"], "from": format_ts(r["time_from"]),
                "to": format_ts(r["time_to"]) if r["time_to"] is not None else None,
                "policy_version": _version_facts(conn, version),
            })
    return out


# ------------------------------------------------------------------------------------------
# share (sshare-like)


@dataclass
class ShareRow:
    account: str
    user: str
    depth: int
    raw_shares: int | str
    norm_shares: float
    raw_usage: float
    norm_usage: float
    effectv_usage: float
    fairshare: float | None
    level_fs: float | None

    def as_dict(self) -> dict:
        return {"Account": self.account, "User": self.user, "RawShares": self.raw_shares,
                "NormShares": round(self.norm_shares, 6), "RawUsage": int(round(self.raw_usage)),
                "NormUsage": round(self.norm_usage, 6), "EffectvUsage": round(self.effectv_usage, 6),
                "FairShare": None if self.fairshare is None else round(self.fairshare, 6),
                "LevelFS": None if self.level_fs is None else self.level_fs}


def decay_factor(half_life: float) -> float:
    """Slurm's per-second decay: ``1 − 0.693 / PriorityDecayHalfLife`` (1 = no decay)."""
    return 1.0 if not half_life else 1.0 - 0.693 / half_life


def decayed_usage(t0: float, t1: float, rate: float, now: float, df: float, period: float) -> float:
    """Usage a job charges for running [t0, t1] at ``rate`` (billing × UsageFactor), seen
    at ``now``: Slurm's decay thread, every ``period`` seconds (aligned to the epoch), adds
    Δ·df^Δ of each running job and decays all earlier usage by df^Δ (slurm.md §4)."""
    t1 = min(t1, now)
    if t1 <= t0 or rate == 0:
        return 0.0
    if df >= 1.0:
        return rate * (t1 - t0)
    total = 0.0
    first_end = min(t1, (math.floor(t0 / period) + 1) * period)
    last_start = max(first_end, math.floor(t1 / period) * period)

    def charge(a: float, b: float, tick: float) -> float:
        d = b - a
        return d * df ** d * df ** max(0.0, now - tick)

    total += charge(t0, first_end, min(first_end, now))
    n_full = int(round((last_start - first_end) / period))
    if n_full > 0:
        # Full periods end at first_end + k·period, k = 1..n: a geometric series.
        q = df ** period
        total += period * q * df ** max(0.0, now - (first_end + n_full * period)) * (1 - q ** n_full) / (1 - q)
    if t1 > last_start:
        total += charge(last_start, t1, t1)
    return rate * total


def share_report(ledger: Ledger, pool, *, cluster: str | None = None, now: float | None = None,
                 accounts=None, users=None) -> list[ShareRow]:
    """sshare -l for ``pool``'s account tree, with RawUsage from the ledger's jobs (billing ×
    seconds × QOS UsageFactor, decayed with the pool's PriorityDecayHalfLife and
    PriorityCalcPeriod) and Fair Tree's NormShares, EffectvUsage, LevelFS and FairShare."""
    import time as _time

    acct = pool.slurm.accounting if pool.slurm is not None else None
    if acct is None:
        raise LedgerError(f"pool {pool.name} has no sacctmgr dump, so it has no account tree to share")
    params = pool.slurm.params
    half_life = params.get("PriorityDecayHalfLife", 7 * 86400)
    period = params.get("PriorityCalcPeriod", 300) or 300
    df = decay_factor(half_life or 0)
    j = s.jobs.c
    q = sa.select(j.account, j.user, j.qos, j.start, j.end, j.elapsed, j.billing).where(j.start.is_not(None))
    if cluster:
        q = q.where(j.origin == cluster)
    with ledger.read() as conn:
        rows = conn.execute(q).all()
    if now is None:
        ends = [r.start + (r.elapsed or 0) for r in rows]
        now = max(ends) if ends else _time.time()
    usage_factor = {name: qos.usage_factor for name, qos in acct.qos.items()}
    user_usage: dict[tuple[str, str], float] = {}
    for r in rows:
        t1 = r.start + (r.elapsed or 0) if r.end is None else r.end
        rate = (r.billing or 0) * usage_factor.get(r.qos, 1.0)
        key = (r.account, r.user)
        user_usage[key] = user_usage.get(key, 0.0) + decayed_usage(r.start, t1, rate, now, df, period)
    return fair_tree(acct, user_usage, accounts=accounts, users=users)


def fair_tree(acct, user_usage: dict[tuple[str, str], float], *, accounts=None, users=None) -> list[ShareRow]:
    """Fair Tree (slurm.md §5.2–5.3) over the sacctmgr tree with the given per-association usage."""
    kids: dict[str, list] = {}
    for a in acct.accounts.values():
        if a.account != "root":
            kids.setdefault(a.parent or "root", []).append(("account", a.account, a.fairshare))
    for u in acct.user_associations:
        kids.setdefault(u.account, []).append(("user", u.user, u.fairshare))
    usage_of: dict[str, float] = {}
    # Usage of jobs whose user has no association under the account (or no user at all)
    # still counts for the account and its ancestors.
    known = {(acc, name) for acc, k in kids.items() for kind, name, _ in k if kind == "user"}
    loose: dict[str, float] = {}
    for (acc, user), value in user_usage.items():
        if (acc, user) not in known:
            loose[acc] = loose.get(acc, 0.0) + value

    def acc_usage(name: str) -> float:
        if name not in usage_of:
            total = loose.get(name, 0.0)
            for kind, child, _ in kids.get(name, []):
                total += user_usage.get((name, child), 0.0) if kind == "user" else acc_usage(child)
            usage_of[name] = total
        return usage_of[name]

    n_users = sum(1 for k in kids.values() for kind, _, _ in k if kind == "user") or 1
    rows: list[ShareRow] = []
    root_usage = acc_usage("root") or 0.0
    rows.append(ShareRow("root", "", 0, "", 1.0, root_usage, 1.0 if root_usage else 0.0, 1.0, None, None))
    state = {"rank": n_users, "rnt": n_users}

    def shares_of(entry) -> float:
        return float(entry[2]) if isinstance(entry[2], int) else 0.0

    def visit(parent: str, depth: int, parent_tied: bool) -> None:
        children = kids.get(parent, [])
        total_shares = sum(shares_of(c) for c in children) or 0.0
        p_usage = acc_usage(parent)
        scored = []
        for c in children:
            kind, name, raw = c
            use = user_usage.get((parent, name), 0.0) if kind == "user" else acc_usage(name)
            S = shares_of(c) / total_shares if total_shares else 0.0
            U = use / p_usage if p_usage else 0.0
            if raw == "parent" and kind == "user":
                lf = math.inf
            elif S == 0:
                lf = 0.0
            elif U == 0:
                lf = math.inf
            else:
                lf = S / U
            scored.append((lf, 0 if kind == "user" else 1, c, S, U, use))
        scored.sort(key=lambda x: (-x[0], x[1]))
        prev_lf = None
        for i, (lf, _, (kind, name, raw), S, U, use) in enumerate(scored):
            tied = (prev_lf is not None and lf == prev_lf) or (i == 0 and parent_tied)
            prev_lf = lf
            norm = use / root_usage if root_usage else 0.0
            if kind == "user":
                if not tied:
                    state["rank"] = state["rnt"]
                fs = state["rank"] / n_users
                state["rnt"] -= 1
                rows.append(ShareRow(parent, name, depth, raw, S, use, norm, U, fs, lf))
            else:
                rows.append(ShareRow(name, "", depth, raw, S, use, norm, U, None, lf))
                visit(name, depth + 1, tied)

    visit("root", 1, False)
    acc_filter, user_filter = set(_names(accounts)), set(_names(users))
    if acc_filter:
        rows = [r for r in rows if r.account in acc_filter]
    if user_filter:
        rows = [r for r in rows if r.user in user_filter or not r.user]
    # sshare lists a tree in file order, not rank order: keep the walk's order per level.
    return rows


def render_share(rows: list[ShareRow], parsable: bool) -> str:
    cols = ["Account", "User", "RawShares", "NormShares", "RawUsage", "NormUsage", "EffectvUsage", "FairShare",
            "LevelFS", "GrpTRESMins", "TRESRunMins"]

    def fmt(r: ShareRow) -> list[str]:
        lf = "" if r.level_fs is None else ("inf" if math.isinf(r.level_fs) else f"{r.level_fs:.6f}")
        return [" " * r.depth + r.account, r.user, str(r.raw_shares), f"{r.norm_shares:.6f}",
                str(int(round(r.raw_usage))), f"{r.norm_usage:.6f}", f"{r.effectv_usage:.6f}",
                "" if r.fairshare is None else f"{r.fairshare:.6f}", lf, "", ""]

    body = [fmt(r) for r in rows]
    if parsable:
        return "\n".join("|".join(x) for x in [cols] + body) + "\n"
    widths = [max(len(c), *(len(b[i]) for b in body)) if body else len(c) for i, c in enumerate(cols)]
    lines = [" ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(cols, widths)))]
    lines.append(" ".join("-" * w for w in widths))
    for b in body:
        lines.append(" ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(b, widths))))
    return "\n".join(lines) + "\n"

