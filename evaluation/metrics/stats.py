"""Confidence intervals and paired significance tests over per-query metric values (NumPy only).

* :func:`bootstrap_ci`: percentile bootstrap of the mean (Efron & Tibshirani, *An Introduction to the
  Bootstrap*, 1993, ch. 13): resample the n values with replacement ``resamples`` times, take the
  ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of the resampled means.
* :func:`paired_test`: two-sided test of ``mean(a - b) = 0`` on paired per-query values.
  ``randomization``: the paired randomization (permutation) test of Smucker, Allan & Carterette
  (CIKM 2007): under the null each per-query difference is equally likely to have either sign, so the
  null distribution is the mean of the differences with random sign flips. ``bootstrap``: the shifted
  bootstrap test (Efron & Tibshirani 1993, sec. 16.4; Sakai, SIGIR 2006): resample the differences
  centred on 0. Both report ``p = (#{|mean*| >= |observed|} + 1) / (resamples + 1)`` (Phipson & Smyth
  2010: never 0, exact-size Monte Carlo p-value).

Random draws come from ``numpy.random.default_rng(seed)``, so results are reproducible, and drawn in
chunks of at most ``~2**22`` values to bound memory.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from evaluation.results import Summary

_CHUNK_VALUES = 1 << 22  # random draws held in memory at once


def _chunk_rows(n: int, total: int) -> int:
    return max(1, min(total, _CHUNK_VALUES // max(n, 1)))


def _values(values: np.ndarray, name: str = "values") -> np.ndarray:
    array = np.asarray(values, dtype=np.float64).reshape(-1)
    if np.isnan(array).any():
        raise ValueError(f"{name} contains NaN")
    return array


def bootstrap_means(values: np.ndarray, resamples: int = 2000, seed: int = 0) -> np.ndarray:
    """float64 [resamples]: means of ``resamples`` resamples (with replacement) of ``values``."""
    x = _values(values)
    n = len(x)
    if n == 0:
        return np.full(resamples, np.nan)
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    step = _chunk_rows(n, resamples)
    for start in range(0, resamples, step):
        count = min(step, resamples - start)
        means[start : start + count] = x[rng.integers(0, n, size=(count, n))].mean(axis=1)
    return means


def bootstrap_ci(
    values: np.ndarray, resamples: int = 2000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean of ``values``; ``(nan, nan)`` when empty."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    if len(np.asarray(values).reshape(-1)) == 0:
        return float("nan"), float("nan")
    means = bootstrap_means(values, resamples, seed)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return float(low), float(high)


def summarize(values: np.ndarray, resamples: int = 2000, confidence: float = 0.95, seed: int = 0) -> Summary:
    """:class:`Summary` of per-query ``values``: mean, bootstrap CI, number of queries (NaN mean when empty)."""
    x = _values(values)
    low, high = bootstrap_ci(x, resamples, confidence, seed)
    mean = float(x.mean()) if len(x) else float("nan")
    return Summary(value=mean, ci_low=low, ci_high=high, n_queries=len(x))


def paired_test(
    a: np.ndarray,
    b: np.ndarray,
    method: Literal["randomization", "bootstrap"] = "randomization",
    resamples: int = 10000,
    seed: int = 0,
) -> float:
    """Two-sided p-value of ``mean(a - b) != 0`` over paired per-query values (see the module docstring).

    Identical inputs give 1.0; swapping ``a`` and ``b`` gives the same p-value. NaN when empty.
    Raises ValueError when the lengths differ or ``method`` is unknown.
    """
    x, y = _values(a, "a"), _values(b, "b")
    if len(x) != len(y):
        raise ValueError(f"paired_test needs paired values: len(a)={len(x)}, len(b)={len(y)}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    n = len(x)
    if n == 0:
        return float("nan")
    d = x - y
    observed = abs(d.sum() / n)
    tolerance = 1e-12 * max(1.0, float(np.abs(d).max()))  # sums in another order differ in the last bits
    rng = np.random.default_rng(seed)
    extreme = 0
    step = _chunk_rows(n, resamples)
    if method == "randomization":
        total = d.sum()
        n_bytes = (n + 7) // 8
        for start in range(0, resamples, step):
            count = min(step, resamples - start)
            flips = np.unpackbits(rng.integers(0, 256, size=(count, n_bytes), dtype=np.uint8), axis=1, count=n)
            permuted = (total - 2.0 * (flips @ d)) / n  # sum of d with the flipped signs negated
            extreme += int(np.count_nonzero(np.abs(permuted) >= observed - tolerance))
    elif method == "bootstrap":
        centred = d - d.mean()
        for start in range(0, resamples, step):
            count = min(step, resamples - start)
            means = centred[rng.integers(0, n, size=(count, n))].mean(axis=1)
            extreme += int(np.count_nonzero(np.abs(means) >= observed - tolerance))
    else:
        raise ValueError(f"unknown method {method!r}: randomization or bootstrap")
    return (extreme + 1) / (resamples + 1)
