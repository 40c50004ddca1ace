"""Confidence intervals, paired tests, multiplicity and power over per-query values that come in documents.

ConTEB queries cluster by document (a SQuAD article brings ~200 of them) and a claim is about documents a model
never saw, so the unit of resampling is the **document**: every function takes ``documents``, one label per value
(the document of the query's gold chunk), and resamples or permutes whole documents, each bringing all its queries.
Passing ``documents=None`` treats every value as its own document: the query-level figure, shown only as a labelled
secondary column. The estimate is always the mean over queries (the reported metric): with ``S_j`` the sum of
document ``j``'s values, ``n_j`` its number of queries and ``N = sum n_j``, ``mean = sum S_j / N``.

* :func:`bootstrap_ci`: cluster bootstrap of the mean (Davison & Hinkley, *Bootstrap Methods and their Application*,
  1997, sec. 3.8: resample the ``m`` documents with replacement; each resample's mean is
  ``sum w_j S_j / sum w_j n_j`` with ``w_j`` the times document ``j`` was drawn), read as an **expanded percentile
  interval** (Hesterberg, "What teachers should know about the bootstrap", *The American Statistician* 69(4), 2015,
  sec. 3.2): the percentile interval undercovers with few resampling units (its spread is the plug-in variance,
  ``(m - 1) / m`` of the unbiased one, and uses normal instead of t quantiles), so the quantile levels are widened
  to ``Phi(-sqrt(m / (m - 1)) * t_{1 - alpha/2, m - 1})`` and its complement.
* :func:`paired_test`: two-sided test of ``mean(a - b) = 0``. ``randomization``: the paired randomization test of
  Smucker, Allan & Carterette (CIKM 2007) with whole documents as the exchangeable units: under the null each
  document's summed difference ``D_j`` is equally likely to have either sign, and the null distribution is
  ``sum s_j D_j / N`` over sign vectors ``s``, enumerated exactly when ``2**m <= resamples`` (``p`` = the share of
  sign vectors at least as extreme, the identity included), else drawn at random with
  ``p = (#{|T*| >= |T|} + 1) / (resamples + 1)`` (Phipson & Smyth 2010). ``bootstrap``: the shifted bootstrap test
  (Efron & Tibshirani 1993, sec. 16.4) over documents: the differences centred on 0, documents resampled, the
  resampled means widened by the expansion of the interval at ``alpha = 0.05`` (:func:`expansion`), so that the test
  rejects where the 95% expanded interval of the difference excludes 0. With
  ``m`` documents no p-value is below ``1 / 2**(m - 1)`` (:func:`smallest_p`): five documents can never be
  significant at 0.05.
* :func:`holm`: Holm's step-down adjustment of a family of p-values (Holm, *Scandinavian Journal of Statistics*
  6(2), 1979): the ``i``-th smallest of ``k`` becomes ``max_{j <= i} min(1, (k - j + 1) p_(j))``.
* :func:`minimum_detectable_difference`: the smallest true mean difference a two-sided test at ``alpha`` detects
  with probability ``power`` on these documents: ``(t_{1 - alpha/2, m - 1} + t_{power, m - 1}) * SE``, the
  minimum detectable effect of Bloom ("Minimum detectable effects", *Evaluation Review* 19(5), 1995), with ``SE``
  the document-level (cluster) standard error of the mean difference,
  ``SE = sqrt(m / (m - 1) * sum_j (D_j - n_j * mean)^2) / N``.

Random draws come from ``numpy.random.default_rng(seed)``, so results are reproducible, and are drawn in chunks
of at most ``~2**22`` values to bound memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as scipy_stats

from evaluation.results import Comparison, Summary, is_missing

_CHUNK_VALUES = 1 << 22  # random draws held in memory at once
_EXACT_LIMIT = 1 << 16  # at most this many sign vectors are enumerated (the resamples decide below it)
SIGNIFICANCE_ALPHA = 0.05
DETECTION_POWER = 0.8
"""The level and power :func:`minimum_detectable_difference` states a test set's resolution at."""

