"""sbatch scripts: reading #SBATCH options as sbatch 22.05 does, mapping, rendering."""
from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.errors import InputError
from gpupool.formats.sbatch import (
    UNLIMITED,
    ArraySpec,
    Dependency,
    DependencyClause,
    GpuCount,
    GresRequest,
    SbatchJob,
    SignalSpec,
    begin_offset,
    parse_gpupool_comments,
    parse_sbatch,
    parse_sbatch_text,
    render_sbatch,
    sbatch_to_workload,
)
from gpupool.model.workload import GANG_ALL, GANG_MIN

SEED_SCRIPT = Path(__file__).resolve().parents[2] / "examples/seed-pool/workloads/pretrain-run.sbatch"


def job_of(*directives: str, body: str = "srun hostname") -> SbatchJob:
    text = "#!/bin/bash\n" + "".join(f"#SBATCH {d}\n" for d in directives) + body + "\n"
    return parse_sbatch_text(text, "job.sbatch")


def error_of(*directives: str) -> str:
    with pytest.raises(InputError) as info:
        job_of(*directives)
    return str(info.value)


# ---------------------------------------------------------------------- reading the header

def test_header_stops_at_first_command_and_late_directives_are_recorded() -> None:
    text = ("#!/bin/bash\n\n# a comment\n   # indented comment\n#SBATCH -N 2\n"
            "echo start\n#SBATCH -N 5\n#SBATCH --nonsense\n")
    job = parse_sbatch_text(text, "a.sbatch")
    assert job.nodes == 2
    assert job.body == "echo start\n#SBATCH -N 5\n#SBATCH --nonsense"
    assert job.late_directives == (7, 8)


def test_only_exact_sbatch_prefix_is_a_directive() -> None:
    text = "#!/bin/sh\n# SBATCH -N 3\n##SBATCH -N 4\n#SBATCHX -N 5\n #SBATCH -N 6\n#sbatch -N 7\ntrue\n"
    job = parse_sbatch_text(text, "a.sh")
    assert job.nodes is None
    assert job.shebang == "#!/bin/sh"


def test_long_short_attached_prefix_quoting_and_comments() -> None:
    job = job_of("--nodes=2", "--ntasks 16", "-c8", "-t 1:00:00",
                 "-J 'my job' --comment=\"two words\"  # trailing comment",
                 "--part=train --acco ml")
    assert (job.nodes, job.ntasks, job.cpus_per_task, job.time) == (2, 16, 8, 3600)
    assert job.job_name == "my job" and job.comment == "two words"
    assert job.partition == "train" and job.account == "ml"


def test_later_option_overrides_earlier() -> None:
    job = job_of("-N 2", "--nodes=4", "--gres=gpu:1", "--gres=gpu:2")
    assert job.nodes == 4
    assert job.gres == (GresRequest("gpu", None, 2),)
    assert job.lines["nodes"] == 3


def test_bundled_short_flags() -> None:
    job = job_of("-HQ -N1")
    assert job.not_modelled == (("hold", None), ("quiet", None))
    assert job.nodes == 1


def test_every_short_form() -> None:
    job = job_of("-N 3 -n 24 -c 4 -t 90 -A acct -q high -p train -J name -o out.txt -e err.txt",
                 "-G a100:4 -a 1-3 -d afterany:7 -w gpu01 -x gpu02 -C nvlink")
    assert job.nodes == 3 and job.ntasks == 24 and job.cpus_per_task == 4
    assert job.time == 90 * 60
    assert (job.account, job.qos, job.partition, job.job_name) == ("acct", "high", "train", "name")
    assert (job.output, job.error) == ("out.txt", "err.txt")
    assert job.gpus == GpuCount("a100", 4)
    assert job.array == ArraySpec((1, 2, 3))
    assert job.dependency == Dependency((DependencyClause("afterany", ("7",)),))
    assert (job.nodelist, job.exclude, job.constraint) == ("gpu01", "gpu02", "nvlink")


