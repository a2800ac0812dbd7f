"""Which QOS a job gets and may name: association QOS lists and DefaultQOS (own or inherited
from the accounts above, as slurmdbd fills them), QOS names in any case, and a QOS the dump
lacks, with and without ``AccountingStorageEnforce=qos``.

Probe p94 (2026-12-04): a real Slurm 22.05.8 (Debian packages, ``gpupool.conformance.real_slurm``
with slurmdbd and a x10 clock) on the seed pool with ml-platform's DefaultQOS set to scavenger,
an account ``solo`` with QOS='scavenger' and no DefaultQOS, and the submitting user's
association in ml-research narrowed to QOS=normal. ``sacctmgr show assoc`` then listed every
user association with its account's QOS list and DefaultQOS, the narrowed one with its own;
sbatch answered as asserted below (the users here stand for that submitter in each account)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.errors import InputError
from gpupool.formats.pool_dir import load_pool
from gpupool.policy.slurm.limits import MSG_ACCOUNT, MSG_QOS
from gpupool.policy.slurm.submit_check import submit_rejection
from tests.unit.sbatch_plans import workload
from tests.unit.test_slurm_req_tres import _edit, _seed_copy

_SOLO = ("Account - 'ml-platform':Description='Platform and tooling':Organization='ml':Fairshare=20:MaxJobs=20:"
         "QOS='normal,scavenger':DefaultQOS='normal'",
         "Account - 'ml-platform':Description='Platform and tooling':Organization='ml':Fairshare=20:MaxJobs=20:"
         "QOS='normal,scavenger':DefaultQOS='scavenger'\n"
         "Account - 'solo':Description='one QOS':Organization='ml':Fairshare=5:QOS='scavenger'")
_USERS = ("User - 'dave':DefaultAccount='ml-platform':Fairshare=1",
          "User - 'dave':DefaultAccount='ml-platform':Fairshare=1\n"
          "Parent - 'ml-research'\n"
          "User - 'erin':DefaultAccount='ml-research':Fairshare=1:QOS='normal'\n"
          "Parent - 'solo'\n"
          "User - 'frank':DefaultAccount='solo':Fairshare=1")


def _pool(tmp_path, enforce: str = "associations,limits,qos,safe", part_qos: str | None = None):
    edits = [("AccountingStorageEnforce=associations,limits,qos,safe", f"AccountingStorageEnforce={enforce}")]
    pool_dir = _seed_copy(tmp_path, edits)
    if part_qos is not None:
        with open(pool_dir / "slurm.conf", "a") as f:
            f.write(f"PartitionName=extra Nodes=gpu[03-04] QOS={part_qos} State=UP\n")
    _edit(pool_dir / "accounts.cfg", [_SOLO, _USERS])
    return load_pool(pool_dir)


def _wl(user: str, opts: str, jid: int = 1):
    return replace(workload(f"j{jid}", f"--mem=100 -t 5 {opts}", 0.0, jid, runtime=60.0), user=user)


def _qos_of(pool, specs: list[tuple[str, str]]) -> dict[int, tuple[str, str | None]]:
    """(state, QOS) of each (user, options) job once run."""
    wls = [_wl(user, opts, k) for k, (user, opts) in enumerate(specs, 1)]
    pol = make_policy("slurm", pool)
    out = Engine(pool, wls, pol).run()
    return {j.id: (j.state, pol.req(j).qos) for j in out.jobs}


#: (user, options) -> what the real system answered: refused (MSG_QOS) or the job's QOS
P94 = [
    (("carol", "-A ml-serving --qos=high"), MSG_QOS),        # not in ml-serving's normal,serving
    (("carol", "-A ml-serving --qos=serving"), "serving"),
    (("carol", "-A ml-serving"), "normal"),                  # the account's DefaultQOS
    (("erin", "-A ml-research --qos=high"), MSG_QOS),        # its own list (normal) wins
    (("erin", "-A ml-research"), "normal"),
    (("dave", "-A ml-platform"), "scavenger"),               # the account's DefaultQOS, inherited
    (("dave", "-A ml-platform --qos=normal"), "normal"),
    (("dave", "-A ml-platform --qos=serving"), MSG_QOS),
    (("frank", "-A solo"), "scavenger"),                     # no DefaultQOS: the list's only QOS
    (("frank", "-A solo --qos=normal"), MSG_QOS),
    (("carol", "-A ml-serving --qos=nosuch"), MSG_QOS),
    (("carol", "-A ml-serving --qos=Serving"), "serving"),   # QOS names match in any case
]


def test_association_qos_lists_and_default_qos_as_the_real_system_gave_them(tmp_path):
    pool = _pool(tmp_path)
    for (user, opts), want in P94:
        why = submit_rejection(pool, _wl(user, opts))
        assert why == (want if want == MSG_QOS else None), (user, opts)
    accepted = [(spec, want) for spec, want in P94 if want != MSG_QOS]
    got = _qos_of(pool, [spec for spec, _want in accepted])
    assert [got[k] for k in range(1, len(accepted) + 1)] == [("COMPLETED", want) for _spec, want in accepted]


def test_the_account_is_checked_before_the_qos(tmp_path):
    """``_job_create`` validates the association, then the QOS."""
    assert submit_rejection(_pool(tmp_path), _wl("carol", "-A ml-research --qos=nosuch")) == MSG_ACCOUNT


def test_without_qos_enforcement_any_known_qos_runs_and_an_unknown_one_is_dropped(tmp_path):
    """``assoc_mgr_fill_in_qos`` fails on an unknown QOS only under ``qos``; without it the
    job runs with no QOS, and the association's list is not read."""
    pool = _pool(tmp_path, enforce="associations,limits")
    assert submit_rejection(pool, _wl("carol", "-A ml-serving --qos=high")) is None
    assert submit_rejection(pool, _wl("carol", "-A ml-serving --qos=nosuch")) is None
    got = _qos_of(pool, [("carol", "-A ml-serving --qos=high"), ("carol", "-A ml-serving --qos=nosuch"),
                         ("carol", "-A ml-serving --qos=SERVING")])
    assert got == {1: ("COMPLETED", "high"), 2: ("COMPLETED", None), 3: ("COMPLETED", "serving")}


