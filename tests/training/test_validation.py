"""Training validation nDCG@10 is the evaluation's: trec_eval ranks at ties, pytrec_eval's values."""

from __future__ import annotations

import numpy as np
import pytest
import pytrec_eval
import torch

from training.data import TrainingSample
from training.validation import evaluate, gold_ranks


class FixedScoresEncoder:
    """Scores every query against every chunk with the vectors it is given (no model)."""

    def __init__(self, chunk_vectors: dict[str, np.ndarray], query_vector: np.ndarray) -> None:
        self.model = torch.nn.Linear(1, 1)  # only its training flag is used
        self.chunk_vectors = chunk_vectors
        self.query_vector = query_vector.astype(np.float32)

    def encode_documents(self, documents: list[list[str]], mode: str = "late", titles=None) -> list[np.ndarray]:
        return [np.stack([self.chunk_vectors[chunk] for chunk in doc]).astype(np.float32) for doc in documents]

    def encode_queries(self, queries: list[str]) -> np.ndarray:
        return np.tile(self.query_vector, (len(queries), 1))


def sample(doc_id: str, n_chunks: int, gold: list[int]) -> TrainingSample:
    chunks = [f"{doc_id} text {i}" for i in range(n_chunks)]
    return TrainingSample(
        doc_id=doc_id,
        chunks=chunks,
        queries=[f"{doc_id} query {g}" for g in gold],
        gold=gold,
        chunk_ids=[f"{doc_id}_{i}" for i in range(n_chunks)],
    )


def pytrec_ndcg10(runs: list[dict[str, float]], golds: list[str]) -> float:
    run = {f"q{i}": scores for i, scores in enumerate(runs)}
    qrels = {f"q{i}": {gold: 1} for i, gold in enumerate(golds)}
    values = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
    return float(np.mean([values[q]["ndcg_cut_10"] for q in run]))


def test_ties_rank_as_trec_eval_not_in_the_gold_chunks_favour() -> None:
    # Document a: chunks a_0 and a_1 tie with the gold a_0; a_2 scores lower. Document b: everything ties.
    vectors = {
        "a text 0": np.array([1.0, 0.0]),
        "a text 1": np.array([1.0, 0.0]),
        "a text 2": np.array([0.0, 1.0]),
        "b text 0": np.array([1.0, 0.0]),
        "b text 1": np.array([1.0, 0.0]),
        "b text 2": np.array([1.0, 0.0]),
    }
    encoder = FixedScoresEncoder(vectors, np.array([1.0, 0.0]))
    samples = [sample("a", 3, [0, 2]), sample("b", 3, [0, 2])]
    scores = evaluate(encoder, samples, batch_docs=2)  # type: ignore[arg-type]

    score_of = {f"{doc}_{i}": float(vectors[f"{doc} text {i}"][0]) for doc in "ab" for i in range(3)}
    golds = ["a_0", "a_2", "b_0", "b_2"]
    own = [{c: s for c, s in score_of.items() if c[0] == gold[0]} for gold in golds]
    assert scores["ndcg10_in_document"] == pytest.approx(pytrec_ndcg10(own, golds), abs=1e-9)
    assert scores["ndcg10_in_batch"] == pytest.approx(pytrec_ndcg10([score_of] * 4, golds), abs=1e-9)
    assert scores["queries"] == 4.0
    # Ties broken in the gold chunk's favour (the old rule) would give a_0 and b_0 rank 1 in their document:
    favoured = (1.0 + 0.5 + 1.0 + 1.0) / 4  # a_0: 1, a_2: rank 3, b_0: 1, b_2: 1
    assert scores["ndcg10_in_document"] < favoured - 0.1
    assert encoder.model.training  # the flag is restored


def test_gold_ranks_per_document_and_per_group() -> None:
    group = [sample("a", 2, [0]), sample("b", 2, [1])]
    tied = [np.zeros((1, 4), dtype=np.float32), np.zeros((1, 4), dtype=np.float32)]
    # ids descending among equal scores: b_1, b_0, a_1, a_0
    assert gold_ranks(group, tied) == ([2, 1], [4, 1])
    broken = [sample("a", 2, [0]), TrainingSample("b", ["x", "y"], ["q"], [1])]  # no chunk ids
    with pytest.raises(ValueError, match="chunk id"):
        gold_ranks(broken, tied)
