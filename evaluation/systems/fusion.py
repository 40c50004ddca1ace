"""Weighted fusion of already prepared systems (``kind: fusion``): normalised scores or weighted reciprocal ranks.

For query ``q`` and chunk ``c``, with convex weights ``w_s`` (each >= 0, summing to 1) in the components' order:

* ``method: score``: ``score(q, c) = sum_s w_s * n_s(q, c)``, where ``n_s`` normalises component ``s``'s scores of
  query ``q`` over its *retrieved list*, the first ``depth`` chunks of its trec-order ranking
  (:func:`evaluation.systems.hybrid.corpus_ranks`; ``depth`` defaults to the evaluation's ``top_k``):

  - ``minmax``: ``(x - min) / (max - min)`` over the list (every listed chunk 1 when ``max == min``);
  - ``zscore``: ``(x - mean) / std`` over the list (population std; every listed chunk 0 when ``std == 0``).

  A chunk the component did not retrieve (outside its list) takes the **lowest normalised score of that list**
  (0 under min-max): as bad as the system's worst retrieved chunk for the query, never worse, so a chunk another
  system found is not pushed below everything by a system that merely ranked it deeper.
* ``method: rrf``: ``score(q, c) = sum_s w_s / (k + rank_s(q, c))`` over the whole corpus (the ranks of
  :mod:`evaluation.systems.hybrid`; with equal weights the ranking of the equal-weight ``hybrid``).

The sum runs in float64 and is rounded to float32 for ranking; the fused ranking breaks ties by chunk id in trec
order, as every system does. Reuse: the components' prepared systems (:class:`~evaluation.indexed.IndexedSystem`) are
called, nothing is encoded twice; fitting the weights (:mod:`evaluation.select`) calls :func:`component_features`
once per component and :func:`fuse_features` once per grid point.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evaluation.config import FusionSystem
from evaluation.indexed import IndexedSystem, NotRunnable
from evaluation.systems.hybrid import FusedScorer, corpus_ranks, fused_system
from evaluation.systems.ranking import ScoreBlock

DEFAULT_DEPTH = 100
"""The retrieved list's length when neither the system nor the runner sets ``depth`` (the evaluation's top_k)."""


def normalise_scores(scores: np.ndarray, key: np.ndarray, depth: int, how: str) -> np.ndarray:
    """float64 ``[B, C]``: ``scores`` (float32 ``[B, C]``) normalised per row over each row's first ``depth`` chunks in
    trec order (``key``: :func:`~evaluation.systems.ranking.tie_order`); outside the list, the list's minimum
    (module docstring). ``how``: ``minmax`` or ``zscore``."""
    scores = np.asarray(scores, dtype=np.float32)
    listed = corpus_ranks(scores, key) <= depth
    values = scores.astype(np.float64)
    masked = np.where(listed, values, np.nan)
    if how == "minmax":
        low = np.nanmin(masked, axis=1, keepdims=True)
        span = np.nanmax(masked, axis=1, keepdims=True) - low
        normalised = np.where(span > 0, (values - low) / np.where(span > 0, span, 1.0), 1.0)
    elif how == "zscore":
        mean = np.nanmean(masked, axis=1, keepdims=True)
        std = np.sqrt(np.nanmean((masked - mean) ** 2, axis=1, keepdims=True))
        normalised = np.where(std > 0, (values - mean) / np.where(std > 0, std, 1.0), 0.0)
    else:
        raise ValueError(f"unknown normalisation {how!r}: minmax | zscore")
    floor = np.min(np.where(listed, normalised, np.inf), axis=1, keepdims=True)
    return np.where(listed, normalised, floor)


def component_features(scores: np.ndarray, key: np.ndarray, system: FusionSystem, depth: int) -> np.ndarray:
    """float64 ``[B, C]``: what ``system`` weighs of one component's score block: its normalised scores
    (``method: score``) or ``1 / (k + rank)`` (``method: rrf``)."""
    if system.method == "rrf":
        return 1.0 / (system.k + corpus_ranks(scores, key))
    return normalise_scores(scores, key, depth, system.normalise)


def fuse_features(features: Sequence[np.ndarray], weights: Sequence[float]) -> np.ndarray:
    """float32 ``[B, C]``: ``sum_s w_s * features_s`` in float64, in the components' order, rounded to float32."""
    if len(features) != len(weights):
        raise ValueError(f"{len(weights)} weights for {len(features)} components")
    fused = np.zeros(np.shape(features[0]), dtype=np.float64)
    for feature, weight in zip(features, weights, strict=True):
        if weight:
            fused += float(weight) * feature
    return fused.astype(np.float32)


class WeightedScorer(FusedScorer):
    """``rows -> float32 [len(rows), C]``: the weighted fusion of ``components`` (``(name, score_block)``, in
    ``system.systems`` order) with ``weights``, over the corpus whose chunks are ``chunk_ids``."""

    def __init__(
        self,
        system: FusionSystem,
        components: Sequence[tuple[str, ScoreBlock]],
        chunk_ids: Sequence[str],
        weights: Sequence[float],
        depth: int,
    ):
        super().__init__(components, chunk_ids, system.k)
        self.system, self.weights, self.depth = system, list(weights), depth

    def combine(self, blocks: list[np.ndarray]) -> np.ndarray:
        features = [component_features(block, self.key, self.system, self.depth) for block in blocks]
        return fuse_features(features, self.weights)


def describe_fusion(system: FusionSystem, weights: Sequence[float]) -> str:
    """One line: the method and each component with its weight, e.g. ``fusion · min-max scores: 0.3 bm25-title +
    0.7 insent``."""
    how = f"weighted RRF (k={system.k:g})" if system.method == "rrf" else f"{system.normalise} scores"
    parts = " + ".join(f"{w:.2g} {name}" for name, w in zip(system.systems, weights, strict=True))
    fitted = ", weights fitted on validation" if system.fitted else ""
    return f"fusion · {how}: {parts}{fitted}"


def prepare_fusion(
    system: FusionSystem, components: Sequence[tuple[str, IndexedSystem]], chunk_ids: Sequence[str]
) -> IndexedSystem:
    """The fusion of ``components`` (``(name, prepared system)`` in ``system.systems`` order) with ``system.weights``
    (the runner fills fitted ones in). Raises :class:`NotRunnable` without weights (nothing fitted them: no
    validation split), ValueError for other components."""
    names = [name for name, _ in components]
    if names != list(system.systems):
        raise ValueError(f"fusion {system.name}: components {names}, expected {list(system.systems)}")
    if system.weights is None:
        raise NotRunnable(
            "weights not fitted: fit: validation needs the task's validation split (declare validation in its "
            "splits), or give weights"
        )
    depth = system.depth or DEFAULT_DEPTH
    blocks = [(name, part.score_block) for name, part in components]
    scorer = WeightedScorer(system, blocks, chunk_ids, system.weights, depth)
    details = {
        "method": system.method,
        "normalise": system.normalise if system.method == "score" else None,
        "k": system.k if system.method == "rrf" else None,
        "depth": depth if system.method == "score" else None,
        "weights": dict(zip(names, system.weights, strict=True)),
        "fitted": system.fitted,
    }
    return fused_system(scorer, components, describe_fusion(system, system.weights), details)
