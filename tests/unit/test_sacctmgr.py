"""sacctmgr dump files: the account tree, users, QOS lines, errors and round trips."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpupool.errors import InputError, MissingReferenceError
from gpupool.formats.sacctmgr import format_tres, parse_sacctmgr_dump, parse_tres, render_sacctmgr_dump
from gpupool.model.slurm import Accounting, Association, Qos, User

SEED = Path(__file__).resolve().parents[2] / "examples" / "seed-pool" / "accounts.cfg"

REAL_DUMP = """\
# To edit this file start with a cluster line for the new cluster
# Cluster - 'cluster_name':MaxTRESPerJob=node=50
# Parent - 'root'
Cluster - 'hpc':Fairshare=1:QOS='normal':Classification=capacity
Parent - 'root'
User - 'root':DefaultAccount='root':AdminLevel='Administrator':Fairshare=1
Account - 'physics':Description='physics group':Organization='cas':Fairshare=100:GrpTRES=cpu=512,mem=2T,gres/gpu:a100=8:GrpTRESMins=cpu=1000000
Parent - 'physics'
Account - 'theory':Description='theory':Organization='cas':Fairshare=parent:MaxWallDurationPerJob=1440
User - 'ann':DefaultAccount='physics':Coordinator='physics':Fairshare=2:MaxJobs=4:MaxTRESPerJob=gres/gpu=4
Parent - 'theory'
User - 'ann':DefaultAccount='physics':Fairshare=1:QOS='normal,long':DefaultQOS='normal'
"""


def write(tmp_path: Path, text: str, name: str = "accounts.cfg") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def canon(acct: Accounting) -> tuple:
    """What a round trip must keep (file order of user associations aside)."""
    key = lambda a: (a.account, a.user or "", a.extra.get("Partition", ""))  # noqa: E731
    return (acct.cluster, acct.accounts, acct.users, sorted(acct.user_associations, key=key), acct.qos)


def test_seed_pool() -> None:
    acct = parse_sacctmgr_dump(SEED)
    assert acct.cluster == "seed"
    assert set(acct.accounts) == {"root", "ml-research", "ml-serving", "ml-platform"}
    assert [a.account for a in acct.children("root")] == ["ml-research", "ml-serving", "ml-platform"]
    assert [a.fairshare for a in acct.children("root")] == [50, 30, 20]
    assert acct.accounts["ml-research"].grp_tres == {"gres/gpu": 24}
    by_user = {(a.user, a.account) for a in acct.user_associations}
    assert {("alice", "ml-research"), ("bob", "ml-research"), ("carol", "ml-serving"),
            ("dave", "ml-platform")} <= by_user
    assert acct.users["carol"].default_account == "ml-serving"
    assert acct.qos["normal"].priority == 0
    high = acct.qos["high"]
    assert (high.priority, high.preempt, high.preempt_mode) == (100, ("normal",), "REQUEUE")
    serving = acct.qos["serving"]
    assert (serving.priority, serving.preempt, serving.max_tres_per_user) == (200, ("normal",), {"gres/gpu": 16})
    assert acct.qos["scavenger"].usage_factor == 0.5
    assert acct.not_modelled == []


def test_real_dump_layout(tmp_path: Path) -> None:
    path = write(tmp_path, REAL_DUMP)
    acct = parse_sacctmgr_dump(path)
    assert acct.accounts["root"].qos == ("normal",)
    assert acct.accounts["root"].extra == {"Classification": "capacity"}
    physics = acct.accounts["physics"]
    assert physics.grp_tres == {"cpu": 512, "mem": 2 * 1024 * 1024, "gres/gpu:a100": 8}
    assert physics.extra == {"GrpTRESMins": "cpu=1000000"}
    assert (physics.description, physics.organization, physics.parent) == ("physics group", "cas", "root")
    theory = acct.accounts["theory"]
    assert (theory.parent, theory.fairshare, theory.max_wall) == ("physics", "parent", 86400)
    ann = [a for a in acct.user_associations if a.user == "ann"]
    assert [(a.account, a.fairshare) for a in ann] == [("physics", 2), ("theory", 1)]
    assert ann[0].max_jobs == 4 and ann[0].max_tres_per_job == {"gres/gpu": 4}
    assert ann[1].qos == ("normal", "long") and ann[1].default_qos == "normal"
    assert acct.users["ann"] == User("ann", "physics", "None", {"Coordinator": "physics"})
    assert acct.users["root"].admin_level == "Administrator"
    assert [key for _, key in acct.not_modelled] == ["Cluster:Classification", "Account:GrpTRESMins",
                                                      "User:Coordinator"]
    assert acct.not_modelled[0][0] == f"{path}:4"


def test_qos_lines_with_short_names(tmp_path: Path) -> None:
    acct = parse_sacctmgr_dump(write(tmp_path, """\
