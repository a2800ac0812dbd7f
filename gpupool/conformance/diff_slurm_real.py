"""Play the differential workload on a real Slurm and read back what it decided.

The driver submits each script at its arrival time on Slurm's own clock (the shared
libfaketime clock under a speed-up), waits until the queue is empty, then reads:
submit/start/end/state/nodes from ``jobcomp/filetxt`` (always there), the per-node GPU
indices from each job's own ``scontrol -d show job`` output, and, with slurmdbd, ``sacct``
(the same facts through accounting, checked against jobcomp).
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from datetime import datetime

from gpupool.conformance.diff_slurm_workload import DiffJob, sbatch_script
from gpupool.conformance.real_slurm import RealSlurm, RealSlurmError
from gpupool.formats.hostlist import expand_hostlist

_JOBCOMP_FIELD = re.compile(r"(\w+)=(\S*)")
_GRES_LINE = re.compile(r"Nodes=(\S+) CPU_IDs=\S+ Mem=\S+ GRES=(\S*)")
_ALLOC_LINE = re.compile(r"Nodes=(\S+) CPU_IDs=(\S+) Mem=(\d+)")
_NUM_CPUS = re.compile(r"NumCPUs=(\d+)")
_IDX = re.compile(r"IDX:([0-9,\-]+)")
_LOG_EVENT = re.compile(
    r"^\[(\S+)\] (?:(?P<submit>_slurm_rpc_submit_batch_job: JobId=(?P<sj>\d+) )"
    r"|(?P<main>sched: Allocate JobId=(?P<mj>\d+) )"
    r"|(?P<bf>sched/backfill: _start_job: Started JobId=(?P<bj>\d+) )"
    r"|(?P<done>_job_complete: JobId=(?P<dj>\d+) done)"
    r"|(?P<tl>Time limit exhausted for JobId=(?P<tj>\d+))"
    r"|(?P<freed>TRACE_JOBS: cleanup_completing: JobId=(?P<fj>\d+)\b)"
    r"|(?P<epilog>TRACE_JOBS: job_epilog_complete: enter JobId=(?P<ej>\d+)\b))", re.MULTILINE)


@dataclass(slots=True)
class RealRecord:
    """What real Slurm did with one job. Times are epoch seconds (Slurm's clock, 1 s resolution)."""

    job_id: int
    name: str
    submit: float
    start: float | None
    end: float | None
    state: str
    nodes: list[str]
    #: node -> GPU indices, read inside the running job
    gpus: dict[str, list[int]] = field(default_factory=dict)
    #: node -> (CPUs, MB) the job holds there, read in the same place
    alloc: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: "main" or "backfill": which scheduler started it (slurmctld log)
    via: str | None = None
    #: when slurmctld found it over its time limit (None if it ended before a check)
    time_limit_hit: float | None = None
    #: when its last node finished COMPLETING (``DebugFlags=TraceJobs`` at verbose:
    #: ``cleanup_completing``); None in logs without it
    released: float | None = None
    #: each node's epilog-complete message (``job_epilog_complete``), in arrival order
    epilogs: list[float] = field(default_factory=list)
    #: slurmctld's own start_time (jobcomp's whole second): the clock time when the pass that
    #: started the job called select_nodes, from which end_time (= start_time + limit) counts;
    #: ``start`` becomes the later, millisecond "Started" log line (``refine_from_log``)
    start_time: float | None = None

    def node_released(self) -> dict[str, float]:
        """When each node of the job could take other jobs again; {} without the log lines.

        The log does not name the node of an epilog message. The batch host (the first node)
        is the one that waits for the job's processes (KillWait after a kill at the limit),
        so it gets the last message; the other nodes, which run no batch script, the earlier
        ones in node order.
        """
        if self.released is None or not self.nodes:
            return {}
        times = sorted(self.epilogs)[: len(self.nodes)] or [self.released]
        first, *others = self.nodes
        out = {first: max(times[-1], self.released)}
        for node, t in zip(others, times):
            out[node] = t
        for node in others[len(times):]:
            out[node] = out[first]
        return out


def _epoch(text: str) -> float | None:
    if not text or text in ("Unknown", "None", "N/A"):
        return None
    return datetime.fromisoformat(text).timestamp()


def parse_index_list(text: str) -> list[int]:
    """``0-2,5`` -> [0, 1, 2, 5] (Slurm's IDX notation)."""
    out: list[int] = []
    for part in text.split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def parse_job_gres(text: str) -> dict[str, list[int]]:
    """Per-node GPU indices from ``scontrol -d show job`` text (``Nodes=… GRES=gpu:2(IDX:0-1)``)."""
    out: dict[str, list[int]] = {}
    for nodes, gres in _GRES_LINE.findall(text):
        idx = [i for m in _IDX.findall(gres) for i in parse_index_list(m)]
        for node in expand_hostlist(nodes):
            out[node] = sorted(set(out.get(node, []) + idx))
    return out


def parse_job_alloc(text: str) -> dict[str, tuple[int, int]]:
    """Per-node (CPUs, MB) from ``scontrol -d show job`` text (``Nodes=… CPU_IDs=0-1,16-17
    Mem=400``; nodes with equal allocations share one line as a host list); {} when the CPUs
    do not add up to the job's ``NumCPUs`` (scontrol cuts a long CPU_IDs list short)."""
    out: dict[str, tuple[int, int]] = {}
    for nodes, cpu_ids, mem in _ALLOC_LINE.findall(text):
        cpus = len(parse_index_list(cpu_ids))
        for node in expand_hostlist(nodes):
            out[node] = (cpus, int(mem))
    total = _NUM_CPUS.search(text)
    if out and (total is None or int(total.group(1)) != sum(c for c, _m in out.values())):
        return {}
    return out


def read_job_outputs(records: dict[int, RealRecord], out_dir) -> None:
    """Fill each record's GPUs and per-node allocation from its job's output file, where it
    was kept."""
    for jid, rec in records.items():
        out = out_dir / f"{jid}.out"
        if out.exists():
            text = out.read_text(errors="replace")
            rec.gpus = parse_job_gres(text)
            rec.alloc = parse_job_alloc(text)


def parse_jobcomp(text: str) -> dict[int, RealRecord]:
    """``jobcomp/filetxt`` lines (``JobId=… JobState=… StartTime=…``) by job id."""
    out: dict[int, RealRecord] = {}
    for line in text.splitlines():
        f = dict(_JOBCOMP_FIELD.findall(line))
        if "JobId" not in f:
            continue
        jid = int(f["JobId"])
        nodes = [] if f.get("NodeList", "(null)") in ("(null)", "") else expand_hostlist(f["NodeList"])
        out[jid] = RealRecord(jid, f.get("Name", ""), _epoch(f.get("SubmitTime", "")) or 0.0,
                              _epoch(f.get("StartTime", "")), _epoch(f.get("EndTime", "")),
                              f.get("JobState", ""), nodes)
    return out


_BACKFILL_CYCLE = re.compile(r"^\[(\S+)\] sched/backfill: _attempt_backfill: beginning", re.MULTILINE)


def backfill_cycles(log_text: str) -> list[float]:
    """When each backfill cycle began (epoch s, slurmctld's clock; ``DebugFlags=Backfill``).

    A real cycle starts ``bf_interval`` after the previous one *ended*, so the instants drift
    by the cycles' durations; a replay runs its cycles at these instants (the policy's
    ``backfill_at``) rather than on a grid that drifts apart from them.
    """
    return [datetime.fromisoformat(m.group(1)).timestamp() for m in _BACKFILL_CYCLE.finditer(log_text)]


_MAIN_PASS = re.compile(r"^\[(\S+)\] (?:debug:\s+)?sched: Running job scheduler for (full queue|default depth)",
                        re.MULTILINE)


def main_passes(log_text: str) -> list[tuple[float, bool]]:
    """When each main scheduler pass began (epoch s) and whether it walked the full queue
    (``SlurmctldDebug=debug`` logs one line per pass; none at ``verbose``: then []).

    slurmctld runs its main scheduler from a background loop about once a second (the full
    pass every ``sched_interval``, a quick one for queued requests) and right after the last
    epilog-complete message of a job killed at its time limit; a submission, a job end or the
    epilog of a job that ended by itself does not run it (docs/differential.md, finding 21).
    The instants depend on slurmctld's threads, so a replay runs its main passes where the log
    shows them (the policy's ``main_at``).
    """
    return [(datetime.fromisoformat(m.group(1)).timestamp(), m.group(2) == "full queue")
            for m in _MAIN_PASS.finditer(log_text)]


_MAIN_ALLOCATE = re.compile(r"^\[(\S+)\] sched: Allocate JobId=", re.MULTILINE)
#: Allocate lines closer than this (s) come from one main pass
_SAME_PASS = 0.1
#: how long before its first Allocate line a pass is taken to have begun (s): before the
#: job's logged start, which a lockstep replay adopts at that very instant
_PASS_LEAD = 0.0005


def main_passes_seen(log_text: str) -> list[float]:
    """Instants (epoch s) at which a main pass is known to have run in a log written at
    ``verbose``, which has no line per pass: just before the first of each burst of
    "sched: Allocate" lines (a pass that started jobs). The other passes stay unknown."""
    seen: list[float] = []
    last = -math.inf
    for m in _MAIN_ALLOCATE.finditer(log_text):
        t = datetime.fromisoformat(m.group(1)).timestamp()
        if t - last > _SAME_PASS:
            seen.append(t - _PASS_LEAD)
        last = t
    return seen



_BF_LINE = re.compile(r"^\[(\S+)\] sched/backfill: (.*)$", re.MULTILINE)
_BF_TEST = re.compile(r"BACKFILL: test for JobId=(\d+) (?:.*?Partition=(\S+))?")
_BF_JOB = re.compile(r"JobId=(\d+)\b")
#: how a cycle that did not stop on its own time limit ends (slurmctld 22.05 backfill.c)
_BF_ENDED = ("reached end of job queue", "bf_max_job_test: limit", "breaking out after testing")


def backfill_cuts(log_text: str) -> dict[float, tuple[tuple[tuple[int, str | None], ...], bool]]:
    """Backfill cycles that ran out of time, by begin instant (epoch s): (the queue records the
    cycle logged "test for", as (job id, partition), in order, the last being where it stopped;
    whether that last one was still tested); no records: it stopped before testing any. A job
    listed in several partitions has a record per partition, and a cut may fall between them
    (the parts mix's seed 52: job 70 of ``-p q,p`` reached in q only).

    slurmctld 22.05 ends a cycle silently once ``time(NULL) - start >= bf_max_time``
    (default ``bf_interval``), checked before each queue record and before each try. Both are
    whole seconds, so with ``bf_interval=1`` a cycle that crosses a second boundary stops at the
    next check, however few jobs it tested: every one of the 124 cycles that ended without
    "reached end of job queue" in a 100-job run had crossed one, and no such cycle had not
    (docs/differential.md). When that happens is a matter of slurmctld's own CPU time, which no
    replay can know, so the replay reads it from the log (``DebugFlags=Backfill``): the jobs
    the cycle logged "test for" are the ones it reached, the last one is where it stopped, and
    that one counts as tested when anything about it was logged after that line (a plan, an
    overlap, a start).
    """
    out: dict[float, tuple[tuple[tuple[int, str | None], ...], bool]] = {}
    begin: float | None = None
    seen: list[tuple[int, str | None]] = []
    last: int | None = None
    tested = False
    for m in _BF_LINE.finditer(log_text):
        msg = m.group(2)
        if "_attempt_backfill: beginning" in msg:
            begin = datetime.fromisoformat(m.group(1)).timestamp()
            seen, last, tested = [], None, False
            continue
        if begin is None:
            continue
        t = _BF_TEST.search(msg)
        if t:
            last, tested = int(t.group(1)), False
            seen.append((last, t.group(2)))
        elif "completed testing" in msg:
            out[begin] = (tuple(seen), tested)
            begin = None
        elif any(k in msg for k in _BF_ENDED):
            begin = None  # ended on its own: not cut
        elif last is not None and not tested:
            j = _BF_JOB.search(msg)
            tested = j is not None and int(j.group(1)) == last
    return out


@dataclass(frozen=True)
class RealTiming:
    """When the real slurmctld's passes ran, read from its log (epoch s): what no replay can
    derive, because it depends on slurmctld's threads and CPU time."""

    #: each backfill cycle's beginning (``backfill_cycles``)
    backfill_at: list[float]
    #: the cycles that ran out of time, the (job, partition) records they reached and whether
    #: the last was still tested (``backfill_cuts``)
    backfill_cut: dict[float, tuple[tuple[tuple[int, str | None], ...], bool]]
    #: each main scheduler pass's beginning and whether it was a full one (``main_passes``;
    #: empty for a log written at ``verbose``)
    main_at: list[tuple[float, bool]]
    #: in a log without ``main_at``: the passes that started jobs (``main_passes_seen``)
    main_seen: list[float]

    def options(self, t0: float) -> dict:
        """The Slurm policy's replay options, run-relative to ``t0`` (passes before it dropped)."""
        out: dict = {}
        cycles = sorted(t - t0 for t in self.backfill_at if t >= t0)
        if cycles:
            out["backfill_at"] = cycles
        if self.backfill_cut:
            out["backfill_cut"] = {t - t0: cut for t, cut in self.backfill_cut.items() if t >= t0}
        if self.main_at:
            out["main_at"] = [(t - t0, full) for t, full in self.main_at if t >= t0]
        else:  # a log without a line per pass: what it does show of them
            out["main_seen"] = [t - t0 for t in self.main_seen if t >= t0]
        return out


def real_timing(log_text: str) -> RealTiming:
    main = main_passes(log_text)
    return RealTiming(backfill_cycles(log_text), backfill_cuts(log_text), main,
                      [] if main else main_passes_seen(log_text))


def refine_from_log(records: dict[int, RealRecord], log_text: str) -> None:
    """Replace jobcomp's whole-second submit/start/end with slurmctld's millisecond log times.

    Whole seconds are not enough: a submission and a job end in the same second are ordered
    by their fractions, and that order decides where the new job goes.
    """
    for m in _LOG_EVENT.finditer(log_text):
        t = datetime.fromisoformat(m.group(1)).timestamp()
        if m.group("submit"):
            rec = records.get(int(m.group("sj")))
            if rec is not None:
                rec.submit = t
        elif m.group("main") or m.group("bf"):
            rec = records.get(int(m.group("mj") or m.group("bj")))
            if rec is not None and rec.via is None:
                if rec.start_time is None:
                    rec.start_time = rec.start
                rec.start, rec.via = t, ("main" if m.group("main") else "backfill")
        elif m.group("done"):
            rec = records.get(int(m.group("dj")))
            if rec is not None:
                rec.end = t
        elif m.group("tl"):
            rec = records.get(int(m.group("tj")))
            if rec is not None and rec.time_limit_hit is None:
                rec.time_limit_hit = t
                rec.end = t  # a killed job logs no completion line; it ends (sacct) at the kill
        elif m.group("freed"):
            rec = records.get(int(m.group("fj")))
            if rec is not None:
                # its processes gone and the epilog done: the nodes take new jobs from now
                # (seconds after the end for a job killed at its limit: KillWait)
                rec.released = t
        elif m.group("epilog"):
            rec = records.get(int(m.group("ej")))
            if rec is not None:
                rec.epilogs.append(t)


def play(rs: RealSlurm, jobs: list[DiffJob], *, drain_timeout: float = 1800.0,
         not_before: float | None = None) -> tuple[dict[int, RealRecord], dict[int, int]]:
    """Submit ``jobs`` at their arrival times on ``rs``; return (records by job id, job index -> id).

    ``not_before`` (Slurm's clock, epoch s): the first submission waits until then.
    """
    scripts = rs.dir / "scripts"
    scripts.mkdir(exist_ok=True)
    paths = []
    for job in jobs:
        p = scripts / f"{job.name}.sbatch"
        p.write_text(sbatch_script(job, str(rs.out_dir / "%j.out")))
        paths.append(p)
    ids: dict[int, int] = {}
    if not_before is not None:
        rs.sleep(not_before - rs.now())
    t0 = rs.now()
    snap = _ShareSampler(rs)
    for job, path in zip(jobs, paths):
        while True:  # sleep until the arrival, sampling sshare every simulated minute meanwhile
            left = t0 + job.arrival - rs.now()
            if left <= 0:
                break
            rs.sleep(min(left, snap.due() - rs.now()) if snap.due() > rs.now() else 0)
            snap.maybe()
        ids[job.index] = rs.sbatch([str(path)])
    rs.wait_idle(timeout=drain_timeout)
    comp = rs.log_dir / "jobcomp.txt"
    deadline = time.monotonic() + 30
    records: dict[int, RealRecord] = {}
    while time.monotonic() < deadline:
        records = parse_jobcomp(comp.read_text()) if comp.exists() else {}
        if set(ids.values()) <= set(records):
            break
        time.sleep(0.2)
    missing = sorted(set(ids.values()) - set(records))
    if missing:
        raise RealSlurmError(f"jobs {missing} never reached {comp}")
    refine_from_log(records, (rs.log_dir / "slurmctld.log").read_text(errors="replace"))
    read_job_outputs(records, rs.out_dir)
    return records, ids


class _ShareSampler:
    """With slurmdbd: ``sshare -a -l -P`` once per simulated minute into ``DIR/log/sshare.txt``
    (prefixed with Slurm's time), to compare fair-share values afterwards; best effort."""

    period = 60.0

    def __init__(self, rs: RealSlurm) -> None:
        self.rs = rs
        self.on = rs.accounting == "dbd"
        self.next = rs.now()
        self.path = rs.log_dir / "sshare.txt"

    def due(self) -> float:
        return self.next if self.on else float("inf")

    def maybe(self) -> None:
        if not self.on or self.rs.now() < self.next:
            return
        self.next += self.period
        try:
            out = self.rs.run(["sshare", "-a", "-l", "-P"], check=False, timeout=10).stdout
        except RealSlurmError:
            return
        with self.path.open("a") as fh:
            fh.write(f"# t={self.rs.now():.3f}\n{out}")


def sacct_records(rs: RealSlurm, ids: list[int], timeout: float = 60.0) -> dict[int, RealRecord]:
    """The same facts through ``sacct`` (slurmdbd only; records arrive a few seconds late)."""
    fmt = "JobID,JobName,Submit,Start,End,State,NodeList"
    deadline = time.monotonic() + timeout
    out: dict[int, RealRecord] = {}
    while time.monotonic() < deadline:
        text = rs.run(["sacct", "-X", "-n", "-P", "-a", f"--format={fmt}",
                       "-j", ",".join(map(str, ids))], check=False).stdout
        out = {}
        for line in text.splitlines():
            parts = line.split("|")
            if len(parts) != 7 or not parts[0].isdigit():
                continue
            jid = int(parts[0])
            state = parts[5].split()[0] if parts[5] else ""
            nodes = [] if parts[6] in ("", "None assigned") else expand_hostlist(parts[6])
            out[jid] = RealRecord(jid, parts[1], _epoch(parts[2]) or 0.0, _epoch(parts[3]), _epoch(parts[4]),
                                  state, nodes)
        if len(out) >= len(ids) and all(r.end is not None for r in out.values()):
            return out
        time.sleep(0.5)
    return out
