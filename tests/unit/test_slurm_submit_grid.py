"""sbatch's answers for a sample of option sets over small partition sets, against probes p140
and p141 on a real 22.05.8 (docs/differential.md, finding 88): p140 made 3,240 sbatch calls, 18 partition sets
under EnforcePartLimits NO, ANY and ALL, one slurmctld reconfigured between sets. The cases
here are those gpupool answered differently before finding 88; all 3,240 answers are kept
with the probe in the project's notes.

What they show (22.05.8 source in brackets):

* select's node filter comes before the node counts: no node with the CPUs of one task
  (``-c200`` on 128-CPU nodes) or the memory per node asked (``--mem=2000000`` on 1000000 MB
  nodes) is "Requested node configuration is not available" even where MinNodes or MaxNodes
  leave no count (``_build_node_list`` before ``get_node_cnts``); memory left to DefMemPerGPU
  filters nothing;
* task pods spread over no more nodes than MaxNodes (``-n200`` in a MaxNodes=1 partition);
* the CPU test counts the tasks as submitted, not as a MinNodes partition spreads them;
* a ``--nodelist`` is a node count for the MinNodes test (sbatch sets ``min_nodes`` to its
  node count);
* a ``--nodes`` range's largest count is lowered to ``--gpus`` before the MaxNodes test (sbatch's
  own ``gres_job_state_validate``).
"""
from __future__ import annotations

import pytest

from gpupool.policy.slurm.submit_check import submit_rejection

from tests.unit.sbatch_plans import NODES_EPL_CONF, slurm_pool, workload

HDR = NODES_EPL_CONF
P = {
 "p": "PartitionName=p Nodes=gpu[01-04] Default=YES MaxTime=60 PriorityTier=1 State=UP",
 "pd": "PartitionName=p Nodes=gpu[01-04] Default=YES DefaultTime=1 MaxTime=3 PriorityTier=1 State=UP",
 "q": "PartitionName=q Nodes=gpu[03-04] MaxTime=3 PriorityTier=1 State=UP",
 "q2": "PartitionName=q Nodes=gpu[03-04] MaxTime=3 PriorityTier=2 State=UP",
 "qD": "PartitionName=q Nodes=gpu[03-04] DefaultTime=1 MaxTime=3 PriorityTier=2 State=DOWN",
 "m": "PartitionName=m Nodes=gpu[03-04] MinNodes=2 MaxTime=3 PriorityTier=1 State=UP",
 "m2": "PartitionName=m Nodes=gpu[03-04] MinNodes=2 MaxTime=3 PriorityTier=2 State=UP",
 "x": "PartitionName=x Nodes=gpu[01-02] MaxNodes=1 DefaultTime=1 MaxTime=1 PriorityTier=1 State=UP",
 "xD": "PartitionName=x Nodes=gpu[01-02] MaxNodes=1 DefaultTime=1 MaxTime=1 PriorityTier=1 State=DOWN",
 "x2": "PartitionName=x Nodes=gpu[01-02] MaxNodes=1 DefaultTime=5 MaxTime=10 PriorityTier=2 State=UP",
 "s": "PartitionName=s Nodes=gpu04 MaxTime=60 PriorityTier=1 State=UP",
 "s2": "PartitionName=s Nodes=gpu04 MaxNodes=2 MinNodes=1 MaxTime=60 PriorityTier=3 State=UP",
}