def test_gpu_options() -> None:
    job = job_of("--gres=gpu:h100:8,gpu:2,nic:1", "--gpus=h100:16", "--gpus-per-node=8",
                 "--gpus-per-task=h100:1", "--cpus-per-gpu=12")
    assert job.gres == (GresRequest("gpu", "h100", 8), GresRequest("gpu", None, 2),
                        GresRequest("nic", None, 1))
    assert job.gpus == GpuCount("h100", 16)
    assert job.gpus_per_node == GpuCount(None, 8)
    assert job.gpus_per_task == GpuCount("h100", 1)
    assert job.cpus_per_gpu == 12
    assert job_of("--gres=gpu").gres == (GresRequest("gpu", None, 1),)
    assert job_of("--gres=gpu:a100").gres == (GresRequest("gpu", "a100", 1),)
    assert job_of("--gres=none").gres == ()


def test_memory_and_time_options() -> None:
    assert job_of("--mem=500G").mem == 512000
    assert job_of("--mem=32000").mem == 32000
    assert job_of("--mem-per-cpu=4G").mem_per_cpu == 4096
    assert job_of("--mem-per-gpu=80G").mem_per_gpu == 81920
    assert job_of("--time=2-00:00:00").time == 172800
    assert job_of("--time=30").time == 1800
    assert job_of("--time=UNLIMITED").time == UNLIMITED
    assert job_of("--time=0").time == UNLIMITED  # sbatch's arg_set_time_limit: 0 is INFINITE
    assert job_of("--time-min=1:00:00").time_min == 3600
    assert job_of().time is None


def test_nodes_range_and_task_options() -> None:
    job = job_of("--nodes=2-4", "--ntasks-per-node=8")
    assert job.nodes == (2, 4) and job.min_nodes == 2 and job.max_nodes == 4
    assert job.ntasks_per_node == 8
    assert job_of("--nodes=3-3").nodes == 3


def test_flags_and_small_options() -> None:
    job = job_of("--exclusive", "--requeue", "--nice", "--signal=B:USR1@300",
                 "--begin=now+1hour")
    assert job.exclusive is True and job.requeue is True and job.nice == 100
    assert job.signal == SignalSpec("USR1", 300, "B")
    assert job.begin == "now+1hour"
    assert job_of("--no-requeue").requeue is False
    assert job_of("--nice=-5").nice == -5
    assert job_of("--signal=SIGTERM").signal == SignalSpec("TERM", 60, "")
    assert job_of("--signal=10@30").signal == SignalSpec("10", 30, "")
    assert job_of("--signal=rb:INT").signal == SignalSpec("INT", 60, "BR")
    assert job_of("--oversubscribe").oversubscribe is True and job_of("-s").oversubscribe is True
    assert job_of("-N 1").oversubscribe is False


def test_exclusive_user_is_kept_as_not_modelled() -> None:
    job = job_of("--exclusive=user")
    assert job.exclusive is False
    assert job.not_modelled == (("exclusive", "user"),)


def test_not_modelled_options_are_kept_in_order() -> None:
    job = job_of("--mail-type=END,FAIL --mail-user=a@b.c", "--reservation maint -D /tmp",
                 "--get-user-env --hold", "--exclusive")
    assert job.not_modelled == (("mail-type", "END,FAIL"), ("mail-user", "a@b.c"),
                                ("reservation", "maint"), ("chdir", "/tmp"),
                                ("get-user-env", None), ("hold", None))


def test_dependencies() -> None:
    dep = job_of("--dependency=afterok:10:11,afternotok:12,singleton").dependency
    assert dep == Dependency((DependencyClause("afterok", ("10", "11")),
                              DependencyClause("afternotok", ("12",)),
                              DependencyClause("singleton", ())), any_of=False)
    dep = job_of("-d after:5+10?aftercorr:6_2").dependency
    assert dep == Dependency((DependencyClause("after", ("5+10",)),
                              DependencyClause("aftercorr", ("6_2",))), any_of=True)
    assert dep.text() == "after:5+10?aftercorr:6_2"
    assert job_of("--dependency=afterok:pretrain-run").dependency.job_ids() == ("pretrain-run",)


