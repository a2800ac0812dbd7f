"""Policy versions of examples/seed-pool variants: commit, log, semantic diff."""
from __future__ import annotations

import json
import shutil

from gpupool.ledger import policy as pol

from .conftest import SEED_POOL


def _variant(tmp_path, name="v2"):
    target = tmp_path / name / "seed-pool"
    shutil.copytree(SEED_POOL, target, ignore=shutil.ignore_patterns("workloads"))
    kueue = target / "kueue.yaml"
    text = kueue.read_text()
    assert text.count("borrowingLimit: 8") == 1
    kueue.write_text(text.replace("borrowingLimit: 8", "borrowingLimit: 16"))
    accounts = target / "accounts.cfg"
    text = accounts.read_text()
    accounts.write_text(text.replace("Preempt='normal':PreemptMode='REQUEUE':MaxTRESPerUser=gres/gpu=16:MaxWall",
                                     "Preempt='normal,scavenger':PreemptMode='REQUEUE':MaxTRESPerUser=gres/gpu=16:MaxWall")
                        .replace("Account - 'ml-platform':Description='Platform and tooling':Organization='ml':Fairshare=20",
                                 "Account - 'ml-platform':Description='Platform and tooling':Organization='ml':Fairshare=10"))
    return target


def test_commit_log_and_semantic_diff(ledger, tmp_path):
    v1, created = pol.commit(ledger, SEED_POOL, "initial pool", author="alice", at=1000.0)
    assert created and v1.pool == "seed-pool" and v1.parent is None
    same, created = pol.commit(ledger, SEED_POOL, "again", author="alice", at=2000.0)
    assert not created and same.version == v1.version
    v2, created = pol.commit(ledger, _variant(tmp_path), "let training borrow more", author="bob", at=3000.0)
    assert created and v2.parent == v1.version and v2.tree != v1.tree
    assert [v.message for v in pol.log(ledger)] == ["let training borrow more", "initial pool"]
    lines = pol.diff_versions(ledger, v1, v2)
    assert lines == [
        "QOS high: Preempt += scavenger",
        "Account ml-platform: Fairshare 20 → 10",
        "ClusterQueue training: nvidia.com/gpu borrowingLimit 8 → 16",
    ]
    assert pol.diff_versions(ledger, v2, v1)[0] == "QOS high: Preempt -= scavenger"
    assert pol.resolve(ledger, "HEAD~1").version == v1.version
    assert pol.resolve(ledger, v2.version[:8]).version == v2.version
    with ledger.read() as conn:  # blobs are shared: only the two changed files were added
        import sqlalchemy as sa

        from gpupool.ledger import schema as s

        assert conn.execute(sa.select(sa.func.count()).select_from(s.policy_blobs)).scalar_one() == len(v1.files) + 2


def test_diff_objects_added_and_removed(tmp_path):
    from gpupool.formats.pool_dir import load_pool

    target = tmp_path / "seed-pool"
    shutil.copytree(SEED_POOL, target, ignore=shutil.ignore_patterns("workloads"))
    (target / "accounts.cfg").write_text((target / "accounts.cfg").read_text().replace(
        "QOS - 'normal'", "QOS - 'urgent':Priority=500\nQOS - 'normal'"))
    lines = pol.diff_pools(load_pool(SEED_POOL), load_pool(target))
    assert len(lines) == 1 and lines[0].startswith("+ QOS urgent (") and "Priority=500" in lines[0]
    assert pol.diff_pools(load_pool(target), load_pool(SEED_POOL)) == ["- QOS urgent"]


def test_policy_cli(db_url, tmp_path, cli):
    out = cli("policy", "commit", SEED_POOL, "-m", "initial", "--author", "alice", "--db", db_url, "--json").output
    v1 = json.loads(out)
    assert v1["created"] and v1["author"] == "alice"
    cli("policy", "commit", _variant(tmp_path), "-m", "borrow 16", "--author", "bob", "--db", db_url)
    log = json.loads(cli("policy", "log", "--db", db_url, "--json").output)
    assert [v["message"] for v in log] == ["borrow 16", "initial"]
    diff = json.loads(cli("policy", "diff", v1["short"], "HEAD", "--db", db_url, "--json").output)
    assert "ClusterQueue training: nvidia.com/gpu borrowingLimit 8 → 16" in diff["changes"]
    text = cli("policy", "diff", "HEAD~1", "HEAD", "--db", db_url).output
    assert "QOS high: Preempt += scavenger" in text
    # a directory on disk diffs against a stored version too
    text = cli("policy", "diff", "HEAD", SEED_POOL, "--db", db_url).output
    assert "borrowingLimit 16 → 8" in text
    for cmd in (["acct"], ["share"], ["usage"], ["policy", "commit"], ["policy", "log"], ["policy", "diff"],
                ["audit", "job"], ["audit", "gpus"], ["import", "sacct"], ["import", "sshare"], ["import", "kueue"]):
        help_text = cli(*cmd, "--help").output
        assert "--json" in help_text and "--db" in help_text, cmd


def test_diff_shows_a_qos_preempt_exempt_time_change(tmp_path):
    from gpupool.formats.pool_dir import load_pool

    target = tmp_path / "seed-pool"
    shutil.copytree(SEED_POOL, target, ignore=shutil.ignore_patterns("workloads"))
    (target / "accounts.cfg").write_text((target / "accounts.cfg").read_text().replace(
        "QOS - 'normal':Description='Default QOS'", "QOS - 'normal':Description='Default QOS':PreemptExemptTime=10"))
    assert pol.diff_pools(load_pool(SEED_POOL), load_pool(target)) == ["QOS normal: PreemptExemptTime (unset) → 00:10:00"]