#: (EnforcePartLimits, partition set, sbatch options) -> the real answer (None: queued)
CASES = {
    ("ALL", "p+x2", "-p x -n200"): "Requested node configuration is not available",
    ("ANY", "x", "-p x -n200"): "Requested node configuration is not available",
    ("ANY", "s+x2", "-p x -n200 --time-min=5 --exclusive"): "Requested node configuration is not available",
    ("NO", "p+m", "-p p,m -N1 -c200 -t 1"): "Requested node configuration is not available",
    ("NO", "m+x", "-p m,x -N2 -c200 --mem=2000000"): "Requested node configuration is not available",
    ("NO", "pd+xD", "-p x -N5 --gpus=8 -t 5 --mem=2000000"): "Requested node configuration is not available",
    ("NO", "q2+x", "-p x,q -N2 -c200 -t 100 -w gpu01"): "Requested node configuration is not available",
    ("ALL", "m", "-p m -c200 -t 1"): "Requested node configuration is not available",
    ("ALL", "p+m", "-p m -c200 -t 5"): "Requested time limit is invalid (missing or exceeds some limit)",
    ("ANY", "m2+s", "-p m -c200 --time-min=5 --mem=2000000"):
        "Invalid time-min specification (exceeds job's time or other limits)",
    ("ALL", "m", "-p m -n2 -c64 -t 5 -w gpu04"): "Node count specification invalid",
    ("ANY", "m", "-p m --gres=gpu:8 -t 1 -w gpu04"): "Node count specification invalid",
    ("ANY", "p+m2", "-p m --gpus=1 -w gpu04"): "Node count specification invalid",
    ("ALL", "p+m", "-p m -c200 --time-min=5 -w gpu04"): "Node count specification invalid",
    ("ALL", "x", "-p x -N1-3 --gpus=1 -t 1 --exclusive"): None,
    ("ANY", "q+s2", "-p s -N1-3 --gpus=1 -t 5"): None,
    ("ANY", "x", "-p x -N1-3 --gpus=1 -t 5 --mem=2000000"): "Requested time limit is invalid (missing or exceeds some limit)",
    ("ANY", "x", "-p x -N1-3 --gpus=8 --time-min=5"): "Node count specification invalid",
    ("ALL", "pd+xD", "-p p,x -N3 --gpus=8 -t 1 --mem=2000000"): None,
    # probe p141 (3,600 more answers, other options): a range without --ntasks asks one task's
    # CPUs; a --nodelist of two nodes is no reason to hold task pods to MaxNodes=1
    ("ALL", "q", "-p q -N2-4 -c129 -x gpu04"): "Requested node configuration is not available",
    ("ALL", "p+m", "-p m -N2-4 -c129 -t 4 --exclusive"): "Requested time limit is invalid (missing or exceeds some limit)",
    ("ANY", "s+x2", "-p s,x -N2-4 -c129 --time-min=1 -x gpu04"): "Node count specification invalid",
    ("NO", "q+s2", "-p q -N2-4 -c129 --mem=900000"): "Requested node configuration is not available",
    ("NO", "q2+x", "-p q,x -n8 -c32 --time-min=1 -w gpu01,gpu02"): None,
    # probe p141 again (finding 95): sbatch raises --nodes' least to a --nodelist's hosts
    # (``-N1-2 -w gpu01,gpu02`` is ``-N2``, two tasks), a list without --nodes sends no
    # largest count (no MaxNodes test at submit: the time limit's refusal comes first), and
    # slurmctld raises the stored least to the list (MaxNodes=1 partitions refuse or hold it)
    ("ALL", "p+m2", "-p p,m -N1-2 --gpus=3 --time-min=1 -w gpu01,gpu02"): "Requested nodes not in this partition",
    ("ALL", "p+x2", "-p x,p --mem-per-cpu=9000 -n2 -w gpu01,gpu02"): "Requested partition configuration not available now",
    ("ALL", "pd+xD", "-p p,x -N1-2 --gpus=3 --time-min=1 -w gpu01,gpu02"): "Requested partition configuration not available now",
    ("ALL", "q", "-p q -N1-2 -c129 -t 2 -w gpu01,gpu02"): "More processors requested than permitted",
    ("ALL", "s", "-p s -N1-2 --gpus=3 -t 2 -w gpu01,gpu02"): "Node count specification invalid",
    ("ALL", "x", "-p x --gpus=3 -t 4 -w gpu01,gpu02"): "Requested time limit is invalid (missing or exceeds some limit)",
    ("ALL", "x", "-p x -N1-2 --cpus-per-gpu=20 --gpus=2 -w gpu01,gpu02"): "Node count specification invalid",
    ("ANY", "m+x", "-p x,m -n2 --ntasks-per-node=2 --time-min=1 -w gpu01,gpu02"): "Requested node configuration is not available",
    ("ANY", "pd+x", "-p p,x --gpus=3 -t 4 -w gpu01,gpu02"): "Requested time limit is invalid (missing or exceeds some limit)",
    ("ANY", "pd+x", "-p x -N1-2 --cpus-per-gpu=20 --gpus=2 --time-min=1 -w gpu01,gpu02"): "Node count specification invalid",
    ("ANY", "q+s2", "-p q -N1-2 --gpus=3 -t 2 -w gpu01,gpu02"): "Requested nodes not in this partition",
    ("ANY", "q2+x", "-p x --gpus=3 -t 4 -w gpu01,gpu02"): "Requested time limit is invalid (missing or exceeds some limit)",
    ("ANY", "s+x2", "-p x,s -n3 -w gpu01,gpu02"): "Requested partition configuration not available now",
    ("NO", "m+x", "-p m,x -N1-2 --mem=0 --time-min=1 -w gpu01,gpu02"): None,
    ("NO", "m+x", "-p x -N1-2 --cpus-per-gpu=20 --gpus=2 --time-min=1 -w gpu01,gpu02"): None,
    ("NO", "m2+s", "-p m -N1-2 --cpus-per-gpu=20 --gpus=2 -t 4 -w gpu01,gpu02"): None,
    ("NO", "m2+s", "-p s,m -N1-2 --cpus-per-gpu=20 --gpus=2 -t 4 -w gpu01,gpu02"): "Requested node configuration is not available",
    ("NO", "p+m", "-p m -N1-2 --cpus-per-gpu=20 --gpus=2 -t 4 -w gpu01,gpu02"): None,
    ("NO", "q2+x", "-p x -N1-2 --gpus=3 -w gpu01,gpu02"): None,
    ("NO", "s", "-p s -N1-2 -n3 -t 2 -w gpu01,gpu02"): None,
    ("NO", "x", "-p x -N1-2 --gpus=3 -t 4 -w gpu01,gpu02"): None,
    # probe p142: --exclusive beside --cpus-per-gpu needs that many CPUs for every GPU of a
    # node (160 for 8 GPUs on 128-CPU nodes: refused; 16 a GPU: taken)
    ("NO", "p", "-p p --cpus-per-gpu=20 --gpus=2 --exclusive -t 1"): "Requested node configuration is not available",
    ("NO", "p", "-p p --cpus-per-gpu=20 --gres=gpu:2 --exclusive -t 1"): "Requested node configuration is not available",
    ("NO", "p", "-p p --cpus-per-gpu=16 --gpus=8 --exclusive -t 1"): None,
    ("NO", "p", "-p p --cpus-per-gpu=20 --gpus=2 -t 1"): None,
    # from the source, not probed (a review): --mem-per-cpu above RealMemory filters every
    # node; --cpus-per-gpu without -c asks a CPU a task of the partition
    ("NO", "p+m", "-p p,m -N1 --mem-per-cpu=1000001 -t 1"): "Requested node configuration is not available",
    ("ALL", "s", "-p s --gres=gpu:8 --cpus-per-gpu=17 -t 1"): "Requested node configuration is not available",
}


