"""Statistics more than one task needs: the unbiased pass@k estimator, exact tests for
proportions and a paired bootstrap.  Pure Python (math only), so aggregation and
`launch regress` need no SciPy.

Why these: pass@k from n ≥ k samples is the estimator of Chen et al. (2021) that the
DafnyComp paper reports; proportions of instances (accuracy, % verified, % solved) are
compared with exact tests because a nightly slice has tens of instances, where normal
approximations mislead; means of per-instance values (speedups) have no closed form worth
trusting, so they are bootstrapped over instances, paired when both runs saw the same ones.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass


def geometric_mean(values: Sequence[float]) -> float:
    """exp(mean(log v)) of positive values: the mean of ratios (speedups) that does not let
    one large ratio outweigh many small ones (InvBench's Speedup_all in some rows)."""
    if not values or any(v <= 0 for v in values):
        raise ValueError("geometric mean needs at least one value, all positive")
    return math.exp(math.fsum(math.log(v) for v in values) / len(values))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn without replacement from n samples,
    c of them correct, is correct: 1 - C(n-c, k) / C(n, k).  Requires n ≥ k."""
    if not 0 <= c <= n:
        raise ValueError(f"pass@k: need 0 <= c <= n, got c={c}, n={n}")
    if k < 1 or k > n:
        raise ValueError(f"pass@k: need 1 <= k <= n, got k={k}, n={n}")
    if n - c < k:
        return 1.0
    # The product form avoids huge binomials: prod_{i=n-c+1}^{n} (1 - k/i).
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def mean_pass_at_k(samples: Sequence[tuple[int, int]], k: int) -> float:
    """Mean of pass@k over instances, each given as (n samples, c correct)."""
    if not samples:
        return float("nan")
    return sum(pass_at_k(n, c, k) for n, c in samples) / len(samples)


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval for a proportion (95 % by default)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def _hypergeom_pmf(k: int, n1: int, n2: int, t: int) -> float:
    return math.comb(n1, k) * math.comb(n2, t - k) / math.comb(n1 + n2, t)


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p-value of Fisher's exact test for k1/n1 vs k2/n2 (independent samples):
    the probability, given the margins, of a table at most as likely as the observed one."""
    if not (0 <= k1 <= n1 and 0 <= k2 <= n2):
        raise ValueError(f"fisher_exact: bad counts {k1}/{n1}, {k2}/{n2}")
    t = k1 + k2
    if n1 == 0 or n2 == 0 or t == 0 or t == n1 + n2:
        return 1.0
    observed = _hypergeom_pmf(k1, n1, n2, t)
    lo, hi = max(0, t - n2), min(t, n1)
    p = sum(q for k in range(lo, hi + 1)
            if (q := _hypergeom_pmf(k, n1, n2, t)) <= observed * (1 + 1e-7))
    return min(1.0, p)


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar test for paired outcomes (the same instances in both runs):
    `only_a` instances succeed only in run A, `only_b` only in run B."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


@dataclass(frozen=True)
class BootstrapResult:
    difference: float          # mean(b) - mean(a) on the observed data
    low: float                 # lower end of the (1 - alpha) percentile interval
    high: float
    p_value: float             # two-sided: how often the resampled difference crosses 0


def paired_bootstrap(a: Sequence[float], b: Sequence[float], *, resamples: int = 2000,
                     alpha: float = 0.05, seed: int = 0) -> BootstrapResult:
    """Bootstrap over instances of mean(b) - mean(a), where a[i] and b[i] belong to the same
    instance (resampling pairs keeps the instance-to-instance correlation).  Seeded, so a
    report is reproducible."""
    if len(a) != len(b):
        raise ValueError(f"paired_bootstrap: {len(a)} vs {len(b)} values (not paired)")
    n = len(a)
    if n == 0:
        return BootstrapResult(float("nan"), float("nan"), float("nan"), 1.0)
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    observed = sum(diffs) / n
    rng = random.Random(seed)
    stats = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    lo = stats[int(math.floor(alpha / 2 * (resamples - 1)))]
    hi = stats[int(math.ceil((1 - alpha / 2) * (resamples - 1)))]
    below = sum(1 for s in stats if s <= 0) / resamples
    above = sum(1 for s in stats if s >= 0) / resamples
    return BootstrapResult(observed, lo, hi, min(1.0, 2 * min(below, above)))
