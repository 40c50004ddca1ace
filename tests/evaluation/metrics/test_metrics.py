"""evaluation.metrics.retrieval against pytrec_eval (trec_eval) and hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import pytrec_eval

from evaluation.metrics.retrieval import (
    DEFAULT_CUTOFFS,
    TREC_NAMES,
    evaluate_run,
    metric_names,
    metrics_from_gold_rank,
    metrics_from_ranks,
    rank_run,
    run_rank,
    trec_names,
)
from evaluation.systems.ranking import rank_corpus

CUTOFFS = DEFAULT_CUTOFFS


def reference(run: dict, qrels: dict, cutoffs=CUTOFFS) -> dict[str, dict[str, float]]:
    """pytrec_eval's values under our metric names (mrr@10 = recip_rank of the run cut to its top 10)."""
    spec = ",".join(str(k) for k in cutoffs)
    measures = {f"ndcg_cut.{spec}", f"map_cut.{spec}", f"recall.{spec}", f"P.{spec}"}
    full = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    top10 = {qid: {doc: docs[doc] for doc in rank_run(docs)[:10]} for qid, docs in run.items()}
    reciprocal = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10)
    names = trec_names(cutoffs)
    out = {}
    for qid, values in full.items():
        out[qid] = {name: values[trec] for name, trec in names.items() if name != "mrr@10"}
        out[qid]["mrr@10"] = reciprocal[qid]["recip_rank"]
    return out


def assert_close(ours: dict, ref: dict, tol: float = 1e-6) -> None:
    assert list(ours) == [q for q in ours if q in ref] and set(ours) == set(ref)
    for qid, values in ref.items():
        assert set(ours[qid]) == set(values)
        for name, value in values.items():
            assert ours[qid][name] == pytest.approx(value, abs=tol), (qid, name)


def random_run(rng: np.random.Generator, n_queries: int = 40, n_docs: int = 160) -> tuple[dict, dict]:
    """Runs with ties (scores rounded to 1 decimal), graded qrels (0-3), relevant documents not
    retrieved, runs shorter than 100, qrels queries missing from the run, judged-but-nonrelevant queries."""
    run, qrels = {}, {}
    for q in range(n_queries):
        qid = f"q{q}"
        length = int(rng.integers(0, n_docs))
        docs = rng.choice(n_docs, size=length, replace=False)
        if q % 7 != 3:  # some qrels queries are absent from the run
            run[qid] = {f"d{d}": float(np.round(rng.random(), 1)) for d in docs}
        judged = rng.choice(n_docs, size=int(rng.integers(1, 8)), replace=False)
        qrels[qid] = {f"d{d}": int(rng.integers(0, 4)) for d in judged}
        if q % 11 == 5:
            qrels[qid] = {doc: 0 for doc in qrels[qid]}
    run["not-judged"] = {"d1": 1.0}
    return run, qrels


def test_names():
    names = metric_names()
    assert names[:5] == ["ndcg@1", "ndcg@5", "ndcg@10", "ndcg@50", "ndcg@100"]
    assert names[-1] == "mrr@10" and len(names) == 4 * 5 + 1
    assert TREC_NAMES["ndcg@10"] == "ndcg_cut_10" and TREC_NAMES["map@100"] == "map_cut_100"
    assert TREC_NAMES["recall@5"] == "recall_5" and TREC_NAMES["p@1"] == "P_1"
    assert TREC_NAMES["mrr@10"] == "recip_rank"
    assert set(TREC_NAMES) == set(names)
    with pytest.raises(ValueError):
        metric_names((0, 5))