def test_arrays() -> None:
    assert job_of("--array=0-15:2%4").array == ArraySpec(tuple(range(0, 16, 2)), 4)
    assert job_of("--array=1,3,5").array == ArraySpec((1, 3, 5))
    assert job_of("--array=5,1-3,3").array == ArraySpec((1, 2, 3, 5))
    assert ArraySpec(tuple(range(0, 16, 2)), 4).text() == "0-14:2%4"
    assert ArraySpec((1, 3, 5, 6)).text() == "1-5:2,6"
    assert ArraySpec((1, 2)).text() == "1-2"
    assert ArraySpec((1, 5)).text() == "1,5"


# ---------------------------------------------------------------------- errors

@pytest.mark.parametrize(("directive", "message"), [
    ("--frobnicate=3", "job.sbatch:2: unknown sbatch option '--frobnicate'"),
    ("-Z", "job.sbatch:2: unknown sbatch option '-Z'"),
    ("--n=2", "job.sbatch:2: ambiguous sbatch option '--n': could be --network, --nice, --no-kill, "
              "--no-requeue, --nodefile, --nodelist, --nodes, --ntasks, --ntasks-per-core, "
              "--ntasks-per-gpu, --ntasks-per-node, --ntasks-per-socket"),
    ("--nodes=two", "job.sbatch:2: --nodes: expected a node count N or a range MIN-MAX such as "
                    "'2' or '2-4', got 'two'"),
    ("--nodes=4-2", "job.sbatch:2: --nodes: expected 1 <= MIN <= MAX nodes, got '4-2'"),
    ("--nodes", "job.sbatch:2: --nodes needs a value"),
    ("-N", "job.sbatch:2: -N (--nodes) needs a value"),
    ("--hold=yes", "job.sbatch:2: --hold takes no value, got '--hold=yes'"),
    ("--ntasks=0", "job.sbatch:2: --ntasks: expected a whole number >= 1, got '0'"),
    ("--mem=lots", "job.sbatch:2: --mem: expected a memory size such as '500G', '32000' (MB) or "
                   "'512M', got 'lots'"),
    ("--time=soon", "job.sbatch:2: --time: expected a Slurm time such as '30', '12:00:00', "
                    "'2-00:00:00', '7-0' or 'UNLIMITED', got 'soon'"),
    ("--gres=gpu:h100:x", "job.sbatch:2: --gres: expected a whole GRES count in 'gpu:h100:x', got 'x'"),
    ("--gres=gpu::1", "job.sbatch:2: --gres: expected name[:type][:count] entries such as "
                      "'gpu:h100:8,gpu:2', got 'gpu::1'"),
    ("--gpus=h100:8,a100:2", "job.sbatch:2: --gpus: gpupool models one GPU type per job; got "
                             "several in 'h100:8,a100:2'"),
    ("--gpus-per-node=eight", "job.sbatch:2: --gpus-per-node: expected [type:]count such as '8' "
                              "or 'h100:8', got 'eight'"),
    ("--dependency=afterok:1,afterany:2?afterok:3", "job.sbatch:2: --dependency: ',' (all) and "
     "'?' (any) cannot be mixed in one dependency, got 'afterok:1,afterany:2?afterok:3'"),
    ("--dependency=before:1", "job.sbatch:2: --dependency: expected a dependency type (after, "
     "afterany, afterok, afternotok, aftercorr, afterburstbuffer, singleton), got 'before:1'"),
    ("--dependency=afterok", "job.sbatch:2: --dependency: expected afterok:jobid[:jobid...], got 'afterok'"),
    ("--dependency=singleton:4", "job.sbatch:2: --dependency: 'singleton' takes no job ids, got 'singleton:4'"),
    ("--array=3-1", "job.sbatch:2: --array: expected FIRST-LAST[:STEP] with FIRST <= LAST and "
                    "STEP >= 1, got '3-1'"),
    ("--array=a-b", "job.sbatch:2: --array: expected task ids such as '0-15', '0-15:2%4' or "
                    "'1,3,5', got 'a-b'"),
    ("--array=0-3%0", "job.sbatch:2: --array: expected a whole number >= 1, got '0'"),
    ("--begin=someday", "job.sbatch:2: --begin: expected a begin time such as 'now+1hour', "
     "'now+30minutes', 'now+600', '2026-12-01T08:00:00', '2026-12-01', '16:00', '4:00PM', "
     "'midnight', 'noon', 'teatime', 'tomorrow', got 'someday'"),
    ("--begin=now+3fortnights", "job.sbatch:2: --begin: unknown time unit 'fortnights' in "
     "'now+3fortnights'; expected one of seconds, minutes, hours, days, weeks"),
    ("--signal=USR9", "job.sbatch:2: --signal: unknown signal 'USR9'; expected a name such as "
                      "USR1 or TERM, or a number"),
    ("--signal=B:USR1@70000", "job.sbatch:2: --signal: expected at most 65535 seconds before the "
                              "limit, got 70000"),
    ("--exclusive=team", "job.sbatch:2: --exclusive: expected no value, 'user' or 'mcs', got 'team'"),
    ("--account=a/b", "job.sbatch:2: --account: expected a account name (letters, digits, '_', "
                      "'.', '-'), got 'a/b'"),
    ("train.py", "job.sbatch:2: unexpected argument 'train.py' on an #SBATCH line; options start "
                 "with '-' or '--'"),
    ("--job-name='open", "job.sbatch:2: cannot split the #SBATCH line: No closing quotation"),
    ("hetjob", "job.sbatch:2: heterogeneous jobs ('#SBATCH hetjob') are not supported by gpupool"),
])
def test_option_errors(directive: str, message: str) -> None:
    assert error_of(directive) == message


