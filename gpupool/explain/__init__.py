"""``gpupool explain``: Kueue's next scheduling cycle(s) on a kubectl object dump, and why.

``dump.load_dump`` reads the dump into a ``KueueState``; ``run.explain`` runs cycles into an
``Explanation``; ``messages`` words Kueue's condition messages; ``render`` prints. See docs/explain.md.
"""
from gpupool.explain.dump import DumpState, load_dump
from gpupool.explain.run import Explanation, explain

__all__ = ["DumpState", "Explanation", "explain", "load_dump"]
