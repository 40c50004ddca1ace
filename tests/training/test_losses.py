"""InSeNT losses against loop-based references written from the formulas, plus gradient and edge-case checks."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from torch import Tensor

from training.losses import (
    InsentLoss,
    InsentLossModule,
    cosine_scores,
    insent_loss,
    maxsim_scores,
    pad_document_tokens,
    pad_documents,
    single_softmax_loss,
)

DTYPE = torch.float64
TOL = 1e-6


# ------------------------------------------------------------------------------------------ batches and references


@dataclass
class Batch:
    """A random single-vector batch: documents with different chunk counts, several queries per document."""

    queries: Tensor  # [Q, D]
    docs: list[Tensor]  # N x [n_i, D]
    query_doc: Tensor  # [Q]
    query_chunk: Tensor  # [Q]


def _normalise(x: Tensor) -> Tensor:
    return torch.nn.functional.normalize(x, dim=-1)


def _queries_for(n_chunks: list[int], per_doc: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
    docs, chunks = [], []
    for d, n in enumerate(n_chunks):
        for _ in range(per_doc):
            docs.append(d)
            chunks.append(int(torch.randint(n, (1,), generator=gen)))
    return torch.tensor(docs), torch.tensor(chunks)


def make_batch(seed: int, n_chunks: list[int] | None = None, per_doc: int = 2, dim: int = 8) -> Batch:
    gen = torch.Generator().manual_seed(seed)
    n_chunks = n_chunks or [3, 1, 5, 2]
    docs = [_normalise(torch.randn(n, dim, generator=gen, dtype=DTYPE)) for n in n_chunks]
    query_doc, query_chunk = _queries_for(n_chunks, per_doc, gen)
    queries = _normalise(torch.randn(len(query_doc), dim, generator=gen, dtype=DTYPE))
    return Batch(queries, docs, query_doc, query_chunk)


def _logsumexp(values: list[float]) -> float:
    m = max(values)
    return m + math.log(sum(math.exp(v - m) for v in values))


def ref_cosine(queries: Tensor, docs: list[Tensor]) -> dict[tuple[int, int, int], float]:
    """score[(q, n, c)] for real chunks only, one dot product at a time."""
    out = {}
    for q in range(queries.shape[0]):
        for n, doc in enumerate(docs):
            for c in range(doc.shape[0]):
                out[(q, n, c)] = sum(float(queries[q, k]) * float(doc[c, k]) for k in range(queries.shape[1]))
    return out


def ref_maxsim(query_tokens: list[Tensor], doc_tokens: list[list[Tensor]]) -> dict[tuple[int, int, int], float]:
    """ColBERT MaxSim: Σ over query tokens of max over chunk tokens of the dot product (unpadded inputs)."""
    out = {}
    for q, qt in enumerate(query_tokens):
        for n, doc in enumerate(doc_tokens):
            for c, ct in enumerate(doc):
                total = 0.0
                for i in range(qt.shape[0]):
                    total += max(float(torch.dot(qt[i], ct[j])) for j in range(ct.shape[0]))
                out[(q, n, c)] = total
    return out


def ref_insent(
    score: dict[tuple[int, int, int], float],
    n_chunks: list[int],
    query_doc: Tensor,
    query_chunk: Tensor,
    lambda_seq: float,
    scale: float,
) -> tuple[float, float, float]:
    """(total, in_sequence, in_batch) with explicit candidate lists per query."""
    seq_terms, batch_terms = [], []
    for q in range(len(query_doc)):
        d, g = int(query_doc[q]), int(query_chunk[q])
        gold = scale * score[(q, d, g)]
        seq_candidates = [scale * score[(q, d, c)] for c in range(n_chunks[d])]
        batch_candidates = [gold] + [
            scale * score[(q, n, c)] for n in range(len(n_chunks)) if n != d for c in range(n_chunks[n])
        ]
        seq_terms.append(_logsumexp(seq_candidates) - gold)
        batch_terms.append(_logsumexp(batch_candidates) - gold)
    seq = sum(seq_terms) / len(seq_terms)
    batch = sum(batch_terms) / len(batch_terms)
    return lambda_seq * seq + (1 - lambda_seq) * batch, seq, batch


def ref_single_softmax(
    score: dict[tuple[int, int, int], float], n_chunks: list[int], query_doc: Tensor, query_chunk: Tensor, scale: float
) -> float:
    terms = []
    for q in range(len(query_doc)):
        gold = scale * score[(q, int(query_doc[q]), int(query_chunk[q]))]
        candidates = [scale * score[(q, n, c)] for n in range(len(n_chunks)) for c in range(n_chunks[n])]
        terms.append(_logsumexp(candidates) - gold)
    return sum(terms) / len(terms)


def make_token_batch(
    seed: int, n_chunks: list[int] | None = None, per_doc: int = 2, dim: int = 6
) -> tuple[list[Tensor], list[list[Tensor]], Tensor, Tensor]:
    """Random token embeddings: queries and chunks of different token lengths, documents of different sizes."""
    gen = torch.Generator().manual_seed(seed)
    n_chunks = n_chunks or [3, 1, 4]
    doc_tokens = [
        [
            _normalise(torch.randn(int(torch.randint(1, 6, (1,), generator=gen)), dim, generator=gen, dtype=DTYPE))
            for _ in range(n)
        ]
        for n in n_chunks
    ]
    query_doc, query_chunk = _queries_for(n_chunks, per_doc, gen)
    query_tokens = [
        _normalise(torch.randn(int(torch.randint(1, 5, (1,), generator=gen)), dim, generator=gen, dtype=DTYPE))
        for _ in range(len(query_doc))
    ]
    return query_tokens, doc_tokens, query_doc, query_chunk


def pad_queries(query_tokens: list[Tensor]) -> tuple[Tensor, Tensor]:
    padded = torch.nn.utils.rnn.pad_sequence(query_tokens, batch_first=True)
    lengths = torch.tensor([t.shape[0] for t in query_tokens])
    return padded, torch.arange(padded.shape[1])[None, :] < lengths[:, None]


def _scores_and_mask(batch: Batch) -> tuple[Tensor, Tensor]:
    chunks, chunk_mask = pad_documents(batch.docs)
    return cosine_scores(batch.queries, chunks), chunk_mask


# ------------------------------------------------------------------------------------------ scores


def test_cosine_scores_match_loops() -> None:
    batch = make_batch(0)
    scores, chunk_mask = _scores_and_mask(batch)
    assert scores.shape == (len(batch.query_doc), 4, 5)
    for (q, n, c), value in ref_cosine(batch.queries, batch.docs).items():
        assert scores[q, n, c].item() == pytest.approx(value, abs=TOL)
    assert torch.all(scores[:, ~chunk_mask] == 0)  # zero-padded chunks score 0


def test_maxsim_scores_match_loops() -> None:
    query_tokens, doc_tokens, _, _ = make_token_batch(1)
    q_pad, q_mask = pad_queries(query_tokens)
    c_pad, c_tok_mask, chunk_mask = pad_document_tokens(doc_tokens)
    scores = maxsim_scores(q_pad, q_mask, c_pad, c_tok_mask)
    assert scores.shape == (len(query_tokens), 3, 4)
    for (q, n, c), value in ref_maxsim(query_tokens, doc_tokens).items():
        assert scores[q, n, c].item() == pytest.approx(value, abs=TOL)
    assert torch.isfinite(scores).all()
    assert torch.all(scores[:, ~chunk_mask] == 0)  # padding chunks (no tokens): 0, not -inf


def test_maxsim_ignores_padding_token_values() -> None:
    """Whatever sits in padding positions (here large values) changes nothing."""
    query_tokens, doc_tokens, _, _ = make_token_batch(2)
    q_pad, q_mask = pad_queries(query_tokens)
    c_pad, c_tok_mask, _ = pad_document_tokens(doc_tokens)
    expected = maxsim_scores(q_pad, q_mask, c_pad, c_tok_mask)
    noisy_q = torch.where(q_mask[..., None], q_pad, torch.full_like(q_pad, 7.0))
    noisy_c = torch.where(c_tok_mask[..., None], c_pad, torch.full_like(c_pad, 9.0))
    assert torch.allclose(maxsim_scores(noisy_q, q_mask, noisy_c, c_tok_mask), expected, atol=1e-12)


# ------------------------------------------------------------------------------------------ losses vs references


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("lambda_seq", [0.0, 0.1, 0.5, 1.0])
@pytest.mark.parametrize("scale", [20.0, 3.0])
def test_insent_loss_matches_reference(seed: int, lambda_seq: float, scale: float) -> None:
    batch = make_batch(seed)
    scores, chunk_mask = _scores_and_mask(batch)
    result = insent_loss(scores, chunk_mask, batch.query_doc, batch.query_chunk, lambda_seq=lambda_seq, scale=scale)
    assert isinstance(result, InsentLoss)
    assert all(t.dim() == 0 for t in result)
    n_chunks = [d.shape[0] for d in batch.docs]
    total, seq, in_batch = ref_insent(
        ref_cosine(batch.queries, batch.docs), n_chunks, batch.query_doc, batch.query_chunk, lambda_seq, scale
    )
    assert result.total.item() == pytest.approx(total, abs=TOL)
    assert result.in_sequence.item() == pytest.approx(seq, abs=TOL)
    assert result.in_batch.item() == pytest.approx(in_batch, abs=TOL)


@pytest.mark.parametrize("seed", [0, 3])
def test_single_softmax_matches_reference(seed: int) -> None:
    batch = make_batch(seed, n_chunks=[2, 6, 1])
    scores, chunk_mask = _scores_and_mask(batch)
    loss = single_softmax_loss(scores, chunk_mask, batch.query_doc, batch.query_chunk, scale=20.0)
    n_chunks = [d.shape[0] for d in batch.docs]
    expected = ref_single_softmax(
        ref_cosine(batch.queries, batch.docs), n_chunks, batch.query_doc, batch.query_chunk, 20.0
    )
    assert loss.item() == pytest.approx(expected, abs=TOL)


@pytest.mark.parametrize("variant", ["weighted", "single_softmax"])
@pytest.mark.parametrize("lambda_seq", [0.1, 0.7])
def test_maxsim_module_matches_reference(variant: str, lambda_seq: float) -> None:
    query_tokens, doc_tokens, query_doc, query_chunk = make_token_batch(4)
    q_pad, q_mask = pad_queries(query_tokens)
    c_pad, c_tok_mask, chunk_mask = pad_document_tokens(doc_tokens)
    module = InsentLossModule(lambda_seq=lambda_seq, scale=2.0, mode="tokens", variant=variant)  # type: ignore[arg-type]
    result = module(q_pad, c_pad, chunk_mask, query_doc, query_chunk, query_mask=q_mask, chunk_token_mask=c_tok_mask)
    score = ref_maxsim(query_tokens, doc_tokens)
    n_chunks = [len(d) for d in doc_tokens]
    total, seq, in_batch = ref_insent(score, n_chunks, query_doc, query_chunk, lambda_seq, 2.0)
    if variant == "single_softmax":
        total = ref_single_softmax(score, n_chunks, query_doc, query_chunk, 2.0)
    assert result.total.item() == pytest.approx(total, abs=TOL)
    assert result.in_sequence.item() == pytest.approx(seq, abs=TOL)
    assert result.in_batch.item() == pytest.approx(in_batch, abs=TOL)


def test_module_single_mode_matches_functions() -> None:
    batch = make_batch(5)
    chunks, chunk_mask = pad_documents(batch.docs)
    scores = cosine_scores(batch.queries, chunks)
    weighted = InsentLossModule(lambda_seq=0.3)(batch.queries, chunks, chunk_mask, batch.query_doc, batch.query_chunk)
    expected = insent_loss(scores, chunk_mask, batch.query_doc, batch.query_chunk, lambda_seq=0.3)
    assert all(torch.equal(a, b) for a, b in zip(weighted, expected, strict=True))
    single = InsentLossModule(variant="single_softmax")(
        batch.queries, chunks, chunk_mask, batch.query_doc, batch.query_chunk
    )
    assert torch.equal(single.total, single_softmax_loss(scores, chunk_mask, batch.query_doc, batch.query_chunk))
    assert not single.in_sequence.requires_grad and not single.in_batch.requires_grad


def test_hand_computed_value() -> None:
    """One query, gold score a, a same-document neighbour b, another document's chunk c."""
    a, b, c, s, lam = 0.8, 0.5, 0.6, 20.0, 0.25
    scores = torch.tensor([[[a, b], [c, 0.0]]], dtype=DTYPE)
    chunk_mask = torch.tensor([[True, True], [True, False]])
    result = insent_loss(scores, chunk_mask, torch.tensor([0]), torch.tensor([0]), lambda_seq=lam, scale=s)
    seq = math.log(1 + math.exp(s * (b - a)))
    in_batch = math.log(1 + math.exp(s * (c - a)))
    assert result.in_sequence.item() == pytest.approx(seq, abs=1e-12)
    assert result.in_batch.item() == pytest.approx(in_batch, abs=1e-12)
    assert result.total.item() == pytest.approx(lam * seq + (1 - lam) * in_batch, abs=1e-12)


