"""The extra views of the public ConTEB evaluation: nDCG@10 by chunk position and by corpus size.

* By position: per-query nDCG@10 grouped by the gold chunk's ``chunk_index`` (0 = first chunk of its
  document), each group's mean with a bootstrap CI (:func:`by_position`).
* Document level: no function here; it is ``metrics_from_gold_rank(ranking.doc_rank)["ndcg@10"]``
  (``evaluation.metrics.retrieval``), the gold chunk's document ranked by its best chunk
  (``evaluation.systems.ranking``).
* Corpus-size scaling: nDCG@10 when the corpus is only ``n`` random documents, ``n`` geometric from 1
  to all (:func:`scaling_sizes`), ``repeats`` random subsets per ``n`` (:func:`sample_subsets`); the
  gold chunk's rank within each subset comes from ``rank_corpus(..., subsets=masks).subset_rank`` and
  :func:`scaling_curve` averages it. Only queries whose gold document is in the subset count.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evaluation.metrics.retrieval import metrics_from_gold_rank
from evaluation.metrics.stats import summarize
from evaluation.results import PositionPoint, ScalingPoint


def by_position(
    values: np.ndarray,
    position: np.ndarray,
    documents: np.ndarray | None = None,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> list[PositionPoint]:
    """One :class:`PositionPoint` per gold position present (ascending): mean of ``values`` (per-query
    nDCG@10, [Q]) over the queries whose gold chunk has that ``position`` ([Q] chunk_index), its
    bootstrap CI over their ``documents`` ([Q] labels; None: each query its own) and the numbers of such queries
    and documents."""
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    position = np.asarray(position).reshape(-1)
    if len(values) != len(position):
        raise ValueError(f"values ({len(values)}) and position ({len(position)}) must have one entry per query")
    labels = None if documents is None else np.asarray(documents).reshape(-1)
    points = []
    for p in np.unique(position):
        at = position == p
        summary = summarize(values[at], None if labels is None else labels[at], resamples, confidence, seed)
        points.append(
            PositionPoint(
                position=int(p),
                value=summary.value,
                ci_low=summary.ci_low,
                ci_high=summary.ci_high,
                n_queries=summary.n_queries,
                n_documents=summary.n_documents,
            )
        )
    return points


def scaling_sizes(n_documents: int, points: int = 8) -> list[int]:
    """``min(points, n_documents)`` distinct corpus sizes, geometric from 1 to ``n_documents`` (both
    included), ascending: ``round(n_documents ** (i / (points - 1)))``, each raised to one above the
    previous where rounding would repeat a size. Empty when ``n_documents < 1``."""
    if points < 2:
        raise ValueError(f"points must be >= 2, got {points}")
    if n_documents < 1:
        return []
    if n_documents <= points:
        return list(range(1, n_documents + 1))
    sizes: list[int] = []
    for size in np.rint(np.geomspace(1, n_documents, points)).astype(np.int64):
        sizes.append(max(int(size), sizes[-1] + 1) if sizes else 1)
    sizes[-1] = n_documents
    return sizes


def sample_subsets(
    n_documents: int, sizes: Sequence[int], repeats: int = 5, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """(bool masks [S, D], size per subset int64 [S]): for each ``n`` in ``sizes``, ``repeats`` subsets
    of ``n`` documents drawn uniformly without replacement (``numpy.random.default_rng(seed)``), or a
    single all-documents subset when ``n == n_documents`` (every draw would be the same)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    rng = np.random.default_rng(seed)
    masks, subset_size = [], []
    for n in sizes:
        if not 1 <= n <= n_documents:
            raise ValueError(f"subset size {n} outside [1, {n_documents}]")
        for _ in range(1 if n == n_documents else repeats):
            mask = np.zeros(n_documents, dtype=bool)
            mask[rng.choice(n_documents, size=n, replace=False)] = True
            masks.append(mask)
            subset_size.append(n)
    if not masks:
        return np.zeros((0, n_documents), dtype=bool), np.zeros(0, dtype=np.int64)
    return np.stack(masks), np.asarray(subset_size, dtype=np.int64)


def scaling_curve(subset_rank: np.ndarray, subset_size: np.ndarray) -> list[ScalingPoint]:
    """One :class:`ScalingPoint` per subset size (ascending).

    ``subset_rank``: int [Q, S], the gold chunk's 1-based rank within subset ``s`` (0: its document is
    not in ``s``); ``subset_size``: int [S]. Per subset: mean nDCG@10 (``1 / log2(rank + 1)`` for
    ranks <= 10) over the queries with rank > 0. Per size: ``value`` = mean and ``std`` = population
    standard deviation (ddof 0) of those subset means over the subsets that have at least one query
    (``repeats`` = their number; NaN value when none has); ``n_queries`` = the mean number of queries
    per subset over all subsets of that size.
    """
    subset_rank = np.asarray(subset_rank)
    subset_size = np.asarray(subset_size).reshape(-1)
    if subset_rank.ndim != 2 or subset_rank.shape[1] != len(subset_size):
        raise ValueError(f"subset_rank must be [Q, {len(subset_size)}], got shape {subset_rank.shape}")
    ndcg = metrics_from_gold_rank(subset_rank.reshape(-1), cutoffs=(10,))["ndcg@10"].reshape(subset_rank.shape)
    present = subset_rank > 0
    counts = present.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        subset_means = np.where(counts > 0, (ndcg * present).sum(axis=0) / np.maximum(counts, 1), np.nan)
    points = []
    for n in np.unique(subset_size):
        of_size = subset_size == n
        means = subset_means[of_size]
        means = means[~np.isnan(means)]
        points.append(
            ScalingPoint(
                n_documents=int(n),
                value=float(means.mean()) if len(means) else float("nan"),
                std=float(means.std()) if len(means) else float("nan"),
                repeats=len(means),
                n_queries=float(counts[of_size].mean()),
            )
        )
    return points
