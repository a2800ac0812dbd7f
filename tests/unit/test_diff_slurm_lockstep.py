"""The lockstep replay of the differential harness, without a real Slurm.

A "real" history here is one gpupool run of the same workload (a consistent history: no GPU
held twice). Lockstep against the slurm policy's own history must agree on every job and force
nothing; against another policy's history it must start every job where and when that history
did (within the tolerance) and count as agreed exactly the jobs whose first proposal matched.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.conformance.diff_slurm import DiffReport, accounts_of, compare, gpu_caps, replay
from gpupool.conformance.diff_slurm_real import RealRecord
from gpupool.conformance.diff_slurm_workload import generate
from gpupool.engine.nodes import mask_indices
from gpupool.formats.pool_dir import load_pool

SEED_POOL = Path(__file__).resolve().parents[2] / "examples" / "seed-pool"
T0 = 1_700_000_000.0  # an epoch for t=0, as a real run has one


def _pool(path: Path = SEED_POOL):
    """The seed pool (or the pool at ``path``) with user "alice" associated to every leaf
    account (as the harness adds the submitting user, ``replay_pool``)."""
    from gpupool.model.slurm import Association, User

    pool = load_pool(path)
    acct = pool.slurm.accounting
    for account in accounts_of(pool):
        acct.user_associations.append(Association(account, user="alice", fairshare=1))
    acct.users.setdefault("alice", User("alice"))
    return pool


def _workload(pool, seed: int, n: int):
    nodes = [x for x in pool.nodes.values()][:4]
    return generate(seed, n, accounts_of(pool), max_nodes=len(nodes), gpus_per_node=min(len(x.gpus) for x in nodes),
                    max_limit_min=3, mean_gap_s=4.0, gpu_caps=gpu_caps(pool))


def _user(pool) -> str:
    return "alice"


def _history(pool, jobs, policy_sim: dict, ids) -> dict[int, RealRecord]:
    """A finished gpupool run written as real Slurm's records (epoch times)."""
    names = list(pool.nodes)
    out = {}
    for job in jobs:
        jid = ids[job.index]
        s = policy_sim[jid]
        gpus: dict[str, list[int]] = {}
        for p in s.placement or ():
            gpus.setdefault(names[p[0]], []).extend(mask_indices(p[1]))
        out[jid] = RealRecord(jid, job.name, T0 + job.arrival, T0 + s.first_start, T0 + s.end, str(s.final_state),
                              sorted(gpus), gpus)
    return out


def _submitted(jobs, ids) -> dict[int, RealRecord]:
    """Records holding only the submit times (what an open replay needs to run)."""
    return {ids[j.index]: RealRecord(ids[j.index], j.name, T0 + j.arrival, None, None, "PENDING", [], {})
            for j in jobs}


@pytest.mark.parametrize("seed", [1, 2])
def test_lockstep_against_its_own_history_agrees_on_everything(seed):
    pool = _pool()
    jobs = _workload(pool, seed, 40)
    ids = {j.index: j.index + 1 for j in jobs}
    user = _user(pool)
    own = replay(pool, jobs, _submitted(jobs, ids), ids, T0, user)
    real = _history(pool, jobs, own, ids)
    sim = replay(pool, jobs, real, ids, T0, user, lockstep=1.0)
    rep = DiffReport("seed", seed, len(jobs), "none", None, 1.0, mode="lockstep")
    compare(rep, jobs, real, ids, sim, list(pool.nodes), T0)
    assert rep.order_agree == 1.0 and rep.gpus_agree == 1.0 and rep.start_within_interval == 1.0, \
        "\n".join(rep.summary_lines())
    assert rep.start_delta_max < 1e-6


def test_lockstep_follows_another_history_and_counts_each_decision():
    """Follow fifo's history (no backfill, no fair share): every start happens where fifo put it,
    and a job counts as agreed only if slurm proposed it there, within a second of fifo's start."""
    from gpupool.conformance.diff_slurm_lockstep import LockstepPolicy, real_gpus
    from gpupool.engine.core import Engine
    from gpupool.engine.policy_api import make_policy

    pool = _pool()
    jobs = _workload(pool, 7, 50)
    ids = {j.index: j.index + 1 for j in jobs}
    user = _user(pool)
    # fifo's history of the same workload, as the "real" one
    import gpupool.conformance.diff_slurm as ds
    wls = []
    from dataclasses import replace as dc_replace

    from gpupool.conformance.diff_slurm_workload import sbatch_script
    from gpupool.formats.sbatch import parse_sbatch_text, sbatch_to_workload
    for job in jobs:
        sb = parse_sbatch_text(sbatch_script(job, "out/%j.out"), f"{job.name}.sbatch")
        wl = sbatch_to_workload(sb, id=ids[job.index], submit_time=job.arrival, runtime=float(job.runtime_s))[0]
        wls.append(dc_replace(wl, user=user))
    fifo = {j.id: j for j in Engine(pool, wls, make_policy("fifo", pool), check=True).run().jobs}
    real = _history(pool, jobs, fifo, ids)

    names = list(pool.nodes)
    index = {n: i for i, n in enumerate(names)}
    forced = {jid: (r.start - T0, real_gpus(r.gpus, index)) for jid, r in real.items()}
    policy = make_policy("slurm", pool, {"epoch": T0})
    wrapper = LockstepPolicy(policy, forced, 1.0)
    ends = {jid: (r.start - T0, r.end - T0, r.state) for jid, r in real.items()}
    executor = ds.ReplayExecutor(policy.over_time_limit, [], ends)
    wls_replay = [dc_replace(w, submit_time=real[w.id].submit - T0) for w in wls]
    out = {j.id: j for j in Engine(pool, wls_replay, wrapper, check=True, executor=executor).run().jobs}

    assert wrapper.agreed | wrapper.adopted == set(real) and not wrapper.agreed & wrapper.adopted
    for jid, r in real.items():
        j = out[jid]
        assert abs(j.first_start - (r.start - T0)) <= 1.0 + 1e-9
        got = {names[p[0]]: mask_indices(p[1]) for p in j.placement}
        assert got == r.gpus, f"job {jid} not on the history's GPUs"
        p = wrapper.proposals.get(jid)
        matched = p is not None and abs(p.time - (r.start - T0)) <= 1.0 and p.gpus == forced[jid][1]
        if matched:  # slurm's first proposal was the history's decision: carried out as proposed
            assert jid in wrapper.agreed
        if jid in wrapper.adopted:  # forced: no proposal of slurm's was the history's decision
            assert not matched
    # the two policies differ on this workload (slurm backfills, fifo does not): both kinds occur
    assert wrapper.agreed and wrapper.adopted
    # and the report counts a job as agreeing exactly when its first proposal matched
    rep = DiffReport("seed", 7, len(jobs), "none", None, 1.0, mode="lockstep")
    views = {jid: ds.SimView(tuple((n, m, 0, 0) for n, m in wrapper.proposals[jid].gpus) if jid in wrapper.proposals
                             else (), wrapper.proposals[jid].time if jid in wrapper.proposals else None,
                             out[jid].final_state, out[jid].state, out[jid].end) for jid in out}
    compare(rep, jobs, real, ids, views, names, T0)
    ok = {d.job_id for d in rep.per_job
          if not any(q.startswith(("GPUs", "start ")) and not q.startswith("start order") for q in d.problems)}
    assert ok == {jid for jid, p in wrapper.proposals.items()
                  if abs(p.time - (real[jid].start - T0)) <= 1.0 and p.gpus == forced[jid][1]}