def test_memory_options_are_mutually_exclusive() -> None:
    assert error_of("--mem=10G", "-N 1", "--mem-per-gpu=4G") == (
        "job.sbatch:4: --mem, --mem-per-cpu and --mem-per-gpu are mutually exclusive; give only one")


def test_script_must_start_with_shebang() -> None:
    with pytest.raises(InputError) as info:
        parse_sbatch_text("#SBATCH -N 1\nsrun true\n", "x.sbatch")
    assert str(info.value) == ("x.sbatch:1: this does not look like a batch script: the first "
                               "line must be '#!' and an interpreter, such as '#!/bin/bash'")


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read the sbatch script"):
        parse_sbatch(tmp_path / "missing.sbatch")


# ---------------------------------------------------------------------- #GPUPOOL comments

def test_gpupool_comments() -> None:
    job = job_of("-N 1", body="#GPUPOOL runtime=10:30:00 outcome=failed\nsrun true\n"
                 "# GPUPOOL checkpoint_interval=600")
    assert (job.runtime, job.outcome, job.checkpoint_interval) == (37800.0, "FAILED", 600.0)
    facts = parse_gpupool_comments("kind: Job\n# GPUPOOL runtime=90\n", "j.yaml")
    assert facts == {"runtime": 90.0}


@pytest.mark.parametrize(("comment", "message"), [
    ("#GPUPOOL", "job.sbatch:2: empty #GPUPOOL comment; expected key=value with keys runtime, "
                 "outcome, checkpoint_interval"),
    ("#GPUPOOL walltime=1", "job.sbatch:2: #GPUPOOL: expected key=value with keys runtime, "
                            "outcome, checkpoint_interval, got 'walltime=1'"),
    ("#GPUPOOL runtime=soon", "job.sbatch:2: #GPUPOOL runtime: expected seconds or a Slurm duration "
                              "such as '3600', '10:30:00' or '1-00:00:00', got 'soon'"),
    ("#GPUPOOL outcome=TIMEOUT", "job.sbatch:2: #GPUPOOL outcome: expected one of COMPLETED, "
                                 "FAILED, CANCELLED, got 'TIMEOUT'"),
])
def test_gpupool_comment_errors(comment: str, message: str) -> None:
    with pytest.raises(InputError) as info:
        parse_sbatch_text(f"#!/bin/bash\n{comment}\ntrue\n", "job.sbatch")
    assert str(info.value) == message


