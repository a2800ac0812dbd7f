"""Will-run estimates and GPU/node choice (spec §2, §6, §7); the backfill map is tested in
test_slurm_node_space.py."""
from gpupool.engine.nodes import NodeTable
from gpupool.model.pool import Gpu, Node, Pool
from gpupool.model.workload import PodSet, Workload
from gpupool.policy.slurm.backfill import will_run
from gpupool.policy.slurm.select import Free, gpu_env, place


def _pool(n=4, cpus=32, gpus=4, weights=None):
    nodes = {}
    for i in range(n):
        nodes[f"n{i + 1}"] = Node(f"n{i + 1}", cpus, 100000, tuple(Gpu(k) for k in range(gpus)),
                                  weight=(weights or [1] * n)[i], state="IDLE")
    return Pool("t", nodes=nodes)


def _wl(count=1, gpus=0, cpus=1, exclusive=False):
    return Workload(1, "j", (PodSet(count=count, gpus=gpus, cpu_m=cpus * 1000, one_per_node=True,
                                    exclusive=exclusive),))


def test_will_run_uses_limit_ends():
    nodes = NodeTable(_pool(n=1, gpus=4))
    free = Free(nodes)
    running = (0, 0b0011, 4000, 0)
    free.take([running])
    free.take([(0, 0b0100, 4000, 0)])
    ends = [(1800.0, 1, (running,), 1800.0), (7201.0, 2, ((0, 0b0100, 4000, 0),), 7201.0)]
    est, pl = will_run(_wl(gpus=3, cpus=4), (0,), None, free, ends, 30.0)
    assert est == 1800.0 and pl[0][1] == 0b1011  # GPUs 0,1,3
    est, pl = will_run(_wl(gpus=1, cpus=4), (0,), None, free, ends, 30.0)
    assert est == 30.0 and pl[0][1] == 0b1000


def test_will_run_frees_running_jobs_in_batches_like_cons_tres():
    """22.05 frees running jobs in batches (30 s window from an epoch-aligned barrier, doubling)
    and plans at the end of the batch's last job: the job that ends at 160 opens a batch that
    also takes the one ending at 170, so the plan is 170 on the two lowest nodes, not 160 on
    n1+n3 (what freeing one job at a time gives). Seen on a real 22.05.8 (docs/differential.md)."""
    nodes = NodeTable(_pool(n=3, gpus=1))
    free = Free(nodes)
    jobs = [(2, 100.0), (0, 160.0), (1, 170.0)]
    ends = []
    for seq, (node, end) in enumerate(jobs, 1):
        pl = (node, 0b1, 1000, 0)
        free.take([pl])
        ends.append((end, seq, (pl,), end))
    est, pl = will_run(_wl(count=2, gpus=1), (0, 1, 2), None, free, ends, 10.0)
    assert est == 170.0 and sorted(p[0] for p in pl) == [0, 1]
    # the barrier is aligned in epoch time: shifted by 20 s, 160 and 170 fall in different windows
    est, pl = will_run(_wl(count=2, gpus=1), (0, 1, 2), None, free, ends, 10.0, epoch=20.0)
    assert est == 160.0 and sorted(p[0] for p in pl) == [0, 2]


def test_will_run_sweeps_a_later_job_past_one_with_no_usable_node():
    """cons_tres's will-run skips a running job with no usable node without closing the batch:
    jobs 98 (n2) and 99 (n1, not usable) both end at 1529 s, 98 first (ties go by job id), and
    job 53 (n3, ends 1771 s) joins the batch, so a whole-node job is planned at 1771 s, not at
    1529 s on n2 (a real 22.05.8, docs/differential.md, finding 23). With 99 ahead of 98 the
    batch closes after 98 and the plan is 1529 s."""
    nodes = NodeTable(_pool(n=3, gpus=8))
    free = Free(nodes)
    p98, p99, p53 = (1, 0b11, 1000, 0), (0, 0xFF, 1000, 0), (2, 0xFF, 1000, 0)
    free.take([p98, p99, p53])
    whole = _wl(gpus=8)
    ends = [(1529.0, 98, (p98,), 1529.0), (1529.0, 99, (p99,), 1529.0), (1771.0, 53 + 1000, (p53,), 1771.0)]
    est, pl = will_run(whole, (0, 1, 2), frozenset({1, 2}), free, sorted(ends), 1503.0, epoch=-1.0)
    assert est == 1771.0 and pl[0][0] in (1, 2)
    swapped = [(1529.0, 97, (p99,), 1529.0), (1529.0, 98, (p98,), 1529.0), (1771.0, 1053, (p53,), 1771.0)]
    est, pl = will_run(whole, (0, 1, 2), frozenset({1, 2}), free, swapped, 1503.0, epoch=-1.0)
    assert est == 1529.0 and pl[0][0] == 1