def test_a_completing_node_takes_no_job_until_released():
    """Replaying a real cluster: a job that ended at t=60 while its node stayed COMPLETING until
    t=80 (KillWait) keeps that whole node from new jobs, even on its free GPUs, and the next
    job starts at the release; without the hold it starts at its submission."""
    from gpupool.engine.core import Engine
    from gpupool.engine.policy_api import make_policy
    from gpupool.model.workload import PodSet, Workload

    pool = _pool()

    def wl(jid, submit, gpus, runtime, nodes=1):
        return Workload(jid, f"j{jid}", (PodSet(count=nodes, gpus=gpus, one_per_node=nodes > 1),), submit_time=submit,
                        runtime=runtime, time_limit=3600.0, account="ml-platform", user="alice")  # no GrpTRES

    def run(holds):
        jobs = [wl(1, 0.0, 2, 60.0), wl(2, 0.0, 4, 1000.0), wl(3, 0.0, 8, 1000.0, nodes=3), wl(4, 61.0, 2, 50.0)]
        policy = make_policy("slurm", pool, {"epoch": 0.0})
        policy.node_holds = list(holds)
        return {j.id: j for j in Engine(pool, jobs, policy, check=True).run().jobs}

    names = list(pool.nodes)
    plain = run([])
    node_of_1 = plain[1].placement[0][0]
    assert {p[0] for p in plain[4].placement} == {node_of_1}  # the only node with free GPUs
    assert plain[4].first_start == 61.0
    held = run([(node_of_1, 60.0, 80.0, 80.0, True)])
    assert held[1].end == 60.0
    assert held[4].first_start == 80.0 and {names[p[0]] for p in held[4].placement} == {names[node_of_1]}
    # a hold on another node changes nothing for this job
    other = run([((node_of_1 + 1) % len(names), 60.0, 80.0, 80.0, True)])
    assert other[4].first_start == 61.0


def test_a_job_end_alone_runs_no_main_pass_while_its_node_completes():
    """slurmctld's main scheduler is called by the epilog-complete message that releases the
    nodes of a job killed at its limit, not by the job's end: a job that the end freed from its
    account's GrpTRES limit starts at the release (t=80), not at the end (t=61.5) on another
    node; in a simulation (no holds) end and release coincide and it starts at 61.5 (no tick
    there). The release of a job that ended by itself calls no pass at all."""
    from gpupool.engine.core import Engine
    from gpupool.engine.policy_api import make_policy
    from gpupool.model.workload import PodSet, Workload

    pool = _pool()

    def wl(jid, gpus, runtime):  # ml-serving: GrpTRES=gres/gpu=16
        return Workload(jid, f"j{jid}", (PodSet(count=1, gpus=gpus),), submit_time=0.0, runtime=runtime,
                        time_limit=3600.0, account="ml-serving", user="alice")

    def run(holds):
        policy = make_policy("slurm", pool, {"epoch": 0.0})
        policy.node_holds = list(holds)
        jobs = [wl(1, 8, 61.5), wl(2, 8, 1000.0), wl(3, 2, 50.0)]
        return {j.id: j for j in Engine(pool, jobs, policy, check=True).run().jobs}

    plain = run([])
    assert plain[3].first_start == 61.5
    node_of_1 = plain[1].placement[0][0]
    held = run([(node_of_1, 61.5, 80.0, 80.0, True)])
    assert held[1].end == 61.5 and held[3].first_start == 80.0
    # a release that does not call the main scheduler (the job was not killed at its limit):
    # job 3 waits for the next pass, at the next 30-s tick
    quiet = run([(node_of_1, 61.5, 80.0, 80.0, False)])
    assert quiet[3].first_start == 90.0


