"""evaluation.systems.ranking against a brute-force reference (full sort in trec tie order)."""

from __future__ import annotations

import numpy as np
import pytest

import evaluation.systems.ranking as ranking_module
from evaluation.systems.ranking import DenseScorer, Ranking, dense_scorer, position_major, rank_corpus, tie_order


class MatrixScorer:
    """A scorer over a fixed matrix that also offers the fast paths (``permuted``, ``into``)."""

    def __init__(self, scores: np.ndarray):
        self.scores = scores

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        return self.scores[rows]

    def permuted(self, columns: np.ndarray) -> MatrixScorer:
        return MatrixScorer(self.scores[:, columns])

    def into(self, rows: np.ndarray, out: np.ndarray) -> np.ndarray:
        out[...] = self.scores[rows]
        return out


def brute_force(scores, chunk_ids, gold, chunk_doc, doc_ids, top_k, subsets) -> Ranking:
    """Full sort of every row by (score desc, id desc), documents by (best chunk desc, id desc)."""
    n_queries, n_chunks = scores.shape
    key, doc_key = tie_order(chunk_ids), tie_order(doc_ids)
    k = min(top_k, n_chunks)
    gold_rank, doc_rank = np.zeros(n_queries, np.int64), np.zeros(n_queries, np.int64)
    top_index = np.zeros((n_queries, k), np.int64)
    subset_rank = np.zeros((n_queries, len(subsets)), np.int64) if subsets is not None else None
    for q in range(n_queries):
        order = np.lexsort((key, scores[q]))[::-1]
        gold_rank[q] = np.flatnonzero(order == gold[q])[0] + 1
        top_index[q] = order[:k]
        docs = np.unique(chunk_doc)
        best = np.array([scores[q][chunk_doc == d].max() for d in docs])
        doc_order = docs[np.lexsort((doc_key[docs], best))[::-1]]
        doc_rank[q] = np.flatnonzero(doc_order == chunk_doc[gold[q]])[0] + 1
        if subsets is not None:
            for s, mask in enumerate(subsets):
                if mask[chunk_doc[gold[q]]]:
                    inside = order[mask[chunk_doc[order]]]
                    subset_rank[q, s] = np.flatnonzero(inside == gold[q])[0] + 1
    top_score = np.take_along_axis(scores, top_index, axis=1)
    return Ranking(gold_rank, top_index, top_score, doc_rank, subset_rank)


def random_case(seed: int, n_queries: int, n_chunks: int, n_docs: int, contiguous: bool = True, zeros: float = 0.3):
    rng = np.random.default_rng(seed)
    scores = np.round(rng.random((n_queries, n_chunks)), 1).astype(np.float32)  # many ties
    scores[rng.random((n_queries, n_chunks)) < zeros] = 0.0  # BM25-like zeros
    chunk_ids = [f"c{rng.integers(10**6)}-{i}" for i in range(n_chunks)]
    doc_ids = [f"d{rng.integers(10**6)}-{i}" for i in range(n_docs)]
    chunk_doc = rng.integers(0, n_docs, n_chunks)
    if contiguous:
        chunk_doc = np.sort(chunk_doc)
    gold = rng.integers(0, n_chunks, n_queries)
    subsets = rng.random((5, n_docs)) < 0.5
    subsets[0] = True
    return scores, chunk_ids, gold, chunk_doc, doc_ids, subsets


def assert_same(ours: Ranking, ref: Ranking) -> None:
    np.testing.assert_array_equal(ours.gold_rank, ref.gold_rank)
    np.testing.assert_array_equal(ours.top_index, ref.top_index)
    np.testing.assert_array_equal(ours.top_score, ref.top_score)
    np.testing.assert_array_equal(ours.doc_rank, ref.doc_rank)
    if ref.subset_rank is None:
        assert ours.subset_rank is None
    else:
        np.testing.assert_array_equal(ours.subset_rank, ref.subset_rank)
    assert ours.gold_rank.dtype == np.int64 and ours.top_index.dtype == np.int64
    assert ours.top_score.dtype == np.float32 and ours.doc_rank.dtype == np.int64


@pytest.mark.parametrize("scorer", ["callable", "fast"])
@pytest.mark.parametrize("contiguous", [True, False])
@pytest.mark.parametrize("seed", range(3))
def test_matches_brute_force(seed, contiguous, scorer, monkeypatch):
    """Ties everywhere, several block sizes, top_k below and above C; few top-k groups so that the
    lower-bound and the exact (tie-heavy) paths both run."""
    monkeypatch.setattr(ranking_module, "_MIN_GROUPS", 4)
    monkeypatch.setattr(ranking_module, "_SLOW_ROWS", 2)
    exact_calls = []
    exact = ranking_module._TopK._exact
    monkeypatch.setattr(
        ranking_module._TopK, "_exact", lambda self, s, rows: exact_calls.append(1) or exact(self, s, rows)
    )
    scores, chunk_ids, gold, chunk_doc, doc_ids, subsets = random_case(seed, 9, 70, 12, contiguous)
    n_queries = len(gold)
    score_block = MatrixScorer(scores) if scorer == "fast" else (lambda rows: scores[rows])
    for top_k in (1, 5, 200):
        ref = brute_force(scores, chunk_ids, gold, chunk_doc, doc_ids, top_k, subsets)
        for block in (1, 3, n_queries):
            ours = rank_corpus(
                score_block, n_queries, chunk_ids, gold, chunk_doc, doc_ids, top_k=top_k, block=block, subsets=subsets
            )
            assert_same(ours, ref)
    assert exact_calls  # the tie-heavy path ran too
    ours = rank_corpus(score_block, n_queries, chunk_ids, gold, chunk_doc, doc_ids, top_k=5)
    assert ours.subset_rank is None
    np.testing.assert_array_equal(ours.gold_rank, ref.gold_rank)


