"""InSeNT losses for contextual (late-chunking) embedders: scores first, then losses on the scores.

The InSeNT loss (In-Sequence Negative Training) is from "Context is Gold to find the Gold Passage: Evaluating and
Training Contextual Document Embeddings" (Conti et al., 2025). A batch holds ``N`` whole documents with all their
chunks and all their queries; every query ``q`` has one gold chunk ``g(q)`` in its own document ``d(q)``::

    L = λ_seq · L_seq + (1 − λ_seq) · L_batch

    L_seq   = mean_q [ −log softmax_{c ∈ chunks(d(q))}                       (s · score(q, c)) [g(q)] ]
    L_batch = mean_q [ −log softmax_{c ∈ {g(q)} ∪ chunks of documents ≠ d(q)} (s · score(q, c)) [g(q)] ]

Both terms are InfoNCE (cross-entropy) losses on ``s · score`` with the similarity scale ``s = 20`` (temperature
0.05). ``L_seq`` teaches the model to tell the gold chunk from its neighbours in the same document (which share its
context); ``L_batch`` teaches it to tell the gold chunk from the chunks of other documents. The paper default is
``λ_seq = 0.1``.

Averaging (``average``): ``"query"`` (our default) is the mean over all queries of the batch, as written above, so
every query weighs the same and a document with many queries weighs more. ``"document"`` is the public code's
(``LongContextEmbeddingModel._compute_loss_weighted_inbatch_inseq``): each term is averaged over the queries of each
document, then over the documents that have queries (``mean_d mean_{q ∈ d}``), so every document weighs the same.
They coincide when every document has the same number of queries. We keep ``"query"`` as the default because it is
the formula of the paper's text and it does not let one query of a sparsely annotated document weigh as much as
dozens of another's; ``average="document"`` reproduces the public code.

The score is either the cosine similarity of single vectors (:func:`cosine_scores`, the inputs already
L2-normalised) or, for late-interaction models, the MaxSim of ColBERT (Khattab & Zaharia, 2020, "ColBERT:
Efficient and Effective Passage Search via Contextualized Late Interaction over BERT") computed by
:func:`maxsim_scores`. The losses only see a ``[Q, N, C]`` score tensor, so both share the same loss code.

Scale of MaxSim: both score kinds are multiplied by the same ``scale`` (default 20). Cosine lies in ``[−1, 1]``, so
its logits lie in ``[−20, 20]``; MaxSim is a *sum* over the query's ``Lq`` real tokens of cosines, so it lies in
``[−Lq, Lq]`` (in practice ``[0, Lq]``, ``Lq`` ≈ 10–32) and ``20 · MaxSim`` gives a far sharper softmax. The public
code's late-interaction loss (``_compute_late_interaction_loss``) applies *no* scale to MaxSim (scale 1, as
PyLate's contrastive loss); set ``scale: 1`` with ``mode: tokens`` to reproduce it.

Shape conventions (used throughout):

- ``Q`` queries, ``N`` documents, ``C`` the largest number of chunks of a document in the batch, ``D`` the
  embedding dimension, ``Lq``/``Lc`` the largest number of tokens of a query/chunk.
- ``chunk_mask: Bool[N, C]`` is True for real chunks and False for padding (a document with fewer than ``C``
  chunks). Padding chunks never count as candidates and receive zero gradient.
- ``query_doc: Long[Q]`` is the index (in ``0..N-1``) of the document of each query and ``query_chunk: Long[Q]`` the
  index (in ``0..C-1``) of its gold chunk within that document.

Nothing here imports Dagster.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

__all__ = [
    "InsentLoss",
    "InsentLossModule",
    "cosine_scores",
    "insent_loss",
    "maxsim_scores",
    "pad_document_tokens",
    "pad_documents",
    "single_softmax_loss",
]

ScoreMode = Literal["single", "tokens"]
LossVariant = Literal["weighted", "single_softmax"]
Average = Literal["query", "document"]


class InsentLoss(NamedTuple):
    """The InSeNT loss and its two terms, each a scalar tensor (averaged over queries).

    ``total`` is what to back-propagate; ``in_sequence`` (``L_seq``) and ``in_batch`` (``L_batch``) are its terms,
    reported for logging.
    """

    total: Tensor
    in_sequence: Tensor
    in_batch: Tensor


# --------------------------------------------------------------------------------------------------- scores


def cosine_scores(queries: Tensor, chunks: Tensor) -> Tensor:
    """Cosine similarity of every query with every chunk of every document of the batch.

    ``score(q, n, c) = <queries[q], chunks[n, c]>``: the inputs are already L2-normalised, so the dot product is the
    cosine similarity. Padding chunks (zero vectors from :func:`pad_documents`) score 0; the losses mask them.

    Args:
        queries: ``[Q, D]`` L2-normalised query embeddings.
        chunks: ``[N, C, D]`` L2-normalised chunk embeddings, padded per document.

    Returns:
        ``[Q, N, C]`` scores.
    """
    if queries.dim() != 2 or chunks.dim() != 3 or queries.shape[-1] != chunks.shape[-1]:
        raise ValueError(
            f"expected queries [Q, D] and chunks [N, C, D], got {tuple(queries.shape)} and {tuple(chunks.shape)}"
        )
    return torch.einsum("qd,ncd->qnc", queries, chunks)


def maxsim_scores(query_tokens: Tensor, query_mask: Tensor, chunk_tokens: Tensor, chunk_token_mask: Tensor) -> Tensor:
    """ColBERT MaxSim of every query with every chunk (Khattab & Zaharia, 2020).

    ``score(q, n, c) = Σ_{i : query_mask[q, i]} max_{j : chunk_token_mask[n, c, j]} <query_tokens[q, i],
    chunk_tokens[n, c, j]>`` — the sum over the real query tokens of the best dot product with a real token of the
    chunk (token embeddings L2-normalised by the encoder, as in ColBERT). Padding tokens never win the max and are
    not summed. A chunk without any real token (a padding chunk) would have a max over an empty set (−inf); its
    score is set to 0 instead, with zero gradient, so the result is finite everywhere — the losses then drop padding
    chunks through ``chunk_mask``.

    Memory: the token-level similarity tensor is ``[Q, N, C, Lq, Lc]``.

    Args:
        query_tokens: ``[Q, Lq, D]`` query token embeddings.
        query_mask: ``Bool[Q, Lq]``, True for real query tokens.
        chunk_tokens: ``[N, C, Lc, D]`` chunk token embeddings (see :func:`pad_document_tokens`).
        chunk_token_mask: ``Bool[N, C, Lc]``, True for real chunk tokens.

    Returns:
        ``[Q, N, C]`` scores.
    """
    if query_tokens.dim() != 3 or chunk_tokens.dim() != 4 or query_tokens.shape[-1] != chunk_tokens.shape[-1]:
        raise ValueError(
            f"expected query_tokens [Q, Lq, D] and chunk_tokens [N, C, Lc, D], got "
            f"{tuple(query_tokens.shape)} and {tuple(chunk_tokens.shape)}"
        )
    if query_mask.shape != query_tokens.shape[:2] or chunk_token_mask.shape != chunk_tokens.shape[:3]:
        raise ValueError("query_mask must be [Q, Lq] and chunk_token_mask [N, C, Lc]")
    query_mask = query_mask.bool()
    chunk_token_mask = chunk_token_mask.bool()
    sim = torch.einsum("qid,ncjd->qncij", query_tokens, chunk_tokens)  # [Q, N, C, Lq, Lc]
    sim = sim.masked_fill(~chunk_token_mask[None, :, :, None, :], float("-inf"))
    best = sim.amax(dim=-1)  # [Q, N, C, Lq]; -inf for chunks without tokens
    has_tokens = chunk_token_mask.any(dim=-1)  # [N, C]
    keep = has_tokens[None, :, :, None] & query_mask[:, None, None, :]  # [Q, N, C, Lq]
    best = torch.where(keep, best, torch.zeros((), dtype=best.dtype, device=best.device))
    return best.sum(dim=-1)


# --------------------------------------------------------------------------------------------------- losses


def _check_inputs(scores: Tensor, chunk_mask: Tensor, query_doc: Tensor, query_chunk: Tensor) -> None:
    if scores.dim() != 3:
        raise ValueError(f"scores must be [Q, N, C], got {tuple(scores.shape)}")
    q, n, c = scores.shape
    if chunk_mask.shape != (n, c):
        raise ValueError(f"chunk_mask must be [N, C] = {(n, c)}, got {tuple(chunk_mask.shape)}")
    if query_doc.shape != (q,) or query_chunk.shape != (q,):
        raise ValueError(
            f"query_doc and query_chunk must be [Q] = ({q},), got {tuple(query_doc.shape)} and "
            f"{tuple(query_chunk.shape)}"
        )
    if q == 0:
        raise ValueError("the batch has no query")
    if bool((query_doc < 0).any() or (query_doc >= n).any() or (query_chunk < 0).any() or (query_chunk >= c).any()):
        raise ValueError("query_doc/query_chunk out of range")
    if not bool(chunk_mask.bool()[query_doc, query_chunk].all()):
        raise ValueError("a query's gold chunk is a padding chunk (chunk_mask False)")


def _info_nce(logits: Tensor, candidates: Tensor, gold: Tensor) -> Tensor:
    """Per-query ``−log softmax`` of the gold logit over the candidate logits: ``logsumexp(candidates) − gold``.

    ``logits``/``candidates``: ``[Q, N, C]`` (Bool mask, always containing the gold chunk); ``gold``: ``[Q]``.
    Non-candidates are filled with −inf, so they weigh exp(−inf) = 0 and get zero gradient.
    """
    masked = logits.masked_fill(~candidates, float("-inf"))
    return torch.logsumexp(masked.flatten(1), dim=1) - gold


def _gold_and_masks(
    scores: Tensor, chunk_mask: Tensor, query_doc: Tensor, query_chunk: Tensor, scale: float
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Shared pieces of both losses.

    Returns scaled logits ``[Q, N, C]``, gold logits ``[Q]``, ``valid: Bool[Q, N, C]`` (real chunks),
    ``own_doc: Bool[Q, N, 1]`` (the query's document) and ``gold_onehot: Bool[Q, N, C]``.
    """
    q, n, c = scores.shape
    logits = scale * scores
    rows = torch.arange(q, device=scores.device)
    gold = logits[rows, query_doc, query_chunk]
    valid = chunk_mask.bool()[None].expand(q, n, c)
    own_doc = (torch.arange(n, device=scores.device)[None, :] == query_doc[:, None])[:, :, None]  # [Q, N, 1]
    gold_onehot = torch.zeros((q, n, c), dtype=torch.bool, device=scores.device)
    gold_onehot[rows, query_doc, query_chunk] = True
    return logits, gold, valid, own_doc, gold_onehot