@pytest.mark.parametrize(("epl", "parts", "opts"), list(CASES))
def test_sbatch_answers_as_the_real_system_gave_them(tmp_path, epl, parts, opts):
    pool = slurm_pool(tmp_path, HDR.format(epl=epl) + "\n".join(P[k] for k in parts.split("+")) + "\n")
    assert submit_rejection(pool, workload("J", opts, 0.0, 1)) == CASES[(epl, parts, opts)]


@pytest.mark.parametrize(("gres", "opts", "real"), [
    ("gpu:8", "-c40 --cpus-per-gpu=1 --gres=gpu:2", None),
    ("gpu:8", "-c4 --cpus-per-gpu=20 --gres=gpu:2", "Requested node configuration is not available"),
    ("gpu:a100:4,gpu:v100:4", "--gres=gpu:a100:2 --cpus-per-gpu=20", None),
])
def test_an_exclusive_job_needs_its_cpus_per_gpu_for_each_gpu_of_the_type_asked(tmp_path, gres, opts, real):
    """The count is ``--cpus-per-gpu`` as asked, whatever ``-c`` says, for each GPU of the type
    asked on the node (cons_common ``gres_select_filter_remove_unusable``; from the source, not
    probed): 40 CPUs at one a GPU fit 8 GPUs, 4 CPUs at 20 a GPU do not, and 20 for each of
    four a100s fit 128 CPUs."""
    conf = NODES_EPL_CONF.format(epl="ALL").replace("Gres=gpu:8", f"Gres={gres}")
    pool = slurm_pool(tmp_path, conf + "PartitionName=p Nodes=gpu[01-04] Default=YES MaxTime=60 State=UP\n")
    assert submit_rejection(pool, workload("J", f"-p p {opts} --exclusive -t 1", 0.0, 1)) == real
