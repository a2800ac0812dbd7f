"""Rendering an ``Explanation``: rich tables for people, a JSON-ready dict for machines."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from gpupool.explain.run import Explanation, describe_topology_request

OUTCOME_WORDS = {
    "nofit": "does not fit",
    "no_candidates": "no preemption candidates",
    "preempting": "preempting (admitted once its victims are gone)",
    "skipped": "skipped this cycle",
    "blocked": "not scheduled",
    "inactive": "ClusterQueue inactive",
    "queued": "queued",
}


def to_json(x: Explanation) -> dict:
    data = x.to_dict()
    data["summary"] = summary(x)
    return data


def summary(x: Explanation) -> dict:
    return {
        "cycles_run": len(x.cycles),
        "admitted": sum(len(c.admissions) for c in x.cycles),
        "evicted": sum(len(c.evictions) for c in x.cycles),
        "still_pending": len(x.pending),
        "inadmissible": sum(1 for w in x.pending if w.queue_state == "inadmissible"),
    }


def _flavors(pod_sets) -> str:
    parts = []
    for p in pod_sets:
        by_flavor: dict[str, list[str]] = {}
        for r, f in sorted(p.flavors.items()):
            by_flavor.setdefault(f, []).append(f"{r}={p.usage.get(r, '?')}")
        inner = "; ".join(f"{f}: {', '.join(rs)}" for f, rs in by_flavor.items())
        parts.append(f"{p.name}×{p.count} → {inner}")
        if p.topology_request and (len(p.topology_request) > 1 or "podSetGroupName" in p.topology_request
                                   or "podSetSliceRequiredTopology" in p.topology_request):
            parts.append(f"  topology request: {describe_topology_request(p.topology_request)}")
        if p.topology:
            doms = ", ".join(f"{'/'.join(d['values'])}×{d['count']}" for d in p.topology["domains"])
            parts.append(f"  topology ({'/'.join(p.topology['levels'])}): {doms}")
    return "\n".join(parts)


def print_explanation(x: Explanation, out: Console) -> None:
    mode = "fair sharing" if x.fair_sharing else "classic preemption"
    out.print(f"[bold]explain[/]: {len(x.admitted_before)} admitted, "
              f"{len(x.pending_before)} pending before the first cycle; {mode}"
              + ("; waitForPodsReady.blockAdmission on" if x.block_admission else "")
              + (f"; admission fair sharing in {', '.join(x.admission_fair_sharing)} (LocalQueue usage "
                 "before priority)" if x.admission_fair_sharing else ""), highlight=False)
    many = x.cycles_requested > 1
    for c in x.cycles:
        title = f"cycle {c.number}" if many else "next scheduling cycle"
        if c.note:
            out.print(f"[bold]{title}[/]: {c.note}", highlight=False)
            continue
        if not (c.admissions or c.evictions or (c.attempts and not many)):
            out.print(f"[bold]{title}[/]: heads {', '.join(c.heads)}; nothing admitted or evicted", highlight=False)
        if c.admissions:
            t = Table("workload", "ClusterQueue", "priority", "pod sets → flavor: usage", "borrows",
                      title=f"{title}: admitted", title_justify="left")
            for a in c.admissions:
                t.add_row(a.workload, a.cluster_queue, str(a.priority), _flavors(a.pod_sets), "yes" if a.borrowing else "")
            out.print(t)
        if c.evictions:
            t = Table("workload", "ClusterQueue", "priority", "reason", "preempted by", "frees",
                      title=f"{title}: evicted (Preempted)", title_justify="left")
            for e in c.evictions:
                t.add_row(e.workload, e.cluster_queue, str(e.priority), e.reason,
                          f"{e.preemptor} ({e.preemptor_cluster_queue})",
                          ", ".join(f"{r}={v}" for r, v in e.freed.items()))
            out.print(t)
    if x.pending:
        t = Table("workload", "ClusterQueue", "priority", "outcome", "queue", "why it waits (QuotaReserved=False message)",
                  title="still pending" + (f" after {len(x.cycles)} cycles" if many else ""), title_justify="left")
        for w in x.pending:
            msg = w.message
            if w.local_queue_usage is not None:
                msg += f" [LocalQueue usage {w.local_queue_usage:g}]"
            t.add_row(w.workload, w.cluster_queue, str(w.priority), OUTCOME_WORDS.get(w.outcome, w.outcome),
                      w.queue_state, msg)
        out.print(t)
    else:
        out.print("nothing left pending", highlight=False)
    if x.notes:
        out.print(f"[dim]{len(x.notes)} note(s): " + "; ".join(x.notes[:5])
                  + (" …" if len(x.notes) > 5 else "") + "[/]", highlight=False)