def test_hand_computed_query_and_document_averages() -> None:
    """Document 0 has two queries, document 1 one: the two averages weigh them differently."""
    s, lam = 20.0, 0.5
    scores = torch.tensor(
        [
            [[0.9, 0.4], [0.7, 0.1]],  # query 0: document 0, gold chunk 0
            [[0.3, 0.6], [0.5, 0.2]],  # query 1: document 0, gold chunk 1
            [[0.2, 0.8], [0.6, 0.4]],  # query 2: document 1, gold chunk 0
        ],
        dtype=DTYPE,
    )
    chunk_mask = torch.tensor([[True, True], [True, True]])
    query_doc, query_chunk = torch.tensor([0, 0, 1]), torch.tensor([0, 1, 0])

    def lse(*values: float) -> float:
        return math.log(sum(math.exp(s * v) for v in values))

    seq = [lse(0.9, 0.4) - s * 0.9, lse(0.3, 0.6) - s * 0.6, lse(0.6, 0.4) - s * 0.6]
    bat = [lse(0.9, 0.7, 0.1) - s * 0.9, lse(0.6, 0.5, 0.2) - s * 0.6, lse(0.6, 0.2, 0.8) - s * 0.6]
    by_query = insent_loss(scores, chunk_mask, query_doc, query_chunk, lam, s)
    assert by_query.in_sequence.item() == pytest.approx(sum(seq) / 3, abs=1e-12)
    assert by_query.in_batch.item() == pytest.approx(sum(bat) / 3, abs=1e-12)
    by_doc = insent_loss(scores, chunk_mask, query_doc, query_chunk, lam, s, average="document")
    seq_doc = ((seq[0] + seq[1]) / 2 + seq[2]) / 2
    bat_doc = ((bat[0] + bat[1]) / 2 + bat[2]) / 2
    assert by_doc.in_sequence.item() == pytest.approx(seq_doc, abs=1e-12)
    assert by_doc.in_batch.item() == pytest.approx(bat_doc, abs=1e-12)
    assert by_doc.total.item() == pytest.approx(lam * seq_doc + (1 - lam) * bat_doc, abs=1e-12)
    assert abs(by_doc.total.item() - by_query.total.item()) > 1e-3  # the averages differ here
    # A document without queries does not count in the document average.
    scores3 = torch.cat([scores, torch.full((3, 1, 2), 0.3, dtype=DTYPE)], dim=1)
    mask3 = torch.ones(3, 2, dtype=torch.bool)
    with_empty = insent_loss(scores3, mask3, query_doc, query_chunk, lam, s, average="document")
    bat_empty = [lse(0.9, 0.7, 0.1, 0.3, 0.3) - s * 0.9, lse(0.6, 0.5, 0.2, 0.3, 0.3) - s * 0.6]
    bat_empty.append(lse(0.6, 0.2, 0.8, 0.3, 0.3) - s * 0.6)
    assert with_empty.in_sequence.item() == pytest.approx(seq_doc, abs=1e-12)
    assert with_empty.in_batch.item() == pytest.approx(((bat_empty[0] + bat_empty[1]) / 2 + bat_empty[2]) / 2)
    module = InsentLossModule(lam, s, average="document")
    assert "average='document'" in repr(module)
    with pytest.raises(ValueError, match="average"):
        insent_loss(scores, chunk_mask, query_doc, query_chunk, average="batch")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="average"):
        InsentLossModule(average="batch")  # type: ignore[arg-type]


