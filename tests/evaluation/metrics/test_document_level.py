"""evaluation.metrics.stats with documents as the units: calibration and coverage under intra-document correlation
(the simulation of issue 32), power, Holm's adjustment, the minimum detectable difference, exact enumeration.

The simulated task: 8 documents × 30 queries, per-query differences ``u_j + e_jq`` with ``u_j ~ N(0, 0.5)`` shared by
document ``j`` and ``e_jq ~ N(0, 0.5)`` (intra-document correlation 0.5). Run with ``documents=None`` (each query its
own unit, what the tests did before) the same simulation rejects a true null about 70% of the time and the interval
covers the true mean about a third of the time; the assertions below fail then.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from evaluation.metrics.stats import (
    Clustered,
    bootstrap_ci,
    clustered,
    holm,
    minimum_detectable_difference,
    paired,
    paired_test,
    smallest_p,
)
from evaluation.results import Comparison

DOCUMENTS, PER_DOCUMENT, CORRELATION = 8, 30, 0.5
TASKS = 600
LABELS = np.repeat(np.arange(DOCUMENTS), PER_DOCUMENT)
DOCUMENT_SD = math.sqrt(CORRELATION + (1 - CORRELATION) / PER_DOCUMENT)
"""Standard deviation of a document's mean difference in the simulated task."""


def simulated(rng: np.random.Generator, shift: float = 0.0) -> np.ndarray:
    """Per-query differences of one simulated task (module docstring), their true mean ``shift``."""
    shared = rng.normal(0.0, math.sqrt(CORRELATION), DOCUMENTS)
    own = rng.normal(0.0, math.sqrt(1 - CORRELATION), DOCUMENTS * PER_DOCUMENT)
    return shared[LABELS] + own + shift


def rejection_rate(shift: float, method: str, seed: int, resamples: int = 2000) -> float:
    rng = np.random.default_rng(seed)
    zeros = np.zeros(DOCUMENTS * PER_DOCUMENT)
    p = [paired_test(simulated(rng, shift), zeros, LABELS, method, resamples, seed=t) for t in range(TASKS)]  # type: ignore[arg-type]
    return float(np.mean(np.array(p) < 0.05))


@pytest.mark.parametrize("method", ["randomization", "bootstrap"])
def test_false_positive_rate_under_intra_document_correlation(method: str) -> None:
    assert 0.02 <= rejection_rate(0.0, method, seed=11) <= 0.08


def test_interval_covers_the_true_mean_under_intra_document_correlation() -> None:
    """The expanded interval covers near its 95%; the plain percentile interval over 8 documents would cover about
    ``P(|t_7| < 1.96 * sqrt(7 / 8))`` = 0.89 (too narrow: plug-in variance, normal quantiles), below the band."""
    rng = np.random.default_rng(12)
    covered = [
        low <= 0.0 <= high for low, high in (bootstrap_ci(simulated(rng), LABELS, 1000, 0.95, t) for t in range(TASKS))
    ]
    assert 0.925 <= np.mean(covered) <= 0.975


def test_power_at_one_document_level_standard_deviation(capsys: pytest.CaptureFixture[str]) -> None:
    """The power of the randomization test at a true difference of one document-level SD, reported (the figure is
    in bench/BENCHMARKS.md); it must be well above the test's level and below certainty with 8 documents."""
    power = rejection_rate(DOCUMENT_SD, "randomization", seed=13)
    with capsys.disabled():
        print(f"\npower at one document-level SD, {DOCUMENTS} documents x {PER_DOCUMENT} queries: {power:.3f}")
    assert 0.5 <= power <= 0.95


def test_the_query_level_test_is_what_the_simulation_catches() -> None:
    """The same simulation with each query its own unit: far outside the band (so the band can fail)."""
    rng = np.random.default_rng(14)
    zeros = np.zeros(DOCUMENTS * PER_DOCUMENT)
    p = [paired_test(simulated(rng), zeros, None, resamples=500, seed=t) for t in range(100)]
    assert np.mean(np.array(p) < 0.05) > 0.3


def test_exact_enumeration_over_documents() -> None:
    """6 documents: the p-value is the share of the 64 sign vectors of the documents' summed differences at least as
    extreme as the observed mean, computed here directly."""
    rng = np.random.default_rng(3)
    labels = np.repeat(np.array(["d0", "d1", "d2", "d3", "d4", "d5"]), [3, 1, 4, 2, 5, 1])
    a, b = rng.random(16), rng.random(16)
    sums = np.array([(a - b)[labels == d].sum() for d in dict.fromkeys(labels)])
    signs = np.array(list(itertools.product([-1.0, 1.0], repeat=6)))
    exact = np.mean(np.abs(signs @ sums / 16) >= abs((a - b).mean()) - 1e-12)
    assert paired_test(a, b, labels) == pytest.approx(exact)
    assert paired_test(a, b, labels) == paired_test(b, a, labels)
    assert paired_test(a, a, labels) == 1.0


