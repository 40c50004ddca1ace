"""evaluation.metrics.views on hand-computed examples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaluation.metrics.retrieval import metrics_from_gold_rank
from evaluation.metrics.views import by_position, sample_subsets, scaling_curve, scaling_sizes
from evaluation.results import ScalingPoint
from evaluation.systems.ranking import rank_corpus


def test_by_position_by_hand():
    # Position 0: ranks 1, 2, 11 -> nDCG@10 1, 1/log2(3), 0. Position 2: ranks 1, 1. Position 5: rank 3.
    ranks = np.array([1, 1, 2, 3, 11, 1])
    position = np.array([0, 2, 0, 5, 0, 2])
    values = metrics_from_gold_rank(ranks)["ndcg@10"]
    points = by_position(values, position, resamples=500)
    assert [p.position for p in points] == [0, 2, 5]
    assert [p.n_queries for p in points] == [3, 2, 1]
    assert points[0].value == pytest.approx((1 + 1 / math.log2(3) + 0) / 3)
    assert points[1].value == 1.0 and (points[1].ci_low, points[1].ci_high) == (1.0, 1.0)
    assert points[2].value == 0.5 and (points[2].ci_low, points[2].ci_high) == (0.5, 0.5)
    assert 0.0 <= points[0].ci_low <= points[0].value <= points[0].ci_high <= 1.0
    with pytest.raises(ValueError):
        by_position(values, position[:3])
    assert by_position(np.zeros(0), np.zeros(0, int)) == []


def test_document_level_by_hand():
    """Document A: chunks 0.9 and 0.5 (gold); document B: one chunk at 0.8. The gold chunk ranks 3rd
    (nDCG@10 = 0.5) but its document ranks 1st (document-level nDCG@10 = 1)."""
    scores = np.array([[0.9, 0.5, 0.8]], dtype=np.float32)
    ranking = rank_corpus(
        lambda rows: scores[rows], 1, ["a1", "a2", "b1"], np.array([1]), np.array([0, 0, 1]), ["A", "B"]
    )
    assert ranking.gold_rank.tolist() == [3] and ranking.doc_rank.tolist() == [1]
    assert metrics_from_gold_rank(ranking.gold_rank)["ndcg@10"].tolist() == [0.5]
    assert metrics_from_gold_rank(ranking.doc_rank)["ndcg@10"].tolist() == [1.0]


def test_scaling_sizes():
    assert scaling_sizes(1) == [1]
    assert scaling_sizes(5) == [1, 2, 3, 4, 5]
    assert scaling_sizes(100) == [1, 2, 4, 7, 14, 27, 52, 100]
    assert scaling_sizes(10) == [1, 2, 3, 4, 5, 6, 7, 10]
    assert scaling_sizes(0) == []
    for n in (9, 37, 1000, 12345):
        for points in (2, 3, 8):
            sizes = scaling_sizes(n, points)
            assert sizes == sorted(set(sizes)) and sizes[0] == 1 and sizes[-1] == n and len(sizes) == points
    with pytest.raises(ValueError):
        scaling_sizes(10, 1)


def test_sample_subsets():
    masks, sizes = sample_subsets(20, [1, 5, 20], repeats=3, seed=4)
    assert masks.shape == (7, 20) and masks.dtype == bool
    assert sizes.tolist() == [1, 1, 1, 5, 5, 5, 20]
    assert masks.sum(axis=1).tolist() == sizes.tolist()
    assert masks[-1].all()
    again, _ = sample_subsets(20, [1, 5, 20], repeats=3, seed=4)
    np.testing.assert_array_equal(masks, again)
    other, _ = sample_subsets(20, [1, 5, 20], repeats=3, seed=5)
    assert not np.array_equal(masks, other)
    with pytest.raises(ValueError):
        sample_subsets(20, [21])
    with pytest.raises(ValueError):
        sample_subsets(20, [0])


def test_scaling_curve_by_hand():
    # Subsets 0, 1, 3 hold one document each; subset 2 holds both. Query 0: rank 1 in subset 0, rank 3 in
    # subset 2; query 1: rank 2 in subset 1, rank 1 in subset 2; no query in subset 3.
    subset_rank = np.array([[1, 0, 3, 0], [0, 2, 1, 0]])
    subset_size = np.array([1, 1, 2, 1])
    points = scaling_curve(subset_rank, subset_size)
    a, b = 1.0, 1 / math.log2(3)  # subset 0 and subset 1 means
    assert points[0] == ScalingPoint(
        n_documents=1,
        value=pytest.approx((a + b) / 2),
        std=pytest.approx(abs(a - b) / 2),
        repeats=2,
        n_queries=pytest.approx(2 / 3),
    )
    assert points[1] == ScalingPoint(n_documents=2, value=pytest.approx(0.75), std=0.0, repeats=1, n_queries=2.0)
    empty = scaling_curve(np.zeros((3, 2), int), np.array([1, 1]))
    assert math.isnan(empty[0].value) and empty[0].repeats == 0 and empty[0].n_queries == 0.0


def test_scaling_curve_through_rank_corpus():
    """The all-documents subset reproduces the overall nDCG@10; a one-document subset ranks the gold chunk
    among its own document's chunks only."""
    rng = np.random.default_rng(0)
    n_queries, n_chunks, n_docs = 40, 60, 12
    scores = rng.random((n_queries, n_chunks)).astype(np.float32)
    chunk_doc = np.sort(rng.integers(0, n_docs, n_chunks))
    chunk_doc[:n_docs] = np.arange(n_docs)
    chunk_doc.sort()
    gold = rng.integers(0, n_chunks, n_queries)
    masks, sizes = sample_subsets(n_docs, scaling_sizes(n_docs, 4), repeats=3, seed=1)
    ranking = rank_corpus(
        lambda rows: scores[rows],
        n_queries,
        [f"c{i:02d}" for i in range(n_chunks)],
        gold,
        chunk_doc,
        [f"d{i:02d}" for i in range(n_docs)],
        subsets=masks,
    )
    points = scaling_curve(ranking.subset_rank, sizes)
    assert [p.n_documents for p in points] == scaling_sizes(n_docs, 4)
    overall = metrics_from_gold_rank(ranking.gold_rank)["ndcg@10"].mean()
    assert points[-1].value == pytest.approx(overall) and points[-1].n_queries == n_queries
    assert points[-1].repeats == 1 and points[-1].std == 0.0
    for s in np.flatnonzero(sizes == 1):
        (doc,) = np.flatnonzero(masks[s])
        for q in np.flatnonzero(chunk_doc[gold] == doc):
            own = np.flatnonzero(chunk_doc == doc)
            assert ranking.subset_rank[q, s] == 1 + np.count_nonzero(scores[q, own] > scores[q, gold[q]])