def test_module_passes_the_average() -> None:
    batch = make_batch(3)
    chunks, chunk_mask = pad_documents(batch.docs)
    scores = cosine_scores(batch.queries, chunks)
    for average in ("query", "document"):
        for variant in ("weighted", "single_softmax"):
            got = InsentLossModule(0.3, 20.0, variant=variant, average=average)(
                batch.queries, chunks, chunk_mask, batch.query_doc, batch.query_chunk
            )
            want = insent_loss(scores, chunk_mask, batch.query_doc, batch.query_chunk, 0.3, 20.0, average)
            assert torch.allclose(got.in_sequence, want.in_sequence) and torch.allclose(got.in_batch, want.in_batch)
            if variant == "weighted":
                assert torch.allclose(got.total, want.total)


# ------------------------------------------------------------------------------------------ gradients and edge cases


def test_gradients_reach_every_real_chunk_and_query() -> None:
    batch = make_batch(6)
    docs = [d.clone().requires_grad_(True) for d in batch.docs]
    queries = batch.queries.clone().requires_grad_(True)
    chunks, chunk_mask = pad_documents(docs)
    chunks.retain_grad()
    loss = InsentLossModule(lambda_seq=0.1)(queries, chunks, chunk_mask, batch.query_doc, batch.query_chunk).total
    loss.backward()
    for doc in docs:
        assert doc.grad is not None
        assert torch.all(doc.grad.abs().sum(dim=-1) > 0)
    assert queries.grad is not None and torch.all(queries.grad.abs().sum(dim=-1) > 0)
    assert chunks.grad is not None
    assert torch.all(chunks.grad[~chunk_mask] == 0)  # padding chunks: zero gradient
    assert torch.all(chunks.grad[chunk_mask].abs().sum(dim=-1) > 0)


