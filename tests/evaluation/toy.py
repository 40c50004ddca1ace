"""Small corpora and model folders for the evaluation-system tests."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from evaluation.corpus import EvalCorpus

DOCUMENTS: dict[str, list[str]] = {
    "paris": [
        "Paris is the capital of France and its largest city.",
        "The city hosts the Louvre, the most visited museum in the world.",
        "Its metro opened in 1900 for the World's Fair.",
    ],
    "oslo": ["Oslo is the capital of Norway, at the head of the Oslofjord."],
    "lyon": [
        "Lyon lies at the confluence of the Rhône and the Saône.",
        "The city is known for silk weaving and for its cuisine.",
    ],
}
QUERIES: list[tuple[str, str, int]] = [  # (query, doc, chunk index of the gold chunk)
    ("When did the Paris metro open?", "paris", 2),
    ("What is the capital of Norway?", "oslo", 0),
    ("Which city is famous for silk weaving?", "lyon", 1),
]


def toy_corpus(order: list[int] | None = None, contexts: dict[str, str] | None = None) -> EvalCorpus:
    """:data:`DOCUMENTS` as an :class:`EvalCorpus`; ``order`` permutes the chunk rows (to test row bookkeeping)."""
    rows = [(doc, i, text) for doc, chunks in DOCUMENTS.items() for i, text in enumerate(chunks)]
    if order is not None:
        rows = [rows[i] for i in order]
    chunk_ids = [f"{doc}_{i}" for doc, i, _ in rows]
    row_of = {cid: r for r, cid in enumerate(chunk_ids)}
    return EvalCorpus(
        name="toy",
        source="test",
        split="test",
        chunk_ids=chunk_ids,
        chunks=[text for _, _, text in rows],
        doc_ids=[doc for doc, _, _ in rows],
        chunk_index=np.array([i for _, i, _ in rows], dtype=np.int32),
        titles=[doc.title() for doc, _, _ in rows],
        query_ids=[f"q{i}" for i in range(len(QUERIES))],
        queries=[q for q, _, _ in QUERIES],
        gold=np.array([row_of[f"{doc}_{i}"] for _, doc, i in QUERIES], dtype=np.int64),
        contexts=contexts,
    )


def save_tiny_model(folder: Path, prompts: dict[str, str] | None = None, base_model: str | None = None) -> Path:
    """A tiny random ModernBERT saved to ``folder`` (optionally with prompts and a card naming its base model)."""
    from tests.support.tiny_models import tiny_modernbert

    model = tiny_modernbert()
    if prompts is not None:
        model.prompts = prompts
    model.save(str(folder))
    if base_model is not None:
        (folder / "README.md").write_text(f"---\nbase_model: {base_model}\n---\n\n# tiny\n", encoding="utf-8")
    return folder


def all_scores(indexed, n_queries: int) -> np.ndarray:
    """float32 ``[Q, C]`` from an :class:`~evaluation.indexed.IndexedSystem`."""
    return indexed.score_block(np.arange(n_queries, dtype=np.int64))


def progress_lines(stderr: str) -> list[str]:
    """The descriptions of the project's tqdm bars written to ``stderr`` (the text before ``: <n>%|``), in order, once
    each; a library's bar (transformers' ``Loading weights``) names no system and is left out."""
    found = re.findall(r"([^\r\n]*?): +\d+%\|", stderr)
    return [desc for desc in dict.fromkeys(found) if ": " in desc]
