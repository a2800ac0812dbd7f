"""Fair-share usage that survives a daemon restart, kept the way slurmctld keeps it.

The Slurm policy accumulates decayed usage in memory (``decay.UsageLedger``), on the engine's
clock, which starts again at 0 with every daemon. slurmctld saves the usage and the time of its
last decay pass (state files ``assoc_usage``, ``priority_last_decay_ran``; spec §12) and, when
it starts again, its decay thread's first pass decays the saved usage by ``df**Δ`` for the Δ
seconds since that pass, each running job adding its piece since then, ``d·df**d`` (spec §4).
The daemon does the same:

* :class:`UsageJournal` follows the policy's usage each loop turn: the decay passes on the
  daemon's own clock, the run segments the policy opens and closes (:func:`open_segments`), the
  closed ones folded at each pass. Its :meth:`~UsageJournal.saved` form is small (one figure per
  association, one entry per running job: no list that grows with the jobs ended in a period),
  so the daemon writes it with the turn's transaction and a ``kill -9`` loses nothing.
* :func:`restart_usage` is the restarted controller's first decay pass over that saved form.
* :func:`prime` and :func:`seed` hand the result to a fresh policy before its first pass
  ranks anyone, and :func:`share_view` is ``sshare``/``sprio`` of the running daemon.
* :func:`usage_from_records` rebuilds usage from the recorded runs for a ledger that holds no
  saved usage (written by an older gpupool).

Closed segments are valued with the policy's own closed forms (``segment_usage``), so the
journal and the policy agree to the last bits but for the order of additions.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from gpupool.engine.snapshot import Snapshot
from gpupool.errors import GpupoolError
from gpupool.policy.slurm import priority as prio
from gpupool.policy.slurm.decay import UsageLedger, decay_factor, reset_boundary, segment_usage, usage_end
from gpupool.policy.slurm.fairshare import build_tree, classic, fair_tree

#: The ``live_meta`` key of the saved usage.
META_KEY = "fairshare"
FORMAT = 1

Key = tuple  # (account, user), as ``JobReq.assoc``
Segment = tuple  # (start, key, weight): a running job's usage segment as the policy holds it


@dataclass
class SavedUsage:
    """The journal as written to the state database: usage as of one decay pass.

    Times are the saving daemon's engine seconds; ``epoch`` is the wall clock of its t=0.
    """

    epoch: float
    t_ref: float  # the last decay pass (a multiple of ``period``)
    period: float
    half_life: float
    #: usage at ``t_ref`` of the segments that ended by then (their remainder included)
    folded: dict = field(default_factory=dict)
    #: segments that ended after ``t_ref``: their pieces up to ``t_ref`` plus the remainder added
    #: at their end (``r·df**r``), which the next pass decays with the rest
    closed: dict = field(default_factory=dict)
    #: segments still open when saved
    running: list = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps({
            "format": FORMAT, "epoch": self.epoch, "t_ref": self.t_ref, "period": self.period,
            "half_life": self.half_life,
            "folded": [[k[0], k[1], v] for k, v in self.folded.items()],
            "closed": [[k[0], k[1], v] for k, v in self.closed.items()],
            "running": [[s, k[0], k[1], w] for s, k, w in self.running],
        })

    @classmethod
    def from_json(cls, text: str, where: str = f"live_meta {META_KEY}") -> SavedUsage:
        """Parse what :meth:`to_json` wrote; a clear error naming the field otherwise."""
        try:
            d = json.loads(text)
        except ValueError as exc:
            raise GpupoolError(f"{where}: not JSON ({exc})") from None
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise GpupoolError(f"{where}: format {d.get('format') if isinstance(d, dict) else d!r} "
                               f"is not {FORMAT}")
        try:
            return cls(
                epoch=float(d["epoch"]), t_ref=float(d["t_ref"]), period=float(d["period"]),
                half_life=float(d["half_life"]),
                folded={(a, u): float(v) for a, u, v in d["folded"]},
                closed={(a, u): float(v) for a, u, v in d["closed"]},
                running=[(float(s), (a, u), float(w)) for s, a, u, w in d["running"]])
        except (KeyError, TypeError, ValueError) as exc:
            raise GpupoolError(f"{where}: bad or missing field ({exc!r})") from None


def restart_usage(saved: SavedUsage, epoch: float, half_life: float, reset_period: str) -> dict:
    """RawUsage by association at a restarted daemon's t=0 (wall clock ``epoch``).

    slurmctld's first decay pass after a start, from the saved usage: the usage as of the last
    pass ``T`` (running segments' pieces up to ``T`` included) times ``df**Δ``, Δ = seconds since
    ``T``; then each segment that was open adds ``d·df**d·w`` for ``d`` = its time since
    ``T``, one piece however long the daemon was down (``_apply_new_usage`` with the start
    clipped to the last run). A job whose process ended while no daemon watched is recorded as
    ending at the restart, so it is charged up to then too. ``PriorityUsageResetPeriod``
    boundaries fall on the saving daemon's clock, as they did while it ran; one crossed while
    down zeroes what came before it. ``half_life`` and ``reset_period`` are the configuration
    now (slurmctld decays with the configuration it starts with); the pieces up to ``T`` were
    charged under the saved one.
    """
    T = saved.t_ref
    x0 = max(T, epoch - saved.epoch)  # the restart on the saving daemon's clock; never behind T
    old_df = decay_factor(saved.half_life)
    b_T = reset_boundary(T, reset_period)
    at_T: dict = dict(saved.folded)
    for key, v in saved.closed.items():
        at_T[key] = at_T.get(key, 0.0) + v
    for s, key, w in saved.running:
        v = segment_usage(max(s, b_T), math.inf, T, saved.period, old_df, w, False)
        if v:
            at_T[key] = at_T.get(key, 0.0) + v
    b0 = reset_boundary(x0, reset_period)
    if b0 > T:
        at_T = {}
    df = decay_factor(half_life)
    f = df ** (x0 - T)
    out = {key: v * f for key, v in at_T.items()}
    for s, key, w in saved.running:
        d = x0 - max(T, s, b0)
        if d > 0 and w:
            out[key] = out.get(key, 0.0) + d * df ** d * w
    return out


def usage_from_records(records, acct, epoch: float, period: float, half_life: float, remainder: bool) -> dict:
    """RawUsage by association at t=0 (wall clock ``epoch``) rebuilt from accounting rows, for
    a state database written before the usage was saved (an older gpupool).

    ``records`` yields ``(account, user, qos, start, end, billing)`` in epoch seconds (``end``
    None: the job was running when that daemon stopped; it is charged up to ``epoch``). Each
    row is one run segment charged as the policy charges it (billing × QOS UsageFactor, decay
    passes every ``period``), on this daemon's pass grid extended back in time: the old
    daemon's own grid is not recorded, so pieces may differ from what it charged by up to a
    period's decay. What the rows do not hold is not charged: runs before a requeue (a row
    keeps the last), billing weights beyond the recorded billing (CPUs), reset periods.
    """
    df = decay_factor(half_life)
    qos = acct.qos if acct is not None else {}
    out: dict = {}
    for account, user, q, start, end, billing in records:
        if start is None or not billing:
            continue
        key, q = _association(acct, account or "", user or "root", q or "")
        uf = qos[q].usage_factor if q in qos else 1.0
        s = start - epoch
        e = min(end if end is not None else epoch, epoch) - epoch
        v = segment_usage(s, e, 0.0, period, df, float(billing) * uf, remainder)
        if v:
            out[key] = out.get(key, 0.0) + v
    return out


def _association(acct, account: str, user: str, qos: str) -> tuple[Key, str]:
    """The (account, user) association and the QOS a job's usage goes to, resolved as the
    policy resolves a request without them (``jobinfo.job_req``): the user's default account,
    else their first association; the QOS slurmctld gives a job naming none
    (``jobinfo.default_qos``: the association's DefaultQOS, own or inherited, …), where the
    dump defines it."""
    from gpupool.model.slurm import qos_name
    from gpupool.policy.slurm.jobinfo import default_qos  # local: as the policy imports above

    if acct is not None and not account:
        u = acct.users.get(user)
        account = (u.default_account if u is not None else None) or next(
            (ua.account for ua in acct.user_associations if ua.user == user), "")
    if acct is not None and not qos:
        qos = default_qos(acct, user, account)
        if qos not in acct.qos:
            qos = ""
    elif acct is not None:
        qos = qos_name(acct.qos, qos)
    return (account, user), qos


class UsageJournal:
    """The policy's usage on the daemon's clock, kept so that it can be saved every turn.

    ``observe`` is called after each engine step with the policy's open segments; a segment
    whose job ended or was requeued is closed with the end the policy closes it with. Decay passes follow the clock (at each multiple of ``period``), not the policy's
    lazy ones: the saved usage is as of the latest pass, as slurmctld's decay thread leaves it.
    """

    def __init__(self, period: float, half_life: float, reset_period: str, remainder: bool, *,
                 epoch: float, seed: dict | None = None, running: dict | None = None,
                 clock_epoch: float = 0.0) -> None:
        self.ledger = UsageLedger(period, half_life, reset_period, remainder)
        if seed:
            self.ledger.folded = dict(seed)
        self.half_life = float(half_life)
        self.epoch = epoch
        #: the policy's epoch, by which it puts a segment's end on fair share's clock
        #: (``decay.usage_clock``): the journal closes segments where the policy does
        self.clock_epoch = clock_epoch
        self.running: dict[int, Segment] = dict(running or {})
        #: per association: the ``ledger.recent`` segments' value at the last pass, remainder included
        self._closed: dict = {}
        self._n = 0  # how many of ``ledger.recent`` are summed in ``_closed``

    def observe(self, segs: dict, active: dict, jobs: dict, now: float) -> bool:
        """Follow the policy's open segments ``segs`` (job id -> (start, key, w)) at ``now``.

        ``active`` is the engine's running table, ``jobs`` all its jobs. A segment is closed
        as soon as its job leaves ``active`` (the policy's own rule, applied by the policy only
        at its next decision, which an empty queue may put off; the end is the same), or when
        the policy replaces it (the job was requeued and started again). True when the saved
        form changed."""
        led = self.ledger
        changed = False
        running = self.running
        if len(segs) != len(running) or segs.keys() - active.keys() or any(
                segs.get(jid) != seg for jid, seg in running.items()):
            now_open = {jid: seg for jid, seg in segs.items() if jid in active}
            for jid, seg in running.items():
                if now_open.get(jid) != seg:
                    end = usage_end(_segment_end(jobs.get(jid), now), self.clock_epoch, led.period)
                    led.close(seg[1], seg[0], end, seg[2])
            if now_open != running:
                self.running = now_open
                changed = True
        t_before = led.T_ref
        led.pass_at(now)
        if led.T_ref != t_before:
            self._closed = {}
            self._n = 0
            changed = True
        recent = led.recent
        if len(recent) > self._n:
            T = led.T_ref
            b = reset_boundary(T, led.reset_period)
            for key, s, e, w in recent[self._n:]:
                v = self._value_at_pass(max(s, b), e, T, w)
                if v:
                    self._closed[key] = self._closed.get(key, 0.0) + v
            self._n = len(recent)
            changed = True
        return changed

    def _value_at_pass(self, s: float, e: float, T: float, w: float) -> float:
        """A closed segment's usage as of pass ``T``: its pieces up to ``T`` and, where the
        policy adds it (AccountingStorageEnforce=limits), the remainder added at its end."""
        led = self.ledger
        v = segment_usage(s, e, T, led.period, led.df, w, led.remainder)
        if led.remainder and e > T:
            r = e - max(s, T)
            if r > 0:
                v += r * led.df ** r * w
        return v

    def saved(self) -> SavedUsage:
        led = self.ledger
        return SavedUsage(self.epoch, led.T_ref, led.period, self.half_life, dict(led.folded),
                          dict(self._closed), list(self.running.values()))

    def usage(self) -> dict:
        """RawUsage by association as of the last pass: what the policy ranks fair share with."""
        return self.ledger.usage(list(self.running.values()))


def _segment_end(job, now: float) -> float:
    """Where the policy closes a segment, before ``usage_end``: the job's end, or (requeued)
    its new submit time."""
    if job is None:
        return now
    if job.final_state is not None and job.end is not None:
        return job.end
    return job.submit


# ---------------------------------------------------------------------------- the policy side
def is_slurm(policy) -> bool:
    from gpupool.policy.slurm.policy import SlurmPolicy

    return isinstance(policy, SlurmPolicy)


def prime(policy, engine) -> None:
    """Have the Slurm policy set itself up for ``engine``'s nodes now, before any job is back.

    Why: the policy builds its per-run state, its usage ledger included, in its first decision
    for a node table, and ranks fair share in that same decision. A restarted daemon must give
    it the restored usage (and its re-adopted jobs' partitions and usage segments) before that
    ranking, so it makes one decision on an empty snapshot first. At t=-1 it starts nothing,
    runs no backfill cycle (those run at t > 0) and leaves its decay pass for t=0.
    """
    policy.decide(Snapshot(-1.0, engine.pool, engine.nodes, {}, {}, {}))


def seed(policy, usage: dict) -> None:
    """Give a primed policy ``usage`` (by association) as its usage at its t=0 pass."""
    policy.ledger.folded = dict(usage)


def adopt(policy, job, placement: tuple, started: float) -> None:
    """Tell a primed policy about a job the engine re-adopted: its partition and time limit
    (``adopt_start``, as for any start the policy did not decide) and its usage segment, which
    counts from this daemon's t=0, where the restored usage left off."""
    try:
        policy.adopt_start(job, placement, started)
    except ValueError:
        pass  # no partition of the job holds the node any more: it keeps what the engine knows
    policy.track_start(job, placement, 0.0)


def open_segments(policy) -> dict:
    """The policy's open usage segments, job id -> (start, (account, user), billing × UsageFactor).

    Read, never written: it is the record the policy closes usage from, so following it is
    exact where recomputing billing here could drift from it. A public
    ``open_usage_segments()`` is used where the policy has one, else its ``_segs``."""
    get = getattr(policy, "open_usage_segments", None)
    return get() if get is not None else policy._segs


# ---------------------------------------------------------------------------- sshare / sprio
def share_view(policy, journal: UsageJournal, jobs, now: float, wall, all_jobs: dict | None = None) -> dict:
    """``sshare -l`` (associations) and ``sprio`` (pending jobs) as the daemon's policy sees
    them: usage as of the last decay pass, Fair Tree (or classic) factors, priorities at that
    pass. ``wall`` maps engine time to epoch seconds; ``all_jobs`` (id -> job, every job the
    daemon knows) settles the pending jobs' dependencies."""
    from gpupool.report.slurm_views import sprio_accrue

    usage = journal.usage()
    T = journal.ledger.T_ref
    s = policy.s
    rows, fs = [], {}
    if policy.acct is not None:
        root, _users = build_tree(policy.acct, usage)
        if s.fair_tree:
            fair_tree(root)
        else:
            classic(root, s.dampening)
        rows = _share_rows(root, s.fair_tree)
        fs = {f"{r['account']}/{r['user']}": r["fairshare"] for r in rows if r["user"]}
    out_jobs = []
    for job in sorted(jobs, key=lambda j: j.id):
        # the jobs sprio lists, aged as it ages them (``report.slurm_views._pending_at``)
        accrue = sprio_accrue(policy, job, all_jobs if all_jobs is not None else {j.id: j for j in jobs}, now)
        if accrue is None:
            continue
        req = policy.req(job)
        for pname in req.parts:
            info = policy.parts.get(pname)
            if info is None:
                continue
            factors = policy.factors(job, info, accrue, max(T, job.submit),
                                     fs.get(f"{req.account}/{req.user}", 0.0) if policy.use_fs else 0.0)
            if job.wl.priority is not None:
                value = int(job.wl.priority)
            elif not s.multifactor:
                value = policy.priority(job, info, accrue, now)
            else:
                value = prio.combine(factors, s.weights, s.tres_weights, job.wl.nice)
            out_jobs.append({"job_id": job.id, "partition": info.name, "user": req.user, "account": req.account,
                             "priority": value, "factors": {k: v for k, v in factors.items() if k != "tres"}})
    return {"as_of": wall(T), "t0": wall(0.0), "period": journal.ledger.period, "half_life": journal.half_life,
            "associations": rows, "jobs": out_jobs}


def _share_rows(root, fair: bool) -> list[dict]:
    """Rows in sshare's order: root, then per account its users, then its sub-accounts."""
    rows = [{"account": "root", "user": "", "raw_shares": "", "norm_shares": 1.0 if not fair else root.norm_shares,
             "raw_usage": root.raw_usage, "norm_usage": 1.0 if root.raw_usage else 0.0,
             "effective_usage": root.effective_usage, "fairshare": None, "level_fs": None}]

    def visit(node) -> None:
        for c in sorted(node.children, key=lambda c: (0 if c.user else 1, c.name)):
            lf = c.level_fs if fair else None
            rows.append({"account": c.key[0] if c.user else c.name, "user": c.name if c.user else "",
                         "raw_shares": "parent" if c.is_parent else str(c.shares), "norm_shares": c.norm_shares,
                         "raw_usage": c.raw_usage, "norm_usage": c.norm_usage,
                         "effective_usage": c.effective_usage, "fairshare": c.fairshare if c.user else None,
                         "level_fs": "inf" if lf is not None and math.isinf(lf) else lf})
            if not c.user:
                visit(c)

    visit(root)
    return rows