def _average(per_query: Tensor, query_doc: Tensor, n_docs: int, average: Average) -> Tensor:
    """Mean of ``per_query [Q]`` losses: over queries, or over the documents that have queries of their means."""
    if average == "query":
        return per_query.mean()
    sums = per_query.new_zeros(n_docs).index_add(0, query_doc, per_query)
    counts = torch.bincount(query_doc, minlength=n_docs).to(per_query.dtype)
    has_queries = counts > 0
    return (sums[has_queries] / counts[has_queries]).mean()


def insent_loss(
    scores: Tensor,
    chunk_mask: Tensor,
    query_doc: Tensor,
    query_chunk: Tensor,
    lambda_seq: float = 0.1,
    scale: float = 20.0,
    average: Average = "query",
) -> InsentLoss:
    """InSeNT loss (Conti et al., 2025): ``L = λ_seq · L_seq + (1 − λ_seq) · L_batch``.

    With ``z(q, c) = scale · scores[q, c]`` and ``g = g(q)`` the gold chunk of query ``q``::

        L_seq(q)   = logsumexp_{c ∈ S(q)} z(q, c) − z(q, g),   S(q) = real chunks of q's own document
        L_batch(q) = logsumexp_{c ∈ B(q)} z(q, c) − z(q, g),   B(q) = {g} ∪ real chunks of the other documents

    each averaged over the queries (``average="query"``) or over the documents of the mean over each document's
    queries (``average="document"``, the public code; see the module docstring). The other chunks of the query's
    own document are not candidates of ``L_batch`` (they are ``L_seq``'s negatives). Padding chunks (``chunk_mask``
    False) are never candidates. Computed with masks and ``logsumexp``, no loop over documents or queries.

    Edge cases: with a single document in the batch there is no in-batch negative, ``B(q) = {g}`` and
    ``L_batch(q) = log(1) = 0`` (finite, zero gradient); a document with a single chunk likewise gives
    ``L_seq(q) = 0``. ``λ_seq = 1`` gives ``total == in_sequence`` and ``λ_seq = 0`` gives ``total == in_batch``
    exactly.

    Args:
        scores: ``[Q, N, C]`` similarity of each query with each chunk (:func:`cosine_scores` or
            :func:`maxsim_scores`).
        chunk_mask: ``Bool[N, C]``, True for real chunks.
        query_doc: ``Long[Q]``, the document (``0..N-1``) of each query.
        query_chunk: ``Long[Q]``, the gold chunk (``0..C-1``) of each query within its document.
        lambda_seq: weight ``λ_seq ∈ [0, 1]`` of the in-sequence term (paper default 0.1).
        scale: similarity scale ``s = 1 / temperature`` (20 = temperature 0.05).
        average: ``"query"`` (mean over queries) or ``"document"`` (mean over documents of per-document means).

    Returns:
        :class:`InsentLoss` of scalar tensors ``(total, in_sequence, in_batch)``.
    """
    if not 0.0 <= lambda_seq <= 1.0:
        raise ValueError(f"lambda_seq must be in [0, 1], got {lambda_seq}")
    if average not in ("query", "document"):
        raise ValueError(f"average must be 'query' or 'document', got {average!r}")
    _check_inputs(scores, chunk_mask, query_doc, query_chunk)
    logits, gold, valid, own_doc, gold_onehot = _gold_and_masks(scores, chunk_mask, query_doc, query_chunk, scale)
    n_docs = scores.shape[1]
    in_sequence = _average(_info_nce(logits, valid & own_doc, gold), query_doc, n_docs, average)
    in_batch = _average(_info_nce(logits, (valid & ~own_doc) | gold_onehot, gold), query_doc, n_docs, average)
    total = lambda_seq * in_sequence + (1.0 - lambda_seq) * in_batch
    return InsentLoss(total=total, in_sequence=in_sequence, in_batch=in_batch)


