"""``gpupool conformance diff-slurm``: one workload through real Slurm and through ``--policy slurm``.

Why: the spec's cases check what someone wrote down; this checks what slurmctld actually does.
Both sides get the same configuration, not two similar ones: gpupool replays from the very
slurm.conf, gres.conf and account tree the real cluster ran (``load_pool(rs.etc)``), the same
sbatch scripts (read by gpupool's sbatch parser) and the submit times real Slurm recorded
(slurmctld's log, in milliseconds). The replay's clock starts when slurmctld's decay thread
started, so fair share is recomputed at the same instants on both sides; time limits are
checked at the instants real Slurm checked them (``ReplayExecutor``).

Agreement is reported per job: start order (rank by start second, then job id), start-time
delta within one scheduler interval, same nodes, same GPU indices per node, same final state;
every job that differs in any of these is listed with both sides' values.
"""
from __future__ import annotations

import bisect
import copy
import math
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from gpupool.conformance.diff_slurm_lockstep import LockstepPolicy, real_gpus
from gpupool.conformance.diff_slurm_real import (RealRecord, RealTiming, parse_jobcomp, play, real_timing,
                                                 sacct_records)
from gpupool.conformance.diff_slurm_workload import DiffJob, generate, rich_fits, sbatch_script
from gpupool.conformance.real_slurm import DEFAULT_SCHEDULER_PARAMETERS, RealSlurm
from gpupool.engine.core import Engine
from gpupool.engine.nodes import mask_indices
from gpupool.formats.pool_dir import load_pool
from gpupool.formats.sacctmgr import render_sacctmgr_dump
from gpupool.formats.sbatch import parse_sbatch_text, sbatch_to_workload
from gpupool.model.pool import Pool
from gpupool.model.slurm import Association, User

#: Keys replaced in the pool's slurm.conf for a run that reacts in seconds, not minutes:
#: fair share recomputed every minute (PriorityCalcPeriod's smallest value).
DEFAULT_OVERRIDES = {"PriorityCalcPeriod": "1"}


@dataclass(slots=True)
class JobDiff:
    """One job on both sides (times relative to slurmctld's start)."""

    index: int
    name: str
    job_id: int
    account: str
    shape: str
    submit: float
    real_start: float | None
    sim_start: float | None
    real_end: float | None
    sim_end: float | None
    real_state: str
    sim_state: str
    real_gpus: dict[str, list[int]]
    sim_gpus: dict[str, list[int]]
    real_rank: int = -1
    sim_rank: int = -1
    order_ok: bool = True
    problems: list[str] = field(default_factory=list)
    #: what the replay had to change in real Slurm's decision to carry it out (no disagreement)
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class DiffReport:
    pool: str
    seed: int
    jobs: int
    accounting: str
    speedup: float | None
    interval: float
    order_agree: float = 0.0
    start_within_interval: float = 0.0
    nodes_agree: float = 0.0
    gpus_agree: float = 0.0
    state_agree: float = 0.0
    start_delta_mean: float = 0.0
    start_delta_max: float = 0.0
    sacct_agree: float | None = None
    real_wall_s: float = 0.0
    #: "open": gpupool runs on its own after the submissions; "lockstep": every decision from
    #: real Slurm's state (``diff_slurm_lockstep``)
    mode: str = "open"
    #: the workload's options (``diff_slurm_workload.MIXES``)
    mix: str = "gpus"
    per_job: list[JobDiff] = field(default_factory=list)
    #: the same run replayed in lockstep (a report of its own, ``mode="lockstep"``)
    lockstep: DiffReport | None = None

    @property
    def disagreements(self) -> list[JobDiff]:
        return [j for j in self.per_job if j.problems]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["disagreements"] = [asdict(j) for j in self.disagreements]
        if self.lockstep is not None:
            d["lockstep"] = self.lockstep.to_dict()
        return d

    def summary_lines(self) -> list[str]:
        pct = lambda x: f"{100 * x:.1f}%"
        head = (f"pool {self.pool}, seed {self.seed}, {self.jobs} jobs ({self.mix} mix), accounting={self.accounting}, "
                f"speed-up x{self.speedup or 1:g}, scheduler interval {self.interval:g} s")
        lines = [
            head if self.mode == "open" else
            "lockstep replay (each decision from real Slurm's state; gpupool's first proposed start):",
            f"  same start order      {pct(self.order_agree)}",
            (f"  start within {self.interval:g} s     {pct(self.start_within_interval)}  "
             f"(mean |delta| {self.start_delta_mean:.2f} s, max {self.start_delta_max:.1f} s)"),
            f"  same nodes            {pct(self.nodes_agree)}",
            f"  same GPU indices      {pct(self.gpus_agree)}",
            f"  same final state      {pct(self.state_agree)}",
        ]
        if self.sacct_agree is not None:
            lines.append(f"  sacct = jobcomp       {pct(self.sacct_agree)}")
        lines.append(f"  disagreements: {len(self.disagreements)} job(s)")
        for j in self.disagreements:
            lines.append(f"    {j.name} (job {j.job_id}, {j.shape}, {j.account}): " + "; ".join(j.problems))
        noted = [j for j in self.per_job if j.notes]
        if noted:  # what carrying out real Slurm's starts changed (a lockstep replay's)
            lines.append(f"  replay notes: {len(noted)} job(s)")
            for j in noted:
                lines.append(f"    {j.name} (job {j.job_id}): " + "; ".join(j.notes))
        if self.lockstep is not None:
            lines += self.lockstep.summary_lines()
        return lines

    def with_lockstep(self, sim: dict[int, object], jobs: list[DiffJob], real: dict[int, RealRecord],
                      ids: dict[int, int], node_names: list[str], t0: float) -> None:
        """Attach the lockstep comparison of the same run (``sim`` from ``replay(lockstep=…)``)."""
        ls = DiffReport(self.pool, self.seed, self.jobs, self.accounting, self.speedup, self.interval,
                        real_wall_s=self.real_wall_s, mode="lockstep", mix=self.mix)
        compare(ls, jobs, real, ids, sim, node_names, t0)
        self.lockstep = ls