def test_padding_chunks_get_zero_gradient_even_when_nonzero() -> None:
    """Garbage in padding slots neither changes the loss nor receives gradient."""
    batch = make_batch(7)
    chunks, chunk_mask = pad_documents(batch.docs)
    garbage = torch.where(chunk_mask[..., None], chunks, torch.full_like(chunks, 5.0)).requires_grad_(True)
    result = insent_loss(cosine_scores(batch.queries, garbage), chunk_mask, batch.query_doc, batch.query_chunk)
    clean = insent_loss(cosine_scores(batch.queries, chunks), chunk_mask, batch.query_doc, batch.query_chunk)
    assert result.total.item() == pytest.approx(clean.total.item(), abs=1e-12)
    result.total.backward()
    assert garbage.grad is not None and torch.all(garbage.grad[~chunk_mask] == 0)


def test_token_gradients_skip_padding() -> None:
    query_tokens, doc_tokens, query_doc, query_chunk = make_token_batch(8)
    q_pad, q_mask = pad_queries(query_tokens)
    c_pad, c_tok_mask, chunk_mask = pad_document_tokens(doc_tokens)
    q_pad.requires_grad_(True)
    c_pad.requires_grad_(True)
    module = InsentLossModule(lambda_seq=0.1, mode="tokens")
    module(
        q_pad, c_pad, chunk_mask, query_doc, query_chunk, query_mask=q_mask, chunk_token_mask=c_tok_mask
    ).total.backward()
    assert q_pad.grad is not None and c_pad.grad is not None
    assert torch.isfinite(q_pad.grad).all() and torch.isfinite(c_pad.grad).all()
    assert torch.all(c_pad.grad[~c_tok_mask] == 0)  # padding tokens and padding chunks
    assert torch.all(q_pad.grad[~q_mask] == 0)
    assert torch.all(c_pad.grad[chunk_mask].abs().sum(dim=(-1, -2)) > 0)  # every real chunk learns
    assert torch.all(q_pad.grad[q_mask].abs().sum(dim=-1) > 0)  # every real query token learns