def test_will_run_guesses_the_end_of_a_job_past_its_limit():
    """A job already past its limit is freed in the first batch; the plan is its limit end +
    KillWait + OverTimeLimit (the ``free_at`` entry), at least now + 1."""
    nodes = NodeTable(_pool(n=1, gpus=1))
    free = Free(nodes)
    pl = (0, 0b1, 1000, 0)
    free.take([pl])
    est, got = will_run(_wl(gpus=1), (0,), None, free, [(50.0, 1, (pl,), 90.0)], 60.0, now=60.0)
    assert est == 90.0 and got[0][1] == 0b1
    est, _ = will_run(_wl(gpus=1), (0,), None, free, [(50.0, 1, (pl,), 60.0)], 60.0, now=60.0)
    assert est == 61.0


def test_gpu_lowest_free_index_and_env():
    nodes = NodeTable(_pool(n=1, gpus=4))
    free = Free(nodes)
    pl1 = place(_wl(gpus=2, cpus=4), (0,), free)
    assert pl1[0][1] == 0b0011
    free.take(pl1)
    pl2 = place(_wl(gpus=1, cpus=4), (0,), free)
    assert pl2[0][1] == 0b0100
    free.take(pl2)
    free.give(pl1)
    pl3 = place(_wl(gpus=3, cpus=4), (0,), free)
    assert pl3[0][1] == 0b1011
    assert gpu_env(pl3, nodes, True) == [{"SLURM_JOB_GPUS": "0,1,3", "SLURM_GPUS_ON_NODE": "3",
                                          "CUDA_VISIBLE_DEVICES": "0,1,2"}]
    assert gpu_env(pl3, nodes, False)[0]["CUDA_VISIBLE_DEVICES"] == "0,1,3"


def test_node_choice_weight_then_best_fit():
    nodes = NodeTable(_pool(n=4, weights=[5, 1, 1, 1]))
    free = Free(nodes)
    free.take([(2, 0, 30000, 0)])  # n3 has 2 CPUs left: tightest fit for a 1-CPU job
    assert place(_wl(cpus=1), (0, 1, 2, 3), free)[0][0] == 2
    assert place(_wl(cpus=4), (0, 1, 2, 3), free)[0][0] == 1  # lowest index among equal fits
    two = place(_wl(count=2, cpus=4), (0, 1, 2, 3), free)
    assert sorted(p[0] for p in two) == [1, 3]  # n3 is too full for 4 CPUs; weight-5 n1 is last resort
    free.give([(2, 0, 30000, 0)])
    assert sorted(p[0] for p in place(_wl(count=2, cpus=4), (0, 1, 2, 3), free)) == [1, 2]
    ex = place(_wl(exclusive=True), (0, 1, 2, 3), free)
    assert ex[0][0] == 1 and ex[0][1] == 0b1111 and ex[0][2] == 32000


def test_one_node_request_takes_the_tightest_run_of_consecutive_nodes():
    """cons_tres 22.05: among runs of consecutive fitting nodes the run with the fewest free CPUs
    wins, then the tightest node in it. n1+n2 (half used, 2 x 30 free CPUs) lose to the lone
    empty n4 (32), although n1 alone is tighter; seen on a real 22.05.8 (docs/differential.md)."""
    nodes = NodeTable(_pool(n=4, gpus=8, cpus=32))
    free = Free(nodes)
    free.take([(0, 0b1111, 2000, 0), (1, 0b1111, 2000, 0), (2, 0xFF, 2000, 0)])  # n3 full
    pl = place(_wl(gpus=1, cpus=1), (0, 1, 2, 3), free)
    assert pl[0][0] == 3 and pl[0][1] == 0b1
    # with n3 usable again the four nodes form one run: the tightest node in it, n1
    free.give([(2, 0xFF, 2000, 0)])
    pl = place(_wl(gpus=1, cpus=1), (0, 1, 2, 3), free)
    assert pl[0][0] == 0 and pl[0][1] == 0b10000