# ---------------------------------------------------------------------- --begin

EPOCH = datetime(2026, 12, 1, 10, 0, 0, tzinfo=timezone.utc)


def test_begin_offsets() -> None:
    assert begin_offset("now+1hour", None, 100) == 3700
    assert begin_offset("now+30minutes", None) == 1800
    assert begin_offset("now+600", None) == 600
    assert begin_offset("now", None, 5) == 5
    assert begin_offset("2026-12-01T12:00:00", EPOCH) == 7200
    assert begin_offset("2026-12-02", EPOCH) == 14 * 3600
    assert begin_offset("16:00", EPOCH) == 6 * 3600
    assert begin_offset("9:00", EPOCH) == 23 * 3600  # already past: tomorrow
    assert begin_offset("4:00PM", EPOCH) == 6 * 3600
    assert begin_offset("midnight", EPOCH) == 14 * 3600
    assert begin_offset("tomorrow", EPOCH) == 14 * 3600
    assert begin_offset("today", EPOCH, 60) == 60  # in the past: at submission
    assert begin_offset("2026-11-01T00:00:00", EPOCH, 30) == 30
    assert begin_offset("noon", datetime(2026, 12, 1, 10, 0, 0)) == 7200  # naive epoch = UTC


def test_begin_wall_clock_needs_epoch() -> None:
    job = job_of("-N 1", "--begin=16:00")
    with pytest.raises(InputError) as info:
        job.begin_offset()
    assert str(info.value) == ("job.sbatch:3: --begin=16:00 is a wall-clock time; gpupool needs the "
                               "run's start time (epoch) to place it; use 'now+<duration>' or give "
                               "an epoch")
    assert job_of("--begin=now+2hours").begin_offset(None, 10) == 7210


# ---------------------------------------------------------------------- mapping

def one(job: SbatchJob, **kw):  # type: ignore[no-untyped-def]
    (wl,) = sbatch_to_workload(job, id=7, submit_time=kw.pop("submit_time", 0.0),
                               runtime=kw.pop("runtime", 60.0), **kw)
    return wl


def test_seed_script_is_two_pods_of_eight_gpus() -> None:
    job = parse_sbatch(SEED_SCRIPT)
    assert job.job_name == "pretrain-run" and job.not_modelled == ()
    wl = one(job, runtime=37800.0)
    (ps,) = wl.pod_sets
    assert (ps.count, ps.gpus, ps.one_per_node, ps.cpu_m, ps.memory_mib) == (2, 8, True, 64000, 512000)
    assert wl.gang == GANG_ALL and wl.total_gpus == 16
    assert (wl.time_limit, wl.account, wl.qos, wl.partition) == (43200.0, "ml-research", "normal", "train")
    assert wl.output == "%x-%j.out" and wl.time_limit is not None


@pytest.mark.parametrize(("directives", "gpus"), [
    (("-N 2", "--gpus-per-node=4"), 4),
    (("-N 2", "--gres=gpu:h100:2,gpu:1"), 3),
    (("-N 2", "--gpus=8"), 4),
    (("-N 2", "--ntasks-per-node=4", "--gpus-per-task=2"), 8),
    (("-N 2", "--ntasks=8", "--gpus-per-task=1"), 4),
    (("-N 2",), 0),
])
def test_per_node_gpus(directives: tuple[str, ...], gpus: int) -> None:
    (ps,) = one(job_of(*directives)).pod_sets
    assert (ps.count, ps.gpus, ps.one_per_node) == (2, gpus, True)


