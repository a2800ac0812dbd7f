"""Slurm's ``--constraint`` and ``--nodelist`` as gpupool reads them from sbatch scripts: the
parts of the syntax it models, checked where the script is read so an error names its line
(the policy applies them: ``policy/slurm/node_filter.py``)."""
from __future__ import annotations

from gpupool.errors import InputError
from gpupool.formats.hostlist import expand_hostlist


def parse_constraint(text: str) -> tuple[str, list[str]]:
    """``--constraint`` as ("&" or "|", feature names): one name, names joined by ``&`` (all)
    or by ``|`` (any). Raises ValueError for what gpupool does not model (brackets, counts,
    parentheses, both operators), naming it."""
    text = text.strip()
    for bad, what in (("[", "matching OR brackets"), ("(", "parentheses"), ("*", "feature counts"),
                      (",", "a comma (Slurm joins features with & or |)")):
        if bad in text:
            raise ValueError(f"--constraint={text}: gpupool does not model {what}; use feature names "
                             "joined by & or by |")
    if "&" in text and "|" in text:
        raise ValueError(f"--constraint={text}: gpupool does not model & and | in one expression")
    op = "|" if "|" in text else "&"
    names = [n.strip() for n in text.split(op)]
    if not all(names):
        raise ValueError(f"--constraint={text}: an empty feature name")
    return op, names


def check_sbatch_limits(source: str, lines: dict[str, int], nodelist: str | None, exclude: str | None,
                        constraint: str | None, nodes_max: int | None, one_per_node: bool,
                        pods: int) -> None:
    """The sbatch-side checks, each error naming the option's line (``lines``: option -> line):
    hostlists that parse, a constraint gpupool models, and no more required nodes than the
    job's node count (sbatch's own "invalid number of nodes (-N L-N)")."""
    if constraint:
        try:
            parse_constraint(constraint)
        except ValueError as exc:
            raise InputError(source, str(exc), line=lines.get("constraint")) from None
    counts = {}
    for option, text in (("nodelist", nodelist), ("exclude", exclude)):
        if not text:
            continue
        try:
            counts[option] = len(set(expand_hostlist(text)))  # (sbatch's ``hostlist_uniq``)
        except (InputError, ValueError) as exc:
            raise InputError(source, f"--{option}={text}: {exc}", line=lines.get(option)) from None
    count = counts.get("nodelist")
    if count is None:
        return
    line = lines.get("nodelist")
    if one_per_node and nodes_max is not None and count > nodes_max:
        # (only --nodes leaves fewer nodes than the list: without it the reader gives each
        # listed node a pod, ``sbatch.job_pod_set``)
        raise InputError(source, f"invalid number of nodes (-N {count}-{nodes_max}): --nodelist names "
                         f"{count} nodes", line=line)
    if not one_per_node and count > pods:
        raise InputError(source, f"--nodelist names {count} nodes for {pods} task(s): give --nodes or "
                         "--ntasks of at least that many", line=line)