def test_trec_tie_order_is_descending_docid():
    """Equal scores: the larger id (strcmp) ranks first; scores equal as float32 tie (trec_eval stores floats)."""
    qrels = {"q": {"a": 1}}
    assert rank_run({"a": 1.0, "b": 1.0, "c": 1.0}) == ["c", "b", "a"]
    assert rank_run({"10": 1.0, "9": 1.0}) == ["9", "10"]
    assert rank_run({"a": 0.1 + 1e-12, "b": 0.1}) == ["b", "a"]
    assert rank_run({"a": -0.0, "b": 0.0}) == ["b", "a"]
    for run in ({"q": {"a": 1.0, "b": 1.0}}, {"q": {"a": 0.1 + 1e-12, "b": 0.1}}, {"q": {"a": -0.0, "b": 0.0}}):
        assert evaluate_run(run, qrels)["q"]["mrr@10"] == 0.5
        assert pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(run)["q"]["recip_rank"] == 0.5


@pytest.mark.parametrize("seed", range(6))
def test_evaluate_run_matches_pytrec_eval(seed):
    run, qrels = random_run(np.random.default_rng(seed))
    assert_close(evaluate_run(run, qrels), reference(run, qrels))


def test_evaluate_run_other_cutoffs():
    run, qrels = random_run(np.random.default_rng(42))
    cutoffs = (2, 3, 20)
    assert_close(evaluate_run(run, qrels, cutoffs), reference(run, qrels, cutoffs))


def test_which_queries_are_scored():
    qrels = {"missing": {"a": 1}, "zero": {"a": 0}, "empty": {}, "ok": {"a": 1}}
    run = {"zero": {"a": 1.0}, "empty": {"a": 1.0}, "ok": {"b": 2.0, "a": 1.0}, "extra": {"a": 1.0}}
    ours = evaluate_run(run, qrels)
    assert list(ours) == ["zero", "ok"]
    assert set(pytrec_eval.RelevanceEvaluator(qrels, {"P"}).evaluate(run)) == {"zero", "ok"}
    assert all(v == 0.0 for v in ours["zero"].values())
    assert ours["ok"]["ndcg@10"] == pytest.approx(1 / math.log2(3))
    everything = evaluate_run(run, qrels, include_missing=True)
    assert list(everything) == ["missing", "zero", "ok"]
    assert all(v == 0.0 for v in everything["missing"].values())


def test_hand_computed_graded_example():
    """Relevances a=2, b=1, c=3 (not retrieved), d=0; run order d, a, x, b."""
    qrels = {"q": {"a": 2, "b": 1, "c": 3, "d": 0}}
    run = {"q": {"d": 4.0, "a": 3.0, "x": 2.0, "b": 1.0}}
    values = evaluate_run(run, qrels, cutoffs=(1, 5))["q"]
    dcg = 2 / math.log2(3) + 1 / math.log2(5)
    idcg = 3 + 2 / math.log2(3) + 1 / math.log2(4)
    assert values["ndcg@5"] == pytest.approx(dcg / idcg)
    assert values["ndcg@1"] == 0.0
    assert values["map@5"] == pytest.approx((1 / 2 + 2 / 4) / 3)
    assert values["recall@5"] == pytest.approx(2 / 3)
    assert values["p@5"] == pytest.approx(2 / 5)
    assert values["mrr@10"] == pytest.approx(1 / 2)


def test_metrics_from_gold_rank_by_hand():
    values = metrics_from_gold_rank(np.array([1, 3, 0, 11, -1, 60]))
    np.testing.assert_allclose(values["ndcg@10"], [1, 0.5, 0, 0, 0, 0])
    np.testing.assert_allclose(values["ndcg@100"], [1, 0.5, 0, 1 / math.log2(12), 0, 1 / math.log2(61)])
    np.testing.assert_allclose(values["map@5"], [1, 1 / 3, 0, 0, 0, 0])
    np.testing.assert_allclose(values["recall@50"], [1, 1, 0, 1, 0, 0])
    np.testing.assert_allclose(values["p@5"], [0.2, 0.2, 0, 0, 0, 0])
    np.testing.assert_allclose(values["p@1"], [1, 0, 0, 0, 0, 0])
    np.testing.assert_allclose(values["mrr@10"], [1, 1 / 3, 0, 0, 0, 0])
    assert all(v.dtype == np.float64 and v.shape == (6,) for v in values.values())