def test_cpus_memory_and_extras_per_node() -> None:
    (ps,) = one(job_of("-N 2", "--ntasks-per-node=4", "-c 8", "--mem-per-cpu=2G",
                       "--gres=gpu:a100:4,nic:1", "--exclusive")).pod_sets
    assert (ps.cpu_m, ps.memory_mib, ps.gpu_type, ps.extra, ps.exclusive) == (
        32000, 32 * 2048, "a100", (("gres/nic", 1),), True)
    (ps,) = one(job_of("-N 1", "--gpus-per-node=2", "--mem-per-gpu=10G", "--cpus-per-gpu=6")).pod_sets
    assert (ps.cpu_m, ps.memory_mib) == (12000, 20480)


def test_ntasks_without_nodes_gives_one_pod_per_task() -> None:
    wl = one(job_of("--ntasks=4", "-c 2", "--gpus-per-task=1", "--mem=8G"))
    (ps,) = wl.pod_sets
    assert (ps.count, ps.gpus, ps.cpu_m, ps.memory_mib, ps.one_per_node) == (4, 1, 2000, 2048, False)
    (ps,) = one(job_of("--ntasks=4", "--gpus=8")).pod_sets
    assert ps.gpus == 2
    (ps,) = one(job_of("--gres=gpu:1", "-c 16")).pod_sets
    assert (ps.count, ps.gpus, ps.cpu_m, ps.one_per_node) == (1, 1, 16000, False)


def test_ntasks_per_node_implies_nodes() -> None:
    (ps,) = one(job_of("--ntasks=16", "--ntasks-per-node=8", "--gpus-per-task=1")).pod_sets
    assert (ps.count, ps.gpus, ps.one_per_node) == (2, 8, True)


def test_no_more_nodes_than_tasks() -> None:
    """sbatch lowers the node count to ``--ntasks`` ("can't run 1 processes on 2 nodes, setting
    nnodes to 1", 22.05's sbatch/opt.c), a range's largest count first."""
    (ps,) = one(job_of("--nodes=2", "--ntasks=1", "--gpus-per-task=1")).pod_sets
    assert (ps.count, ps.min_count, ps.one_per_node, ps.gpus) == (1, None, True, 1)
    wl = one(job_of("--nodes=1-3", "--ntasks=2"))
    assert (wl.pod_sets[0].count, wl.pod_sets[0].min_count, wl.gang) == (2, 1, GANG_MIN)
    (ps,) = one(job_of("--nodes=3", "--ntasks=2", "--gres=gpu:2")).pod_sets
    assert (ps.count, ps.gpus) == (2, 2)
    # cores are steered as for the job sbatch sends, -N2 -n2
    assert ps.slurm_tasks == one(job_of("--nodes=2", "--ntasks=2", "--gres=gpu:2")).pod_sets[0].slurm_tasks
    # and the node list loses its last hosts, sorted, down to that count
    wl = one(job_of("--nodes=2", "--ntasks=1", "--nodelist=gpu02,gpu01"))
    assert (wl.pod_sets[0].count, wl.nodelist) == (1, "gpu01")
    assert one(job_of("--nodes=1-3", "--ntasks=2", "--nodelist=gpu[01-02]")).nodelist == "gpu[01-02]"


def test_node_range_is_a_min_gang() -> None:
    wl = one(job_of("--nodes=2-4", "--gpus-per-node=8"))
    (ps,) = wl.pod_sets
    assert (ps.count, ps.min_count, wl.gang) == (4, 2, GANG_MIN)


