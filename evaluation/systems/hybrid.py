"""Hybrid retrieval: reciprocal rank fusion (RRF; Cormack, Clarke and Büttcher, "Reciprocal Rank Fusion outperforms
Condorcet and individual Rank Learning Methods", SIGIR 2009) of already prepared systems.

For query ``q`` and chunk ``c``::

    score(q, c) = sum over the component systems s of 1 / (k + rank_s(q, c))

``rank_s(q, c)`` is 1-based over *every* chunk of the corpus, in the order :mod:`evaluation.systems.ranking` ranks
(trec_eval's): the component's float32 score descending, equal scores by chunk id descending in ``strcmp`` order
(:func:`~evaluation.systems.ranking.tie_order`). So a chunk's rank in a component is its position in that component's
own run file, and the chunks a component scores alike (BM25's zeros) take consecutive ranks in id order, as trec_eval
would rank them. The sum runs in float64, in the components' order, and is rounded to float32 for ranking; the fused
ranking then breaks its own ties (equal float32 sums, e.g. ranks (1, 3) and (3, 1)) by chunk id the same way.
``k`` >= 0 (the paper's 60) damps the weight of the first ranks.

Reuse: a hybrid takes its components' :class:`~evaluation.indexed.IndexedSystem` (their chunk vectors or BM25 index
and their query vectors, prepared once by :mod:`evaluation.runner`) and scores a block of queries by calling their
``score_block``: nothing is encoded twice. Cost: ``index_seconds`` and ``query_seconds`` are the components' sums (what
the hybrid costs a user who runs it alone); ranking adds one sort of the corpus per query and component.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evaluation.config import HybridSystem
from evaluation.indexed import IndexedSystem, ScoresNaN
from evaluation.systems.ranking import ScoreBlock, tie_order

_ROWS = 256
"""Query rows fused at a time (bounds the int64 ``[rows, C]`` rank matrices held at once)."""


def corpus_ranks(scores: np.ndarray, key: np.ndarray) -> np.ndarray:
    """int64 ``[B, C]``: the 1-based trec-order rank of every chunk (column) of each row of ``scores``.

    ``scores`` float32 ``[B, C]`` (other dtypes are rounded to float32 first, as trec_eval stores scores); ``key``
    int64 ``[C]`` the tie order (:func:`~evaluation.systems.ranking.tie_order`: a larger key ranks first among equal
    scores). Raises ValueError on a NaN score.
    """
    scores = np.asarray(scores, dtype=np.float32)
    if scores.ndim != 2 or scores.shape[1] != len(key):
        raise ValueError(f"scores must be [B, {len(key)}], got shape {scores.shape}")
    if np.isnan(scores).any():
        row = int(np.flatnonzero(np.isnan(scores).any(axis=1))[0])
        raise ValueError(f"NaN score for query row {row}")
    by_key = np.argsort(-np.asarray(key, dtype=np.int64), kind="stable")  # columns, largest key first
    # A stable sort by score descending keeps equal scores in key-descending order; 0.0 and -0.0 compare equal.
    order = by_key[np.argsort(-scores[:, by_key], axis=1, kind="stable")]
    ranks = np.empty(scores.shape, dtype=np.int64)
    np.put_along_axis(ranks, order, np.broadcast_to(np.arange(1, scores.shape[1] + 1), scores.shape), axis=1)
    return ranks


def rrf_scores(score_blocks: Sequence[np.ndarray], key: np.ndarray, k: float) -> np.ndarray:
    """float64 ``[B, C]``: ``sum_s 1 / (k + rank_s)`` over the components' score blocks (each float32 ``[B, C]``, in
    the components' order), ranks by :func:`corpus_ranks`."""
    if not score_blocks:
        raise ValueError("reciprocal rank fusion needs at least one component")
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    fused = np.zeros(np.shape(score_blocks[0]), dtype=np.float64)
    for scores in score_blocks:
        fused += 1.0 / (k + corpus_ranks(scores, key))
    return fused


class FusedScorer:
    """``rows -> float32 [len(rows), C]``: RRF of the score blocks of ``components`` (``(name, score_block)``, in
    fusion order) over the corpus whose chunks are ``chunk_ids`` (module docstring). Queries are fused
    :data:`_ROWS` at a time; a component returning a block of the wrong shape raises ValueError naming it."""

    def __init__(self, components: Sequence[tuple[str, ScoreBlock]], chunk_ids: Sequence[str], k: float):
        self.components = list(components)
        self.key = tie_order(chunk_ids)
        self.k = float(k)

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty((len(rows), len(self.key)), dtype=np.float32)
        for start in range(0, len(rows), _ROWS):
            part = rows[start : start + _ROWS]
            out[start : start + len(part)] = self.combine(component_blocks(self.components, part, len(self.key)))
        return out

    def combine(self, blocks: list[np.ndarray]) -> np.ndarray:
        """The fused ``[rows, C]`` scores of the components' blocks (here RRF; a weighted fusion overrides it)."""
        return rrf_scores(blocks, self.key, self.k)


def component_blocks(components: Sequence[tuple[str, ScoreBlock]], rows: np.ndarray, n_chunks: int) -> list[np.ndarray]:
    """Each component's float32 ``[len(rows), n_chunks]`` score block for ``rows``; ValueError naming a component whose
    block has another shape, :class:`~evaluation.indexed.ScoresNaN` naming one that scored NaN."""
    blocks = []
    for name, score_block in components:
        block = np.asarray(score_block(rows), dtype=np.float32)
        if block.shape != (len(rows), n_chunks):
            raise ValueError(f"component {name}: scores of shape {block.shape}, expected {(len(rows), n_chunks)}")
        bad = np.isnan(block).any(axis=1)
        if bad.any():
            raise ScoresNaN(np.asarray(rows)[bad], int(np.max(rows)) + 1, component=name)
        blocks.append(block)
    return blocks


def prepare_hybrid(
    system: HybridSystem, components: Sequence[tuple[str, IndexedSystem]], chunk_ids: Sequence[str]
) -> IndexedSystem:
    """The hybrid of ``components`` (``(name, prepared system)`` in ``system.systems`` order) over the corpus whose
    chunks are ``chunk_ids`` (corpus order: the components' columns). Raises ValueError for other components."""
    names = [name for name, _ in components]
    if names != list(system.systems):
        raise ValueError(f"hybrid {system.name}: components {names}, expected {list(system.systems)}")
    scorer = FusedScorer([(name, part.score_block) for name, part in components], chunk_ids, system.k)
    description = f"hybrid · reciprocal rank fusion (k={system.k:g}) of " + " + ".join(names)
    return fused_system(scorer, components, description, {"k": system.k})


def fused_system(
    scorer: ScoreBlock, components: Sequence[tuple[str, IndexedSystem]], description: str, details: dict
) -> IndexedSystem:
    """The prepared fusion of ``components`` scored by ``scorer``: costs are the components' sums; ``details`` gain
    the components' names and descriptions."""
    return IndexedSystem(
        scorer,
        sum(part.index_seconds for _, part in components),
        sum(part.query_seconds for _, part in components),
        description,
        {
            "components": [name for name, _ in components],
            **details,
            "component_descriptions": {name: part.description for name, part in components},
        },
    )