Documents = Sequence[object] | np.ndarray | None
"""One document label per value (any hashable: ids or integers); None: every value its own document."""


def _chunk_rows(n: int, total: int) -> int:
    return max(1, min(total, _CHUNK_VALUES // max(n, 1)))


def _values(values: np.ndarray, name: str = "values") -> np.ndarray:
    array = np.asarray(values, dtype=np.float64).reshape(-1)
    if np.isnan(array).any():
        raise ValueError(f"{name} contains NaN")
    return array


@dataclass(frozen=True)
class Clustered:
    """Values grouped by document: ``sums[j]`` and ``counts[j]`` of document ``j``, documents in sorted label order,
    so that every document-level figure drawn from them depends on the values and their documents only, never on the
    order of the queries (the same comparison gives the same p and interval wherever it is computed). Without labels
    (each value its own document) the input order is kept."""

    sums: np.ndarray  # float64 [m]
    counts: np.ndarray  # float64 [m]

    @property
    def n_documents(self) -> int:
        return len(self.sums)

    @property
    def n_values(self) -> int:
        return int(self.counts.sum())

    @property
    def mean(self) -> float:
        return float(self.sums.sum() / self.counts.sum()) if self.n_values else float("nan")

    def standard_error(self) -> float:
        """The document-level standard error of :attr:`mean` (module docstring); NaN below two documents."""
        m = self.n_documents
        if m < 2:
            return float("nan")
        residual = self.sums - self.counts * self.mean
        return float(np.sqrt(m / (m - 1) * np.sum(residual**2)) / self.counts.sum())

    def resampled_means(self, resamples: int, seed: int) -> np.ndarray:
        """float64 [resamples]: the mean of ``resamples`` cluster-bootstrap resamples (documents with replacement)."""
        m = self.n_documents
        rng = np.random.default_rng(seed)
        means = np.empty(resamples)
        step = _chunk_rows(m, resamples)
        for start in range(0, resamples, step):
            count = min(step, resamples - start)
            drawn = rng.integers(0, m, size=(count, m)) + m * np.arange(count)[:, None]
            weights = np.bincount(drawn.reshape(-1), minlength=count * m).reshape(count, m).astype(np.float64)
            means[start : start + count] = (weights @ self.sums) / (weights @ self.counts)
        return means


def clustered(values: np.ndarray, documents: Documents = None, name: str = "values") -> Clustered:
    """``values`` ([n]) summed per document of ``documents`` ([n] labels; None: one document per value)."""
    x = _values(values, name)
    if documents is None:
        return Clustered(x.copy(), np.ones(len(x)))
    labels = np.asarray(documents).reshape(-1)
    if len(labels) != len(x):
        raise ValueError(f"{len(x)} {name} but {len(labels)} document labels: one label per value")
    if len(x) == 0:
        return Clustered(np.zeros(0), np.zeros(0))
    names, index = np.unique(labels, return_inverse=True)
    index, m = index.reshape(-1), len(names)
    return Clustered(np.bincount(index, weights=x, minlength=m), np.bincount(index, minlength=m).astype(np.float64))


def n_documents(documents: Documents, n_values: int) -> int:
    """How many distinct documents ``documents`` holds (``n_values`` when None)."""
    return n_values if documents is None else len(set(np.asarray(documents).reshape(-1).tolist()))


def expansion(m: int, alpha: float) -> float:
    """How much wider than the plug-in normal interval the expanded percentile interval of ``m`` documents is at
    level ``alpha``: ``sqrt(m / (m - 1)) * t_{1 - alpha/2, m - 1} / z_{1 - alpha/2}`` (1 below two documents)."""
    if m < 2:
        return 1.0
    return float(np.sqrt(m / (m - 1)) * scipy_stats.t.ppf(1 - alpha / 2, m - 1) / scipy_stats.norm.ppf(1 - alpha / 2))


def expanded_levels(confidence: float, m: int) -> tuple[float, float]:
    """The quantile levels of the expanded percentile interval (module docstring) for ``m`` documents."""
    alpha = 1.0 - confidence
    low = float(scipy_stats.norm.cdf(-expansion(m, alpha) * scipy_stats.norm.ppf(1 - alpha / 2)))
    return low, 1.0 - low


def bootstrap_ci(
    values: np.ndarray,
    documents: Documents = None,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """The cluster-bootstrap expanded percentile interval of the mean of ``values`` over ``documents`` (module
    docstring); ``(nan, nan)`` when empty, ``(mean, mean)`` with one document."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    grouped = clustered(values, documents)
    if grouped.n_values == 0:
        return float("nan"), float("nan")
    if grouped.n_documents == 1:
        return grouped.mean, grouped.mean
    means = grouped.resampled_means(resamples, seed)
    low, high = np.quantile(means, expanded_levels(confidence, grouped.n_documents))
    return float(low), float(high)


def summarize(
    values: np.ndarray,
    documents: Documents = None,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Summary:
    """:class:`Summary` of per-query ``values``: mean, document-level bootstrap CI, queries and documents."""
    x = _values(values)
    low, high = bootstrap_ci(x, documents, resamples, confidence, seed)
    mean = float(x.mean()) if len(x) else float("nan")
    return Summary(value=mean, ci_low=low, ci_high=high, n_queries=len(x), n_documents=n_documents(documents, len(x)))


def smallest_p(m: int) -> float:
    """The smallest two-sided p-value a sign-flip test over ``m`` documents can give: ``2 / 2**m``."""
    return 2.0 / 2.0**m if m < 1024 else 0.0


def _sign_vectors(m: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """float64 [count, m] of +-1: random sign vectors."""
    bits = np.unpackbits(rng.integers(0, 256, size=(count, (m + 7) // 8), dtype=np.uint8), axis=1, count=m)
    return 1.0 - 2.0 * bits


def _all_sign_vectors(m: int) -> np.ndarray:
    """float64 [2**m, m]: every +-1 vector."""
    codes = np.arange(2**m, dtype=np.int64)[:, None]
    return 1.0 - 2.0 * ((codes >> np.arange(m)) & 1).astype(np.float64)


def paired_test(
    a: np.ndarray,
    b: np.ndarray,
    documents: Documents = None,
    method: Literal["randomization", "bootstrap"] = "randomization",
    resamples: int = 10000,
    seed: int = 0,
) -> float:
    """Two-sided p-value of ``mean(a - b) != 0`` over paired per-query values, documents as the units (module
    docstring; ``documents=None``: the query-level test).

    Identical inputs give 1.0; swapping ``a`` and ``b`` gives the same p-value. NaN when empty.
    Raises ValueError when the lengths differ or ``method`` is unknown.
    """
    x, y = _values(a, "a"), _values(b, "b")
    if len(x) != len(y):
        raise ValueError(f"paired_test needs paired values: len(a)={len(x)}, len(b)={len(y)}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    if method not in ("randomization", "bootstrap"):
        raise ValueError(f"unknown method {method!r}: randomization or bootstrap")
    grouped = clustered(x - y, documents, "differences")
    if grouped.n_values == 0:
        return float("nan")
    sums, total = grouped.sums, grouped.counts.sum()
    observed = abs(sums.sum() / total)
    tolerance = 1e-12 * max(1.0, float(np.abs(sums).max()))  # sums in another order differ in the last bits
    m = grouped.n_documents
    if method == "randomization" and 2**m <= min(resamples, _EXACT_LIMIT):
        null = _all_sign_vectors(m) @ sums / total
        return float(np.mean(np.abs(null) >= observed - tolerance))
    rng = np.random.default_rng(seed)
    extreme = 0
    step = _chunk_rows(m, resamples)
    centred = Clustered(sums - grouped.counts * grouped.mean, grouped.counts)
    widen = expansion(m, SIGNIFICANCE_ALPHA)
    for start in range(0, resamples, step):
        count = min(step, resamples - start)
        if method == "randomization":
            null = _sign_vectors(m, count, rng) @ sums / total
        else:
            null = widen * centred.resampled_means(count, int(rng.integers(0, 2**63)))
        extreme += int(np.count_nonzero(np.abs(null) >= observed - tolerance))
    return (extreme + 1) / (resamples + 1)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values in the input order (module docstring); a NaN stays NaN and is not counted in the
    family."""
    p = np.asarray(p_values, dtype=np.float64)
    adjusted = np.full(len(p), np.nan)
    present = np.flatnonzero(~np.isnan(p))
    k = len(present)
    running = 0.0
    for step, index in enumerate(present[np.argsort(p[present], kind="stable")]):
        running = max(running, min(1.0, (k - step) * p[index]))
        adjusted[index] = running
    return adjusted.tolist()


def adjust_family(comparisons: Sequence[Comparison]) -> None:
    """Set every comparison's ``p_adjusted``: :func:`holm` over the family ``comparisons`` (a task evaluation's
    comparisons on every subset)."""
    adjusted = holm([float("nan") if is_missing(c.p_value) else c.p_value for c in comparisons])
    for comparison, p in zip(comparisons, adjusted, strict=True):
        comparison.p_adjusted = p


def minimum_detectable_difference(
    differences: np.ndarray,
    documents: Documents = None,
    alpha: float = SIGNIFICANCE_ALPHA,
    power: float = DETECTION_POWER,
) -> float:
    """The smallest true mean of ``differences`` (per query, paired) that a two-sided test at ``alpha`` detects with
    probability ``power`` on these documents (Bloom 1995, module docstring); ``inf`` when the sign-flip test cannot
    reach ``alpha`` with this many documents (:func:`smallest_p`); NaN below two documents."""
    grouped = clustered(differences, documents, "differences")
    m = grouped.n_documents
    if m < 2:
        return float("nan")
    if smallest_p(m) > alpha:
        return float("inf")
    multiplier = scipy_stats.t.ppf(1 - alpha / 2, m - 1) + scipy_stats.t.ppf(power, m - 1)
    return float(multiplier * grouped.standard_error())


@dataclass(frozen=True)
class Paired:
    """``a`` − ``b`` over paired per-query values (:func:`paired`): the mean difference, its document-bootstrap
    interval, the document-level p-value (``p_value``), the query-level one (``p_query``, secondary), the minimum
    detectable difference and the sizes."""

    difference: float
    ci_low: float
    ci_high: float
    p_value: float
    p_query: float
    mdd: float
    n_queries: int
    n_documents: int


def paired(
    a: np.ndarray,
    b: np.ndarray,
    documents: Documents,
    method: Literal["randomization", "bootstrap"] = "randomization",
    resamples: int = 10000,
    ci_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Paired:
    """Every figure of one paired comparison of ``a`` and ``b`` (float [n] each) over ``documents`` ([n] labels):
    :func:`paired_test` at the document and the query level, :func:`bootstrap_ci` of the differences and
    :func:`minimum_detectable_difference`."""
    x, y = _values(a, "a"), _values(b, "b")
    if len(x) != len(y):
        raise ValueError(f"paired comparison needs paired values: len(a)={len(x)}, len(b)={len(y)}")
    d = x - y
    low, high = bootstrap_ci(d, documents, ci_resamples, confidence, seed)
    return Paired(
        difference=float(d.mean()) if len(d) else float("nan"),
        ci_low=low,
        ci_high=high,
        p_value=paired_test(x, y, documents, method, resamples, seed),
        p_query=paired_test(x, y, None, method, resamples, seed),
        mdd=minimum_detectable_difference(d, documents),
        n_queries=len(d),
        n_documents=n_documents(documents, len(d)),
    )
