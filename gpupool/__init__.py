"""gpupool: one pool of GPUs, two job shapes, Slurm and Kueue policies side by side."""
__version__ = "0.1.0"
