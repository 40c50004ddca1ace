"""evaluation.metrics.stats: bootstrap coverage, paired tests' calibration, power, symmetry, edge cases."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from evaluation.metrics.stats import bootstrap_ci, paired_test, summarize
from evaluation.results import Summary


@pytest.mark.parametrize("distribution", ["normal", "bernoulli"])
def test_bootstrap_ci_coverage(distribution):
    """300 samples of n = 200 with a known mean: the 95% interval covers it 92-98% of the time."""
    rng = np.random.default_rng(123)
    mean = 0.3
    covered = 0
    for trial in range(300):
        normal = distribution == "normal"
        sample = rng.normal(mean, 1.0, size=200) if normal else (rng.random(200) < mean).astype(float)
        low, high = bootstrap_ci(sample, resamples=1000, confidence=0.95, seed=trial)
        covered += low <= mean <= high
    assert 0.92 <= covered / 300 <= 0.98


def test_bootstrap_ci_edge_cases():
    assert all(math.isnan(v) for v in bootstrap_ci(np.zeros(0)))
    assert bootstrap_ci(np.full(10, 0.25)) == (0.25, 0.25)
    values = np.random.default_rng(0).random(50)
    assert bootstrap_ci(values, seed=3) == bootstrap_ci(values, seed=3)
    low, high = bootstrap_ci(values)
    assert low < values.mean() < high
    narrow = bootstrap_ci(values, confidence=0.5)
    assert low < narrow[0] < narrow[1] < high
    with pytest.raises(ValueError):
        bootstrap_ci(values, confidence=1.0)


def test_summarize():
    values = np.array([1.0, 0.0, 0.5, 0.5])
    summary = summarize(values, resamples=500)
    assert isinstance(summary, Summary)
    assert summary.value == 0.5 and summary.n_queries == 4
    assert 0.0 <= summary.ci_low <= 0.5 <= summary.ci_high <= 1.0
    empty = summarize(np.zeros(0))
    assert math.isnan(empty.value) and empty.n_queries == 0


@pytest.mark.parametrize("method", ["randomization", "bootstrap"])
def test_paired_test_identical_symmetric_and_errors(method):
    rng = np.random.default_rng(0)
    a, b = rng.random(100), rng.random(100)
    assert paired_test(a, a, method=method) == 1.0
    assert paired_test(a, b, method=method, seed=2) == paired_test(b, a, method=method, seed=2)
    with pytest.raises(ValueError):
        paired_test(a, b[:-1], method=method)
    assert math.isnan(paired_test(np.zeros(0), np.zeros(0), method=method))


def test_paired_test_unknown_method():
    with pytest.raises(ValueError):
        paired_test(np.ones(3), np.zeros(3), method="t-test")  # type: ignore[arg-type]


@pytest.mark.parametrize("method", ["randomization", "bootstrap"])
def test_paired_test_detects_a_real_difference(method):
    rng = np.random.default_rng(1)
    a = rng.random(300)
    b = a + 0.1 + rng.normal(0, 0.2, size=300)
    assert paired_test(a, b, method=method, resamples=2000) < 0.01


@pytest.mark.parametrize("method", ["randomization", "bootstrap"])
def test_paired_test_is_calibrated_under_the_null(method):
    """a and b from the same distribution: p-values spread over (0, 1], few below 0.05."""
    rng = np.random.default_rng(2)
    p = np.array(
        [paired_test(rng.random(100), rng.random(100), method=method, resamples=500, seed=i) for i in range(60)]
    )
    assert 0.35 <= p.mean() <= 0.65
    assert np.mean(p < 0.05) <= 0.15
    assert p.min() > 0.0 and p.max() <= 1.0


def test_randomization_matches_exact_enumeration():
    """n = 10: every one of the 2**10 sign patterns; the Monte Carlo p-value is within 0.02 of it."""
    rng = np.random.default_rng(3)
    a, b = rng.random(10), rng.random(10)
    d = a - b
    observed = abs(d.mean())
    signs = np.array(list(itertools.product([-1.0, 1.0], repeat=10)))
    exact = np.mean(np.abs(signs @ d / 10) >= observed - 1e-12)
    assert paired_test(a, b, resamples=20000) == pytest.approx(exact, abs=0.02)