@pytest.mark.parametrize(("directives", "message"), [
    (("-N 1-3", "--gpus=8", "-n4"),
     "job.sbatch:3: --gpus=8 cannot be split evenly over 1-3 node(s); gpupool models identical pods: use --gpus-per-node"),
    (("-N 3-4", "--gpus=2"), "job.sbatch:3: --gpus=2 asks fewer GPUs than the 3 nodes; Slurm refuses the job "
                             "(Invalid generic resource (gres) specification)"),
    (("-N 3", "--gpus=2"), "job.sbatch:3: --gpus=2 asks fewer GPUs than the 3 nodes; Slurm refuses the job "
                           "(Invalid generic resource (gres) specification)"),
    (("--ntasks=3", "--gpus=8", "--exclusive"), "job.sbatch:3: --gpus=8 cannot be split evenly over --ntasks=3; "
                                 "gpupool models identical pods: use --gpus-per-task"),
    (("--ntasks=4", "--gres=gpu:2", "--cpus-per-gpu=2"), "job.sbatch:3: --gres/--gpus-per-node are per node, but "
     "this script gives --ntasks without --nodes, so the node count is unknown here (gpupool walks nodes for "
     "GPUs per node only without --nodelist, --cpus-per-gpu, --gpus or --gpus-per-task); add --nodes"),
    (("-N 1", "--gres=gpu:h100:8", "--gpus-per-task=a100:1"), "job.sbatch:4: gpupool models one GPU "
     "type per job; this script asks for a100, h100"),
])
def test_mapping_errors(directives: tuple[str, ...], message: str) -> None:
    with pytest.raises(InputError) as info:
        one(job_of(*directives))
    assert str(info.value) == message


def test_workload_fields() -> None:
    job = job_of("-N 1", "--time=UNLIMITED", "--time-min=30", "--nice=10", "--no-requeue",
                 "--signal=USR1@120", "--dependency=afterok:3", "-C a100", "-w gpu01", "-x gpu02",
                 "--begin=now+1hour")
    wl = one(job, submit_time=50.0, outcome="FAILED", checkpoint_interval=600.0)
    assert wl.time_limit == math.inf and wl.time_min == 1800.0
    assert (wl.nice, wl.requeue, wl.signal, wl.dependency) == (10, False, "USR1@120", "afterok:3")
    assert (wl.constraint, wl.nodelist, wl.exclude) == ("a100", "gpu01", "gpu02")
    assert (wl.begin_time, wl.submit_time, wl.outcome, wl.checkpoint_interval) == (3650.0, 50.0, "FAILED", 600.0)
    assert (wl.id, wl.name, wl.source) == (7, "job", "job.sbatch")
    plain = one(job_of("-N 1"))
    assert (plain.time_limit, plain.requeue, plain.nice, plain.begin_time) == (None, True, 0, None)
    assert plain.oversubscribe is False and one(job_of("-N 1", "-s")).oversubscribe is True


def test_array_gives_one_workload_per_task() -> None:
    wls = sbatch_to_workload(job_of("-J sweep", "--array=0-6:3%2", "-N 1"), id=10, submit_time=5.0,
                             runtime=60.0)
    assert [(w.id, w.array_job_id, w.array_task_id) for w in wls] == [(10, 10, 0), (11, 10, 3), (12, 10, 6)]
    assert {w.name for w in wls} == {"sweep"} and wls[0].array_max_running == 2
    assert wls[1].source == "job.sbatch[3]"


def test_bad_outcome() -> None:
    with pytest.raises(InputError, match="outcome: expected one of COMPLETED, FAILED, CANCELLED, got 'LOST'"):
        one(job_of("-N 1"), outcome="LOST")


# ---------------------------------------------------------------------- rendering

def test_render_is_readable() -> None:
    text = render_sbatch(parse_sbatch(SEED_SCRIPT))
    assert "#SBATCH --mem=500G\n" in text and "#SBATCH --time=12:00:00\n" in text
    assert parse_sbatch_text(text, str(SEED_SCRIPT)) == parse_sbatch(SEED_SCRIPT)


_token = st.from_regex(r"[a-z][a-z0-9_\-]{0,7}", fullmatch=True)
_text = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=20)
_opt = lambda s: st.none() | s  # noqa: E731
_gpu = st.builds(GpuCount, _opt(_token), st.integers(0, 16))
_dep_id = st.from_regex(r"[0-9]{1,5}(_[0-9]{1,2})?", fullmatch=True) | _token
_clause = st.builds(DependencyClause, st.sampled_from(["after", "afterany", "afterok", "afternotok", "aftercorr"]),
                    st.lists(_dep_id, min_size=1, max_size=3).map(tuple)) | st.just(DependencyClause("singleton", ()))
