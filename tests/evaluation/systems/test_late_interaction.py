"""Late interaction (``evaluation.systems.late_interaction``) and the encoder's token inference methods."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import evaluation.systems.late_interaction as late_interaction
from embedding.encoder import LateChunkingEncoder
from evaluation.config import LateInteractionSystem
from evaluation.systems.dispatch import prepare_system
from evaluation.systems.embedders import setup_encoder
from evaluation.systems.late_interaction import TokenIndex, maxsim_scores
from tests.evaluation.toy import DOCUMENTS, all_scores, progress_lines, save_tiny_model, toy_corpus


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def brute_force(queries: list[np.ndarray], chunks: list[np.ndarray]) -> np.ndarray:
    """``Σ_i max_j <q_i, d_j>`` by explicit loops."""
    out = np.zeros((len(queries), len(chunks)), dtype=np.float64)
    for qi, q in enumerate(queries):
        for ci, d in enumerate(chunks):
            if len(d) == 0:
                out[qi, ci] = -len(q)
                continue
            out[qi, ci] = sum(max(float(np.dot(t, u)) for u in d.astype(np.float64)) for t in q.astype(np.float64))
    return out


def test_maxsim_equals_brute_force_with_tiny_tiles(monkeypatch):
    rng = np.random.default_rng(0)
    lengths = [3, 0, 5, 1, 8, 2, 0, 4]
    chunks = [rng.normal(size=(n, 6)).astype(np.float16) for n in lengths]
    queries = [rng.normal(size=(n, 6)).astype(np.float32) for n in (2, 5, 1, 3)]
    expected = brute_force(queries, chunks)
    index = TokenIndex.from_chunks(chunks, 6)
    np.testing.assert_allclose(maxsim_scores(queries, index), expected, rtol=1e-5, atol=1e-4)
    monkeypatch.setattr(late_interaction, "TILE_TOKENS", 5)  # several chunk tiles, one chunk longer than a tile
    monkeypatch.setattr(late_interaction, "TILE_ELEMENTS", 12)  # several query sub-blocks
    assert len(index.tiles()) > 2
    np.testing.assert_allclose(maxsim_scores(queries, index), expected, rtol=1e-5, atol=1e-4)


def test_system_scores_equal_brute_force_on_a_tiny_model(tiny_folder, tmp_path):
    corpus = toy_corpus()
    system = LateInteractionSystem(kind="late_interaction", name="li", model=str(tiny_folder))
    indexed = prepare_system(system, corpus, tmp_path)
    encoder = setup_encoder(system, tmp_path).encoder
    documents = [chunks for chunks in DOCUMENTS.values()]
    tokens = [t for doc in encoder.encode_document_tokens(documents, mode="late") for t in doc]
    queries = encoder.encode_query_tokens(list(corpus.queries))
    expected = brute_force(queries, tokens)  # toy_corpus rows follow DOCUMENTS order
    np.testing.assert_allclose(all_scores(indexed, corpus.n_queries), expected, atol=1e-4)
    assert indexed.details["chunk_tokens"] == sum(len(t) for t in tokens)
    assert indexed.description.startswith("late interaction (MaxSim) · late chunking")


def test_token_inference_matches_the_training_paths(tiny_folder, tmp_path):
    system = LateInteractionSystem(kind="late_interaction", name="li", model=str(tiny_folder))
    encoder = setup_encoder(system, tmp_path).encoder
    documents = list(DOCUMENTS.values())
    queries = ["a short query", "a much longer query with many more tokens in it than the first"]
    encoder.model.eval()
    with torch.no_grad():
        reference = encoder.forward_document_tokens(documents, mode="late")
        query_vectors, mask = encoder.forward_query_tokens(queries)
    encoded = encoder.encode_document_tokens(documents, mode="late")
    for got_doc, ref_doc in zip(encoded, reference, strict=True):
        for got, ref in zip(got_doc, ref_doc, strict=True):
            assert got.dtype == np.float16 and got.shape == tuple(ref.shape)
            np.testing.assert_allclose(got.astype(np.float32), ref.numpy(), atol=2e-3)
            np.testing.assert_allclose(np.linalg.norm(got.astype(np.float32), axis=1), 1.0, atol=2e-3)
    got_queries = encoder.encode_query_tokens(queries, batch_size=1)
    for row, got in enumerate(got_queries):
        n = int(mask[row].sum())
        assert got.shape == (n, query_vectors.shape[-1]) and got.dtype == np.float32
        np.testing.assert_allclose(got, query_vectors[row, :n].numpy(), atol=1e-5)


def test_token_slices_do_not_change_results(tiny_folder, tmp_path, monkeypatch):
    system = LateInteractionSystem(kind="late_interaction", name="li", model=str(tiny_folder))
    encoder = setup_encoder(system, tmp_path).encoder
    documents = list(DOCUMENTS.values())
    whole = encoder.encode_document_tokens(documents, mode="independent")
    monkeypatch.setattr(type(encoder), "TOKEN_SLICE_CHUNKS", 2)
    sliced = encoder.encode_document_tokens(documents, mode="independent")
    for a_doc, b_doc in zip(whole, sliced, strict=True):
        for a, b in zip(a_doc, b_doc, strict=True):
            np.testing.assert_allclose(a.astype(np.float32), b.astype(np.float32), atol=2e-3)


def test_progress_bars_name_the_system_and_the_phase(tiny_folder, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(LateChunkingEncoder, "TOKEN_SLICE_CHUNKS", 2)  # several slices: the document bar shows
    corpus = toy_corpus()
    bars = []
    for name, context in (("colbert-late", "late"), ("colbert-independent", "independent")):
        system = LateInteractionSystem(kind="late_interaction", name=name, model=str(tiny_folder), context=context)
        capsys.readouterr()
        prepare_system(system, corpus, tmp_path, show_progress=True)
        bars.append(progress_lines(capsys.readouterr().err))
    assert bars == [
        ["colbert-late: document tokens", "colbert-late: query tokens"],
        ["colbert-independent: chunk tokens", "colbert-independent: query tokens"],
    ]


def test_minilm_is_flagged_as_not_multi_vector(tmp_path):
    corpus = toy_corpus()
    system = LateInteractionSystem(kind="late_interaction", name="li", context="independent")
    indexed = prepare_system(system, corpus, tmp_path)
    assert "not a multi-vector model" in indexed.description
    assert "independent chunks" in indexed.description
    scores = all_scores(indexed, corpus.n_queries)
    assert (scores.argmax(axis=1) == corpus.gold).all()  # MiniLM tokens still find these easy gold chunks


def test_anchored_token_vectors_use_document_titles(tiny_folder, tmp_path):
    corpus = toy_corpus()
    options = dict(kind="late_interaction", model=str(tiny_folder), max_length=24)
    anchored = LateInteractionSystem(name="a", window_policy="anchored", anchor_share=0.5, **options)
    indexed = prepare_system(anchored, corpus, tmp_path)
    assert indexed.details["window_policy"] == "anchored"
    encoder = setup_encoder(anchored, tmp_path).encoder
    documents = list(DOCUMENTS.values())
    titles = [doc.title() for doc in DOCUMENTS]
    tokens = [t for doc in encoder.encode_document_tokens(documents, mode="late", titles=titles) for t in doc]
    assert encoder.anchor_tokens > 0
    queries = encoder.encode_query_tokens(list(corpus.queries))
    scores = all_scores(indexed, corpus.n_queries)
    np.testing.assert_allclose(scores, brute_force(queries, tokens), atol=1e-4)
    untitled = [t for doc in encoder.encode_document_tokens(documents, mode="late") for t in doc]
    assert np.abs(scores - brute_force(queries, untitled)).max() > 1e-4  # the titles reached the heads
    plain = all_scores(prepare_system(LateInteractionSystem(name="p", **options), corpus, tmp_path), corpus.n_queries)
    assert np.abs(scores - plain).max() > 1e-4
