"""Ledger ingest and query speed: N synthetic sacct job records into a SQLite ledger.

    python benchmarks/bench_ledger.py                    # 1M jobs (issue 5's target size)
    python benchmarks/bench_ledger.py --jobs 100000 --json

Generates N job records as ``sacct --parsable2 --allocations`` text (seeded: users, accounts,
QOS, partitions, GPU types, node lists, submit/start/end over ``--days`` days), written as one
file per day as a site would export them daily, and imports the files with
``import_sacct_files`` (what ``gpupool import sacct FILES…`` runs: each file one transaction of
jobs, events, allocations, policy versions and the hourly usage roll-up; the next files are
parsed in a child process while one is written) into a fresh SQLite ledger. Then times the reads issue 5 names:

* ``usage --by account,gpu-type --period month``  (``usage_report``)
* ``acct`` with a one-day time window            (``acct_jobs(starttime=, endtime=)``)
* ``audit gpus NODE:0,1 --at T``                   (``audit_gpus``)

Every time is also given as a ratio to a baseline measured in the same run, on the same rows:
a bare SQLite table with the job columns filled by one ``executemany`` (ingest), a plain SQL
``GROUP BY`` month/account/GPU type over it (usage), a plain windowed ``SELECT`` (acct) and an
indexed lookup in a bare allocations table (audit gpus). Targets (issue 5): ingest 1M job
records in <= 60 s; ``usage --period month`` over them in <= 2 s. Peak memory is the process's
max RSS (``ru_maxrss``, the generated rows included) and, on Linux, the peak from the start of
ingest on (VmHWM, reset through /proc/self/clear_refs).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import resource
import sqlite3
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # runnable as a plain script from a checkout
    sys.path.insert(0, str(REPO))

EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp()
DAY = 86400.0
HEADER = ("JobID|JobIDRaw|JobName|User|Account|Partition|QOS|Cluster|Priority|Submit|Eligible|Start|End|"
          "Elapsed|ElapsedRaw|Timelimit|State|ExitCode|Reason|AllocCPUS|NNodes|NodeList|ReqTRES|AllocTRES")
GPU_TYPES = ("h100", "a100", "l40s")
STATES = ("COMPLETED",) * 8 + ("FAILED", "CANCELLED by 1001", "TIMEOUT")


def _ts(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def _dur(sec: int) -> str:
    d, rest = divmod(sec, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return (f"{d}-" if d else "") + f"{h:02d}:{m:02d}:{s:02d}"


def generate(n: int, days: int, seed: int = 5):
    """Job tuples (day, sacct line, bare row, bare allocation rows), seeded."""
    rng = random.Random(seed)
    users = [f"u{i:03d}" for i in range(200)]
    accounts = [f"acct{i:02d}" for i in range(20)]
    per_day: list[list[str]] = [[] for _ in range(days)]
    bare, bare_allocs = [], []
    for i in range(n):
        job_id = 1000 + i
        day = i * days // n
        submit = EPOCH + day * DAY + rng.randrange(86400)
        start = submit + rng.randrange(3600)
        elapsed = rng.randrange(60, 8 * 3600)
        end = start + elapsed
        u = rng.randrange(len(users))
        user, account = users[u], accounts[u % len(accounts)]
        gtype = GPU_TYPES[u % 3]
        rack = rng.randrange(64)
        nnodes = 1 if rng.random() < 0.9 else 2
        gpn = rng.choice((1, 2, 4, 8)) if nnodes == 1 else 8
        gpus = gpn * nnodes
        nodes = [f"gpu{rack * 2 + k:03d}" for k in range(nnodes)]
        nodelist = nodes[0] if nnodes == 1 else f"gpu[{rack * 2:03d}-{rack * 2 + 1:03d}]"
        cpus = gpus * 8
        state = STATES[rng.randrange(len(STATES))]
        part = "gpu" if gtype != "l40s" else "inference"
        qos = ("normal", "high", "low")[rng.randrange(3)]
        alloc = f"billing={cpus},cpu={cpus},gres/gpu:{gtype}={gpus},gres/gpu={gpus},mem={gpus * 64}G,node={nnodes}"
        req = f"billing={cpus},cpu={cpus},gres/gpu={gpus},mem={gpus * 64}G,node={nnodes}"
        line = "|".join((str(job_id), str(job_id), f"train-{i % 977}", user, account, part, qos, "bench",
                         str(rng.randrange(1, 100000)), _ts(submit), _ts(submit), _ts(start), _ts(end),
                         _dur(elapsed), str(elapsed), "08:00:00", state,
                         "0:0" if state == "COMPLETED" else "1:0", "None", str(cpus), str(nnodes), nodelist,
                         req, alloc))
        per_day[day].append(line)
        bare.append(("bench", str(job_id), f"train-{i % 977}", user, account, part, qos, submit, start, end,
                     float(elapsed), state, cpus, nodelist, alloc, gpus, gtype, gpus * float(elapsed)))
        for node in nodes:
            bare_allocs.append(("bench", str(job_id), node, -1, gpn, gtype, start, end))
    return per_day, bare, bare_allocs


BARE_SQL = """CREATE TABLE jobs (origin TEXT, job_id TEXT, name TEXT, user TEXT, account TEXT, partition TEXT,
  qos TEXT, submit REAL, start REAL, "end" REAL, elapsed REAL, state TEXT, ncpus INT, node_list TEXT,
  alloc_tres TEXT, gpus INT, gpu_type TEXT, gpu_seconds REAL, PRIMARY KEY (origin, job_id));