QOS - 'high':Priority=100:Preempt='normal,low':PreemptMode=requeue:GrpTRES=gres/gpu=32:MaxTRESPerUser=gres/gpu=8:MaxWall=2-00:00:00:UsageFactor=2.0:GraceTime=300:Flags=DenyOnLimit,NoReserve:MaxJobsPerUser=5:MaxSubmitJobsPerUser=10:MaxTRESPerJob=cpu=64,mem=500G:MinTRESPerJob=gres/gpu=1
QOS - 'low':UsageFactor=0.5:GraceTime=00:02:00
Cluster - 'c'
"""))
    high = acct.qos["high"]
    assert high == Qos(
        name="high", priority=100, preempt=("normal", "low"), preempt_mode="REQUEUE", grp_tres={"gres/gpu": 32},
        max_tres_per_user={"gres/gpu": 8}, max_tres_per_job={"cpu": 64, "mem": 512000}, max_jobs_per_user=5,
        max_submit_jobs_per_user=10, max_wall=2 * 86400, usage_factor=2.0, grace_time=300,
        flags=("DenyOnLimit", "NoReserve"), min_tres_per_job={"gres/gpu": 1},
    )
    assert acct.qos["low"].grace_time == 120
    assert "root" in acct.accounts and acct.accounts["root"].fairshare == 1


def test_qos_flags_match_as_sacctmgr_does_and_unmodelled_ones_are_noted(tmp_path: Path) -> None:
    """Each word sets the first flag whose name it contains, any case; a word naming none is
    dropped with a note; the flags the policy does not act on are noted."""
    acct = parse_sacctmgr_dump(write(tmp_path, """\