def test_a_main_pass_leaves_completing_nodes_out_of_its_selection():
    """A main pass puts no job on a COMPLETING node and chooses among the others (the replays
    of docs/differential.md, finding 21). Job 4 arrives at 61 s: without holds it takes the
    first free node (the one job 1 left at 60.5 s); with that node COMPLETING until 80 s it
    starts at once on the node nobody used."""
    from gpupool.engine.core import Engine
    from gpupool.engine.policy_api import make_policy
    from gpupool.model.workload import PodSet, Workload

    pool = _pool()

    def wl(jid, submit, gpus, runtime):
        return Workload(jid, f"j{jid}", (PodSet(count=1, gpus=gpus),), submit_time=submit, runtime=runtime,
                        time_limit=3600.0, account="ml-platform", user="alice")  # no GrpTRES

    def run(holds):
        policy = make_policy("slurm", pool, {"epoch": 0.0})
        policy.node_holds = list(holds)
        jobs = [wl(1, 0.0, 8, 60.5), wl(2, 0.0, 8, 1000.0), wl(3, 0.0, 8, 1000.0), wl(4, 61.0, 4, 30.0)]
        return {j.id: j for j in Engine(pool, jobs, policy, check=True).run().jobs}

    plain = run([])
    node_of_1 = plain[1].placement[0][0]
    assert plain[4].first_start == 61.0 and plain[4].placement[0][0] == node_of_1
    held = run([(node_of_1, 60.5, 80.0, 80.0, True)])
    used = {plain[j].placement[0][0] for j in (1, 2, 3)}
    (empty,) = set(range(len(pool.nodes))) - used
    assert held[4].first_start == 61.0 and held[4].placement[0][0] == empty


def test_job_alloc_is_read_per_node_from_scontrol_text():
    from gpupool.conformance.diff_slurm_real import parse_job_alloc

    text = ("   NumNodes=3 NumCPUs=8 NumTasks=8 CPUs/Task=1\n   JOB_GRES=gpu:6\n"
            "     Nodes=gpu01 CPU_IDs=0-1,16-17 Mem=400 GRES=gpu:4(IDX:0-3)\n"
            "     Nodes=gpu[02-03] CPU_IDs=0-1 Mem=200 GRES=gpu:2(IDX:0-1)\n   MinCPUsNode=1\n")
    assert parse_job_alloc(text) == {"gpu01": (4, 400), "gpu02": (2, 200), "gpu03": (2, 200)}
    # scontrol cuts a long CPU_IDs list short: CPUs that do not add up to NumCPUs are not used
    assert parse_job_alloc(text.replace("NumCPUs=8", "NumCPUs=64")) == {}


@pytest.mark.parametrize(("opts", "gpus", "alloc", "expect"), [
    # task pods sharing a node: one pod per GPU of it, the node's real CPUs and memory on them
    ("-n3 --gpus-per-task=1", ((3, 0b10011000),), {3: (4, 360000)},
     [(3, 0b1000, 2000, 120000), (3, 0b10000, 1000, 120000), (3, 0b10000000, 1000, 120000)]),
    # the same without the job's output: gpupool's own amounts, CPUs in whole cores
    # real Slurm's CPUs fewer than the later pods would take: poured in order (``_share``)
    ("-n3 --gpus-per-task=1", ((3, 0b111),), {3: (1, 360000)},
     [(3, 0b1, 1000, 120000), (3, 0b10, 0, 120000), (3, 0b100, 0, 120000)]),
    ("-n3 --gpus-per-task=1", ((3, 0b111),), {},
     [(3, 0b1, 2000, 120000), (3, 0b10, 1000, 120000), (3, 0b100, 1000, 120000)]),
    # a pod per node: real's CPUs per node (a split job's tasks)
    ("-N2 -n8 --gres=gpu:2", ((2, 0b11000000), (3, 0b110)), {2: (6, 240000), 3: (2, 240000)},
     [(2, 0b11000000, 6000, 240000), (3, 0b110, 2000, 240000)]),
    # a walked -n T --gpus=X job: real's amounts per node; without its output, the first node
    # all the tasks but one per later node (as on idle nodes), memory per GPU following the GPUs
    ("-n10 --gpus=10", ((0, 0b11), (1, 0b111111), (3, 0b11)), {0: (2, 240000), 1: (8, 720000), 3: (2, 240000)},
     [(0, 0b11, 2000, 240000), (1, 0b111111, 8000, 720000), (3, 0b11, 2000, 240000)]),
    ("-n10 --gpus=10", ((0, 0b11), (1, 0b111111), (3, 0b11)), {},
     [(0, 0b11, 8000, 240000), (1, 0b111111, 2000, 720000), (3, 0b11, 2000, 240000)]),
    # task pods' --mem is per node (finding 74): without the output each node holds all of it,
    # shared out over its pods
    ("-n3 --gpus-per-task=1 --mem=3000", ((2, 0b11), (3, 0b1)), {},
     [(2, 0b1, 1000, 2000), (2, 0b10, 1000, 1000), (3, 0b1, 2000, 3000)]),
])
def test_adoption_takes_real_slurms_cpus_and_memory(opts, gpus, alloc, expect):
    from gpupool.conformance.diff_slurm_lockstep import LockstepPolicy
    from gpupool.engine.core import Engine
    from gpupool.engine.policy_api import make_policy
    from tests.unit.sbatch_plans import workload

    from dataclasses import replace as dc_replace

    pool = _pool()
    wl = dc_replace(workload("j", opts + " -A ml-research", 0.0, 1, runtime=600.0), user="alice")
    policy = make_policy("slurm", pool, {"epoch": T0})
    # real Slurm started it 5 s after its submission: gpupool's proposal at once is withdrawn
    # and real Slurm's start adopted
    wrapper = LockstepPolicy(policy, {1: (5.0, gpus)}, 1.0, None, {1: alloc})
    out = Engine(pool, [wl], wrapper, check=True, until=10.0)
    out.run()
    assert wrapper.adopted == {1}
    assert sorted(out.jobs[1].placement) == sorted(expect)


