"""Plain data shared by every part of gpupool (no I/O, no policy)."""
from gpupool.model.pool import Gpu, Node, Pool
from gpupool.model.workload import PodSet, Service, Workload

__all__ = ["Gpu", "Node", "Pool", "PodSet", "Service", "Workload"]
