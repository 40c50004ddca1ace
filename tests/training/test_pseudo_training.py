"""Training reads a documents-only task's train split: the pseudo-queries as gold pairs, the chunks with their
sentences cut out; a tiny random ModernBERT takes two InSeNT optimizer steps on it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from conteb.config import TaskConfig
from curation.chunking import chunk_documents
from curation.dataset import publish_task
from curation.pseudo_queries import build_pseudo_queries, pseudo_documents
from curation.quarantine import quarantine_table
from curation.sources import load_source
from embedding.models import offline_minilm_path
from tests.builders import write_speeches
from tests.support.tiny_models import tiny_modernbert
from training.config import make_config
from training.data import load_samples
from training.loop import train


def publish_speeches(root: Path) -> tuple[Path, pa.Table]:
    """A speeches task (documents only) published with pseudo-queries on its train split; its pseudo-queries."""
    task = TaskConfig.model_validate(
        {
            "name": "speeches",
            "source": {"kind": "text_folder", "path": str(write_speeches(root / "speeches"))},
            "chunking": {"chunk_size": 400},
            "splits": {"train": 0.5, "test": 0.5, "seed": 0},
            "pseudo_queries": {"per_document": 6, "seed": 0},
        }
    )
    documents = load_source(task.source).documents_table()
    chunks = chunk_documents(documents, task.chunking).chunks
    assert task.pseudo_queries is not None
    result = build_pseudo_queries(documents, chunks, pseudo_documents(task, chunks), task.pseudo_queries)
    out = root / "conteb" / "speeches"
    quarantine = {"pseudo queries": quarantine_table(result.quarantine)}
    publish_task(out, task, "speeches", chunks, result.queries, quarantine, pseudo_sentences=result.sentences)
    return out, result.queries


def test_training_reads_pseudo_pairs_and_the_training_copies(tmp_path: Path) -> None:
    folder, pseudo = publish_speeches(tmp_path)
    samples, stats = load_samples([folder], split="train")
    assert stats.queries == pseudo.num_rows > 0 and stats.splits == {str(folder): "train"}
    assert {sample.doc_id for sample in samples} == set(pseudo.column("doc_id").to_pylist())
    answers = dict(zip(pseudo.column("query").to_pylist(), pseudo.column("answer").to_pylist(), strict=True))
    for sample in samples:
        for query, gold in zip(sample.queries, sample.gold, strict=True):
            sentence = answers[query]
            assert query.endswith(sentence)
            assert sentence not in sample.chunks[gold] and sentence in sample.originals[gold]
            assert not any(sentence in chunk for chunk in sample.chunks)  # no copy left anywhere in the document

    base = tmp_path / "tiny-modernbert"
    tiny_modernbert(offline_minilm_path(), seed=0, device="cpu").save(str(base))
    config = make_config(
        {
            "data": [folder],
            "base_model": str(base),
            "output": tmp_path / "model",
            "max_steps": 2,
            "batch_docs": 2,
            "validation_fraction": 0.0,
            "eval_every": 0,
            "checkpoint_every": 0,
            "lr": 1e-3,
            "device": "cpu",
            "seed": 0,
        }
    )
    result = train(config)
    losses = [record["loss"] for record in result.loss_history]
    assert result.steps == 2 and len(losses) == 2 and np.all(np.isfinite(losses)) and min(losses) > 0
    assert result.stats.queries == pseudo.num_rows  # every pseudo-query was a gold pair of the run
