"""Validation nDCG@10 of a model being trained, on held-out documents, with the evaluation's metric.

Each validation query has one gold chunk. Two rankings per query:

* in-document: the chunks of its own document;
* in-batch: every chunk of its group of ``batch_docs`` validation documents
  (:func:`training.data.validation_groups`, groups in ``doc_id`` order).

Scores are dot products of L2-normalised chunk and query vectors (``mode="single"``, chunks by late
chunking or alone: ``context``) or MaxSim of token vectors (``mode="tokens"``), computed in inference
mode. Ranks follow trec_eval as the evaluation does (:func:`evaluation.metrics.retrieval.run_rank`: float32 score
descending, equal scores by chunk id descending), so a gold chunk tied with others is not favoured, and
nDCG@10 is :func:`evaluation.metrics.retrieval.metrics_from_gold_rank`: the values are pytrec_eval's for the same
scores.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from embedding.encoder import LateChunkingEncoder
from embedding.windows import Context
from evaluation.config import DEFAULT_TITLE_TEMPLATE
from evaluation.metrics.retrieval import metrics_from_gold_rank, run_rank
from training.data import TrainingSample, encoder_inputs, validation_groups
from training.losses import maxsim_scores, pad_document_tokens

NDCG_CUTOFF = 10


def evaluate(
    encoder: LateChunkingEncoder,
    samples: list[TrainingSample],
    batch_docs: int,
    mode: str = "single",
    context: Context = "late",
    header: str | None = None,
    title_template: str = DEFAULT_TITLE_TEMPLATE,
) -> dict[str, float]:
    """``{"ndcg10_in_document", "ndcg10_in_batch", "queries"}`` over ``samples`` (NaN scores without queries); the
    chunks read as in training (``header``, :func:`training.data.encoder_inputs`).

    The model's training flag is restored afterwards.
    """
    model = encoder.model
    was_training = model.training
    model.eval()
    in_document: list[int] = []
    in_batch: list[int] = []
    try:
        with torch.inference_mode():
            for group in validation_groups(samples, batch_docs):
                scores = group_scores(encoder, group, mode, context, header, title_template)
                document_ranks, batch_ranks = gold_ranks(group, scores)
                in_document += document_ranks
                in_batch += batch_ranks
    finally:
        model.train(was_training)
    return {
        "ndcg10_in_document": _mean_ndcg(in_document),
        "ndcg10_in_batch": _mean_ndcg(in_batch),
        "queries": float(len(in_document)),
    }


def _mean_ndcg(ranks: list[int]) -> float:
    if not ranks:
        return float("nan")
    key = f"ndcg@{NDCG_CUTOFF}"
    return float(np.mean(metrics_from_gold_rank(np.asarray(ranks, dtype=np.int64), (NDCG_CUTOFF,))[key]))


def gold_ranks(group: Sequence[TrainingSample], scores: Sequence[np.ndarray]) -> tuple[list[int], list[int]]:
    """Per query of ``group`` (documents in order, then their queries): the trec_eval rank of its gold chunk among
    its document's chunks, and among all chunks of the group.

    ``scores[i]``: float ``[queries of document i, chunks of the whole group]``, columns in document order.
    Chunks are told apart by ``TrainingSample.chunk_ids`` (unique within the group).
    """
    ids = [chunk for sample in group for chunk in sample.chunk_ids]
    if len(ids) != sum(len(sample.chunks) for sample in group) or len(set(ids)) != len(ids):
        raise ValueError("validation samples need one distinct chunk id per chunk (TrainingSample.chunk_ids)")
    in_document: list[int] = []
    in_batch: list[int] = []
    offset = 0
    for sample, doc_scores in zip(group, scores, strict=True):
        n = len(sample.chunks)
        for row, gold in zip(doc_scores, sample.gold, strict=True):
            values = row.tolist()
            gold_id = sample.chunk_ids[gold]
            in_document.append(run_rank(dict(zip(sample.chunk_ids, values[offset : offset + n], strict=True)), gold_id))
            in_batch.append(run_rank(dict(zip(ids, values, strict=True)), gold_id))
        offset += n
    return in_document, in_batch


def group_scores(
    encoder: LateChunkingEncoder,
    group: list[TrainingSample],
    mode: str,
    context: Context = "late",
    header: str | None = None,
    title_template: str = DEFAULT_TITLE_TEMPLATE,
) -> list[np.ndarray]:
    """Per document of ``group``: float32 ``[its queries, all chunks of the group]`` scores (module docstring)."""
    docs, titles = encoder_inputs(group, header, title_template)
    queries = [query for sample in group for query in sample.queries]
    if not queries:
        return [np.zeros((0, 0)) for _ in group]
    if mode == "single":
        chunk_vectors = np.concatenate(encoder.encode_documents(docs, mode=context, titles=titles), axis=0)
        query_vectors = np.asarray(encoder.encode_queries(queries))
        scores = query_vectors @ chunk_vectors.T
    else:
        tokens, token_mask, chunk_mask = pad_document_tokens(
            encoder.forward_document_tokens(docs, mode=context, titles=titles)
        )
        query_tokens, query_mask = encoder.forward_query_tokens(queries)
        full = maxsim_scores(query_tokens.float(), query_mask, tokens.float(), token_mask)  # [Q, N, C]
        scores = full[:, chunk_mask].float().cpu().numpy()  # real chunks, document order
    out, start = [], 0
    for sample in group:
        out.append(scores[start : start + len(sample.queries)])
        start += len(sample.queries)
    return out