def test_single_document_batch_is_finite() -> None:
    """No in-batch negative: L_batch = log(1) = 0 per query; no NaN in values or gradients."""
    batch = make_batch(9, n_chunks=[4])
    queries = batch.queries.clone().requires_grad_(True)
    chunks, chunk_mask = pad_documents(batch.docs)
    chunks = chunks.detach().requires_grad_(True)
    scores = cosine_scores(queries, chunks)
    result = insent_loss(scores, chunk_mask, batch.query_doc, batch.query_chunk, lambda_seq=0.1)
    assert result.in_batch.item() == 0.0
    assert result.in_sequence.item() > 0
    assert result.total.item() == pytest.approx(0.1 * result.in_sequence.item(), abs=1e-12)
    result.total.backward()
    assert torch.isfinite(queries.grad).all() and torch.isfinite(chunks.grad).all()  # type: ignore[arg-type]

    only_batch = insent_loss(scores, chunk_mask, batch.query_doc, batch.query_chunk, lambda_seq=0.0)
    assert only_batch.total.item() == 0.0
    single_chunk = make_batch(9, n_chunks=[1])
    s, m = _scores_and_mask(single_chunk)
    assert insent_loss(s, m, single_chunk.query_doc, single_chunk.query_chunk).total.item() == 0.0


