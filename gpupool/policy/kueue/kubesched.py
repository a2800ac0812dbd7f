"""A kube-scheduler model for pods of admitted workloads (fleet_and_bridge.md §1.4).

Filter: node Ready and schedulable, node selector (pod's plus the assigned flavor's node
labels), GPU product, NoSchedule/NoExecute taints tolerated, requests (cpu, memory,
``nvidia.com/gpu``) within free allocatable. Score: NodeResourcesFit with ``LeastAllocated``
on cpu and memory (weights 1) by default, ``MostAllocated`` and extra resource weights (e.g.
``nvidia.com/gpu``) configurable; ties go to the lowest node index (kube-scheduler picks at
random among ties; gpupool stays deterministic). Pods are bound one at a time; each bind
updates the free table the next pod sees.
"""
from __future__ import annotations

from gpupool.engine.nodes import lowest_bits
from gpupool.model.resources import CPU, GPU, MEMORY
from gpupool.policy.kueue.flavors import BLOCKING_EFFECTS, tolerates
from gpupool.policy.placement import Scratch

STRATEGIES = ("LeastAllocated", "MostAllocated")


class KubeScheduler:
    def __init__(self, pool, strategy: str = "LeastAllocated", weights: dict[str, int] | None = None) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"scoring strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
        self.strategy = strategy
        self.weights = dict(weights or {CPU: 1, MEMORY: 1})
        self.taints = [tuple(t for t in n.taints if t.get("effect") in BLOCKING_EFFECTS) for n in pool.nodes.values()]
        self._filter_memo: dict[tuple, tuple[int, ...]] = {}
        #: The default score (LeastAllocated on cpu and memory, weight 1 each) is computed
        #: inline in ``place_pod``: it runs for every candidate node of every pod.
        self._default = self.strategy == "LeastAllocated" and self.weights == {CPU: 1, MEMORY: 1}

    def _static_candidates(self, nodes, selector: tuple, gpu_type, tolerations: tuple) -> tuple[int, ...]:
        key = (selector, gpu_type, tolerations)
        found = self._filter_memo.get(key)
        if found is None:
            tols = [dict(t) for t in tolerations]
            out = []
            for i in range(len(nodes)):
                labels = nodes.labels[i]
                if any(labels.get(k) != v for k, v in selector):
                    continue
                if gpu_type and nodes.gpu_type[i] != gpu_type:
                    continue
                if any(not tolerates(tols, t) for t in self.taints[i]):
                    continue
                out.append(i)
            found = self._filter_memo[key] = tuple(out)
        return found

    def _score(self, nodes, scratch: Scratch, i: int, cpu: int, mem: int, gpus: int) -> int:
        total = 0
        weight_sum = 0
        for res, w in self.weights.items():
            if res == CPU:
                cap, used = nodes.cpu_total[i], nodes.cpu_total[i] - scratch.free_cpu[i] + cpu
            elif res == MEMORY:
                cap, used = nodes.mem_total[i], nodes.mem_total[i] - scratch.free_mem[i] + mem
            elif res == GPU:
                cap, used = nodes.gpu_total[i], nodes.gpu_total[i] - scratch.free_gpus[i] + gpus
            else:
                continue
            weight_sum += w
            if cap <= 0:
                continue
            if self.strategy == "LeastAllocated":
                total += w * (0 if used > cap else (cap - used) * 100 // cap)
            else:
                total += w * (100 if used > cap else used * 100 // cap)
        return total // weight_sum if weight_sum else 0

    def place_pod(self, nodes, scratch: Scratch, ps, selector: tuple, tolerations: tuple,
                  used: set[int]):
        """Bind one pod of pod set ``ps``: the placement tuple, or None when no node fits."""
        best, best_score = -1, -1
        g, cpu, mem = ps.gpus, ps.cpu_m, ps.memory_mib
        up, drain = nodes.up, nodes.drain
        free_gpus, free_cpu, free_mem = scratch.free_gpus, scratch.free_cpu, scratch.free_mem
        default = self._default
        if default:
            cpu_total, mem_total = nodes.cpu_total, nodes.mem_total
        one_per_node, exclusive = ps.one_per_node, ps.exclusive
        for i in self._static_candidates(nodes, selector, ps.gpu_type, tolerations):
            if not up[i] or drain[i] or (one_per_node and i in used):
                continue
            if exclusive:
                if not (scratch.free_mask[i] == nodes.full_mask[i] and free_cpu[i] == nodes.cpu_total[i]
                        and free_mem[i] == nodes.mem_total[i]):
                    continue
            elif free_gpus[i] < g or free_cpu[i] < cpu or free_mem[i] < mem:
                continue
            if default:
                # ``_score`` for LeastAllocated on cpu and memory: (cap - used) = free - request.
                cap, left = cpu_total[i], free_cpu[i] - cpu
                c = 0 if cap <= 0 or left < 0 else left * 100 // cap
                cap, left = mem_total[i], free_mem[i] - mem
                score = (c + (0 if cap <= 0 or left < 0 else left * 100 // cap)) // 2
            else:
                score = self._score(nodes, scratch, i, cpu, mem, g)
            if score > best_score:
                best, best_score = i, score
        if best < 0:
            return None
        if ps.exclusive:
            pod = (best, scratch.free_mask[best], scratch.free_cpu[best], scratch.free_mem[best])
        else:
            pod = (best, lowest_bits(scratch.free_mask[best], g) if g else 0, cpu, mem)
        scratch.take((pod,))
        used.add(best)
        return pod
