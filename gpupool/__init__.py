"""gpupool: one pool of GPUs, two job shapes, Slurm and Kueue policies side by side."""
__version__ = "0.1.0"


def simulate(*args, **kwargs):
    """See ``gpupool.simulation.simulate`` (imported lazily to keep ``import gpupool`` cheap)."""
    from gpupool.simulation import simulate as _simulate

    return _simulate(*args, **kwargs)