@pytest.mark.parametrize("seed", [0, 1])
def test_lambda_extremes_reduce_to_single_terms(seed: int) -> None:
    batch = make_batch(seed)
    scores, chunk_mask = _scores_and_mask(batch)
    only_seq = insent_loss(scores, chunk_mask, batch.query_doc, batch.query_chunk, lambda_seq=1.0)
    only_batch = insent_loss(scores, chunk_mask, batch.query_doc, batch.query_chunk, lambda_seq=0.0)
    assert torch.equal(only_seq.total, only_seq.in_sequence)
    assert torch.equal(only_batch.total, only_batch.in_batch)


def test_invariant_to_permuting_documents_and_queries() -> None:
    batch = make_batch(10)
    scores, chunk_mask = _scores_and_mask(batch)
    expected = insent_loss(scores, chunk_mask, batch.query_doc, batch.query_chunk, lambda_seq=0.1)
    expected_single = single_softmax_loss(scores, chunk_mask, batch.query_doc, batch.query_chunk)

    perm = torch.tensor([2, 0, 3, 1])  # new document i is old document perm[i]
    inverse = torch.argsort(perm)
    qperm = torch.randperm(len(batch.query_doc), generator=torch.Generator().manual_seed(0))
    p_scores = scores[:, perm][qperm]
    p_mask = chunk_mask[perm]
    p_doc = inverse[batch.query_doc][qperm]
    p_chunk = batch.query_chunk[qperm]
    got = insent_loss(p_scores, p_mask, p_doc, p_chunk, lambda_seq=0.1)
    for a, b in zip(got, expected, strict=True):
        assert a.item() == pytest.approx(b.item(), abs=1e-12)
    assert single_softmax_loss(p_scores, p_mask, p_doc, p_chunk).item() == pytest.approx(
        expected_single.item(), abs=1e-12
    )


