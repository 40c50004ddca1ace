"""Model resolution, the per-process model cache and prefix resolution (``evaluation.systems.embedders``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import evaluation.systems.embedders as embedders
from evaluation.config import ContextualSystem, DenseSystem, LateInteractionSystem
from evaluation.systems.dispatch import prepare_system
from evaluation.systems.embedders import (
    KNOWN_PREFIXES,
    clear_model_cache,
    looks_like_path,
    model_problem,
    setup_encoder,
)
from tests.evaluation.toy import save_tiny_model, toy_corpus


@pytest.fixture
def counted_loads(monkeypatch) -> list[str]:
    """Names passed to ``load_model`` by the cache (a fresh cache for the test)."""
    calls: list[str] = []
    real = embedders.load_model

    def counting(name, device=None, max_seq_length=None):
        calls.append(name)
        return real(name, device=device, max_seq_length=max_seq_length)

    monkeypatch.setattr(embedders, "load_model", counting)
    clear_model_cache()
    yield calls
    clear_model_cache()


def test_four_minilm_systems_share_one_load(counted_loads, tmp_path):
    corpus = toy_corpus(contexts={"paris_0": "About Paris."})
    systems = [
        DenseSystem(kind="dense", name="a", context="independent"),
        DenseSystem(kind="dense", name="b", context="late", query_prefix="q: "),
        ContextualSystem(kind="contextual", name="c"),
        LateInteractionSystem(kind="late_interaction", name="d"),
    ]
    for system in systems:
        prepare_system(system, corpus, tmp_path)
    assert counted_loads == ["offline-minilm"]


def test_new_weights_are_loaded_again(counted_loads, tmp_path):
    folder = save_tiny_model(tmp_path / "m")
    system = DenseSystem(kind="dense", name="t", model=str(folder))
    first = setup_encoder(system, tmp_path)
    assert setup_encoder(system, tmp_path).encoder.model is first.encoder.model
    weights = folder / "model.safetensors"
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert setup_encoder(system, tmp_path).encoder.model is not first.encoder.model
    assert len(counted_loads) == 2
    assert first.load_seconds > 0 and setup_encoder(system, tmp_path).load_seconds == 0.0


def test_prefixes_from_model_prompts_and_explicit_empty_wins(tmp_path):
    folder = save_tiny_model(tmp_path / "m", prompts={"query": "query: ", "document": "passage: "})
    setup = setup_encoder(DenseSystem(kind="dense", name="t", model=str(folder)), tmp_path)
    assert (setup.prefixes.query, setup.prefixes.document) == ("query: ", "passage: ")
    assert setup.prefixes.query_source == "model prompts"
    assert setup.encoder.query_prefix == "query: " and setup.encoder.document_prefix == "passage: "
    forced = setup_encoder(DenseSystem(kind="dense", name="t", model=str(folder), query_prefix=""), tmp_path)
    assert forced.prefixes.query == "" and forced.prefixes.query_source == "config"
    assert forced.prefixes.document == "passage: "


def test_known_prefixes_by_base_model_name(tmp_path):
    folder = save_tiny_model(tmp_path / "m", base_model="nomic-ai/modernbert-embed-base")
    setup = setup_encoder(DenseSystem(kind="dense", name="t", model=str(folder)), tmp_path)
    assert (setup.prefixes.query, setup.prefixes.document) == KNOWN_PREFIXES["nomic-ai/modernbert-embed-base"]
    assert setup.prefixes.document_source == "known default for nomic-ai/modernbert-embed-base"
    assert setup.details["document_prefix"] == "search_document: "
    assert setup.prefixes.describe() == "prefixes: query 'search_query: ', document 'search_document: '"


def test_minilm_has_no_prefixes(tmp_path):
    setup = setup_encoder(DenseSystem(kind="dense", name="t"), tmp_path)
    assert setup.prefixes.describe() == "prefixes: none"
    assert setup.details["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"


def test_path_like_names():
    assert looks_like_path("/abs/model") and looks_like_path("./m") and looks_like_path("a/b/c")
    assert not looks_like_path("nomic-ai/modernbert-embed-base") and not looks_like_path("offline-minilm")
    assert model_problem(DenseSystem(kind="dense", name="t", model="./no-such-folder"), Path(".")) is not None
    assert model_problem(DenseSystem(kind="dense", name="t", model="org/hub-model"), Path(".")) is None


def test_query_vectors_shared_by_systems_of_one_model_and_prefix(counted_loads, tmp_path, monkeypatch):
    """Independent, late and anchored systems of one model encode the queries once; a new prefix encodes again."""
    corpus = toy_corpus()
    encoded: list[int] = []
    real = embedders.LateChunkingEncoder.encode_queries

    def counting(self, queries, *args, **kwargs):
        encoded.append(len(queries))
        return real(self, queries, *args, **kwargs)

    monkeypatch.setattr(embedders.LateChunkingEncoder, "encode_queries", counting)
    systems = [
        DenseSystem(kind="dense", name="a", context="independent"),
        DenseSystem(kind="dense", name="b", context="late"),
        DenseSystem(kind="dense", name="c", context="late", window_policy="anchored"),
        DenseSystem(kind="dense", name="d", context="title"),
    ]
    prepared = [prepare_system(system, corpus, tmp_path) for system in systems]
    assert encoded == [corpus.n_queries]
    assert [p.details["query_vectors_reused"] for p in prepared] == [False, True, True, True]
    rows = list(range(corpus.n_queries))
    fresh = setup_encoder(systems[0], tmp_path).encoder.encode_queries(list(corpus.queries))
    for p in prepared:  # the shared vectors are the encoder's own
        scores = p.score_block(rows)
        assert scores.shape[0] == corpus.n_queries
    assert embedders._QUERY_CACHE and next(iter(embedders._QUERY_CACHE.values())).tolist() == fresh.tolist()
    prefixed = prepare_system(DenseSystem(kind="dense", name="e", query_prefix="q: "), corpus, tmp_path)
    assert prefixed.details["query_vectors_reused"] is False and len(encoded) == 3