def test_metrics_from_gold_rank_equals_general_path():
    rng = np.random.default_rng(3)
    rank = rng.integers(0, 150, size=500)
    fast = metrics_from_gold_rank(rank)
    general = metrics_from_ranks([np.array([r]) for r in rank], n_relevant=np.ones(500))
    for name in metric_names():
        np.testing.assert_allclose(fast[name], general[name], atol=1e-12, err_msg=name)


def test_metrics_from_ranks_validation():
    with pytest.raises(ValueError):
        metrics_from_ranks([np.array([1])])  # no n_relevant / ideal_gains
    with pytest.raises(ValueError):
        metrics_from_ranks([np.array([1])], gains=[np.array([2.0])], n_relevant=[1])  # gains without ideal
    with pytest.raises(ValueError):
        metrics_from_ranks([np.array([2, 2])], n_relevant=[2])  # repeated rank
    empty = metrics_from_ranks([np.array([], dtype=np.int64)], n_relevant=[0])
    assert all(v.tolist() == [0.0] for v in empty.values())


@pytest.mark.parametrize("seed", range(3))
def test_rank_corpus_gold_metrics_match_pytrec_eval(seed):
    """Single gold chunk per query: rank_corpus + metrics_from_gold_rank on a dense score matrix with ties
    against pytrec_eval on the same scores written as a run over every chunk."""
    rng = np.random.default_rng(seed)
    n_queries, n_chunks = 30, 130
    scores = np.round(rng.random((n_queries, n_chunks)), 1).astype(np.float32)
    scores[:, :40] = 0.0  # BM25-like: many ties at zero
    scores[:, 40:50] = -0.0  # ties 0.0 in trec_eval
    chunk_ids = [f"chunk-{rng.integers(10**6)}-{i}" for i in range(n_chunks)]
    chunk_doc = np.sort(rng.integers(0, 20, n_chunks))
    doc_ids = [f"doc{i}" for i in range(20)]
    gold = rng.integers(0, n_chunks, n_queries)
    ranking = rank_corpus(lambda rows: scores[rows], n_queries, chunk_ids, gold, chunk_doc, doc_ids, block=7)
    ours = metrics_from_gold_rank(ranking.gold_rank)
    run = {f"q{q}": {chunk_ids[c]: float(scores[q, c]) for c in range(n_chunks)} for q in range(n_queries)}
    qrels = {f"q{q}": {chunk_ids[gold[q]]: 1} for q in range(n_queries)}
    ref = reference(run, qrels)
    for q in range(n_queries):
        for name in metric_names():
            assert ours[name][q] == pytest.approx(ref[f"q{q}"][name], abs=1e-6), (q, name)
    # The top 100 (what a run file holds) gives the same values: every cutoff is <= 100.
    top_run = {
        f"q{q}": {chunk_ids[c]: float(s) for c, s in zip(ranking.top_index[q], ranking.top_score[q], strict=True)}
        for q in range(n_queries)
    }
    top_values = evaluate_run(top_run, qrels)
    assert_close(top_values, reference(top_run, qrels))
    assert_close(top_values, ref)


def test_run_rank_follows_trec_eval_at_ties() -> None:
    """One relevant document tied with others: its rank is trec_eval's (ids descending among equal scores)."""
    run = {"q": {"c_0": 0.5, "c_1": 0.5, "c_10": 0.5, "c_2": 0.1}}
    assert [run_rank(run["q"], doc) for doc in ("c_10", "c_1", "c_0", "c_2")] == [1, 2, 3, 4]  # strcmp: c_10 > c_1
    for gold in ("c_0", "c_1", "c_10"):
        qrels = {"q": {gold: 1}}
        ours = metrics_from_gold_rank(np.array([run_rank(run["q"], gold)]))
        assert_close({"q": {name: float(v[0]) for name, v in ours.items()}}, reference(run, qrels))
    with pytest.raises(KeyError, match="not in the run"):
        run_rank(run["q"], "c_9")