def single_softmax_loss(
    scores: Tensor, chunk_mask: Tensor, query_doc: Tensor, query_chunk: Tensor, scale: float = 20.0
) -> Tensor:
    """One InfoNCE over every real chunk of the batch (the ablation of InSeNT's two-term weighting).

    ``L = mean_q [ logsumexp_{c ∈ A} scale · scores[q, c] − scale · scores[q, g(q)] ]`` with ``A`` every real chunk
    of every document of the batch: the query's own-document chunks and the other documents' chunks compete in one
    softmax. Padding chunks are never candidates. Always a mean over queries (the public code's ``inbatch_inseq``
    loss is one cross-entropy over all queries, too).

    Args:
        scores: ``[Q, N, C]`` similarity scores.
        chunk_mask: ``Bool[N, C]``, True for real chunks.
        query_doc: ``Long[Q]``, the document of each query.
        query_chunk: ``Long[Q]``, the gold chunk of each query within its document.
        scale: similarity scale (1 / temperature).

    Returns:
        Scalar tensor, averaged over queries.
    """
    _check_inputs(scores, chunk_mask, query_doc, query_chunk)
    logits, gold, valid, _, _ = _gold_and_masks(scores, chunk_mask, query_doc, query_chunk, scale)
    return _info_nce(logits, valid, gold).mean()


