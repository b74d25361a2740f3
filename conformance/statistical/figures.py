"""The lane's arithmetic: Wilson intervals for pass rates, standard errors for means, pass@k, and the chance a GRPO
group of G samples has rewards that differ, P(signal) = 1 - p^G - (1 - p)^G."""

import math
import statistics
from collections.abc import Sequence

__all__ = ["Z", "mean_se", "pass_at_k", "signal", "signal_interval", "wilson"]

Z = 1.96  # two-sided 95 %


def wilson(passes: int, n: int) -> tuple[float, float]:
    """The Wilson score interval of a pass rate; (0, 1) when nothing was played."""
    if n == 0:
        return 0.0, 1.0
    p = passes / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def mean_se(values: Sequence[float]) -> tuple[float | None, float | None]:
    """The mean and its standard error (None with fewer than two values)."""
    if not values:
        return None, None
    mean = statistics.fmean(values)
    return mean, (statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None)


def pass_at_k(passes: int, n: int, k: int) -> float | None:
    """The unbiased estimate that at least one of k samples (of the n played) passes."""
    if n == 0 or k > n:
        return None
    if n - passes < k:
        return 1.0
    return 1.0 - math.comb(n - passes, k) / math.comb(n, k)


def signal(p: float, group: int) -> float:
    """The chance that a group of `group` samples with pass rate p does not all agree."""
    return max(0.0, 1.0 - p**group - (1.0 - p) ** group)


def signal_interval(low: float, high: float, group: int) -> tuple[float, float]:
    """P(signal) over a pass rate's interval: it rises to p = 1/2 and falls after, so the top is there when inside."""
    ends = (signal(low, group), signal(high, group))
    top = signal(0.5, group) if low <= 0.5 <= high else max(ends)
    return min(ends), top
