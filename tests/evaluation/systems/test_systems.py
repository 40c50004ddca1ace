"""The dispatcher (``evaluation.systems.dispatch``): requirement checks and every default system on the sample
corpus."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from curation.sources.sample import load_sample
from evaluation.config import LateInteractionSystem, default_systems
from evaluation.indexed import IndexedSystem, NotRunnable
from evaluation.rechunk import rechunk_corpus
from evaluation.systems.dispatch import prepare_system, requirement_problem
from tests.conftest import SAMPLE_DIR


@pytest.fixture(scope="module")
def sample_corpus():
    """Three documents of the sample corpus (the whole corpus takes a minute on two CPU cores) at 1000 characters."""
    source = load_sample(SAMPLE_DIR)
    documents = source.documents_table().slice(0, 3)
    kept = set(documents.column("doc_id").to_pylist())
    queries = source.queries_table().filter(pc.is_in(source.queries_table().column("doc_id"), pa.array(sorted(kept))))
    return rechunk_corpus(documents, queries, 1000, name="sample")


def test_requirements_of_the_default_systems(sample_corpus, tmp_path):
    problems = {s.name: requirement_problem(s, sample_corpus, tmp_path) for s in default_systems()}
    assert problems["bm25"] is None and problems["bm25-subword"] is None
    assert problems["independent"] is None and problems["late-chunking"] is None
    assert problems["insent"].startswith(f"not trained yet: {tmp_path / 'insent_model'} does not exist")
    assert problems["finetune-control"].endswith("materialize finetune_control_model (job train_insent)")
    assert problems["contextual"] == "no LLM chunk contexts were given with this corpus"
    for system in default_systems():
        if problems[system.name]:
            with pytest.raises(NotRunnable, match=problems[system.name][:20]):
                prepare_system(system, sample_corpus, tmp_path)


@pytest.mark.parametrize(
    "system",
    [s for s in default_systems() if s.name in ("bm25", "bm25-subword", "independent", "late-chunking")]
    + [LateInteractionSystem(kind="late_interaction", name="late-interaction")],
    ids=lambda s: s.name,
)
def test_runnable_systems_score_every_chunk(system, sample_corpus, tmp_path):
    logs: list[str] = []
    indexed = prepare_system(system, sample_corpus, tmp_path, log=logs.append)
    assert isinstance(indexed, IndexedSystem) and indexed.description and logs
    rows = np.arange(sample_corpus.n_queries, dtype=np.int64)
    scores = indexed.score_block(rows)
    assert scores.dtype == np.float32 and scores.shape == (sample_corpus.n_queries, sample_corpus.n_chunks)
    assert np.isfinite(scores).all()
    picked = np.array([5, 0, 11], dtype=np.int64)
    np.testing.assert_allclose(indexed.score_block(picked), scores[picked], rtol=1e-5, atol=1e-5)
    gold_scores = scores[rows, sample_corpus.gold]
    top1 = float(np.mean(scores.argmax(axis=1) == sample_corpus.gold))
    mrr = float(np.mean(1.0 / (1 + (scores > gold_scores[:, None]).sum(axis=1))))
    # Well above chance, not high: in the sample's same-template documents only context tells the later
    # chunks apart (data/sample/README.md). Chance: top-1 1/n, MRR of a random ranking H(n)/n.
    n = sample_corpus.n_chunks
    chance_top1, chance_mrr = 1 / n, sum(1 / k for k in range(1, n + 1)) / n
    assert top1 > 3 * chance_top1 and mrr > 2 * chance_mrr, (system.name, top1, mrr, n)