class InsentLossModule(torch.nn.Module):
    """InSeNT loss as a module: scores the batch, then applies :func:`insent_loss` or :func:`single_softmax_loss`.

    ``mode="single"``: single-vector embeddings scored with :func:`cosine_scores` — ``query_repr [Q, D]``,
    ``chunk_repr [N, C, D]``. ``mode="tokens"``: late interaction scored with :func:`maxsim_scores` —
    ``query_repr [Q, Lq, D]`` with ``query_mask Bool[Q, Lq]``, ``chunk_repr [N, C, Lc, D]`` with
    ``chunk_token_mask Bool[N, C, Lc]``.

    ``variant="weighted"`` (default) is the InSeNT loss ``λ_seq · L_seq + (1 − λ_seq) · L_batch``;
    ``variant="single_softmax"`` back-propagates :func:`single_softmax_loss` as ``total`` and reports ``L_seq`` and
    ``L_batch`` computed without gradient, for logging only.

    Args:
        lambda_seq: weight of the in-sequence term (paper default 0.1).
        scale: similarity scale, 1 / temperature (default 20), applied to cosine and to MaxSim alike (the public
            code applies none to MaxSim: module docstring).
        mode: ``"single"`` (cosine) or ``"tokens"`` (MaxSim).
        variant: ``"weighted"`` or ``"single_softmax"``.
        average: how the weighted loss's terms are averaged, ``"query"`` (default) or ``"document"`` (public code).
    """

    def __init__(
        self,
        lambda_seq: float = 0.1,
        scale: float = 20.0,
        mode: ScoreMode = "single",
        variant: LossVariant = "weighted",
        average: Average = "query",
    ) -> None:
        super().__init__()
        if average not in ("query", "document"):
            raise ValueError(f"average must be 'query' or 'document', got {average!r}")
        if mode not in ("single", "tokens"):
            raise ValueError(f"mode must be 'single' or 'tokens', got {mode!r}")
        if variant not in ("weighted", "single_softmax"):
            raise ValueError(f"variant must be 'weighted' or 'single_softmax', got {variant!r}")
        if not 0.0 <= lambda_seq <= 1.0:
            raise ValueError(f"lambda_seq must be in [0, 1], got {lambda_seq}")
        self.lambda_seq = float(lambda_seq)
        self.scale = float(scale)
        self.mode: ScoreMode = mode
        self.variant: LossVariant = variant
        self.average: Average = average

    def scores(
        self,
        query_repr: Tensor,
        chunk_repr: Tensor,
        query_mask: Tensor | None = None,
        chunk_token_mask: Tensor | None = None,
    ) -> Tensor:
        """``[Q, N, C]`` scores for this module's mode (the token masks are required in ``"tokens"`` mode)."""
        if self.mode == "single":
            return cosine_scores(query_repr, chunk_repr)
        if query_mask is None or chunk_token_mask is None:
            raise ValueError("mode='tokens' needs query_mask [Q, Lq] and chunk_token_mask [N, C, Lc]")
        return maxsim_scores(query_repr, query_mask, chunk_repr, chunk_token_mask)

    def forward(
        self,
        query_repr: Tensor,
        chunk_repr: Tensor,
        chunk_mask: Tensor,
        query_doc: Tensor,
        query_chunk: Tensor,
        query_mask: Tensor | None = None,
        chunk_token_mask: Tensor | None = None,
    ) -> InsentLoss:
        """Score the batch and compute the loss.

        Args:
            query_repr: ``[Q, D]`` (single) or ``[Q, Lq, D]`` (tokens).
            chunk_repr: ``[N, C, D]`` (single) or ``[N, C, Lc, D]`` (tokens).
            chunk_mask: ``Bool[N, C]``, True for real chunks.
            query_doc: ``Long[Q]``, the document of each query.
            query_chunk: ``Long[Q]``, the gold chunk of each query within its document.
            query_mask: ``Bool[Q, Lq]`` (tokens mode only).
            chunk_token_mask: ``Bool[N, C, Lc]`` (tokens mode only).

        Returns:
            :class:`InsentLoss` ``(total, in_sequence, in_batch)``.
        """
        scores = self.scores(query_repr, chunk_repr, query_mask, chunk_token_mask)
        if self.variant == "weighted":
            return insent_loss(scores, chunk_mask, query_doc, query_chunk, self.lambda_seq, self.scale, self.average)
        total = single_softmax_loss(scores, chunk_mask, query_doc, query_chunk, self.scale)
        with torch.no_grad():
            terms = insent_loss(
                scores.detach(), chunk_mask, query_doc, query_chunk, self.lambda_seq, self.scale, self.average
            )
        return InsentLoss(total=total, in_sequence=terms.in_sequence, in_batch=terms.in_batch)

    def extra_repr(self) -> str:
        return (
            f"lambda_seq={self.lambda_seq}, scale={self.scale}, mode={self.mode!r}, variant={self.variant!r}, "
            f"average={self.average!r}"
        )


