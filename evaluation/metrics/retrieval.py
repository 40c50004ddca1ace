"""Retrieval metrics that match ``trec_eval`` (as wrapped by ``pytrec_eval``), per query, in NumPy.

Metric names (``k`` in ``cutoffs``, default ``(1, 5, 10, 50, 100)``) and their trec_eval measures
(:data:`TREC_NAMES`). Ranks ``r`` are 1-based; a query has ``R`` relevant documents (qrels relevance
>= 1, trec_eval's default ``relevance_level``); ``rel(r)`` is 1 when the document at rank ``r`` is
relevant, else 0; ``gain(r)`` its qrels relevance when positive, else 0:

* ``ndcg@k`` (``ndcg_cut_k``): ``DCG@k / IDCG@k`` with ``DCG@k = sum_{r<=k} gain(r) / log2(r + 1)``
  and ``IDCG@k`` the same sum over the qrels' positive gains sorted descending (Järvelin & Kekäläinen,
  ACM TOIS 20(4) 2002, in trec_eval's ``m_ndcg_cut.c`` form); 0 when ``IDCG = 0``.
* ``map@k`` (``map_cut_k``): ``sum_{r<=k} rel(r) * P@r / R`` (unretrieved relevant documents count 0).
* ``recall@k`` (``recall_k``): ``sum_{r<=k} rel(r) / R``.
* ``p@k`` (``P_k``): ``sum_{r<=k} rel(r) / k`` (a run shorter than ``k`` still divides by ``k``).
* ``mrr@10`` (``recip_rank`` on the run truncated to its top 10): ``1 / r_first`` when the first
  relevant document is at ``r_first <= 10``, else 0.

Every metric is 0 for a query with ``R = 0``.

Ranking order (trec_eval ``form_res_rels.c``, ``comp_sim_docno``): each query's documents are sorted
by score descending, and equal scores by document id *descending* in ``strcmp`` order
(``return strcmp(ptr2->docno, ptr1->docno)``), so among equal scores the lexicographically larger id
ranks first (``"b"`` before ``"a"``, ``"9"`` before ``"10"``). Verified empirically with
pytrec-eval-terrier 0.5.11 (tests/evaluation/test_metrics.py). trec_eval stores scores as C ``float``
(``TEXT_RESULTS.sim`` in ``trec_format.h``), so scores that are equal once rounded to float32 tie:
:func:`evaluate_run` rounds to float32 before sorting, as pytrec_eval does (0.1 and 0.1 + 1e-12 tie
there). ``-0.0`` ties ``0.0``.

Which queries :func:`evaluate_run` scores (as pytrec_eval): the qids present in both the run and the
qrels, where the qrels list at least one judged document (relevance 0 included; such a query scores 0).
Qrels queries absent from the run are left out (trec_eval without ``-c``); ``include_missing=True``
scores them 0 instead (trec_eval ``-c``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DEFAULT_CUTOFFS: tuple[int, ...] = (1, 5, 10, 50, 100)
MRR_CUTOFF = 10


def metric_names(cutoffs: Sequence[int] = DEFAULT_CUTOFFS) -> list[str]:
    """``ndcg@k``, ``map@k``, ``recall@k``, ``p@k`` for each ``k`` (in that order), then ``mrr@10``."""
    _check_cutoffs(cutoffs)
    names = [f"{metric}@{k}" for metric in ("ndcg", "map", "recall", "p") for k in cutoffs]
    return [*names, f"mrr@{MRR_CUTOFF}"]


def _trec_names(cutoffs: Sequence[int]) -> dict[str, str]:
    names = {}
    for k in cutoffs:
        names[f"ndcg@{k}"] = f"ndcg_cut_{k}"
        names[f"map@{k}"] = f"map_cut_{k}"
        names[f"recall@{k}"] = f"recall_{k}"
        names[f"p@{k}"] = f"P_{k}"
    names[f"mrr@{MRR_CUTOFF}"] = "recip_rank"  # on the run truncated to its top 10
    return names


TREC_NAMES: dict[str, str] = _trec_names(DEFAULT_CUTOFFS)
"""Our metric name -> trec_eval measure name (``mrr@10`` is ``recip_rank`` of the top-10 run)."""


def trec_names(cutoffs: Sequence[int] = DEFAULT_CUTOFFS) -> dict[str, str]:
    """:data:`TREC_NAMES` for other cutoffs."""
    _check_cutoffs(cutoffs)
    return _trec_names(cutoffs)


def _check_cutoffs(cutoffs: Sequence[int]) -> None:
    if not cutoffs or any(int(k) != k or k < 1 for k in cutoffs) or len(set(cutoffs)) != len(cutoffs):
        raise ValueError(f"cutoffs must be distinct positive integers, got {tuple(cutoffs)}")


def metrics_from_gold_rank(gold_rank: np.ndarray, cutoffs: Sequence[int] = DEFAULT_CUTOFFS) -> dict[str, np.ndarray]:
    """Every metric per query when each query has exactly one relevant document (relevance 1).

    ``gold_rank``: int [Q], the 1-based rank of the relevant document in the full ranking; any value
    < 1 means not retrieved. With ``R = 1`` the formulas reduce to, for ``r = gold_rank <= k``:
    ``ndcg@k = 1 / log2(r + 1)``, ``map@k = 1 / r``, ``recall@k = 1``, ``p@k = 1 / k``,
    ``mrr@10 = 1 / r`` (``r <= 10``); all 0 otherwise. Returns float64 arrays [Q].
    """
    _check_cutoffs(cutoffs)
    rank = np.asarray(gold_rank)
    if rank.ndim != 1:
        raise ValueError(f"gold_rank must be 1-D, got shape {rank.shape}")
    rank = rank.astype(np.float64)
    found = rank >= 1
    safe = np.where(found, rank, 1.0)
    inverse = np.where(found, 1.0 / safe, 0.0)
    discount = np.where(found, 1.0 / np.log2(safe + 1.0), 0.0)
    out: dict[str, np.ndarray] = {}
    for metric in ("ndcg", "map", "recall", "p"):
        for k in cutoffs:
            inside = found & (rank <= k)
            if metric == "ndcg":
                value = np.where(inside, discount, 0.0)
            elif metric == "map":
                value = np.where(inside, inverse, 0.0)
            elif metric == "recall":
                value = inside.astype(np.float64)
            else:
                value = inside / float(k)
            out[f"{metric}@{k}"] = value
    out[f"mrr@{MRR_CUTOFF}"] = np.where(found & (rank <= MRR_CUTOFF), inverse, 0.0)
    return out


def metrics_from_ranks(
    relevant_ranks: Sequence[np.ndarray],
    gains: Sequence[np.ndarray] | None = None,
    n_relevant: Sequence[int] | np.ndarray | None = None,
    ideal_gains: Sequence[np.ndarray] | None = None,
    cutoffs: Sequence[int] = DEFAULT_CUTOFFS,
) -> dict[str, np.ndarray]:
    """Every metric per query, general case (several relevant documents, graded gains).

    * ``relevant_ranks[q]``: int array, the distinct 1-based ranks at which query ``q``'s run holds a
      relevant document (relevance >= 1), in any order; values < 1 are ignored (not retrieved).
    * ``gains[q]``: the qrels relevance of those documents, same order (the nDCG gain). ``None``: 1.
    * ``n_relevant[q]``: ``R``, the number of relevant documents in the qrels, retrieved or not.
      ``None``: ``len(ideal_gains[q])``.
    * ``ideal_gains[q]``: the relevance of every relevant qrels document of ``q`` (for ``IDCG``).
      ``None``: ``R`` gains of 1 (binary relevance); required when ``gains`` is given.

    Formulas in the module docstring. Returns float64 arrays [Q] keyed by :func:`metric_names`.
    """
    _check_cutoffs(cutoffs)
    n_queries = len(relevant_ranks)
    if gains is not None and ideal_gains is None:
        raise ValueError("ideal_gains is required with gains (IDCG needs every relevant document's gain)")
    if n_relevant is None:
        if ideal_gains is None:
            raise ValueError(
                "give n_relevant or ideal_gains: recall and MAP divide by the number of relevant documents"
            )
        n_relevant = [len(np.atleast_1d(g)) for g in ideal_gains]
    n_rel = np.asarray(n_relevant, dtype=np.float64).reshape(-1)
    if len(n_rel) != n_queries or (gains is not None and len(gains) != n_queries):
        raise ValueError("relevant_ranks, gains and n_relevant must have one entry per query")
    if ideal_gains is not None and len(ideal_gains) != n_queries:
        raise ValueError("ideal_gains must have one entry per query")

    # Flatten the retrieved relevant documents: query index, rank, gain; sorted by (query, rank).
    lengths = np.array([len(np.atleast_1d(r)) for r in relevant_ranks], dtype=np.int64)
    query = np.repeat(np.arange(n_queries), lengths)
    rank = _concat(relevant_ranks, np.float64)
    gain = _concat(gains, np.float64) if gains is not None else np.ones_like(rank)
    if len(gain) != len(rank):
        raise ValueError("gains must have the same length as relevant_ranks, query by query")
    keep = rank >= 1
    query, rank, gain = query[keep], rank[keep], gain[keep]
    order = np.lexsort((rank, query))
    query, rank, gain = query[order], rank[order], gain[order]
    starts = np.searchsorted(query, np.arange(n_queries))
    hits_so_far = np.arange(len(query)) - starts[query] + 1.0  # relevant documents at ranks <= rank
    if len(rank) and np.any(np.diff(rank)[np.diff(query) == 0] == 0):
        raise ValueError("relevant_ranks must not repeat a rank within a query")
    with np.errstate(divide="ignore", invalid="ignore"):
        per_r = np.where(n_rel > 0, 1.0 / np.where(n_rel > 0, n_rel, 1.0), 0.0)

    # Ideal DCG: each query's positive gains sorted descending.
    if ideal_gains is not None:
        ideal_len = np.array([len(np.atleast_1d(g)) for g in ideal_gains], dtype=np.int64)
        ideal_query = np.repeat(np.arange(n_queries), ideal_len)
        ideal = _concat(ideal_gains, np.float64)
    else:
        ideal_len = n_rel.astype(np.int64)
        ideal_query = np.repeat(np.arange(n_queries), ideal_len)
        ideal = np.ones(len(ideal_query))
    positive = ideal > 0
    ideal_query, ideal = ideal_query[positive], ideal[positive]
    ideal_order = np.lexsort((-ideal, ideal_query))
    ideal_query, ideal = ideal_query[ideal_order], ideal[ideal_order]
    ideal_rank = np.arange(len(ideal)) - np.searchsorted(ideal_query, np.arange(n_queries))[ideal_query] + 1.0

    def per_query(weights: np.ndarray, where: np.ndarray, index: np.ndarray = query) -> np.ndarray:
        return np.bincount(index[where], weights=weights[where], minlength=n_queries).astype(np.float64)

    discounted = np.where(gain > 0, gain, 0.0) / np.log2(rank + 1.0)
    ideal_discounted = ideal / np.log2(ideal_rank + 1.0)
    out: dict[str, np.ndarray] = {}
    for k in cutoffs:
        inside = rank <= k
        dcg = per_query(discounted, inside)
        idcg = per_query(ideal_discounted, ideal_rank <= k, ideal_query)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[f"ndcg@{k}"] = np.where(idcg > 0, dcg / np.where(idcg > 0, idcg, 1.0), 0.0)
    for k in cutoffs:
        out[f"map@{k}"] = per_query(hits_so_far / rank, rank <= k) * per_r
    for k in cutoffs:
        out[f"recall@{k}"] = per_query(np.ones_like(rank), rank <= k) * per_r
    for k in cutoffs:
        out[f"p@{k}"] = per_query(np.ones_like(rank), rank <= k) / float(k)
    first = np.full(n_queries, np.inf)
    np.minimum.at(first, query, rank)
    out[f"mrr@{MRR_CUTOFF}"] = np.where(first <= MRR_CUTOFF, 1.0 / first, 0.0)
    return {name: out[name] for name in metric_names(cutoffs)}


def _concat(arrays: Sequence[np.ndarray], dtype: type) -> np.ndarray:
    if len(arrays) == 0:
        return np.zeros(0, dtype=dtype)
    return np.concatenate([np.atleast_1d(np.asarray(a, dtype=dtype)).reshape(-1) for a in arrays])


def rank_run(scores: dict[str, float]) -> list[str]:
    """Document ids of one query's run in trec_eval order: float32 score descending, then id descending."""
    for doc, score in scores.items():
        if score != score:
            raise ValueError(f"NaN score for document {doc!r}")
    return sorted(scores, key=lambda doc: (float(np.float32(scores[doc])), doc), reverse=True)


