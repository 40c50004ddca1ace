"""Corpus encoding in document shards (``evaluation.sharding``) on the sample corpus with a tiny random model.

One shard gives an unsharded evaluation's vectors bit for bit; several shards give the same chunks with vectors equal
to float32 rounding; a shard's failure is its system's, reported with the shard's name.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import evaluation.sharding as sharding
from curation.sources.sample import load_sample
from evaluation.config import (
    BM25System,
    ContextualSystem,
    DenseSystem,
    EvaluationConfig,
    HybridSystem,
    LateInteractionSystem,
)
from evaluation.encoded import EncodingKey, EncodingProblem
from evaluation.indexed import NotRunnable
from evaluation.rechunk import SpanSources, rechunk_corpus
from evaluation.runner import evaluate_task
from evaluation.sharding import encode_in_shards, encoding_jobs, encoding_shards
from evaluation.systems.dispatch import encode_system
from tests.conftest import SAMPLE_DIR, sample_counts
from tests.evaluation.toy import save_tiny_model


def registry(model: str) -> EvaluationConfig:
    """Every kind of system on ``model``, a trained model that is not there, and the chunk-size study at 500."""
    return EvaluationConfig(
        systems=(
            BM25System(kind="bm25", name="bm25"),
            DenseSystem(kind="dense", name="independent", model=model, context="independent"),
            DenseSystem(kind="dense", name="late", model=model, context="late"),
            ContextualSystem(kind="contextual", name="contextual", model=model),
            LateInteractionSystem(kind="late_interaction", name="maxsim", model=model, context="late"),
            DenseSystem(kind="dense", name="insent", trained="insent_model", context="late"),
        ),
        bootstrap={"resamples": 100},
        significance={"resamples": 100, "comparisons": [("late", "independent")]},
        scaling={"points": 2, "repeats": 1},
        chunk_sizes={"sizes": [500], "systems": ["bm25", "late", "contextual"]},
    )


SIZE = 500
SHARD = sample_counts().shard_size(3) + 1  # documents a shard: three shards of the sample, the last one shorter
LAST = sample_counts().documents - 2 * SHARD


@pytest.fixture(scope="module")
def sample() -> tuple:
    """The sample corpus chunked at 1000 characters (with one LLM context per chunk) and its span sources."""
    source = load_sample(SAMPLE_DIR)
    documents, queries = source.documents_table(), source.queries_table()
    corpus = rechunk_corpus(documents, queries, 1000, name="sample")
    titles = zip(corpus.chunk_ids, corpus.titles, strict=True)
    contexts = {cid: f"From the article on {title}." for cid, title in titles}
    return dataclasses.replace(corpus, contexts=contexts), SpanSources(documents, queries)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("models")  # empty: insent is not trained


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> EvaluationConfig:
    """On a tiny random model: the mechanics need no trained one (the e2e tests use the offline MiniLM)."""
    return registry(str(save_tiny_model(tmp_path_factory.mktemp("tiny") / "model")))


def jobs_of(sample, models: Path, config: EvaluationConfig, systems=None):
    corpus, sources = sample
    return encoding_jobs(corpus, config, models, sources=sources, systems=systems)


@pytest.fixture(scope="module")
def one(sample, models, config):
    """Every job encoded in one shard."""
    corpus, sources = sample
    return encode_in_shards(corpus, jobs_of(sample, models, config), models, 10_000, sources=sources)


@pytest.fixture(scope="module")
def three(sample, models, config):
    """Every job encoded in three shards (SHARD + SHARD + LAST documents)."""
    corpus, sources = sample
    return encode_in_shards(corpus, jobs_of(sample, models, config), models, SHARD, sources=sources)


def test_jobs_are_the_model_based_systems_that_can_run(sample, models, config):
    keys = [job.key for job in jobs_of(sample, models, config)]
    # bm25 encodes nothing; insent is not trained; contextual has no contexts once re-chunked.
    assert keys == [
        EncodingKey("independent"),
        EncodingKey("late"),
        EncodingKey("contextual"),
        EncodingKey("maxsim"),
        EncodingKey("late", SIZE),
    ]
    corpus, sources = sample
    late = [j.key for j in jobs_of(sample, models, config, systems=["late"])]
    assert late == [EncodingKey("late"), EncodingKey("late", SIZE)]
    assert EncodingKey("late", SIZE) not in {
        j.key for j in encoding_jobs(corpus, config, models, sources=sources, chunk_sizes=False)
    }


def test_shards_partition_the_documents_in_corpus_order(sample):
    corpus, sources = sample
    shards = encoding_shards(corpus, sources, SHARD)
    assert [len(shard.doc_ids) for shard in shards] == [SHARD, SHARD, LAST] and 0 < LAST < SHARD
    assert [d for shard in shards for d in shard.doc_ids] == corpus.document_order
    assert [c for shard in shards for c in shard.corpus.chunk_ids] == corpus.chunk_ids
    for shard in shards:
        assert set(shard.corpus.doc_ids) <= set(shard.doc_ids) and shard.corpus.n_queries == 0
        assert set(shard.sources.documents.column("doc_id").to_pylist()) == set(shard.doc_ids)
        assert set(shard.sources.queries.column("doc_id").to_pylist()) <= set(shard.doc_ids)
        assert set(shard.corpus.contexts) == set(shard.corpus.chunk_ids)
    assert len(encoding_shards(corpus, None, 1000)) == 1


def test_source_documents_the_corpus_lacks_are_sharded_too(sample):
    corpus, sources = sample
    first = corpus.document_order[0]
    without_first = corpus.chunks_of(corpus.document_order[1:])
    shards = encoding_shards(without_first, sources, 100)
    assert shards[0].doc_ids[-1] == first and first not in shards[0].corpus.doc_ids


def test_one_shard_gives_the_unsharded_vectors_bit_for_bit(sample, models, config, one):
    corpus, sources = sample
    for job in jobs_of(sample, models, config, systems=["late", "maxsim"]):
        target = corpus if job.key.chunk_size is None else rechunk_corpus(
            sources.documents, sources.queries, job.key.chunk_size, name="sample"
        )  # fmt: skip
        whole = encode_system(job.system, target, models)
        sharded = one[job.key].aligned(target.chunk_ids)
        assert sharded.shards == 1 and sharded.counts == whole.counts
        if whole.vectors is not None:
            assert np.array_equal(sharded.vectors, whole.vectors), job.key
        else:
            assert all(np.array_equal(a, b) for a, b in zip(sharded.tokens, whole.tokens, strict=True)), job.key


def test_several_shards_agree_to_float_rounding(one, three):
    assert list(three) == list(one)
    for key, a in one.items():
        b = three[key].aligned(a.chunk_ids)
        assert b.shards == 3 and b.counts == a.counts and b.documents == a.documents, key
        if a.vectors is not None:
            np.testing.assert_allclose(b.vectors, a.vectors, atol=1e-5)
        else:
            for x, y in zip(a.tokens, b.tokens, strict=True):
                np.testing.assert_allclose(y.astype(np.float32), x.astype(np.float32), atol=2e-3)  # float16


def evaluate(sample, reports: Path, models: Path, config: EvaluationConfig, encodings=None, **kwargs):
    corpus, sources = sample
    return evaluate_task(
        corpus, config, models_dir=models, reports_dir=reports, sources=sources, encodings=encodings, **kwargs
    )


def test_an_evaluation_on_one_shards_encodings_equals_the_unsharded_one(sample, models, config, one, tmp_path):
    sharded, whole = (
        evaluate(sample, tmp_path / "a", models, config, one),
        evaluate(sample, tmp_path / "b", models, config),
    )
    for a, b in zip(sharded.runs, whole.runs, strict=True):
        assert (a.system, a.status, a.reason) == (b.system, b.status, b.reason)
        if a.status == "ok":
            assert a.metrics == b.metrics and a.scaling == b.scaling and a.by_position == b.by_position, a.system
    assert [(p.system, p.chunk_size, p.value) for p in sharded.chunk_sizes] == [
        (p.system, p.chunk_size, p.value) for p in whole.chunk_sizes
    ]
    for system in ("independent", "late", "maxsim", "contextual"):
        path = Path("runs") / "sample" / f"{system}.trec"
        assert (tmp_path / "a" / path).read_bytes() == (tmp_path / "b" / path).read_bytes(), system
    encoded = [run for run in sharded.runs if run.status == "ok" and run.kind != "bm25"]
    assert {run.details["encode_shards"] for run in encoded} == {1}


def test_a_shards_failure_fails_its_system_only(sample, models, config, tmp_path, monkeypatch):
    corpus, _ = sample
    broken_doc = corpus.document_order[SHARD + 2]  # in shard s0001
    real = sharding.encode_system

    def flaky(system, shard_corpus, *args, **kwargs):
        if system.name == "late" and broken_doc in shard_corpus.doc_ids:
            raise RuntimeError("CUDA out of memory")
        if system.name == "maxsim":
            raise NotRunnable("cannot load model 'colbert' (hub id; no local copy?)")
        return real(system, shard_corpus, *args, **kwargs)

    monkeypatch.setattr(sharding, "encode_system", flaky)
    systems = ["independent", "late", "maxsim", "insent"]
    encodings = encode_in_shards(corpus, jobs_of(sample, models, config, systems=systems), models, SHARD)
    assert encodings[EncodingKey("late")] == EncodingProblem(
        "failed", "sample shard s0001: RuntimeError: CUDA out of memory"
    )
    evaluation = evaluate(sample, tmp_path, models, config, encodings, systems=systems, chunk_sizes=False)
    runs = {run.system: run for run in evaluation.runs}
    assert runs["late"].status == "failed" and "shard s0001: RuntimeError: CUDA out of memory" in runs["late"].reason
    assert runs["maxsim"].status == "not_run" and "no local copy" in runs["maxsim"].reason
    assert runs["independent"].status == "ok" and runs["independent"].details["encode_shards"] == 3
    assert runs["insent"].status == "not_run" and "not trained yet" in runs["insent"].reason


def test_encodings_of_other_chunks_fail_the_system(sample, models, config, tmp_path):
    corpus, _ = sample
    jobs = jobs_of(sample, models, config, systems=["independent"])[:1]
    encodings = encode_in_shards(corpus.chunks_of(corpus.document_order[1:]), jobs, models, 100)
    evaluation = evaluate(sample, tmp_path, models, config, encodings, systems=["independent"], chunk_sizes=False)
    run = next(run for run in evaluation.runs if run.system == "independent")
    assert run.status == "failed" and "EncodingMismatch" in run.reason and "missing" in run.reason


def test_a_hybrid_has_its_components_encoded_in_the_shards(sample, models, config, tmp_path, monkeypatch):
    """A hybrid encodes nothing itself: its model-based components are the jobs (also in the chunk-size study), and
    the ranking step fuses their shard encodings without encoding a chunk."""
    hybrid = HybridSystem(kind="hybrid", name="hybrid", systems=("bm25", "independent"))
    with_hybrid = config.model_copy(
        update={
            "systems": (*config.systems, hybrid),
            "chunk_sizes": config.chunk_sizes.model_copy(update={"systems": ("hybrid",)}),
        }
    )
    keys = [job.key for job in jobs_of(sample, models, with_hybrid, systems=["hybrid"])]
    assert keys == [EncodingKey("independent"), EncodingKey("independent", SIZE)]
    corpus, sources = sample
    encodings = encode_in_shards(corpus, jobs_of(sample, models, with_hybrid, ["hybrid"]), models, 5, sources=sources)

    def no_encoding(*args, **kwargs):
        raise AssertionError("a chunk was encoded in the ranking step")

    monkeypatch.setattr("evaluation.systems.dense.encode_chunks", no_encoding)
    evaluation = evaluate(sample, tmp_path, models, with_hybrid, encodings, systems=["hybrid"])
    assert [(run.system, run.status) for run in evaluation.runs] == [("hybrid", "ok")]
    assert [(p.system, p.chunk_size) for p in evaluation.chunk_sizes] == [("hybrid", SIZE)]


def test_a_warning_repeated_per_document_is_logged_once_per_system_and_shard(
    sample, models, config, monkeypatch, caplog
):
    """The encoder's truncation warning, once per document, reaches the step's log once, naming shard and system
    (evaluation/tally.py), and is not printed one by one."""
    import logging

    corpus, _ = sample
    encoder = logging.getLogger("embedding.encoder")
    real = sharding.encode_system

    def warning_per_document(system, shard_corpus, *args, **kwargs):
        for _ in set(shard_corpus.doc_ids):  # one per document
            encoder.warning("%d chunk(s) longer than %d tokens truncated to fit the context", 1, 510)
        return real(system, shard_corpus, *args, **kwargs)

    monkeypatch.setattr(sharding, "encode_system", warning_per_document)
    lines: list[str] = []
    with caplog.at_level(logging.WARNING, logger="embedding.encoder"):
        jobs = [job for job in jobs_of(sample, models, config, ["independent", "late"]) if job.key.chunk_size is None]
        encode_in_shards(corpus, jobs, models, SHARD, log=lines.append)
    assert [r for r in caplog.records if r.name == "embedding.encoder"] == []
    warned = [line for line in lines if "truncated" in line]
    assert warned == [
        f"sample shard s000{shard}: {system}: warning: 1 chunk(s) longer than 510 tokens truncated to fit the context"
        f" (logged {count} times, shown once)"
        for shard, count in ((0, SHARD), (1, SHARD), (2, sample_counts().documents - 2 * SHARD))
        for system in ("independent", "late")
    ]