def test_scale_acts_as_inverse_temperature() -> None:
    batch = make_batch(11)
    scores, chunk_mask = _scores_and_mask(batch)
    args = (chunk_mask, batch.query_doc, batch.query_chunk)
    at_20 = insent_loss(scores, *args, scale=20.0)
    prescaled = insent_loss(20.0 * scores, *args, scale=1.0)
    for a, b in zip(at_20, prescaled, strict=True):
        assert a.item() == pytest.approx(b.item(), abs=1e-12)
    assert single_softmax_loss(scores, *args, scale=20.0).item() == pytest.approx(
        single_softmax_loss(20.0 * scores, *args, scale=1.0).item(), abs=1e-12
    )
    # scale 0: uniform softmax, L = log(#candidates) per query
    n_chunks = [d.shape[0] for d in batch.docs]
    zero = insent_loss(scores, *args, scale=0.0)
    seq = sum(math.log(n_chunks[int(d)]) for d in batch.query_doc) / len(batch.query_doc)
    assert zero.in_sequence.item() == pytest.approx(seq, abs=1e-12)
    # gold strictly best everywhere: the loss falls towards 0 as the scale grows
    forced = scores.clone()
    forced[torch.arange(len(batch.query_doc)), batch.query_doc, batch.query_chunk] = 2.0
    losses = [insent_loss(forced, *args, scale=s).total.item() for s in (1.0, 5.0, 20.0, 100.0)]
    assert losses == sorted(losses, reverse=True) and losses[-1] < 1e-6


def test_invalid_inputs_raise() -> None:
    batch = make_batch(12)
    scores, chunk_mask = _scores_and_mask(batch)
    bad_chunk = batch.query_chunk.clone()
    bad_chunk[batch.query_doc == 1] = 2  # document 1 has a single chunk: index 2 is padding
    with pytest.raises(ValueError, match="padding"):
        insent_loss(scores, chunk_mask, batch.query_doc, bad_chunk)
    with pytest.raises(ValueError, match="lambda_seq"):
        insent_loss(scores, chunk_mask, batch.query_doc, batch.query_chunk, lambda_seq=1.5)
    with pytest.raises(ValueError, match="mode"):
        InsentLossModule(mode="multi")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tokens"):
        InsentLossModule(mode="tokens").scores(torch.zeros(2, 3, 4), torch.zeros(1, 2, 3, 4))


# ------------------------------------------------------------------------------------------ padding helpers


def test_pad_documents_shapes_and_mask() -> None:
    docs = [torch.randn(n, 4, requires_grad=True) for n in (2, 5, 1)]
    chunks, mask = pad_documents(docs)
    assert chunks.shape == (3, 5, 4) and mask.shape == (3, 5) and mask.dtype == torch.bool
    assert mask.sum(dim=1).tolist() == [2, 5, 1]
    assert mask.tolist()[0] == [True, True, False, False, False]
    for i, doc in enumerate(docs):
        assert torch.equal(chunks[i, : doc.shape[0]], doc)
    assert torch.all(chunks[~mask] == 0)
    chunks.sum().backward()
    assert all(d.grad is not None and torch.all(d.grad == 1) for d in docs)


def test_pad_document_tokens_shapes_and_masks() -> None:
    lengths = [[3, 1], [2, 6, 4], [5]]
    docs = [[torch.randn(n, 4, requires_grad=True) for n in doc] for doc in lengths]
    tokens, token_mask, chunk_mask = pad_document_tokens(docs)
    assert tokens.shape == (3, 3, 6, 4)
    assert token_mask.shape == (3, 3, 6) and chunk_mask.shape == (3, 3)
    assert chunk_mask.tolist() == [[True, True, False], [True, True, True], [True, False, False]]
    assert token_mask.sum(dim=-1).tolist() == [[3, 1, 0], [2, 6, 4], [5, 0, 0]]
    for i, doc in enumerate(docs):
        for j, t in enumerate(doc):
            assert torch.equal(tokens[i, j, : t.shape[0]], t)
    assert torch.all(tokens[~token_mask] == 0)
    tokens.sum().backward()
    assert all(t.grad is not None and torch.all(t.grad == 1) for doc in docs for t in doc)


def test_pad_helpers_reject_empty_input() -> None:
    with pytest.raises(ValueError):
        pad_documents([])
    with pytest.raises(ValueError):
        pad_document_tokens([])
    with pytest.raises(ValueError):
        pad_document_tokens([[], []])
