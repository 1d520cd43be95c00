"""The shared statistics against hand computations."""

import math

import pytest

from veribatch.aggregate.stats import (
    fisher_exact,
    mcnemar_exact,
    paired_bootstrap,
    pass_at_k,
    wilson_interval,
)


def test_pass_at_k_matches_the_binomial_definition() -> None:
    for n, c, k in [(8, 3, 1), (8, 3, 2), (8, 3, 4), (8, 0, 8), (8, 8, 1), (16, 5, 8), (10, 7, 4)]:
        expected = 1 - math.comb(n - c, k) / math.comb(n, k)
        assert pass_at_k(n, c, k) == pytest.approx(expected)
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)      # k=1 is c/n
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)


def test_fisher_exact_on_a_textbook_table() -> None:
    # Lady tasting tea: 3/4 vs 1/4 → two-sided p = 34/70.
    assert fisher_exact(3, 4, 1, 4) == pytest.approx(34 / 70)
    assert fisher_exact(1, 10, 9, 10) == pytest.approx(0.0010923, rel=1e-3)
    assert fisher_exact(5, 10, 5, 10) == pytest.approx(1.0)


def test_mcnemar_and_wilson() -> None:
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)
    assert mcnemar_exact(3, 3) == pytest.approx(1.0)
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, rel=1e-3)


def test_paired_bootstrap_sees_a_consistent_shift_and_not_noise() -> None:
    a = [1.0, 2.0, 3.0, 4.0, 5.0] * 6
    shifted = paired_bootstrap(a, [x + 1.0 for x in a])
    assert shifted.difference == pytest.approx(1.0) and shifted.p_value < 0.01
    same = paired_bootstrap(a, list(a))
    assert same.difference == 0.0 and same.p_value == 1.0