def test_an_unknown_partition_qos_stops_slurmctld_only_under_qos_enforcement(tmp_path):
    with pytest.raises(InputError, match="partition 'extra' has QOS=nosuch.*AccountingStorageEnforce has qos"):
        _pool(tmp_path, part_qos="nosuch")
    pool = _pool(tmp_path / "b", enforce="associations,limits", part_qos="nosuch")
    assert any("partition 'extra' has QOS=nosuch" in note and "with no QOS" in note for note in pool.notes)
    got = _qos_of(pool, [("carol", "-A ml-serving -p extra")])
    assert got == {1: ("COMPLETED", "normal")}


def test_a_qos_requiring_a_reservation_refuses_every_job_here(tmp_path):
    """Flags=RequiresReservation: a job that names no reservation is refused ("Invalid qos
    specification") whatever is enforced; reservations are not modelled, so none names one.
    Probe p95 (a real 22.05.8, same day): ``--qos=resv`` was refused with that message, and
    accepted with ``--reservation=r1`` once ``scontrol create reservation`` had made r1."""
    for enforce in ("associations,limits,qos,safe", "associations"):
        pool = _pool(tmp_path / enforce.replace(",", "_"), enforce=enforce)
        pool.slurm.accounting.qos["high"].flags = ("RequiresReservation",)
        assert submit_rejection(pool, _wl("alice", "-A ml-research --qos=high")) == MSG_QOS
        assert submit_rejection(pool, _wl("alice", "-A ml-research --qos=normal")) is None


def test_a_tree_without_qos_lists_allows_normal_only(tmp_path):
    """slurmdbd gives a new cluster's root the QOS list ``normal``: with no list anywhere
    (the Cluster line's taken away), under ``qos`` only ``normal`` may be named, and a
    DefaultQOS outside the list gives way to it (review of 23c9390, source)."""
    pool_dir = _seed_copy(tmp_path, [])
    _edit(pool_dir / "accounts.cfg", [("Cluster - 'seed':Fairshare=1:QOS='normal'", "Cluster - 'seed':Fairshare=1"),
                                      (":QOS='normal,high,scavenger':DefaultQOS='normal'", ":DefaultQOS='high'"),
                                      (":QOS='normal,serving':DefaultQOS='normal'", ""),
                                      (":QOS='normal,scavenger':DefaultQOS='normal'", "")])
    pool = load_pool(pool_dir)
    assert submit_rejection(pool, _wl("carol", "-A ml-serving --qos=serving")) == MSG_QOS
    assert submit_rejection(pool, _wl("alice", "-A ml-research --qos=normal")) is None
    assert _qos_of(pool, [("alice", "-A ml-research")]) == {1: ("COMPLETED", "normal")}


def test_qos_names_in_lists_defaults_and_partitions_match_in_any_case(tmp_path):
    pool_dir = _seed_copy(tmp_path, [])
    with open(pool_dir / "slurm.conf", "a") as f:
        f.write("PartitionName=extra Nodes=gpu[03-04] QOS=Scavenger State=UP\n")
    _edit(pool_dir / "accounts.cfg", [(":QOS='normal,serving':DefaultQOS='normal'", ":QOS='Normal,Serving':DefaultQOS='SERVING'")])
    pool = load_pool(pool_dir)
    assert pool.slurm.partitions["extra"].qos == "scavenger"
    assert submit_rejection(pool, _wl("carol", "-A ml-serving --qos=serving")) is None
    assert _qos_of(pool, [("carol", "-A ml-serving")]) == {1: ("COMPLETED", "serving")}


