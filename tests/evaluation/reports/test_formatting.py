"""Number formatting shared by the reports and the reading (``evaluation.reports.formatting``), and the missing-value
and
significance rules of ``evaluation.results``."""

from __future__ import annotations

import numpy as np

from evaluation.reports.formatting import (
    DASH,
    format_ci,
    format_metric,
    format_p,
    format_signed,
    format_summary,
    format_usd,
    metric_sort_key,
)
from evaluation.results import Comparison, Summary, is_missing

NAN = float("nan")


def test_missing_values():
    assert is_missing(None) and is_missing(NAN) and is_missing(np.float32("nan")) and is_missing(np.float64("nan"))
    assert not is_missing(0.0) and not is_missing(0) and not is_missing(np.float32(0.5))


def test_formats():
    assert format_metric(0.74349) == "0.743" and format_metric(NAN) == format_metric(None) == DASH
    assert format_ci(0.7, 0.61, 0.8) == "0.700 [0.610, 0.800]" and format_ci(0.7, NAN, 0.8) == "0.700"
    assert format_ci(NAN, 0.1, 0.2) == DASH
    assert format_summary(Summary(0.5, 0.4, 0.6, 10)) == "0.500 [0.400, 0.600]" and format_summary(None) == DASH
    assert format_p(0.0004) == "4.0e-04" and format_p(0.4321) == "0.432" and format_p(NAN) == DASH
    assert format_signed(0.012) == "+0.012" and format_signed(-0.5) == "-0.500"
    assert format_usd(0.04214) == "0.0421" and format_usd(12.345) == "12.35"


def test_metric_order():
    names = ["mrr@10", "custom", "p@1", "ndcg@100", "ndcg@10", "map@5", "recall@1"]
    assert sorted(names, key=metric_sort_key) == ["ndcg@10", "ndcg@100", "map@5", "recall@1", "p@1", "mrr@10", "custom"]


def test_significance_reads_the_adjusted_p():
    def comparison(p: float, adjusted: float, difference: float = 0.1) -> Comparison:
        means, test = (0.5, 0.5 - difference), ("randomization", 100)
        return Comparison("t", "a", "b", "ndcg@10", *means, difference, p, 10, *test, p_adjusted=adjusted)

    assert comparison(0.049, 0.049).significant() and not comparison(0.05, 0.05).significant()
    assert not comparison(NAN, NAN).significant()
    # Holm moved it above 0.05: the raw p does not count
    assert not comparison(0.01, 0.06).significant() and comparison(0.01, 0.06).direction() == "no measurable difference"
    assert not comparison(0.01, NAN).significant()  # an older file, never adjusted
    assert comparison(0.01, 0.02).direction() == "significantly better"
    assert comparison(0.01, 0.02, -0.1).direction() == "significantly worse"


def test_a_p_value_at_its_floor_is_a_bound():
    assert format_p(1 / 10001, bound=True) == "≤ 1.0e-04" and format_p(0.0004, bound=True) == "≤ 4.0e-04"
    assert format_p(NAN, bound=True) == DASH
