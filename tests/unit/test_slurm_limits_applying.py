"""``SlurmPolicy.limits_applying`` lets a job that no QOS or association limit concerns skip
the limit check: it must never skip a limit that could hold the job back.

The check runs for every queue record at every pass and backfill cycle, so the policy keeps,
per (QOS, user, account), the QOS and associations the check reads, or None when none of them
sets a limit (a speed-up). With usage so high that any usage limit set is exceeded, the full
check names no reason where ``limits_applying`` is None; and at any usage the check as a pass
makes it names the full check's reason.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool
from gpupool.policy.slurm import limits
from gpupool.workload.synthetic import generate, parse_synthetic_spec

REPO = Path(__file__).resolve().parents[2]

#: association limits added to the example's accounts, one kind per line: a user's MaxJobs,
#: an account's GrpTRES, another account's GrpJobs and MaxWall, a user's MaxTRESPerJob
_EXTRA = {
    "User - 'ben':DefaultAccount='llm':Fairshare=1": ":MaxJobs=3",
    "Account - 'speech':Description='Speech research':Organization='research':Fairshare=10:QOS='normal'"
    ":DefaultQOS='normal'": ":GrpTRES=gres/gpu=16",
    "Account - 'vision':Description='Vision research':Organization='research':Fairshare=20:QOS='normal,high'"
    ":DefaultQOS='normal'": ":GrpJobs=40:MaxWall=2-00:00:00",
    "User - 'gus':DefaultAccount='serving':Fairshare=1": ":MaxTRESPerJob=gres/gpu=4",
}


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    pool_dir = tmp_path_factory.mktemp("limits") / "pool"
    shutil.copytree(REPO / "examples" / "large-pool", pool_dir)
    accounts = pool_dir / "accounts.cfg"
    text = accounts.read_text()
    for line, extra in _EXTRA.items():
        assert line in text, line
        text = text.replace(line, line + extra)
    accounts.write_text(text)
    pool = load_pool(pool_dir)
    pol = make_policy("slurm", pool)
    jobs = generate(pool, parse_synthetic_spec("synthetic:day?seed=5&jobs=400"))
    out = Engine(pool, jobs, pol).run()
    return pol, out.jobs


def _flooded(pol, req) -> dict:
    """Usage far over any limit, in every slot the check reads for ``req``."""
    full = {"jobs": 10**6, "cpu": 10**9, "mem": 10**12, "node": 10**6, "gres/gpu": 10**6, "billing": 10**9}
    usage = {("qu", req.qos, req.user): dict(full), ("q", req.qos): dict(full),
             ("a", req.account, req.user): dict(full)}
    for acc in pol.account_chain(req.account):
        usage[("acc", acc)] = dict(full)
    return usage


def _pair(pol, req, info) -> tuple:
    """The job's QOS and its partition's, in the order the check reads them."""
    return limits.qos_order(pol.qos.get(req.qos or ""), pol.qos.get(info.part.qos or ""))


def test_no_limit_is_skipped(ran) -> None:
    pol, jobs = ran
    kinds = {"held": 0, "free": 0}
    for job in jobs:
        req = pol.req(job)
        info = pol.parts[req.parts[0]]
        full = limits.check(req, pol.time_limit(job, info), _pair(pol, req, info), pol.assoc_limits(req),
                            _flooded(pol, req))
        applies = pol.limits_applying(req, info)
        if applies is None:
            assert full is None, (req.qos, req.user, req.account, full)
            kinds["free"] += 1
        elif full is not None:
            kinds["held"] += 1
    assert kinds["free"] and kinds["held"]  # both kinds of job were met


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_the_check_through_the_memo_gives_the_full_answer(ran, data) -> None:
    """At any usage, the check as a pass makes it (skipped where nothing applies, else on the
    memoised QOS and associations) names the reason the full check names."""
    pol, jobs = ran
    job = data.draw(st.sampled_from(jobs))
    req = pol.req(job)
    info = pol.parts[req.parts[0]]
    count = st.integers(min_value=0, max_value=200)
    slot = st.fixed_dictionaries({"jobs": count, "gres/gpu": count, "cpu": count, "mem": st.integers(0, 10**7)})
    usage = {("qu", req.qos, req.user): data.draw(slot), ("q", req.qos): data.draw(slot),
             ("a", req.account, req.user): data.draw(slot)}
    for acc in pol.account_chain(req.account):
        usage[("acc", acc)] = data.draw(slot)
    tl = pol.time_limit(job, info)
    applies = pol.limits_applying(req, info)
    through_memo = None if applies is None else limits.check(req, tl, applies[0], applies[1], usage)
    assert through_memo == limits.check(req, tl, _pair(pol, req, info), pol.assoc_limits(req), usage)