def test_an_agreed_start_takes_real_slurms_cpus_per_node():
    # gpupool's split -N2 -n10 -c8 --gres=gpu:1 puts its tasks 9 + 1 on gpu01-02; real Slurm's
    # output says 1 + 9 on the same GPUs: the decision agrees, and real Slurm's amounts are
    # carried out (else a later adoption could overfill a node)
    from dataclasses import replace as dc_replace

    from gpupool.conformance.diff_slurm_lockstep import LockstepPolicy
    from gpupool.engine.core import Engine
    from gpupool.engine.policy_api import make_policy
    from tests.unit.sbatch_plans import workload

    pool = _pool()
    wl = dc_replace(workload("j", "-N2 -n10 -c8 --gres=gpu:1 -A ml-research", 0.0, 1, runtime=600.0), user="alice")
    policy = make_policy("slurm", pool, {"epoch": T0})
    wrapper = LockstepPolicy(policy, {1: (0.0, ((0, 1), (1, 1)))}, 1.0, None,
                             {1: {0: (8, 120000), 1: (72, 120000)}})
    out = Engine(pool, [wl], wrapper, check=True, until=5.0)
    out.run()
    assert wrapper.agreed == {1} and not wrapper.adopted
    assert sorted((p[0], p[2] // 1000, p[3]) for p in out.jobs[1].placement) == [(0, 8, 120000), (1, 72, 120000)]


def test_a_backfill_start_selects_again_without_the_completing_nodes(tmp_path: Path):
    """slurmctld's backfill decides with will-run, which counts a COMPLETING node as free, but
    starts the job through select_nodes, where cons_tres skips that node: the runs of fitting
    nodes change and so may the choice (docs/differential.md, finding 57; rich seed 5 at
    631.5 s). Job 4 (``--ntasks-per-node=4 -c4``, one GPU) ties on every idle node; with gpu02
    free, the runs are gpu01-02 and gpu04 and the smaller one wins; with gpu02 COMPLETING the
    runs are gpu01 and gpu04 and the first wins."""
    from tests.unit.sbatch_plans import GPU_NODES_CONF, slurm_pool, workload
    from gpupool.engine.core import Engine
    from gpupool.engine.policy_api import make_policy

    pool = slurm_pool(tmp_path, GPU_NODES_CONF.format(last=4))
    names = list(pool.nodes)

    def run(holds):
        jobs = [workload("j1", "-w gpu03 --gres=gpu:8 -t 60", 0.0, 1),
                workload("j2", "-w gpu02 --gres=gpu:4 -t 60", 0.0, 2, runtime=60.0),
                workload("j3", "-N4 --gres=gpu:8 -t 60", 1.0, 3),  # holds the main pass back
                workload("j4", "-N1 --gres=gpu:1 --ntasks-per-node=4 -c4 -t 5", 61.0, 4, runtime=100.0)]
        policy = make_policy("slurm", pool)
        policy.node_holds = list(holds)
        return {j.id: j for j in Engine(pool, jobs, policy, check=True, until=200.0).run().jobs}

    plain = run([])
    assert plain[4].first_start == 90.0 and names[plain[4].placement[0][0]] == "gpu04"
    held = run([(names.index("gpu02"), 60.0, 100.0, 100.0, True)])
    assert held[4].first_start == 90.0 and names[held[4].placement[0][0]] == "gpu01"
    assert plain[4].via == held[4].via == "SchedBackfill"  # backfill's start, not a main pass


def test_a_real_start_over_the_free_memory_over_allocates_the_node_as_real_slurm_did():
    """A real 22.05.8 gave a split ``--gpus-per-task`` job 240000 MB of DefMemPerGPU memory on
    a node with 120000 MB free (rich seed 7, job 27; docs/differential.md, finding 59; its log:
    "node gpu02 memory is overallocated"). The lockstep replay carries the start out as it was,
    the node's memory over-allocated (``NodeTable.memory_overcommit``), and notes it on the job."""
    from dataclasses import replace as dc_replace

    from gpupool.conformance.diff_slurm_lockstep import LockstepPolicy
    from gpupool.engine.core import Engine
    from gpupool.engine.policy_api import make_policy
    from tests.unit.sbatch_plans import workload

    pool = _pool()
    big = dc_replace(workload("j1", "-w gpu01 --gres=gpu:1 --mem=900000 -A ml-platform", 0.0, 1, runtime=600.0),
                     user="alice")
    small = dc_replace(workload("j2", "--gres=gpu:1 -A ml-platform", 1.0, 2, runtime=600.0), user="alice")
    policy = make_policy("slurm", pool, {"epoch": T0})
    wrapper = LockstepPolicy(policy, {1: (0.0, ((0, 0b1),)), 2: (5.0, ((0, 0b10),))}, 1.0, None,
                             {1: {0: (2, 900000)}, 2: {0: (2, 240000)}})
    out = Engine(pool, [big, small], wrapper, check=True, until=20.0)
    out.run()
    assert 2 in wrapper.adopted
    assert [(p[0], p[1], p[3]) for p in out.jobs[2].placement] == [(0, 0b10, 240000)]
    assert out.nodes.free_mem[0] == -140000
    (note,) = wrapper.notes[2]
    assert "240000 MB on gpu01" in note and "100000 MB free" in note and "over-allocated" in note


def test_only_real_starts_may_go_over_a_nodes_memory():
    """In a lockstep replay gpupool's own starts keep the engine's memory check: a policy whose
    own starts ask 2,000,000 MB too much still stops the run (the open replay's engine alike);
    and a start that may go over memory still may not go over a node's CPUs."""
    from dataclasses import replace as dc_replace

    from gpupool.conformance.diff_slurm_lockstep import LockstepPolicy
    from gpupool.engine.core import Engine
    from gpupool.engine.decisions import Start
    from gpupool.engine.policy_api import make_policy
    from gpupool.errors import InvariantViolation
    from tests.unit.sbatch_plans import workload

    pool = _pool()
    wl = dc_replace(workload("j1", "-w gpu01 --gres=gpu:1 --mem=1000 -A ml-platform", 0.0, 1, runtime=60.0),
                    user="alice")

    def greedy():
        policy = make_policy("slurm", pool, {"epoch": T0})
        inner = policy.decide
        policy.decide = lambda snap: [
            dc_replace(d, placement=tuple((n, m, c, b + 2_000_000) for n, m, c, b in d.placement))
            if type(d) is Start else d for d in inner(snap)]
        return policy

    for policy in (greedy(), LockstepPolicy(greedy(), {1: (0.0, ((0, 1),))}, 1.0)):
        with pytest.raises(InvariantViolation, match="exceeds capacity"):
            Engine(pool, [wl], policy, check=True, until=5.0).run()
    engine = Engine(pool, [wl], make_policy("slurm", pool, {"epoch": T0}), check=True)
    engine.nodes.overcommit_now = True
    engine.nodes.allocate([(0, 0b1, 1000, 2_000_000)])  # memory over: let through
    with pytest.raises(InvariantViolation, match="exceeds capacity"):
        engine.nodes.allocate([(0, 0b10, engine.nodes.cpu_total[0], 0)])


def test_real_memory_is_shared_out_pod_by_pod_and_an_agreed_start_keeps_its_own():
    """Task pods sharing a node take real Slurm's memory (or gpupool's own amounts without its
    output) whole, noted once where it is more than the node has free; an agreed start whose
    real amounts are not free keeps gpupool's own (gpupool proposed it within them: its state
    has drifted), noted; real Slurm's total shared over pods that would take more is poured in
    order, never more than the total."""
    from dataclasses import replace as dc_replace

    from gpupool.conformance.diff_slurm_lockstep import LockstepPolicy, _share
    from gpupool.engine.core import Engine
    from gpupool.engine.policy_api import make_policy
    from tests.unit.sbatch_plans import workload

    def run(opts, real2, alloc2=None):
        pool = _pool()
        big = dc_replace(workload("j1", "-w gpu01 --gres=gpu:1 --mem=900000 -A ml-platform", 0.0, 1, runtime=600.0),
                         user="alice")
        other = dc_replace(workload("j2", f"{opts} -A ml-platform", 1.0, 2, runtime=600.0), user="alice")
        wrapper = LockstepPolicy(make_policy("slurm", pool, {"epoch": T0}), {1: (0.0, ((0, 0b1),)), 2: real2}, 1.0,
                                 None, {1: {0: (2, 900000)}, **({2: alloc2} if alloc2 else {})})
        out = Engine(pool, [big, other], wrapper, check=True, until=20.0)
        out.run()
        return wrapper, out.jobs[2]

    wrapper, job = run("-n3 --gpus-per-task=1 --mem-per-gpu=60000", (5.0, ((0, 0b1110),)))
    assert 2 in wrapper.adopted and [p[3] for p in job.placement] == [60000, 60000, 60000]
    assert len(wrapper.notes[2]) == 1 and "180000 MB on gpu01" in wrapper.notes[2][0]
    # gpupool proposes the same start (its own 50000 MB): agreed, carried out with real Slurm's
    opts = "-w gpu01 --gres=gpu:1 --mem-per-gpu=50000"
    probe, _ = run(opts, (15.0, ((0, 0b10),)))
    proposal = probe.proposals[2]
    wrapper, job = run(opts, (proposal.time, proposal.gpus), {0: (2, 240000)})
    assert 2 in wrapper.agreed and [p[3] for p in job.placement] == [50000]
    assert wrapper.notes[2] == ["real Slurm's CPUs and memory per node are more than the nodes have free here: "
                                "carried out with gpupool's own"]
    assert _share(50000, [40000, 40000, 40000]) == [40000, 10000, 0]
    assert _share(130000, [40000, 40000, 40000]) == [50000, 40000, 40000]


def _run_lockstep(jobs: list[tuple[str, float]], real: dict, alloc: dict, until: float = 50.0):
    """Jobs (sbatch options, submit time) of account ml-platform, ids 1, 2, …, replayed in
    lockstep with ``real`` starts and ``alloc`` amounts: (wrapper, jobs by id)."""
    from dataclasses import replace as dc_replace

    from gpupool.conformance.diff_slurm_lockstep import LockstepPolicy
    from gpupool.engine.core import Engine
    from gpupool.engine.policy_api import make_policy
    from tests.unit.sbatch_plans import workload

    pool = _pool()
    wls = [dc_replace(workload(f"j{k}", f"{opts} -A ml-platform", at, k, runtime=600.0), user="alice")
           for k, (opts, at) in enumerate(jobs, start=1)]
    wrapper = LockstepPolicy(make_policy("slurm", pool, {"epoch": T0}), real, 1.0, None, alloc)
    engine = Engine(pool, wls, wrapper, check=True, until=until)
    engine.run()
    return wrapper, engine.jobs


@pytest.mark.parametrize("holder,each,real_amounts,column,own", [
    # gpu01 at 28 CPUs free: real Slurm's 20 CPUs for job 2 would leave job 3 no room
    ("-c100 --mem=1000", "-c10 --mem=1000", {1: {0: (100, 1000)}, 2: {0: (20, 1000)}}, 2, 10000),
    # gpu01 at 100000 MB free: real Slurm's 90000 MB for job 2 would leave job 3 no room
    ("--mem=900000", "--mem-per-gpu=40000", {1: {0: (2, 900000)}, 2: {0: (2, 90000)}}, 3, 40000),
])
def test_an_agreed_start_takes_real_amounts_only_where_the_other_starts_leave_room(holder, each, real_amounts,
                                                                                   column, own):
    """Jobs 2 and 3 start together on gpu01 as gpupool places them; real Slurm's larger amounts
    for job 2 (CPUs, or memory) would leave job 3 no room: job 2 keeps its own, noted."""
    jobs = [(f"-w gpu01 --gres=gpu:1 {holder}", 0.0)] + [(f"-w gpu01 --gres=gpu:1 {each}", 1.0)] * 2
    probe, _ = _run_lockstep(jobs, {1: (0.0, ((0, 0b1),))}, {})
    real = {jid: (p.time, p.gpus) for jid, p in probe.proposals.items()}
    wrapper, got = _run_lockstep(jobs, real, real_amounts)
    assert wrapper.agreed == {1, 2, 3} and [got[j].placement[0][column] for j in (2, 3)] == [own, own]
    assert list(wrapper.notes) == [2] and "CPUs and memory per node" in wrapper.notes[2][0]


def test_an_adopted_start_holds_real_memory_and_gives_way_in_cpus():
    """Real Slurm's 50000 MB over gpupool's three pods of 40000 are shared out in order (never
    more than real Slurm's total); and CPUs beyond what each pod needs give way where gpupool's
    node holds more."""
    wrapper, got = _run_lockstep([("-w gpu01 --gres=gpu:1 --mem=930000", 0.0),
                                  ("-n3 --gpus-per-task=1 --mem-per-gpu=40000", 1.0)],
                                 {1: (0.0, ((0, 1),)), 2: (5.0, ((0, 0b1110),))},
                                 {1: {0: (2, 930000)}, 2: {0: (3, 50000)}})
    assert 2 in wrapper.adopted and [p[3] for p in got[2].placement] == [40000, 10000, 0]
    assert 2 not in wrapper.notes
    wrapper, got = _run_lockstep([("-w gpu01 --gres=gpu:1 -c100 --mem-per-gpu=1000", 0.0),
                                  ("-w gpu01 --gres=gpu:1 -c2 --mem-per-gpu=1000", 1.0)],
                                 {1: (0.0, ((0, 1),)), 2: (5.0, ((0, 2),))}, {2: {0: (60, 1000)}})
    assert got[2].state == "RUNNING" and got[2].placement[0][2] <= 28000 and wrapper.notes[2]


def test_withdrawn_starts_leave_room_and_a_start_that_cannot_fit_waits():
    """A start gpupool withdraws (real Slurm put that job elsewhere) takes no room from an agreed
    start's real amounts; and where gpupool's state holds more CPUs than real Slurm's did (an
    agreed split job kept with gpupool's own amounts), a real start whose least CPUs are not
    free is not carried out: it is noted and tried again each second, the engine never
    over-allocating."""
    jobs = [("-w gpu01 --gres=gpu:1 --mem=900000", 0.0), ("-w gpu01 --gres=gpu:1 --mem-per-gpu=40000", 1.0),
            ("--gres=gpu:1 --mem-per-gpu=40000", 1.0)]
    probe, _ = _run_lockstep(jobs, {1: (0.0, ((0, 0b1),))}, {}, until=5.0)
    real = {1: (0.0, ((0, 0b1),)), 2: (probe.proposals[2].time, probe.proposals[2].gpus), 3: (1.0, ((1, 0b1),))}
    wrapper, got = _run_lockstep(jobs, real, {1: {0: (2, 900000)}, 2: {0: (2, 90000)}}, until=20.0)
    assert got[2].placement[0][3] == 90000 and got[3].placement[0][0] == 1 and not wrapper.notes

    split = "-N2 -n10 -c8 --mem-per-cpu=8000 --gres=gpu:1"
    jobs = [("-w gpu02 --gres=gpu:1 -c100 --mem=1000", 0.0), (split, 1.0), ("-w gpu01 --gres=gpu:1 -c64 --mem=1000", 2.0)]
    probe, _ = _run_lockstep(jobs[:2], {1: (0.0, ((1, 1),))}, {}, until=5.0)
    p = probe.proposals[2]
    _, own = _run_lockstep(jobs[:2], {1: (0.0, ((1, 1),)), 2: (p.time, p.gpus)}, {}, until=5.0)
    amounts = {q[0]: (q[2] // 1000, q[3]) for q in own[2].placement}
    wrapper, got = _run_lockstep(jobs, {1: (0.0, ((1, 1),)), 2: (p.time, p.gpus), 3: (5.0, ((0, 0b10),))},
                                 {2: {0: amounts[1], 1: amounts[0]}}, until=10.0)
    assert got[3].state == "PENDING" and 3 not in wrapper.adopted and "tried again" in wrapper.notes[3][-1]


def test_a_late_start_holds_back_a_real_start_on_its_gpus():
    """A start carried out late (job 3, its CPUs not free until 601 s) still holds its GPU when
    real Slurm put job 4 on that GPU at 606 s: job 4 waits for it instead of taking it twice."""
    split = "-N2 -n10 -c8 --mem-per-cpu=8000 --gres=gpu:1"
    jobs = [("-w gpu02 --gres=gpu:1 -c100 --mem=1000", 0.0), (split, 1.0), ("-w gpu01 --gres=gpu:1 -c64 --mem=1000", 2.0),
            ("-w gpu01 --gres=gpu:1 -c1 --mem=1000", 3.0)]
    probe, _ = _run_lockstep(jobs[:2], {1: (0.0, ((1, 1),))}, {}, until=5.0)
    p = probe.proposals[2]
    _, own = _run_lockstep(jobs[:2], {1: (0.0, ((1, 1),)), 2: (p.time, p.gpus)}, {}, until=5.0)
    amounts = {q[0]: (q[2] // 1000, q[3]) for q in own[2].placement}
    real = {1: (0.0, ((1, 1),)), 2: (p.time, p.gpus), 3: (5.0, ((0, 0b10),)), 4: (606.0, ((0, 0b10),))}
    wrapper, got = _run_lockstep(jobs, real, {2: {0: amounts[1], 1: amounts[0]}}, until=3000.0)
    assert got[3].start == 601.0 and got[4].start == got[3].end
    assert "GPUs on gpu01 are not free" in wrapper.notes[4][0]


def test_the_text_summary_lists_the_replay_notes():
    """What carrying out real Slurm's starts changed is in the text report too, not only in the
    JSON one (a job with a note and no disagreement is listed under the notes alone)."""
    from gpupool.conformance.diff_slurm import JobDiff

    rep = DiffReport("seed", 7, 2, "slurmdbd", 10.0, 1.0, mode="lockstep")
    row = dict(index=0, account="ml-platform", shape="2x2", submit=0.0, real_start=5.0, sim_start=5.0, real_end=9.0,
               sim_end=9.0, real_state="COMPLETED", sim_state="COMPLETED", real_gpus={}, sim_gpus={})
    rep.per_job = [JobDiff(name="j1", job_id=1, **row, notes=["real Slurm held 240000 MB on gpu02"]),
                   JobDiff(name="j2", job_id=2, **row)]
    lines = rep.summary_lines()
    assert "  disagreements: 0 job(s)" in lines and "  replay notes: 1 job(s)" in lines
    assert "    j1 (job 1): real Slurm held 240000 MB on gpu02" in lines and not any("j2" in ln for ln in lines)


def test_a_memory_note_is_kept_only_for_the_try_carried_out():
    """Job 2 cannot be carried out while job 1 still holds its GPU here: the first try is noted
    (not free, tried again), but the memory it would then have gone over is not; when it is
    carried out, after job 1's end, its 240000 MB are free and nothing more is noted."""
    jobs = [("-w gpu01 --gres=gpu:1 --mem=900000", 0.0), ("-w gpu01 --gres=gpu:1 --mem=1000", 1.0)]
    real = {1: (0.0, ((0, 1),)), 2: (5.0, ((0, 1),))}
    wrapper, got = _run_lockstep(jobs, real, {1: {0: (2, 900000)}, 2: {0: (2, 240000)}}, until=1000.0)
    assert got[2].start == got[1].end and got[2].placement[0][3] == 240000
    assert len(wrapper.notes[2]) == 2 and "tried again" in wrapper.notes[2][1]
    assert not any("MB free" in note for note in wrapper.notes[2])


def _inflated(policy, jid: int):
    """``policy`` whose own start of ``jid`` asks 2,000,000 MB too much (a policy bug)."""
    from dataclasses import replace as dc_replace

    from gpupool.engine.decisions import Start

    inner = policy.decide
    policy.decide = lambda snap: [
        dc_replace(d, placement=tuple((n, m, c, b + 2_000_000) for n, m, c, b in d.placement))
        if type(d) is Start and d.job_id == jid else d for d in inner(snap)]
    return policy


@pytest.mark.parametrize("j3_at", [6.0, 10.0])  # in the pass of job 2's adoption / a later one
def test_gpupools_own_start_beside_or_after_an_adopted_over_allocation_is_checked(j3_at):
    """Job 2 is adopted over gpu01's memory; job 3, agreed, is gpupool's own start asking too
    much memory on gpu02: in the same decision list or later, the engine still stops it (the
    permission is job 2's, for one start, and cleared after it; from a reviewer's mutations)."""
    from dataclasses import replace as dc_replace

    from gpupool.conformance.diff_slurm_lockstep import LockstepPolicy
    from gpupool.engine.core import Engine
    from gpupool.engine.policy_api import make_policy
    from gpupool.errors import InvariantViolation
    from tests.unit.sbatch_plans import workload

    pool = _pool()
    wls = [dc_replace(workload(f"j{k}", f"{opts} -A ml-platform", at, k, runtime=rt), user="alice")
           for k, (opts, at, rt) in enumerate([("-w gpu01 --gres=gpu:1 --mem=900000", 0.0, 600.0),
                                               ("--gres=gpu:1", 1.0, 600.0),
                                               ("-w gpu02 --gres=gpu:1 --mem=1000", j3_at, 60.0)], start=1)]
    # at 6.0 gpupool's withdrawn proposal of job 2 holds gpu02's GPU 0 in that pass: job 3 takes 1
    real = {1: (0.0, ((0, 0b1),)), 2: (5.0, ((0, 0b10),)), 3: (j3_at, ((1, 0b10 if j3_at == 6.0 else 0b1),))}
    wrapper = LockstepPolicy(_inflated(make_policy("slurm", pool, {"epoch": T0}), 3), real, 1.0, None,
                             {1: {0: (2, 900000)}, 2: {0: (2, 240000)}})
    engine = Engine(pool, wls, wrapper, check=True, until=30.0)
    with pytest.raises(InvariantViolation, match="exceeds capacity"):
        engine.run()
    assert 2 in wrapper.adopted
    if j3_at == 6.0:  # job 3's start comes first in the list, job 2's adoption after it
        assert engine.nodes.memory_overcommit == {2}
    else:  # job 2 had over-allocated gpu01 before
        assert engine.nodes.free_mem[0] == -140000


def test_a_permission_to_go_over_memory_is_for_one_start():
    """A job named in ``memory_overcommit`` may go over a node's memory on its next start only,
    not on a later piece of a partial start."""
    from dataclasses import replace as dc_replace

    from gpupool.engine.core import Engine
    from gpupool.engine.decisions import Start, WakeAt
    from gpupool.errors import InvariantViolation
    from tests.unit.sbatch_plans import workload

    pool = _pool()
    wl = dc_replace(workload("j1", "-N2 --gres=gpu:1 -A ml-platform", 0.0, 1, runtime=60.0), user="alice")

    class Pieces:
        name = "pieces"
        tick_interval = 0.0
        over_time_limit = 0.0
        calls = 0

        def resolve_request(self, wl):
            return wl

        def decide(self, snap):
            self.calls += 1
            if self.calls == 1:
                snap.nodes.memory_overcommit.add(1)
                return [Start(1, ((0, 1, 1000, 2_000_000),), partial=True), WakeAt(1.0)]
            if self.calls == 2:
                return [Start(1, ((1, 1, 1000, 2_000_000),), partial=True)]
            return []

    policy = Pieces()
    engine = Engine(pool, [wl], policy, check=True, until=5.0)
    with pytest.raises(InvariantViolation, match="exceeds capacity"):
        engine.run()
    assert policy.calls == 2 and engine.nodes.free_mem[0] < 0


@pytest.mark.parametrize("job2,real_cpus,cpus,noted", [
    ("-c2", 100, 64, True),          # a partition that shares none: 64 left
    ("-p shared -c128", 128, 128, False),  # sharing too: the group's CPUs are its to share
])
def test_an_adopted_start_leaves_the_cpus_shared_jobs_hold(tmp_path, job2, real_cpus, cpus, noted):
    """CPUs held by jobs sharing them (OverSubscribe=FORCE:2: half of job 1's 128 at least) are
    not in the node's free count but the engine still keeps them from a start that does not
    share: real Slurm's 100 CPUs for job 2 are cut to what is left, 64, instead of stopping the
    replay on the engine's check; a start that shares them in the same partition is carried out
    as real Slurm did (from a reviewer's script)."""
    import shutil
    from dataclasses import replace as dc_replace

    from gpupool.conformance.diff_slurm_lockstep import LockstepPolicy
    from gpupool.engine.core import Engine
    from gpupool.engine.policy_api import make_policy
    from tests.unit.sbatch_plans import workload

    d = tmp_path / "pool"
    shutil.copytree(SEED_POOL, d)
    conf = (d / "slurm.conf").read_text().replace(
        "PartitionName=train Nodes=gpu[01-04]",
        "PartitionName=shared Nodes=gpu[01-04] OverSubscribe=FORCE:2 MaxTime=60 State=UP\nPartitionName=train Nodes=gpu[01-04]")
    (d / "slurm.conf").write_text(conf)
    pool = _pool(d)
    wls = [dc_replace(workload("j1", "-p shared -w gpu01 --gres=gpu:1 -c128 --mem=1000 -A ml-platform", 0.0, 1,
                               runtime=600.0), user="alice"),
           dc_replace(workload("j2", f"-w gpu01 --gres=gpu:1 {job2} --mem=1000 -A ml-platform", 1.0, 2, runtime=600.0),
                      user="alice")]
    wrapper = LockstepPolicy(make_policy("slurm", pool, {"epoch": T0}), {1: (0.0, ((0, 1),)), 2: (5.0, ((0, 2),))},
                             1.0, None, {1: {0: (128, 1000)}, 2: {0: (real_cpus, 1000)}})
    engine = Engine(pool, wls, wrapper, check=True, until=20.0)
    engine.run()
    assert engine.jobs[2].state == "RUNNING" and engine.jobs[2].placement[0][2] == cpus * 1000
    assert (f"{real_cpus} CPUs on gpu01 with 64 free" in wrapper.notes[2][0]) if noted else 2 not in wrapper.notes


def test_a_cpus_per_gpu_job_without_its_real_cpus_is_adopted(tmp_path):
    """Where the real output gives no CPUs per node, a job asking ``--cpus-per-gpu`` is adopted
    on the real nodes and GPUs with the CPUs each node holds: they go out from the job's total,
    not with each node's GPUs (``spread_gpus._cpus_dealt``), so 8 GPUs at 20 CPUs each ask no
    more than a 128-CPU node (a review found such a job retried every second for ever)."""
    from dataclasses import replace

    from gpupool.conformance.diff_slurm_lockstep import LockstepPolicy
    from gpupool.engine.core import Engine
    from gpupool.engine.policy_api import make_policy
    from tests.unit.sbatch_plans import workload

    pool = load_pool("examples/seed-pool")
    wl = replace(workload("j", "-A ml-platform -t 5 --gpus=16 --cpus-per-gpu=20 --mem=100", 1.0, 1, runtime=60.0),
                 user="dave")
    wrapper = LockstepPolicy(make_policy("slurm", pool), {1: (1.0, ((1, 0xff), (2, 0x7f), (3, 0x01)))}, 1.0)
    job = Engine(pool, [wl], wrapper, check=True, until=30.0).run().jobs[0]
    assert job.first_start is not None and job.first_start < 3.0
    assert sorted((p[0], p[1].bit_count()) for p in job.placement) == [(1, 8), (2, 7), (3, 1)]