# --------------------------------------------------------------------------------------------------- padding


def pad_documents(chunk_vectors: list[Tensor]) -> tuple[Tensor, Tensor]:
    """Stack the chunk vectors of ``N`` documents into one zero-padded tensor (differentiable).

    Args:
        chunk_vectors: ``N`` tensors ``[n_i, D]``, the chunk embeddings of document ``i`` (``n_i`` may differ).

    Returns:
        ``chunks [N, C, D]`` with ``C = max n_i`` (zeros for padding) and ``chunk_mask Bool[N, C]``
        (``chunk_mask[i, j]`` is True iff ``j < n_i``).
    """
    if not chunk_vectors:
        raise ValueError("pad_documents needs at least one document")
    if any(v.dim() != 2 for v in chunk_vectors):
        raise ValueError("every document must be a [n_i, D] tensor")
    chunks = pad_sequence(chunk_vectors, batch_first=True, padding_value=0.0)
    lengths = torch.tensor([v.shape[0] for v in chunk_vectors], device=chunks.device)
    chunk_mask = torch.arange(chunks.shape[1], device=chunks.device)[None, :] < lengths[:, None]
    return chunks, chunk_mask


def pad_document_tokens(chunk_tokens: list[list[Tensor]]) -> tuple[Tensor, Tensor, Tensor]:
    """Stack the per-chunk token embeddings of ``N`` documents into one zero-padded tensor (differentiable).

    Args:
        chunk_tokens: ``N`` lists (one per document) of ``n_i`` tensors ``[len_ij, D]`` (the token embeddings of
            chunk ``j`` of document ``i``).

    Returns:
        ``tokens [N, C, L, D]`` with ``C = max n_i`` and ``L = max len_ij`` (zeros for padding),
        ``chunk_token_mask Bool[N, C, L]`` (True for real tokens) and ``chunk_mask Bool[N, C]`` (True for real
        chunks).
    """
    if not chunk_tokens:
        raise ValueError("pad_document_tokens needs at least one document")
    flat = [t for doc in chunk_tokens for t in doc]
    if not flat:
        raise ValueError("pad_document_tokens needs at least one chunk")
    if any(t.dim() != 2 for t in flat):
        raise ValueError("every chunk must be a [len, D] tensor")
    n_docs = len(chunk_tokens)
    n_chunks = max(len(doc) for doc in chunk_tokens)
    padded = pad_sequence(flat, batch_first=True, padding_value=0.0)  # [total_chunks, L, D]
    device = padded.device
    doc_idx = torch.tensor([i for i, doc in enumerate(chunk_tokens) for _ in doc], device=device)
    chunk_idx = torch.tensor([j for doc in chunk_tokens for j in range(len(doc))], device=device)
    token_lengths = torch.tensor([t.shape[0] for t in flat], device=device)
    max_len, dim = padded.shape[1], padded.shape[2]

    tokens = padded.new_zeros((n_docs, n_chunks, max_len, dim)).index_put((doc_idx, chunk_idx), padded)
    chunk_token_mask = torch.zeros((n_docs, n_chunks, max_len), dtype=torch.bool, device=device)
    chunk_token_mask[doc_idx, chunk_idx] = torch.arange(max_len, device=device)[None, :] < token_lengths[:, None]
    chunk_mask = torch.zeros((n_docs, n_chunks), dtype=torch.bool, device=device)
    chunk_mask[doc_idx, chunk_idx] = True
    return tokens, chunk_token_mask, chunk_mask