def _same_record(acc: RealRecord, rec: RealRecord) -> bool:
    """sacct against jobcomp (both whole seconds of one job record): same times, nodes and state."""
    def sec(a: float | None, b: float | None) -> bool:
        return (a is None) == (b is None) and (a is None or math.floor(a) == math.floor(b))
    return sec(acc.start, rec.start) and sec(acc.end, rec.end) and acc.nodes == rec.nodes and acc.state == rec.state


def _scheduler_interval(params: str) -> float:
    vals = dict(p.split("=", 1) for p in params.split(",") if "=" in p)
    return float(max(int(vals.get("sched_interval", 60)), int(vals.get("bf_interval", 30)), 1))


def replay_pool(rs: RealSlurm) -> Pool:
    """The pool gpupool replays: the files real Slurm runs, plus the account tree it was given.

    The tree is written next to slurm.conf as a sacctmgr dump, with the submitting user's
    associations that ``RealSlurm`` added, so fair share sees the same tree on both sides.
    """
    src = rs.pool.slurm.accounting if rs.pool is not None and rs.pool.slurm is not None else None
    if src is not None:
        acct = copy.deepcopy(src)
        acct.cluster = rs.cluster
        for account in rs.submit_user_accounts():
            acct.user_associations.append(Association(account, user=rs.submit_user, fairshare=1))
        acct.users.setdefault(rs.submit_user, User(rs.submit_user))
        (rs.etc / "accounts.cfg").write_text(render_sacctmgr_dump(acct))
    return load_pool(rs.etc)


def accounts_of(pool: Pool) -> list[str]:
    """Leaf accounts of the pool's tree (where jobs are charged); two made-up ones without a tree."""
    acct = pool.slurm.accounting if pool.slurm is not None else None
    if acct is None:
        return ["teama", "teamb"]
    parents = {a.parent for a in acct.accounts.values() if a.parent}
    return [a for a in acct.accounts if a != "root" and a not in parents]