QOS - 'a':Flags=denyonlimit,OVERPARTQOS,NoDecay,Bogus
QOS - 'b':Flags=-1
Cluster - 'c'
"""))
    assert acct.qos["a"].flags == ("DenyOnLimit", "OverPartQOS", "NoDecay")
    assert acct.qos["b"].flags == ()
    labels = [label for _where, label in acct.not_modelled]
    assert "QOS:Flags=NoDecay" in labels
    assert any(label.startswith("QOS:Flags=Bogus (names no QOS flag") for label in labels)
    assert not any("DenyOnLimit" in label or "OverPartQOS" in label for label in labels)
    with pytest.raises(InputError, match="names no QOS flag"):
        parse_sacctmgr_dump(write(tmp_path, "QOS - 'a':Flags=Bogus\nCluster - 'c'\n"))
    with pytest.raises(InputError, match="names no QOS flag"):  # sacctmgr refuses an empty value too
        parse_sacctmgr_dump(write(tmp_path, "QOS - 'a':Flags=''\nCluster - 'c'\n"))
    # atoi(value) == -1 clears them all, whatever follows
    cleared = parse_sacctmgr_dump(write(tmp_path, "QOS - 'a':Flags='-1,DenyOnLimit'\nCluster - 'c'\n"))
    assert cleared.qos["a"].flags == ()


@pytest.mark.parametrize("text, seconds", [
    ("5", 300),            # sacctmgr's time_str2secs: a bare number is minutes
    ("5:30", 330), ("00:10:00", 600), ("1-00:00:00", 86400), ("0", 0),
    ("-1", None), ("INFINITE", None), ("UNLIMITED", None),  # not set: the cluster's applies
])
def test_qos_preempt_exempt_time(tmp_path: Path, text: str, seconds: int | None) -> None:
    acct = parse_sacctmgr_dump(write(tmp_path, f"QOS - 'low':PreemptExemptTime={text}\nCluster - 'c'\n"))
    assert acct.qos["low"].preempt_exempt_time == seconds
    assert acct.not_modelled == []
    again = parse_sacctmgr_dump(write(tmp_path, render_sacctmgr_dump(acct), "again.cfg"))
    assert again.qos["low"].preempt_exempt_time == seconds


def test_tres_strings() -> None:
    assert parse_tres("cpu=64,gres/gpu=16,mem=500G") == {"cpu": 64, "gres/gpu": 16, "mem": 512000}
    assert parse_tres("CPU=1,Mem=1000,GRES/gpu:h100=2,node=3,billing=4") == {
        "cpu": 1, "mem": 1000, "gres/gpu:h100": 2, "node": 3, "billing": 4}
    assert format_tres({"cpu": 64, "mem": 512000, "gres/gpu": 16}) == "cpu=64,mem=500G,gres/gpu=16"
    assert format_tres({"mem": 1000}) == "mem=1000M"


@pytest.mark.parametrize(
    ("text", "line", "message", "cls"),
    [
        ("Parent - 'root'\n", 1, "expected a \"Cluster - 'name'\" line before this Parent line", InputError),
        ("Cluster - 'c'\nAccount - 'a'\n", 2, "expected a \"Parent - 'account'\" line before this Account line",
         InputError),
        ("Cluster - 'c'\nParent - 'physics'\n", 2,
         "Parent 'physics' is not defined yet; its Account line must come before the lines that use it as Parent",
         MissingReferenceError),
        ("Cluster - 'c'\nParent - 'root'\nAccount - 'a':Fairshare=lots\n", 3,
         "Fairshare must be a whole number, got 'lots'", InputError),
        ("Cluster - 'c'\nParent - 'root'\nAccount - 'a':Colour='red'\n", 3,
         "unknown Account option 'Colour'; expected one of DefaultQOS, Description, Fairshare, GrpJobs, "
         "GrpJobsAccrue, GrpSubmitJobs, GrpTRES, GrpTRESMins, GrpTRESRunMins, GrpWall, MaxJobs, MaxJobsAccrue, "
         "MaxSubmitJobs, MaxTRESMinsPerJob, MaxTRESPerJob, MaxTRESPerNode, MaxTRESRunMins, "
         "MaxWallDurationPerJob, MinPrioThresh, Organization, Priority, QOS", InputError),
        ("Cluster - 'c'\nParent - 'root'\nAccount - 'a'\nAccount - 'a'\n", 4,
         "account 'a' is defined twice (first at {path}:3)", InputError),
        ("Cluster - 'c'\nParent - 'root'\nAccount - 'a':GrpTRES=gpu=4\n", 3,
         "unknown TRES 'gpu'; expected one of billing, cpu, energy, mem, node, pages, vmem or gres/NAME",
         InputError),
        ("Cluster - 'c'\nParent - 'root'\nAccount - 'a':GrpTRES=mem=lots\n", 3,
         "mem: expected a Slurm memory size such as '1000000', '32G' or '512M', got 'lots'", InputError),
        ("Cluster - 'c'\nParent - 'root'\nUser - 'u':DefaultAccount='a'\nUser - 'u':DefaultAccount='b'\n", 4,
         "user 'u': DefaultAccount is 'a' on an earlier line ({path}:3) and 'b' here", InputError),
        ("Cluster - 'c'\nParent - 'root'\nUser - 'u'\nUser - 'u'\n", 4,
         "user 'u' is listed twice under account 'root' (first at {path}:3)", InputError),
        ("Cluster - 'c'\nParent - 'root'\nUser - 'u':QOS+=high\n", 3,
         "QOS+= (add to or remove from inherited values) is not supported in a dump file; list the full value "
         "with QOS=", InputError),
        ("Cluster - 'c'\nCluster - 'd'\n", 2, "a dump file holds one cluster; 'Cluster' was already given at {path}:1",
         InputError),
        ("Machine - 'c'\n", 1, "expected a line such as \"Account - 'name':Option=value\" with kind Cluster, "
                               "Parent, Account, User or QOS, got \"Machine - 'c'\"", InputError),
        ("QOS - 'q':PreemptMode=maybe\n", 1, "PreemptMode must be a comma list of CANCEL, CLUSTER, GANG, OFF, "
                                             "PRIORITY, REQUEUE, SUSPEND, WITHIN, got 'maybe'", InputError),
        ("QOS - 'q':MaxWall=forever\n", 1, "MaxWallDurationPerJob: expected a Slurm time such as '30', '12:00:00', "
                                           "'2-00:00:00', '7-0' or 'UNLIMITED', got 'forever'", InputError),
        ("QOS - 'q'\nQOS - 'q'\n", 2, "QOS 'q' is defined twice (first at {path}:1)", InputError),
        ("QOS - 'q':PreemptExemptTime=soon\n", 1, "PreemptExemptTime: expected a Slurm time such as '30', "
                                                  "'12:00:00', '2-00:00:00', '7-0' or 'UNLIMITED', got 'soon'",
         InputError),
        ("Cluster - 'c'\nParent - 'root'\nAccount - 'a':Description='open\n", 3, "a ' quote is never closed",
         InputError),
        ("Cluster - 'c'\nParent - 'root'\nAccount - 'a':QOS='x,y':DefaultQOS='z'\n", 3,
         "account 'a': DefaultQOS 'z' is not in its QOS list 'x,y'", InputError),
        ("Cluster - 'c'\nParent - 'root'\nUser - 'u':AdminLevel=Boss\n", 3,
         "AdminLevel must be None, Operator or Administrator, got 'Boss'", InputError),
    ],
)
def test_errors(tmp_path: Path, text: str, line: int, message: str, cls: type) -> None:
    path = write(tmp_path, text)
    with pytest.raises(cls) as info:
        parse_sacctmgr_dump(path)
    assert str(info.value) == f"{path}:{line}: " + message.format(path=path)


def test_file_without_cluster(tmp_path: Path) -> None:
    path = write(tmp_path, "# only comments\n")
    with pytest.raises(InputError) as info:
        parse_sacctmgr_dump(path)
    assert str(info.value) == f"{path}: no \"Cluster - 'name'\" line; a sacctmgr dump starts with one"


@pytest.mark.parametrize("source", ["seed", "real"])
def test_round_trip(tmp_path: Path, source: str) -> None:
    path = SEED if source == "seed" else write(tmp_path, REAL_DUMP, "real.cfg")
    first = parse_sacctmgr_dump(path)
    text = render_sacctmgr_dump(first)
    second = parse_sacctmgr_dump(write(tmp_path, text))
    assert canon(second) == canon(first)
    assert render_sacctmgr_dump(second) == text
    assert text.index("QOS - ") < text.index("Cluster - ") if first.qos else True


def test_render_refuses_orphans() -> None:
    acct = Accounting(cluster="c", accounts={"root": Association("root"), "a": Association("a", parent="gone")})
    with pytest.raises(ValueError, match="do not hang off 'root'"):
        render_sacctmgr_dump(acct)


# Hypothesis: generated trees survive parse -> render -> parse.

_tres = st.dictionaries(st.sampled_from(["cpu", "mem", "gres/gpu", "node", "gres/gpu:h100"]),
                        st.integers(1, 4096), max_size=3)
_qos_names = ["normal", "high", "low", "serving"]


@st.composite
def _accounting(draw) -> Accounting:
    qos = {}
    for name in draw(st.lists(st.sampled_from(_qos_names), unique=True, max_size=4)):
        qos[name] = Qos(
            name=name, priority=draw(st.integers(0, 1000)),
            preempt=tuple(draw(st.lists(st.sampled_from(_qos_names), unique=True, max_size=2))),
            preempt_mode=draw(st.sampled_from([None, "REQUEUE", "CANCEL", "SUSPEND,GANG"])),
            grp_tres=draw(_tres), max_tres_per_user=draw(_tres), max_tres_per_job=draw(_tres),
            max_jobs_per_user=draw(st.none() | st.integers(0, 50)),
            max_submit_jobs_per_user=draw(st.none() | st.integers(0, 50)),
            max_wall=draw(st.none() | st.integers(0, 10**6)), usage_factor=draw(st.sampled_from([1.0, 0.5, 2.25])),
            grp_jobs=draw(st.none() | st.integers(0, 50)), max_jobs_per_account=draw(st.none() | st.integers(0, 50)),
            max_tres_per_account=draw(_tres), min_tres_per_job=draw(_tres),
            grp_submit_jobs=draw(st.none() | st.integers(0, 50)),
            max_submit_jobs_per_account=draw(st.none() | st.integers(0, 50)),
            grace_time=draw(st.integers(0, 600)), preempt_exempt_time=draw(st.none() | st.integers(0, 10**6)), flags=tuple(draw(st.lists(st.sampled_from(["NoReserve",
                                                                                              "DenyOnLimit"]),
                                                                             unique=True))),
            description=draw(st.sampled_from(["", "a b: c", "x"])),
            extra=draw(st.sampled_from([{}, {"UsageThreshold": "0.1"}, {"MaxTRESPerNode": "gres/gpu=1"}])),
        )
    accounts = {"root": Association("root", fairshare=draw(st.integers(1, 5)),
                                    qos=tuple(draw(st.lists(st.sampled_from(_qos_names), unique=True, max_size=2))))}
    names = draw(st.lists(st.sampled_from([f"acct{i}" for i in range(8)]), unique=True, max_size=8))
    for name in names:
        parent = draw(st.sampled_from(list(accounts)))
        accounts[name] = Association(
            account=name, parent=parent, fairshare=draw(st.integers(0, 100) | st.just("parent")),
            grp_tres=draw(_tres), grp_jobs=draw(st.none() | st.integers(0, 9)),
            grp_submit_jobs=draw(st.none() | st.integers(0, 9)),
            max_jobs=draw(st.none() | st.integers(0, 9)), max_tres_per_job=draw(_tres),
            max_wall=draw(st.none() | st.integers(0, 10**6)), description=draw(st.sampled_from(["", "Dept: x"])),
            organization=draw(st.sampled_from(["", "org"])), priority=draw(st.none() | st.integers(0, 100)),
            extra=draw(st.sampled_from([{}, {"MinPrioThresh": "5"}, {"GrpTRESMins": "cpu=10"}])),
        )
    users: dict[str, User] = {}
    assocs: list[Association] = []
    for user in draw(st.lists(st.sampled_from(["u1", "u2", "u3", "u4"]), unique=True, max_size=4)):
        homes = draw(st.lists(st.sampled_from(list(accounts)), unique=True, min_size=1, max_size=3))
        users[user] = User(user, default_account=homes[0],
                           admin_level=draw(st.sampled_from(["None", "Operator"])),
                           extra=draw(st.sampled_from([{}, {"Coordinator": homes[0]}])))
        for home in homes:
            qos_list = tuple(draw(st.lists(st.sampled_from(_qos_names), unique=True, max_size=2)))
            assocs.append(Association(account=home, user=user, fairshare=draw(st.integers(0, 9)), qos=qos_list,
                                      default_qos=qos_list[0] if qos_list and draw(st.booleans()) else None,
                                      max_submit_jobs=draw(st.none() | st.integers(0, 9))))
    return Accounting(cluster=draw(st.sampled_from(["c", "seed"])), accounts=accounts, users=users,
                      user_associations=assocs, qos=qos)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_accounting())
def test_render_parse_render_is_stable(acct: Accounting) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        text = render_sacctmgr_dump(acct)
        first = parse_sacctmgr_dump(write(Path(tmp), text, "a.cfg"))
        assert canon(first) == canon(acct)
        again = render_sacctmgr_dump(first)
        second = parse_sacctmgr_dump(write(Path(tmp), again, "b.cfg"))
        assert canon(second) == canon(first)
        assert again == text