def test_a_difference_carried_by_one_document_is_not_significant() -> None:
    """One document of 200 queries all better, nine documents level: significant query by query, not by document."""
    labels = np.repeat(np.arange(10), [200] + [20] * 9)
    a = np.concatenate([np.full(200, 0.8), np.full(180, 0.5)])
    b = np.concatenate([np.full(200, 0.6), np.full(180, 0.5)])
    assert paired_test(a, b, None, resamples=2000) < 0.01
    assert paired_test(a, b, labels, resamples=2000) > 0.05


def test_smallest_p_and_too_few_documents() -> None:
    assert smallest_p(5) == pytest.approx(1 / 16) and smallest_p(6) == pytest.approx(1 / 32)
    labels = np.repeat(np.arange(5), 10)
    all_better = np.random.default_rng(0).random(50) + 1.0
    assert paired_test(all_better, np.zeros(50), labels) == pytest.approx(1 / 16)  # never below 0.05
    assert minimum_detectable_difference(all_better, labels) == math.inf
    assert math.isnan(minimum_detectable_difference(np.ones(4), np.zeros(4)))


def test_minimum_detectable_difference_is_blooms_multiplier_times_the_document_level_error() -> None:
    rng = np.random.default_rng(4)
    labels = np.repeat(np.arange(12), rng.integers(1, 9, size=12))
    d = rng.normal(0.02, 0.1, size=len(labels))
    sums = np.array([d[labels == j].sum() for j in range(12)])
    counts = np.array([np.sum(labels == j) for j in range(12)])
    mean = sums.sum() / counts.sum()
    se = math.sqrt(12 / 11 * np.sum((sums - counts * mean) ** 2)) / counts.sum()
    multiplier = scipy_stats.t.ppf(0.975, 11) + scipy_stats.t.ppf(0.8, 11)
    assert minimum_detectable_difference(d, labels) == pytest.approx(multiplier * se)
    assert clustered(d, labels).standard_error() == pytest.approx(se)


def test_clustered_sums_in_label_order() -> None:
    grouped = clustered(np.array([1.0, 2.0, 3.0, 4.0]), ["b", "a", "b", "c"])
    assert grouped.sums.tolist() == [2.0, 4.0, 4.0] and grouped.counts.tolist() == [1.0, 2.0, 1.0]
    assert grouped.mean == pytest.approx(2.5) and grouped.n_documents == 3
    with pytest.raises(ValueError, match="4 values but 3 document labels"):
        clustered(np.ones(4), ["a", "b", "c"])
    resampled = Clustered(np.array([1.0, 3.0]), np.array([1.0, 1.0])).resampled_means(500, 0)
    assert set(np.round(resampled, 6)) <= {1.0, 2.0, 3.0}


def test_a_comparison_does_not_depend_on_the_order_of_its_queries() -> None:
    """The same values and documents in another order: the same document-level p (Monte Carlo, 24 documents),
    interval and MDD, so that two sections of a report that compute one comparison print one figure."""
    rng = np.random.default_rng(6)
    labels = np.repeat([f"d{j:02d}" for j in range(24)], 5)
    a, b = rng.random(120) + 0.05, rng.random(120)
    order = rng.permutation(120)
    one, other = paired(a, b, labels, resamples=2000), paired(a[order], b[order], labels[order], resamples=2000)
    assert (one.p_value, one.n_documents) == (other.p_value, other.n_documents)
    for figure in ("difference", "ci_low", "ci_high", "mdd"):
        assert getattr(one, figure) == pytest.approx(getattr(other, figure), abs=1e-12)


def test_holm() -> None:
    """The textbook step-down: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1, made monotone."""
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    adjusted = holm([0.2, float("nan"), 0.01])
    assert adjusted[0] == pytest.approx(0.2) and math.isnan(adjusted[1]) and adjusted[2] == pytest.approx(0.02)
    assert holm([0.6, 0.7]) == pytest.approx([1.0, 1.0]) and holm([]) == []


def test_paired_gathers_every_figure_of_a_comparison() -> None:
    rng = np.random.default_rng(5)
    labels = np.repeat(np.arange(10), 6)
    a, b = rng.random(60) + 0.1, rng.random(60)
    result = paired(a, b, labels, resamples=2000)
    assert result.difference == pytest.approx((a - b).mean())
    assert (result.n_queries, result.n_documents) == (60, 10)
    assert result.p_value == paired_test(a, b, labels, resamples=2000)
    assert result.p_query == paired_test(a, b, None, resamples=2000)
    assert result.ci_low < result.difference < result.ci_high
    assert result.mdd == minimum_detectable_difference(a - b, labels)


def test_a_comparison_is_significant_and_worded_by_its_adjusted_p() -> None:
    def comparison(difference: float, p: float, adjusted: float) -> Comparison:
        return Comparison(
            "t", "a", "b", "ndcg@10", 0.5, 0.5, difference, p, 10, "randomization", 100, p_adjusted=adjusted
        )

    assert comparison(0.1, 0.01, 0.04).direction() == "significantly better"
    assert comparison(-0.1, 0.01, 0.04).direction() == "significantly worse"
    assert comparison(0.1, 0.01, 0.06).direction() == "no measurable difference"
    assert not comparison(0.1, 0.01, float("nan")).significant()