@pytest.mark.parametrize("zeros", [0.0, 0.99])
def test_matches_brute_force_default_groups(zeros, monkeypatch):
    """Default group count with C > 2048 (strided groups of 2 plus a tail); with 99% zeros fewer than
    top_k chunks score above 0, so the rows tie at the top-k boundary (the exact path)."""
    exact_rows = []
    exact = ranking_module._TopK._exact
    monkeypatch.setattr(
        ranking_module._TopK, "_exact", lambda self, s, rows: exact_rows.extend(rows) or exact(self, s, rows)
    )
    scores, chunk_ids, gold, chunk_doc, doc_ids, subsets = random_case(7, 12, 4500, 300, zeros=zeros)
    scores += np.where(scores > 0, np.random.default_rng(1).random(scores.shape, dtype=np.float32) * 1e-3, 0)
    ref = brute_force(scores, chunk_ids, gold, chunk_doc, doc_ids, 100, subsets)
    for scorer in (MatrixScorer(scores), lambda rows: scores[rows]):
        ours = rank_corpus(scorer, len(gold), chunk_ids, gold, chunk_doc, doc_ids, block=5, subsets=subsets)
        assert_same(ours, ref)
    assert len(exact_rows) == (2 * len(gold) if zeros else 0)


def test_dense_scorer_and_full_subset():
    rng = np.random.default_rng(0)
    queries, chunks = rng.standard_normal((20, 8), dtype=np.float32), rng.standard_normal((50, 8), dtype=np.float32)
    scorer = dense_scorer(queries, chunks)
    rows = np.array([3, 4, 5])
    np.testing.assert_allclose(scorer(rows), queries[rows] @ chunks.T, rtol=1e-6)
    assert scorer(np.array([7, 1])).dtype == np.float32
    out = np.empty((3, 50), np.float32)
    assert scorer.into(rows, out) is out
    columns = rng.permutation(50)
    np.testing.assert_allclose(scorer.permuted(columns)(rows), (queries[rows] @ chunks.T)[:, columns], rtol=1e-6)
    with pytest.raises(ValueError):
        DenseScorer(queries, chunks[:, :4])

    chunk_ids = [f"c{i}" for i in range(50)]
    chunk_doc = np.repeat(np.arange(10), 5)
    doc_ids = [f"d{i}" for i in range(10)]
    gold = rng.integers(0, 50, 20)
    everything = np.ones((1, 10), bool)
    ours = rank_corpus(scorer, 20, chunk_ids, gold, chunk_doc, doc_ids, top_k=10, block=6, subsets=everything)
    np.testing.assert_array_equal(ours.subset_rank[:, 0], ours.gold_rank)  # the all-documents subset
    scores = queries @ chunks.T
    np.testing.assert_array_equal(ours.top_index[:, 0], scores.argmax(axis=1))


def test_position_major_layout():
    chunk_doc = np.array([0, 0, 0, 1, 2, 2, 0])
    columns, widths = position_major(chunk_doc, 4)  # document 3 has no chunk
    assert widths.tolist() == [3, 2, 1, 1]
    assert columns.tolist() == [0, 4, 3, 1, 5, 2, 6]  # first chunks (doc 0, 2, 1), then second chunks, ...


def test_tie_order():
    key = tie_order(["b", "a", "10", "9", "c"])
    assert key.tolist() == [3, 2, 0, 1, 4]  # "10" < "9" < "a" < "b" < "c" (strcmp)
    with pytest.raises(ValueError):
        tie_order(["a", "a"])


def test_progress_nan_and_validation():
    scores = np.random.default_rng(0).random((7, 30)).astype(np.float32)
    ids, docs, chunk_doc, gold = [f"c{i}" for i in range(30)], ["d0", "d1"], np.repeat([0, 1], 15), np.zeros(7, int)
    seen = []
    rank_corpus(lambda rows: scores[rows], 7, ids, gold, chunk_doc, docs, block=3, progress=seen.append)
    assert seen == [3, 3, 1]
    bad = scores.copy()
    bad[4, 17] = np.nan
    with pytest.raises(ValueError, match="query row 4"):
        rank_corpus(lambda rows: bad[rows], 7, ids, gold, chunk_doc, docs, block=3)
    with pytest.raises(ValueError):
        rank_corpus(lambda rows: scores[rows], 7, ids, np.full(7, 30), chunk_doc, docs)
    with pytest.raises(ValueError):
        rank_corpus(lambda rows: scores[rows][:, :5], 7, ids, gold, chunk_doc, docs)
    empty = rank_corpus(lambda rows: scores[rows], 0, ids, np.zeros(0, int), chunk_doc, docs)
    assert empty.gold_rank.shape == (0,) and empty.top_index.shape == (0, 30)