def run_rank(scores: dict[str, float], doc: str) -> int:
    """1-based rank of ``doc`` in one query's run ``{docid: score}``, in trec_eval order (:func:`rank_run`).

    With ``doc`` the query's one relevant document, ``metrics_from_gold_rank`` of these ranks gives
    pytrec_eval's values for the run. Raises ``KeyError`` when ``doc`` is not in the run.
    """
    if doc not in scores:
        raise KeyError(f"document {doc!r} is not in the run")
    return rank_run(scores).index(doc) + 1


def evaluate_run(
    run: dict[str, dict[str, float]],
    qrels: dict[str, dict[str, int]],
    cutoffs: Sequence[int] = DEFAULT_CUTOFFS,
    *,
    include_missing: bool = False,
) -> dict[str, dict[str, float]]:
    """Per query, every metric of ``run`` (``{qid: {docid: score}}``) against ``qrels`` (``{qid: {docid: rel}}``).

    Same queries, order and values as ``pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)``
    (see the module docstring); keys in qrels order. ``include_missing``: also score qrels queries
    absent from the run (all metrics 0), as ``trec_eval -c``.
    """
    qids = [q for q, judged in qrels.items() if judged and (include_missing or q in run)]
    ranks, gains, ideal = [], [], []
    for qid in qids:
        judged = qrels[qid]
        relevant = {doc: rel for doc, rel in judged.items() if rel >= 1}
        ordered = rank_run(run.get(qid, {})) if relevant else []
        positions = [(i + 1, relevant[doc]) for i, doc in enumerate(ordered) if doc in relevant]
        ranks.append(np.array([p for p, _ in positions], dtype=np.int64))
        gains.append(np.array([g for _, g in positions], dtype=np.float64))
        ideal.append(np.array(list(relevant.values()), dtype=np.float64))
    values = metrics_from_ranks(ranks, gains, ideal_gains=ideal, cutoffs=cutoffs)
    return {qid: {name: float(v[i]) for name, v in values.items()} for i, qid in enumerate(qids)}
