"""One bisection for the scheduler's monotone questions ("after how many freed jobs does this
pod fit?", "how many victims does this job need?"): both only ever turn from no to yes."""
from __future__ import annotations

from collections.abc import Callable


def first_true(lo: int, hi: int, pred: Callable[[int], bool]) -> int:
    """The least ``k`` in ``[lo, hi]`` with ``pred(k)``, given that ``pred`` is monotone (false,
    then true) and ``pred(hi)`` holds; ``pred(hi)`` itself is not evaluated."""
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo
