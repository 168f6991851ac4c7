"""Small figures the benchmarks print."""

import math
import resource


def percentile(ordered: list[float], percent: float) -> float:
    """The nearest-rank percentile of an ascending list."""
    position = max(math.ceil(len(ordered) * percent / 100) - 1, 0)
    return ordered[position]


def max_rss_mb() -> float:
    """This process's peak resident set size."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
