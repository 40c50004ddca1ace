"""A fusion's weights fitted on validation documents: the grid's best point, shrunk toward equal weights, and the
cross-validated score of that whole fit over folds of whole documents.

Inputs: ``values``, float64 ``[P, Q]``: nDCG@10 of validation query ``q`` under grid point ``p`` (the points of
:func:`evaluation.select.weight_grid`, nearest equal weights first); ``needs_context``: bool ``[Q]`` or None
(unlabelled); ``documents``: ``[Q]`` labels, the document of each query's gold chunk (the resampling unit,
:mod:`evaluation.metrics.stats`).

* **Criterion** on the queries ``R``: ``(mean over R ∩ needs_context, mean over R)``, compared lexicographically and
  rounded to 12 decimals (float noise never decides); ``(mean over R, mean over R)`` when no query of ``R`` is
  labelled so. The *criterion queries* of ``R`` are ``R ∩ needs_context``, else ``R``. Best point: the highest
  criterion, exact ties to the earlier grid point (nearer equal weights).
* **Shrinkage** (the one-standard-error rule: Hastie, Tibshirani & Friedman, *The Elements of Statistical Learning*,
  2nd ed., 2009, sec. 7.10; Breiman, Friedman, Olshen & Stone, *Classification and Regression Trees*, 1984): with
  ``p*`` the best point and ``d_p = values[p*] - values[p]`` on the criterion queries of ``R``, the weights are the
  first grid point (nearest equal weights) with ``mean(d_p) <= SE(d_p)``, ``SE`` the document-level standard error
  (:meth:`evaluation.metrics.stats.Clustered.standard_error`). Below two documents ``SE`` is undefined and read as
  unbounded: equal weights (one document cannot tell the points apart from its own noise).
* **Cross-validation** (ESL sec. 7.10.1; sec. 7.10.2: every step of the fit inside the loop, so the shrinkage too):
  ``K = min(5, m)`` folds of whole documents (``m`` documents, a permutation seeded by ``seed`` dealt round-robin, so
  no document is split and fold sizes differ by at most one document); for each fold the weights are fitted (best
  point, then shrunk) on the queries of the other folds and the fold's queries are scored with them. The out-of-fold
  values, each query scored by weights fitted without its document, are the fusion's validation score. Below two
  documents there is nothing to hold out: no out-of-fold score.

The grid is evaluated once (``values``); folds only select rows of it, so cross-validation adds no ranking.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evaluation.metrics.stats import Documents, clustered

FOLDS = 5
"""At most this many cross-validation folds (fewer with fewer documents)."""

Criterion = tuple[float, float]
"""(mean nDCG@10 on the needs_context queries, mean on all queries); both the mean on all without labels."""


def criterion(values: np.ndarray, needs_context: np.ndarray | None) -> Criterion:
    """The module docstring's criterion of per-query values ``[n]`` (``needs_context``: bool ``[n]`` or None)."""
    overall = float(np.mean(values)) if len(values) else float("nan")
    if needs_context is None or not needs_context.any():
        return overall, overall
    return float(np.mean(values[needs_context])), overall


def rounded(value: Criterion) -> tuple[float, ...]:
    """``value`` rounded to 12 decimals: what comparisons of criteria read."""
    return tuple(round(x, 12) for x in value)


def criterion_rows(needs_context: np.ndarray | None, rows: np.ndarray) -> np.ndarray:
    """bool ``[Q]``: the criterion queries of ``rows`` (bool ``[Q]``): those labelled needs_context, else all."""
    if needs_context is None:
        return rows
    labelled = rows & needs_context
    return labelled if labelled.any() else rows


def best_point(values: np.ndarray, needs_context: np.ndarray | None, rows: np.ndarray) -> int:
    """The index of the grid point with the highest criterion over ``rows`` (bool ``[Q]``), ties to the earlier."""
    mask = None if needs_context is None else needs_context[rows]
    keys = [rounded(criterion(point[rows], mask)) for point in values]
    return max(range(len(keys)), key=lambda p: (keys[p], -p))


def shrunk_point(values: np.ndarray, needs_context: np.ndarray | None, documents: np.ndarray, rows: np.ndarray) -> int:
    """The one-standard-error point over ``rows`` (module docstring): the first grid point whose criterion-subset
    mean is within one document-level standard error of the best point's."""
    best = best_point(values, needs_context, rows)
    subset = criterion_rows(needs_context, rows)
    labels = documents[subset]
    for point in range(len(values)):
        if point == best:
            return point
        grouped = clustered(values[best, subset] - values[point, subset], labels, "differences")
        error = grouped.standard_error()
        if np.isnan(error) or grouped.mean <= error + 1e-12:
            return point
    return best  # pragma: no cover - the loop reaches best


def document_folds(documents: Documents, folds: int = FOLDS, seed: int = 0) -> np.ndarray:
    """int64 ``[Q]``: each query's fold, ``min(folds, m)`` folds of whole documents (module docstring); all 0 below
    two documents."""
    labels = np.asarray(documents).reshape(-1)
    distinct, inverse = np.unique(labels, return_inverse=True)
    k = min(folds, len(distinct))
    if k < 2:
        return np.zeros(len(labels), dtype=np.int64)
    order = np.random.default_rng(seed).permutation(len(distinct))
    fold_of = np.empty(len(distinct), dtype=np.int64)
    fold_of[order] = np.arange(len(distinct)) % k
    return fold_of[inverse.reshape(-1)]


@dataclass(frozen=True)
class Fit:
    """A fusion fitted on validation: ``values`` ``[P, Q]`` per grid point, the ``best`` point on every validation
    query, the ``chosen`` one after shrinkage (the weights used on test) and the ``out_of_fold`` values ``[Q]``
    (None below two documents)."""

    grid: list[tuple[float, ...]]
    values: np.ndarray
    best: int
    chosen: int
    out_of_fold: np.ndarray | None

    @property
    def weights(self) -> tuple[float, ...]:
        return self.grid[self.chosen]

    @property
    def best_weights(self) -> tuple[float, ...]:
        return self.grid[self.best]

    @property
    def in_sample(self) -> np.ndarray:
        """float64 ``[Q]``: the chosen weights scored on the queries they were fitted to."""
        return self.values[self.chosen]


def fit_weights(
    grid: list[tuple[float, ...]],
    values: np.ndarray,
    needs_context: np.ndarray | None,
    documents: Documents,
    seed: int = 0,
) -> Fit:
    """Best point, shrunk point and out-of-fold values of one fusion (module docstring)."""
    values = np.asarray(values, dtype=np.float64)
    if values.shape[0] != len(grid):
        raise ValueError(f"{values.shape[0]} rows of values for {len(grid)} grid points")
    labels = np.asarray(documents).reshape(-1)
    everything = np.ones(values.shape[1], dtype=bool)
    best = best_point(values, needs_context, everything)
    chosen = shrunk_point(values, needs_context, labels, everything)
    folds = document_folds(labels, FOLDS, seed)
    out_of_fold: np.ndarray | None = None
    if folds.max(initial=0) > 0:
        out_of_fold = np.empty(values.shape[1])
        for fold in range(int(folds.max()) + 1):
            held = folds == fold
            point = shrunk_point(values, needs_context, labels, ~held)
            out_of_fold[held] = values[point, held]
    return Fit(grid, values, best, chosen, out_of_fold)