_nodes = st.integers(1, 64) | st.tuples(st.integers(1, 8), st.integers(9, 64))
_not_modelled = st.lists(st.sampled_from([
    ("mail-type", "END"), ("hold", None), ("reservation", "maint"), ("chdir", "/scratch/x y"),
    ("exclusive", "user"), ("get-user-env", None), ("wckey", "")]),
    max_size=4).map(tuple)
_memory = st.integers(1, 4 * 1024 * 1024)
# (0 is no duration sbatch keeps: it reads --time=0 as UNLIMITED)
_duration = st.integers(1, 30 * 86400) | st.just(UNLIMITED)
_seconds = st.integers(0, 10**6).map(float) | st.integers(0, 10**6).map(lambda n: n + 0.5)


@st.composite
def sbatch_jobs(draw: st.DrawFn) -> SbatchJob:
    mem_field = draw(st.sampled_from([None, "mem", "mem_per_cpu", "mem_per_gpu"]))
    job = SbatchJob(
        nodes=draw(_opt(_nodes)), ntasks=draw(_opt(st.integers(1, 512))),
        ntasks_per_node=draw(_opt(st.integers(1, 64))), cpus_per_task=draw(_opt(st.integers(1, 128))),
        cpus_per_gpu=draw(_opt(st.integers(1, 32))),
        gres=tuple(draw(st.lists(st.builds(GresRequest, st.sampled_from(["gpu", "nic", "shard"]),
                                           _opt(_token), st.integers(0, 16)), max_size=3))),
        gpus=draw(_opt(_gpu)), gpus_per_node=draw(_opt(_gpu)), gpus_per_task=draw(_opt(_gpu)),
        time=draw(_opt(_duration)), time_min=draw(_opt(_duration)),
        account=draw(_opt(_token)), qos=draw(_opt(_token)),
        partition=draw(_opt(st.lists(_token, min_size=1, max_size=2).map(",".join))),
        job_name=draw(_opt(_text)), output=draw(_opt(_text)), error=draw(_opt(_text)),
        exclusive=draw(st.booleans()), oversubscribe=draw(st.booleans()),
        dependency=draw(_opt(st.builds(Dependency, st.lists(_clause, min_size=1, max_size=3).map(tuple),
                                       st.booleans()))),
        array=draw(_opt(st.builds(ArraySpec, st.sets(st.integers(0, 200), min_size=1).map(
            lambda s: tuple(sorted(s))), _opt(st.integers(1, 50))))),
        begin=draw(_opt(st.sampled_from(["now+1hour", "now+30minutes", "2026-12-01T08:00:00", "16:00",
                                         "midnight", "tomorrow"]))),
        nice=draw(_opt(st.integers(-10000, 10000))), requeue=draw(_opt(st.booleans())),
        signal=draw(_opt(st.builds(SignalSpec, st.sampled_from(["USR1", "TERM", "10", "INT"]),
                                   st.integers(0, 65535), st.sampled_from(["", "B", "R", "BR"])))),
        constraint=draw(_opt(_text)), nodelist=draw(_opt(_text)), exclude=draw(_opt(_text)),
        comment=draw(_opt(_text)), not_modelled=draw(_not_modelled),
        licenses=tuple(draw(st.dictionaries(_token, st.integers(1, 64), max_size=3)).items()),
        runtime=draw(_opt(_seconds)), outcome=draw(_opt(st.sampled_from(["COMPLETED", "FAILED", "CANCELLED"]))),
        checkpoint_interval=draw(_opt(_seconds)),
        body=draw(st.sampled_from(["", "srun hostname", "set -e\n\nsrun python train.py --lr 3e-4\n# done\n"])),
        source="gen.sbatch",
    )
    if mem_field:
        setattr(job, mem_field, draw(_memory))
    return job


@settings(max_examples=150, deadline=None)
@given(sbatch_jobs())
def test_render_round_trip(job: SbatchJob) -> None:
    assert parse_sbatch_text(render_sbatch(job), "gen.sbatch") == job