def partitions_of(pool: Pool, node_names) -> list[tuple[str, int, int | None]]:
    """(name, nodes the run has, MaxTime in whole minutes or None) of each partition that is
    UP, the default one first: where ``mix="parts"`` may send a job."""
    if pool.slurm is None:
        return []
    names = set(node_names)
    out = [(p.name, sum(1 for n in p.nodes if n in names), None if p.max_time is None else int(p.max_time // 60))
           for p in pool.slurm.partitions.values() if (p.state or "UP").upper() == "UP"]
    out.sort(key=lambda row: not pool.slurm.partitions[row[0]].default)
    return [row for row in out if row[1]]


def gpu_caps(pool: Pool) -> dict[str, int]:
    """Per account, the fewest GPUs its GrpTRES or any parent's allows (accounts with a cap)."""
    acct = pool.slurm.accounting if pool.slurm is not None else None
    if acct is None:
        return {}
    caps: dict[str, int] = {}
    for name in acct.accounts:
        cap, cur, seen = None, name, set()
        while cur and cur not in seen:
            seen.add(cur)
            a = acct.accounts.get(cur)
            if a is None:
                break
            g = a.grp_tres.get("gres/gpu")
            if g is not None:
                cap = g if cap is None else min(cap, g)
            cur = a.parent
        if cap is not None:
            caps[name] = cap
    return caps


def replay_runtime(job: DiffJob, rec: RealRecord) -> float:
    """How long the job ran in real Slurm, as the replay's runtime.

    A sleep of N s holds its GPUs for N s plus the launch and completion round trips (a
    fraction of a second, more in fake seconds under a speed-up). The differential compares
    decisions, not that overhead, so the replay takes each job's observed holding time; a
    job killed at its limit keeps the scripted runtime, so the replay finds the kill itself
    (``ReplayExecutor``).
    """
    if rec.time_limit_hit is not None or rec.start is None or rec.end is None:
        return float(job.runtime_s)
    return max(0.0, rec.end - rec.start)


class ReplayExecutor:
    """Ends jobs as the engine's simulated executor does, but on real slurmctld's clock for limits.

    slurmctld checks time limits from its background loop about every 30 s, in a phase set by
    when that loop started and drifting by a fraction of a second per check; the engine's own
    executor checks on multiples of 30 s from t=0. Replaying a real run, the phase must be
    real Slurm's, or a job that overran its limit ends a second early or late and the jobs
    queued behind it start in another order. ``checks`` are the check instants seen in the
    log (run-relative); between them the grid continues every 30 s from the latest one.
    A job that outlives its limit but ends on its own before the next check is TIMEOUT, as
    slurmctld records it (its end is past ``end_time``).

    A job that gpupool starts within ``lockstep`` seconds of real Slurm's start ends when it
    ended in real Slurm. slurmctld takes a fraction of a second (more in fake seconds under a
    sped-up clock) from decision to running job, which gpupool does not model; without this,
    every end in the replay comes that fraction early and events a moment apart change order.
    For such a job it also hands the policy the intervals during which real Slurm's nodes
    stayed COMPLETING after the end (``released``: per node, when the log has it; the policy's
    ``node_holds``): a job killed at its limit keeps its batch host until its processes are
    gone (up to KillWait), and slurmctld puts no job on a completing node. Each interval also
    says whether its job's release called the main scheduler: on 22.05.8 only the epilog of a
    job killed at its limit (``killed``) does (docs/differential.md, finding 21).
    """

    interval = 30.0

    def __init__(self, over_time_limit: float, checks: list[float],
                 real: dict[int, tuple[float, float, str]] | None = None, lockstep: float = 1.5,
                 released: dict[int, dict[int, float]] | None = None,
                 killed: frozenset[int] = frozenset(),
                 over_time_limit_of: Callable[[object], float] | None = None) -> None:
        self.over_time_limit = over_time_limit
        #: one job's allowance where the policy has one per job (a partition's OverTimeLimit)
        self.over_time_limit_of = over_time_limit_of
        self.checks = sorted(checks)
        #: job id -> (real start, real end, real state), run-relative
        self.real = real or {}
        self.lockstep = lockstep
        #: job id -> {node index: when real Slurm's node took new jobs again}, run-relative
        self.released = released or {}
        #: jobs real Slurm killed at their time limit ("Time limit exhausted")
        self.killed = killed
        #: (node, from, until, job released, release calls the main scheduler) COMPLETING
        #: intervals of the jobs ended as in real Slurm; the replay hands this very list to the
        #: policy (``SlurmPolicy.node_holds``)
        self.node_holds: list[tuple[int, float, float, float, bool]] = []
        #: jobs a lockstep replay started as real Slurm did, however late (its ``adopted``): they
        #: end when real Slurm ended them too
        self.adopted: set[int] = set()

    def next_check(self, due: float) -> float:
        """The first check at or after ``due``: an observed one within 30 s, else the grid."""
        if not self.checks:
            return self.interval * math.ceil(due / self.interval)
        k = bisect.bisect_left(self.checks, due)
        if k < len(self.checks) and self.checks[k] - due < self.interval:
            return self.checks[k]
        if k == 0:  # before the first observed check: its grid, backwards
            first = self.checks[0]
            return first - self.interval * math.floor((first - due) / self.interval)
        base = self.checks[k - 1]
        return base + self.interval * math.ceil((due - base) / self.interval)

    def launch(self, job, now: float) -> tuple[float, str]:
        rec = self.real.get(job.id)
        if rec is not None and (abs(now - rec[0]) <= self.lockstep or job.id in self.adopted):
            # started where real Slurm started it (within the launch latency slurmctld has and
            # gpupool does not model): end it when real Slurm ended it, so both runs see the
            # same sequence of ends and the comparison stays one of decisions
            end = max(now, rec[1])
            nodes = self.released.get(job.id, {})
            last = max(nodes.values(), default=end)
            calls = job.id in self.killed
            for node, free in nodes.items():
                if last > end:
                    self.node_holds.append((node, end, max(free, end), last, calls))
            return end, rec[2]
        limit = job.time_limit
        remaining = job.remaining
        if limit is None or remaining <= limit:
            return now + remaining, job.wl.outcome
        otl = self.over_time_limit if self.over_time_limit_of is None else self.over_time_limit_of(job)
        if otl == math.inf:  # OverTimeLimit=UNLIMITED: it runs to its end (a real 22.05.8: COMPLETED)
            return now + remaining, job.wl.outcome
        kill = self.next_check(now + limit + otl)
        if kill < now + remaining:
            return kill, "TIMEOUT"
        return now + remaining, "TIMEOUT"

    def stop(self, job, now: float, reason: str) -> None:
        return None


@dataclass(slots=True)
class SimView:
    """gpupool's side of one job as ``compare`` reads it (a lockstep replay's proposal)."""

    placement: tuple
    first_start: float | None
    final_state: object
    state: object
    end: float | None
    notes: tuple[str, ...] = ()


def replay(pool: Pool, jobs: list[DiffJob], real: dict[int, RealRecord], ids: dict[int, int], t0: float,
           user: str, lockstep: float | None = None, timing: RealTiming | None = None) -> dict[int, object]:
    """Run the same scripts through gpupool with real Slurm's submit times; jobs by id.

    ``lockstep`` (a tolerance in seconds): follow real Slurm's starts and return, per job,
    gpupool's first proposed start instead (``diff_slurm_lockstep``). ``timing``: when real
    Slurm's backfill cycles and main passes ran (``diff_slurm_real.real_timing``); the replay's
    run at the same instants."""
    from dataclasses import replace

    from gpupool.engine.policy_api import make_policy

    wls = []
    for job in jobs:
        jid = ids[job.index]
        sb = parse_sbatch_text(sbatch_script(job, "out/%j.out"), f"{job.name}.sbatch")
        wl = sbatch_to_workload(sb, id=jid, submit_time=real[jid].submit - t0, runtime=replay_runtime(job, real[jid]))[0]
        wls.append(replace(wl, user=user))
    options: dict = {"epoch": t0}
    if timing is not None:
        options.update(timing.options(t0))
        # the second each job's start was stamped with (SlurmPolicy.start_stamp)
        options["start_stamps"] = {jid: (r.start - t0, r.start_time - t0) for jid, r in real.items()
                                   if r.start is not None and r.start_time is not None}
    policy = make_policy("slurm", pool, options)
    checks = [r.time_limit_hit - t0 for r in real.values() if r.time_limit_hit is not None]
    ends = {jid: (r.start - t0, r.end - t0, r.state) for jid, r in real.items()
            if r.start is not None and r.end is not None}
    index = {n: i for i, n in enumerate(pool.nodes)}
    released = {jid: {index[n]: t - t0 for n, t in r.node_released().items()} for jid, r in real.items()}
    killed = frozenset(jid for jid, r in real.items() if r.time_limit_hit is not None)
    executor = ReplayExecutor(policy.over_time_limit, checks, ends, released=released, killed=killed,
                              over_time_limit_of=getattr(policy, "over_time_limit_of", None))
    policy.node_holds = executor.node_holds
    if lockstep is None:
        out = Engine(pool, wls, policy, check=True, executor=executor).run()
        return {j.id: j for j in out.jobs}
    forced = {jid: (r.start - t0, real_gpus(r.gpus, index) if r.gpus else None)
              for jid, r in real.items() if r.start is not None}
    # a job's start_time in slurmctld is the whole second at which the pass that started it
    # selected its nodes (jobcomp's StartTime), up to a second before the logged start: its
    # end_time and fair-share usage count from there (1 ms in, so that the policy's whole-second
    # rounding cannot fall into the second before)
    decided = {jid: r.start_time - t0 + 1e-3 for jid, r in real.items()
               if r.start is not None and r.start_time is not None}
    alloc = {jid: {index[n]: a for n, a in r.alloc.items()} for jid, r in real.items() if r.alloc}
    wrapper = LockstepPolicy(policy, forced, lockstep, decided, alloc)
    executor.adopted = wrapper.adopted  # the same set: a start adopted late still ends as real Slurm's
    out = Engine(pool, wls, wrapper, check=True, executor=executor).run()
    views: dict[int, object] = {}
    for j in out.jobs:
        p = wrapper.proposals.get(j.id)
        placement = () if p is None else tuple((n, m, 0, 0) for n, m in p.gpus)
        views[j.id] = SimView(placement, None if p is None else p.time, j.final_state, j.state,
                              j.end if j.final_state is not None else None, tuple(wrapper.notes.get(j.id, ())))
    return views


def compare(report: DiffReport, jobs: list[DiffJob], real: dict[int, RealRecord], ids: dict[int, int],
            sim: dict[int, object], node_names: list[str], t0: float) -> None:
    """Fill ``report`` with per-job agreement and the summary fractions."""
    rows: list[JobDiff] = []
    for job in jobs:
        jid = ids[job.index]
        r, s = real[jid], sim[jid]
        sim_gpus: dict[str, list[int]] = {}
        for p in s.placement or ():
            sim_gpus.setdefault(node_names[p[0]], []).extend(mask_indices(p[1]))
        sim_start = s.first_start
        sim_end = s.end if s.final_state is not None else None
        rows.append(JobDiff(
            job.index, job.name, jid, job.account, job.shape,
            r.submit - t0, None if r.start is None else r.start - t0, sim_start,
            None if r.end is None else r.end - t0, sim_end, r.state, str(s.final_state or s.state),
            {k: sorted(v) for k, v in r.gpus.items()}, {k: sorted(v) for k, v in sim_gpus.items()},
            notes=list(getattr(s, "notes", ()))))
    inf = float("inf")
    for key, attr in (("real_rank", "real_start"), ("sim_rank", "sim_start")):
        ordered = sorted(rows, key=lambda d: (inf if getattr(d, attr) is None else getattr(d, attr), d.job_id))
        for rank, d in enumerate(ordered):
            setattr(d, key, rank)
    tol = report.interval
    lockstep = report.mode == "lockstep"
    for d in rows:
        # in order unless some job started more than an interval before it on one side and
        # more than an interval after it on the other (starts within an interval are a tie).
        # In lockstep every other start is real Slurm's, so an inversion is the job's own only
        # when its own start is off by more than an interval.
        if lockstep and d.real_start is not None and d.sim_start is not None and abs(d.sim_start - d.real_start) <= tol:
            continue
        for o in rows:
            if o is d:
                continue
            r = (inf if o.real_start is None else o.real_start) - (inf if d.real_start is None else d.real_start)
            s_ = (inf if o.sim_start is None else o.sim_start) - (inf if d.sim_start is None else d.sim_start)
            if (r < -tol and s_ > tol) or (r > tol and s_ < -tol):
                d.order_ok = False
                break
    deltas = []
    n = max(1, len(rows))
    counts = {"order": 0, "start": 0, "nodes": 0, "gpus": 0, "state": 0}
    for d in rows:
        if d.order_ok:
            counts["order"] += 1
        else:
            d.problems.append(f"start order: #{d.sim_rank} (real #{d.real_rank})")
        if d.real_start is not None and d.sim_start is not None:
            delta = d.sim_start - d.real_start  # real starts come from slurmctld's log (ms)
            deltas.append(abs(delta))
            if abs(delta) <= report.interval:
                counts["start"] += 1
            else:
                d.problems.append(f"start {d.sim_start:.1f} s (real {d.real_start:.0f} s)")
        elif d.real_start == d.sim_start:
            counts["start"] += 1
        else:
            d.problems.append(f"start {d.sim_start} (real {d.real_start})")
        if sorted(d.real_gpus) == sorted(d.sim_gpus):
            counts["nodes"] += 1
        else:
            d.problems.append(f"nodes {sorted(d.sim_gpus)} (real {sorted(d.real_gpus)})")
        if d.real_gpus == d.sim_gpus:
            counts["gpus"] += 1
        else:
            d.problems.append(f"GPUs {d.sim_gpus} (real {d.real_gpus})")
        if d.real_state == d.sim_state:
            counts["state"] += 1
        else:
            d.problems.append(f"state {d.sim_state} (real {d.real_state})")
    report.per_job = rows
    report.order_agree = counts["order"] / n
    report.start_within_interval = counts["start"] / n
    report.nodes_agree = counts["nodes"] / n
    report.gpus_agree = counts["gpus"] / n
    report.state_agree = counts["state"] / n
    report.start_delta_mean = statistics.fmean(deltas) if deltas else 0.0
    report.start_delta_max = max(deltas, default=0.0)


def diff_slurm(pool_path: str | Path, *, jobs: int = 100, seed: int = 1, accounting: str = "dbd",
               speedup: float | None = 10.0, workdir: str | Path | None = None,
               scheduler_parameters: str = DEFAULT_SCHEDULER_PARAMETERS,
               overrides: dict[str, str] | None = None, max_limit_min: int = 5,
               mean_gap_s: float = 6.0, mix: str = "gpus") -> DiffReport:
    """Run the whole differential once; raises ``RealSlurmUnavailable`` where Slurm is missing.

    ``mix``: the workload's options (``diff_slurm_workload.MIXES``)."""
    import tempfile
    import time

    pool = load_pool(pool_path)
    over = dict(DEFAULT_OVERRIDES if overrides is None else overrides)
    tmp = None
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="gpupool-diff-slurm-")
        workdir = tmp.name
    report = DiffReport(pool.name, seed, jobs, accounting, speedup, _scheduler_interval(scheduler_parameters), mix=mix)
    if mix == "rich":
        rich_fits(pool)
    rs = RealSlurm(workdir, pool, accounting=accounting, scheduler_parameters=scheduler_parameters,
                   overrides=over, speedup=speedup, slurmctld_debug="debug")
    wall = time.monotonic()
    try:
        with rs:
            gpus_per_node = min(len(n.gpus) for n in pool.nodes.values() if n.name in rs.node_names)
            workload = generate(seed, jobs, accounts_of(pool), max_nodes=len(rs.node_names),
                                gpus_per_node=gpus_per_node, max_limit_min=max_limit_min, mean_gap_s=mean_gap_s,
                                gpu_caps=gpu_caps(pool), mix=mix,
                                partitions=partitions_of(pool, rs.node_names) if mix == "parts" else None)
            # Start once slurmctld has computed fair share with the accounts loaded (before
            # its first decay pass after sacctmgr's load every FairShare is 0, README gotcha
            # 13), and replay on the decay thread's clock: its passes then fall on the same
            # instants as gpupool's PriorityCalcPeriod passes.
            t0 = rs.decay_started_at()
            calc = float(replay_pool(rs).slurm.params.get("PriorityCalcPeriod") or 300)
            passes = math.floor((rs.now() - t0) / calc) + 1
            real, ids = play(rs, workload, not_before=t0 + passes * calc + 2.0)
            if accounting == "dbd":
                # jobcomp's whole seconds, not the log-refined milliseconds: both come from
                # the same slurmctld job record, whereas a "Started" log line can be printed a
                # (simulated) second after the start_time sacct stores
                acc = sacct_records(rs, list(ids.values()))
                comp = parse_jobcomp((rs.log_dir / "jobcomp.txt").read_text())
                same = sum(1 for jid, r in comp.items() if jid in real and jid in acc and _same_record(acc[jid], r))
                report.sacct_agree = same / max(1, len(real))
            gp_pool = replay_pool(rs)
        report.real_wall_s = time.monotonic() - wall
        timing = real_timing((rs.log_dir / "slurmctld.log").read_text(errors="replace"))
        sim = replay(gp_pool, workload, real, ids, t0, rs.submit_user, timing=timing)
        compare(report, workload, real, ids, sim, list(gp_pool.nodes), t0)
        sim = replay(gp_pool, workload, real, ids, t0, rs.submit_user, lockstep=report.interval, timing=timing)
        report.with_lockstep(sim, workload, real, ids, list(gp_pool.nodes), t0)
    finally:
        if tmp is not None:
            tmp.cleanup()
    return report


#: the options every differential script carries; any other ``#SBATCH`` line is one of the
#: job's ``options`` (``mix="rich"``)
_FIXED_OPTIONS = ("--job-name=", "--account=", "--nodes=", "--gres=gpu:", "--time=", "--output=")


def jobs_from_scripts(workdir: str | Path) -> list[DiffJob]:
    """The workload of a finished run, read back from its ``scripts/*.sbatch`` (arrival unknown: 0)."""
    out = []
    for path in sorted(Path(workdir, "scripts").glob("d*.sbatch")):
        text = path.read_text()
        sb = parse_sbatch_text(text, str(path))
        wl = sbatch_to_workload(sb, id=1, submit_time=0.0, runtime=0.0)[0]
        runtime = next(int(ln.split("=", 1)[1]) for ln in text.splitlines() if ln.startswith("#GPUPOOL runtime="))
        flags = [ln[len("#SBATCH "):].strip() for ln in text.splitlines() if ln.startswith("#SBATCH ")]
        # a node count is the script's own; a range (``mix="gpus-range"``) is one of its options
        ranged = [f for f in flags if f.startswith("--nodes=") and "-" in f[len("--nodes="):]]
        given = [int(f.split("=", 1)[1]) for f in flags if f.startswith("--nodes=") and f not in ranged]
        nodes = given[0] if given else 1
        gres = [f for f in flags if f.startswith("--gres=gpu:")]
        options = tuple(f for f in flags if not f.startswith(_FIXED_OPTIONS) or f in ranged)
        gpus_per_node = int(gres[0].rsplit(":", 1)[1]) if gres else wl.total_gpus // nodes
        out.append(DiffJob(int(path.stem[1:]), path.stem, 0.0, nodes, gpus_per_node, int((wl.time_limit or 0) // 60),
                           runtime, wl.account or "", options, bool(gres), bool(given)))
    return out


def replay_workdir(workdir: str | Path, pool_path: str | Path, *, seed: int = 0, accounting: str = "dbd",
                   speedup: float | None = None, interval: float = 1.0) -> DiffReport:
    """Compare again from a finished run's files (slurmctld log, jobcomp, job outputs, scripts):
    re-runs only gpupool's side, e.g. after a change to ``policy/slurm``. Job ids are assumed
    to follow submission order from 1, as a fresh cluster gives them."""
    from gpupool.conformance.diff_slurm_real import (
        parse_jobcomp,
        read_job_outputs,
        refine_from_log,
    )

    pool = load_pool(pool_path)
    rs = RealSlurm(workdir, pool, accounting=accounting)
    jobs = jobs_from_scripts(workdir)
    real = parse_jobcomp((rs.log_dir / "jobcomp.txt").read_text())
    log_text = (rs.log_dir / "slurmctld.log").read_text(errors="replace")
    refine_from_log(real, log_text)
    timing = real_timing(log_text)
    read_job_outputs(real, rs.out_dir)
    ids = {j.index: j.index + 1 for j in jobs}
    t0 = rs.decay_started_at()
    gp = replay_pool(rs)
    report = DiffReport(pool.name, seed, len(jobs), accounting, speedup, interval)
    sim = replay(gp, jobs, real, ids, t0, rs.submit_user, timing=timing)
    compare(report, jobs, real, ids, sim, list(gp.nodes), t0)
    sim = replay(gp, jobs, real, ids, t0, rs.submit_user, lockstep=interval, timing=timing)
    report.with_lockstep(sim, jobs, real, ids, list(gp.nodes), t0)
    return report