def test_a_qos_list_relative_to_the_inherited_one_is_refused_with_its_line(tmp_path):
    pool_dir = _seed_copy(tmp_path, [])
    _edit(pool_dir / "accounts.cfg", [("User - 'dave':DefaultAccount='ml-platform':Fairshare=1",
                                       "User - 'dave':DefaultAccount='ml-platform':Fairshare=1:QOS='+high'")])
    with pytest.raises(InputError, match=r"accounts.cfg:\d+.*QOS='\+high'.*write the full list"):
        load_pool(pool_dir)


def test_the_live_usage_goes_to_the_qos_the_policy_gives(tmp_path):
    """The daemon rebuilds usage from its records with the QOS a job got, the inherited
    DefaultQOS included (scavenger's UsageFactor 0.5 for dave, not normal's 1.0)."""
    from gpupool.live.fairshare import _association

    acct = _pool(tmp_path).slurm.accounting
    assert _association(acct, "", "dave", "") == (("ml-platform", "dave"), "scavenger")
    assert _association(acct, "ml-serving", "carol", "SERVING") == (("ml-serving", "carol"), "serving")


# ---------------------------------------------------------------- AllowQos, DenyQos, AllowAccounts
#: probe p98 (a real 22.05.8, same day): three partitions on gpu[03-04], each job alone, under
#: EnforcePartLimits=ALL and =NO; (user, options) -> (answer under ALL, state and reason under NO)
_P98_CONF = ("PartitionName=aq Nodes=gpu[03-04] AllowQos=high MaxTime=60 State=UP\n"
             "PartitionName=dq Nodes=gpu[03-04] DenyQos=normal MaxTime=60 State=UP\n"
             "PartitionName=aa Nodes=gpu[03-04] AllowAccounts=ml-serving MaxTime=60 State=UP\n")
P98 = [
    (("alice", "-A ml-research -p aq --qos=normal"), MSG_QOS, ("PENDING", "QOSNotAllowed")),
    (("alice", "-A ml-research -p aq --qos=high"), None, ("RUNNING", "aq")),
    (("alice", "-A ml-research -p dq --qos=normal"), MSG_QOS, ("PENDING", "QOSNotAllowed")),
    (("alice", "-A ml-research -p dq --qos=high"), None, ("RUNNING", "dq")),
    (("alice", "-A ml-research -p aa"), MSG_ACCOUNT, ("PENDING", "AccountNotAllowed")),
    (("carol", "-A ml-serving -p aa"), None, ("RUNNING", "aa")),
    (("alice", "-A ml-research -p aq,train --qos=normal"), MSG_QOS, ("RUNNING", "train")),
]


def _access_pool(tmp_path, enforce_part_limits: str):
    pool_dir = _seed_copy(tmp_path, [])
    conf = pool_dir / "slurm.conf"
    conf.write_text(f"EnforcePartLimits={enforce_part_limits}\n" + conf.read_text() + _P98_CONF
                    + "PartitionName=odd Nodes=gpu[03-04] AllowQos=nosuch,HIGH State=UP\n")
    return load_pool(pool_dir)


def test_partition_qos_and_account_lists_as_the_real_system_gave_them(tmp_path):
    strict = _access_pool(tmp_path / "all", "ALL")
    for (user, opts), refused, _later in P98:
        assert submit_rejection(strict, _wl(user, opts)) == refused, opts
    loose = _access_pool(tmp_path / "no", "NO")
    wls = [_wl(user, opts, k) for k, ((user, opts), _refused, _later) in enumerate(P98, 1)]
    for wl in wls:
        assert submit_rejection(loose, wl) is None
    pol = make_policy("slurm", loose)
    out = Engine(loose, wls, pol, until=20).run()
    got = {j.id: (j.state, j.reason if j.state == "PENDING" else pol.part_of(j)) for j in out.jobs}
    assert [got[k] for k in range(1, len(P98) + 1)] == [later for _spec, _refused, later in P98]