CREATE TABLE allocations (id INTEGER PRIMARY KEY, origin TEXT, job_id TEXT, node TEXT, gpu_index INT,
  gpu_count INT, gpu_type TEXT, time_from REAL, time_to REAL);
CREATE INDEX ix_alloc ON allocations (node, time_from);"""


def baseline(path: Path, bare, bare_allocs, window, audit_at) -> tuple[dict, dict]:
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.executescript(BARE_SQL)
    t, c = time.perf_counter(), time.process_time()
    with con:
        con.executemany(f"INSERT INTO jobs VALUES ({','.join('?' * 18)})", bare)
        con.executemany("INSERT INTO allocations (origin, job_id, node, gpu_index, gpu_count, gpu_type, "
                        "time_from, time_to) VALUES (?,?,?,?,?,?,?,?)", bare_allocs)
    times = {"ingest": time.perf_counter() - t, "ingest_cpu": time.process_time() - c}
    t = time.perf_counter()
    usage = con.execute("SELECT strftime('%Y-%m', start, 'unixepoch') AS m, account, gpu_type, "
                        "SUM(gpu_seconds) / 3600.0 FROM jobs GROUP BY m, account, gpu_type").fetchall()
    times["usage"] = time.perf_counter() - t
    t = time.perf_counter()
    acct = con.execute('SELECT * FROM jobs WHERE ("end" IS NULL OR "end" >= ?) AND start <= ? '
                       "ORDER BY origin, submit, job_id", window).fetchall()
    times["acct"] = time.perf_counter() - t
    t = time.perf_counter()
    audit = con.execute("SELECT a.*, j.user, j.account FROM allocations a JOIN jobs j USING (origin, job_id) "
                        "WHERE a.node = ? AND a.time_from <= ? AND a.time_to > ?", ("gpu010",) + (audit_at,) * 2
                        ).fetchall()
    times["audit_gpus"] = time.perf_counter() - t
    con.close()
    return times, {"usage_rows": len(usage), "acct_rows": len(acct), "audit_rows": len(audit)}


def _children_cpu() -> float:
    """User + system CPU seconds of this process's reaped child processes."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _reset_peak_rss() -> bool:
    """Linux: reset the process's peak RSS (VmHWM) to its current RSS."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _peak_rss_mib() -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def run(n: int, days: int, workdir: Path) -> dict:
    from gpupool.ledger import Ledger
    from gpupool.ledger.imports.sacct import import_sacct_files
    from gpupool.ledger.query import acct_jobs, audit_gpus, usage_report

    t = time.perf_counter()
    per_day, bare, bare_allocs = generate(n, days)
    files = []
    for d, lines in enumerate(per_day):
        if lines:
            f = workdir / f"sacct-{d:03d}.txt"
            f.write_text(HEADER + "\n" + "\n".join(lines) + "\n")
            files.append(f)
    gen_s = time.perf_counter() - t
    window = (EPOCH + (days // 2) * DAY, EPOCH + (days // 2 + 1) * DAY)
    audit_at = EPOCH + (days // 2) * DAY + 12 * 3600
    base, base_counts = baseline(workdir / "bare.db", bare, bare_allocs, window, audit_at)
    del bare, bare_allocs, per_day
    gc.collect()

    ledger = Ledger(workdir / "ledger.db")
    reset = _reset_peak_rss()  # so the peak below is the ledger's, not the generator's
    t, c, kids = time.perf_counter(), time.process_time(), _children_cpu()
    added = sum(r["jobs_added"] for r in import_sacct_files(ledger, files))  # as `gpupool import sacct FILES…`
    ingest = time.perf_counter() - t
    ingest_children_cpu = _children_cpu() - kids  # the parsing process, reaped by the import
    ingest_cpu = time.process_time() - c + ingest_children_cpu
    t, c = time.perf_counter(), time.process_time()
    usage = usage_report(ledger, by=("account", "gpu-type"), period="month")
    usage_s, usage_cpu = time.perf_counter() - t, time.process_time() - c
    t = time.perf_counter()
    acct = acct_jobs(ledger, starttime=window[0], endtime=window[1])
    acct_s = time.perf_counter() - t
    t = time.perf_counter()
    audit = audit_gpus(ledger, "gpu010:0,1", audit_at)
    audit_s = time.perf_counter() - t
    ledger.close()
    size = sum(p.stat().st_size for p in workdir.glob("ledger.db*"))
    scale = 1024 if sys.platform != "darwin" else 1
    return {
        "jobs": n, "jobs_added": added, "files": len(files), "days": days, "generate_s": round(gen_s, 3),
        "ingest_s": round(ingest, 3), "ingest_jobs_per_s": round(n / ingest),
        # CPU seconds of this process (all threads) and of the parsing process it starts:
        # what the ingest costs when other programs share the cores, which stretches
        # wall-clock times but not these; the child's part alone as well
        "ingest_cpu_s": round(ingest_cpu, 3), "ingest_children_cpu_s": round(ingest_children_cpu, 3),
        "usage_s": round(usage_s, 4), "usage_cpu_s": round(usage_cpu, 4), "acct_window_s": round(acct_s, 4), "audit_gpus_s": round(audit_s, 4),
        "rows": {"usage": len(usage), "acct": len(acct), "audit": len(audit), **base_counts},
        "baseline_s": {k: round(v, 4) for k, v in base.items()},
        "ratio": {"ingest": round(ingest / base["ingest"], 1),
                  "ingest_cpu": round(ingest_cpu / max(base["ingest_cpu"], 1e-6), 1), "usage": round(usage_s / base["usage"], 2),
                  "acct_window": round(acct_s / base["acct"], 2),
                  "audit_gpus": round(audit_s / max(base["audit_gpus"], 1e-6), 1)},
        "targets": {"ingest_le_60s": ingest <= 60 * n / 1_000_000, "usage_le_2s": usage_s <= 2.0},
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20, 1),
        "peak_rss_ingest_and_queries_mib": _peak_rss_mib() if reset else None,
        "peak_rss_parsing_process_mib": round(
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * scale / 2**20, 1),
        "ledger_mib": round(size / 2**20, 1),
        "python": platform.python_version(), "sqlite": sqlite3.sqlite_version, "cpus": os.cpu_count(),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=1_000_000, help="job records (default: 1M, issue 5's size)")
    ap.add_argument("--days", type=int, default=90, help="days they span; one sacct file per day (default 90)")
    ap.add_argument("--dir", type=Path, default=None, help="work directory (default: a temporary one)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-ledger-", dir=args.dir) as tmp:
        report = run(args.jobs, max(1, min(args.days, args.jobs)), Path(tmp))
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    b, r = report["baseline_s"], report["ratio"]
    print(f"{report['jobs']:,} sacct job records in {report['files']} daily files, SQLite, "
          f"Python {report['python']}, SQLite {report['sqlite']}")
    print(f"  ingest (import_sacct_files){report['ingest_s']:9.2f} s  {report['ingest_jobs_per_s']:>9,} jobs/s  "
          f"x{r['ingest']} of bare executemany ({b['ingest']:.2f} s); CPU {report['ingest_cpu_s']:.1f} s "
          f"({report['ingest_children_cpu_s']:.1f} s of it in the parsing process), x{r['ingest_cpu']}")
    print(f"  usage account,gpu-type/mo  {report['usage_s']:9.3f} s  x{r['usage']} of plain GROUP BY "
          f"({b['usage']:.3f} s)")
    print(f"  acct, one-day window       {report['acct_window_s']:9.3f} s  x{r['acct_window']} of plain SELECT "
          f"({b['acct']:.3f} s), {report['rows']['acct']:,} jobs")
    print(f"  audit gpus gpu010:0,1      {report['audit_gpus_s']:9.4f} s  x{r['audit_gpus']} of indexed lookup "
          f"({b['audit_gpus']:.4f} s)")
    print(f"  peak RSS {report['peak_rss_mib']} MiB (during ingest and queries: "
          f"{report['peak_rss_ingest_and_queries_mib']} MiB); ledger {report['ledger_mib']} MiB; targets {report['targets']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