def test_an_allow_qos_name_the_dump_lacks_is_noted_and_ignored(tmp_path):
    """slurmctld skips such a name ("Ignoring invalid Allow/DenyQOS value") and finds the
    others in any case: ``odd`` takes QOS high only."""
    pool = _access_pool(tmp_path, "NO")
    assert pool.slurm.partitions["odd"].allow_qos == ("nosuch", "high")
    assert any("AllowQos names QOS 'nosuch'" in note for note in pool.notes)
    pol = make_policy("slurm", pool)
    out = Engine(pool, [_wl("alice", "-A ml-research -p odd --qos=high", 1),
                        _wl("alice", "-A ml-research -p odd --qos=normal", 2)], pol, until=20).run()
    assert {j.id: (j.state, j.reason) for j in out.jobs} == {1: ("RUNNING", ""), 2: ("PENDING", "QOSNotAllowed")}


def test_the_ledger_records_the_account_and_qos_a_job_got(tmp_path):
    """sacct shows the QOS and account slurmctld gave a job, not a blank where it named none
    (dave: ml-platform's inherited DefaultQOS scavenger), and fair share charges that QOS's
    UsageFactor; a Kueue-only run records what was submitted."""
    from gpupool.ledger.record import JobTres

    pool = _pool(tmp_path)
    tres = JobTres(pool, "slurm")
    assert tres.account_qos(_wl("dave", "")) == ("ml-platform", "scavenger")
    assert tres.account_qos(_wl("carol", "-A ml-serving --qos=Serving")) == ("ml-serving", "serving")
    assert JobTres(pool, "kueue").account_qos(_wl("dave", "")) == ("", "")


def test_qos_lists_of_partitions_are_ignored_where_no_qos_exists(tmp_path):
    """``qos_list_build``: "We have no QOS on the system Ignoring invalid Allow/DenyQOS
    value(s)"; a pool without accounting runs the job (review of fd116b1)."""
    from tests.unit.sbatch_plans import slurm_pool

    conf = ("ClusterName=bare\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core_Memory\nGresTypes=gpu\n"
            "NodeName=n[1-2] CPUs=16 RealMemory=64000 Gres=gpu:8\n"
            "PartitionName=p Nodes=n[1-2] Default=YES MaxTime=60 AllowQos=high\n")
    pool = slurm_pool(tmp_path, conf)
    assert pool.slurm.partitions["p"].allow_qos is None
    assert any("AllowQos=high: with no QOS defined slurmctld ignores it" in note for note in pool.notes)
    out = Engine(pool, [_wl("alice", "-p p", 1)], make_policy("slurm", pool), until=20).run()
    assert [j.state for j in out.jobs] == ["RUNNING"]


def test_the_synthetic_generator_picks_partitions_that_take_the_qos(tmp_path):
    """A submitter whose QOS a partition denies goes to one that allows it (review of fd116b1:
    ml-platform's scavenger jobs were all put in ``train``, which denies scavenger)."""
    from gpupool.policy.slurm.limits import qos_not_allowed
    from gpupool.workload.synthetic import PRESETS, generate

    pool_dir = _seed_copy(tmp_path, [("PartitionName=train Nodes=gpu[01-04] Default=YES",
                                      "PartitionName=train Nodes=gpu[01-04] Default=YES DenyQos=scavenger")])
    with open(pool_dir / "slurm.conf", "a") as f:
        f.write("PartitionName=scavenge Nodes=gpu[01-04] AllowQos=scavenger MaxTime=2-00:00:00 State=UP\n")
    _edit(pool_dir / "accounts.cfg", [_SOLO])
    pool = load_pool(pool_dir)
    jobs = [w for w in generate(pool, replace(PRESETS["day"], seed=3)) if w.kind == "batch"]
    assert {w.qos for w in jobs if w.account == "ml-platform"} == {"scavenger"}
    assert {w.partition for w in jobs if w.account == "ml-platform"} == {"scavenge"}
    parts = pool.slurm.partitions
    assert not [w for w in jobs if w.qos and qos_not_allowed(parts[w.partition], w.qos)]


def test_the_generator_reads_the_qos_a_submitter_gets_without_naming_one(tmp_path):
    """frank names no QOS; his account's only QOS is scavenger, which ``train`` denies
    (review of debedd4: his jobs were all put in ``train``)."""
    from gpupool.workload.synthetic import PRESETS, generate

    pool_dir = _seed_copy(tmp_path, [("PartitionName=train Nodes=gpu[01-04] Default=YES",
                                      "PartitionName=train Nodes=gpu[01-04] Default=YES DenyQos=scavenger")])
    with open(pool_dir / "slurm.conf", "a") as f:
        f.write("PartitionName=scavenge Nodes=gpu[01-04] AllowQos=scavenger MaxTime=2-00:00:00 State=UP\n")
    _edit(pool_dir / "accounts.cfg", [_SOLO, _USERS])
    pool = load_pool(pool_dir)
    jobs = [w for w in generate(pool, replace(PRESETS["day"], seed=3)) if w.user == "frank"]
    assert jobs and {w.partition for w in jobs} == {"scavenge"}
