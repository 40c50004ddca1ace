"""Train/test overlap by content: what the refusal of :mod:`evaluation.leakage` catches on the real corpora.

Corpora (``../shared/data``, read by path) are curated with the project's own code in a temporary folder, as a
registry task would be: :func:`curation.sources.load_source`, :func:`curation.chunking.chunk_documents` (1000
characters), :func:`curation.pairing.pair_by_span` and :func:`curation.dataset.publish_task`. What a model trained on
a task's ``train`` split saw is what training records: :func:`training.data.load_samples` (split ``train``) ->
:func:`training.data.documents_seen` -> :func:`training.card.write_training_data` (no model is trained: the check
only reads ``training_data.json``).

1. **SQuAD train vs XQuAD.** SQuAD v1.1 dev split by document (``{train: 0.5, test: 0.5, seed: 0}``); XQuAD (its
   240 paragraphs are SQuAD v1.1 dev paragraphs of the same 48 articles, same titles, hence the same doc ids),
   evaluated whole (one split) and on its test split under seeds 0 and 1. Per case: documents sharing an id with a
   SQuAD train document, whether the id/name rule refuses (a format-1 file: what was checked before content was
   recorded), and what the content rule finds
   (:func:`evaluation.leakage.content_overlap`: identical documents, identical chunks, documents sharing a passage);
   then per XQuAD paragraph of the overlapping articles: inside an XQuAD chunk that matched a training chunk, or
   sharing a passage print with the training data on its own (:func:`conteb.content.passage_prints` of the paragraph).
2. **No false refusals between different documents.** For SQuAD v1.1 dev, COVID-QA, the State of the Union
   addresses and the bundled sample, each split by document (seed 0): the test split's documents re-chunked at 1000,
   300 and 100 characters (:func:`evaluation.rechunk.rechunk_corpus`, as the chunk-size study does) against what a
   model trained on the train split recorded. Any overlap there is a false refusal. The control: the train split's
   own documents re-chunked at 300 and 100 characters (every one must be found).
3. **Why the thresholds.** Between different documents of one corpus (the same four): chunk texts (normalised) that
   occur in two documents, at 1000, 300 and 100 characters, with the longest in words (:data:`conteb.content.MIN_WORDS`
   must be above it), and runs of 24+ words in common, with the longest (:data:`conteb.content.PASSAGE_WORDS` must
   be above it).

Usage (from the repository root)::

    nice -n 10 .venv/bin/python bench/content_overlap.py [--json /tmp/content-overlap.json]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import json
import tempfile
import time

import pyarrow as pa
import pyarrow.compute as pc
from record import result_header  # bench/record.py (the script's folder is on sys.path)

from conteb.config import ChunkingConfig
from conteb.content import normalise, passage_prints, words
from conteb.storage import dataset_dir
from curation.chunking import chunk_documents
from curation.dataset import publish_task
from curation.pairing import pair_by_span
from curation.sources import load_source
from curation.sources.squad import load_squad_json
from embedding.model_folder import TRAINING_DATA_FILE, write_training_data
from evaluation.corpus import EvalCorpus
from evaluation.leakage import content_overlap, training_index, training_overlap_problem
from evaluation.rechunk import rechunk_corpus
from evaluation.targets import find_target
from project.config import load_config
from training.data import documents_seen, load_samples

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
SPLITS = "{train: 0.5, test: 0.5, seed: %d}"


def registry(folder: Path) -> Path:
    """Every task of the measurement (sources read by path)."""
    squad, xquad, covid = (
        SHARED / "squad-v1.1-dev.json.gz",
        SHARED / "xquad-en.json.gz",
        SHARED / "covidqa-2020-04-23.json.gz",
    )
    tasks = [
        ("squad", "squad_json", squad, SPLITS % 0),
        ("xquad", "squad_json", xquad, None),
        ("xquad-seed0", "squad_json", xquad, SPLITS % 0),
        ("xquad-seed1", "squad_json", xquad, SPLITS % 1),
        ("covidqa", "squad_json", covid, SPLITS % 0),
        ("sotu", "text_folder", SHARED / "sotu", SPLITS % 0),
        ("sample", "sample", ROOT / "data" / "sample", SPLITS % 0),
    ]
    lines = ["tasks:"]
    for name, kind, path, splits in tasks:
        lines.append(f"  - name: {name}\n    source: {{kind: {kind}, path: {path}}}")
        if splits:
            lines.append(f"    splits: {splits}")
    lines.append("evaluation: {chunk_sizes: {enabled: false, systems: []}}")
    (folder / "conteb.yaml").write_text("\n".join(lines) + "\n")
    return folder / "conteb.yaml"


def publish(config, name: str, data_dir: Path):
    """Curate task ``name`` into ``data_dir/conteb/<name>``; its source tables are returned for the re-chunking."""
    task = next(t for t in config.tasks if t.name == name)
    source = load_source(task.source)
    documents, queries = source.documents_table(), source.queries_table()
    chunks = chunk_documents(documents, task.chunking).chunks
    paired = pair_by_span(queries, documents, chunks).table()
    published = publish_task(dataset_dir(data_dir, name), task, task.source.kind, chunks, paired, {})
    return documents, queries, published.assignment


def trained_on(folder: Path, model: Path, ids_only: bool = False) -> Path:
    """A model folder holding what training on ``folder``'s train split records (no weights); ``ids_only``: without
    the content prints, as a format-1 file (the rule before content was recorded)."""
    model.mkdir(parents=True, exist_ok=True)
    samples, _ = load_samples([folder], split="train")
    seen = documents_seen(samples)
    if ids_only:
        (model / TRAINING_DATA_FILE).write_text(
            json.dumps({"tasks": [{k: v for k, v in e.items() if k != "documents"} for e in seen]})
        )
    else:
        write_training_data(model, seen)
    return model


def counts(model: Path, corpus: EvalCorpus) -> dict:
    overlap = content_overlap(model, corpus)
    assert overlap is not None
    touched = overlap.touched
    return {
        "documents": corpus.n_documents,
        "chunks": corpus.n_chunks,
        "documents_touched": len(touched),
        "chunks_of_touched_documents": sum(doc in touched for doc in corpus.doc_ids),
        "identical_documents": len(overlap.documents),
        "identical_chunks": len(overlap.chunks),
        "documents_sharing_a_passage": len(overlap.passages),
        "example": overlap.example() if overlap.touched else None,
    }


def paragraph_coverage(model: Path, corpus: EvalCorpus, train_ids: set[str]) -> dict:
    """Per XQuAD paragraph of the articles SQuAD train holds: caught by a matched chunk, by its own passages."""
    index = training_index(model)
    assert index is not None
    overlap = content_overlap(model, corpus)
    matched = {chunk for chunk in overlap.chunks} if overlap else set()
    spans: dict[str, list[tuple[int, int, str]]] = {}
    for chunk_id, doc, start, text in zip(
        corpus.chunk_ids, corpus.doc_ids, corpus.char_starts or [], corpus.og_chunks or corpus.chunks, strict=True
    ):
        spans.setdefault(doc, []).append((int(start), int(start) + len(text), chunk_id))
    rows = {"paragraphs": 0, "in_a_matched_chunk": 0, "own_passage_matched": 0, "either": 0, "neither_words": []}
    for document in load_squad_json(SHARED / "xquad-en.json.gz").documents:
        if document.doc_id not in train_ids or document.doc_id not in spans:
            continue
        cursor = 0
        for paragraph in document.text.split("\n\n"):
            start, end = cursor, cursor + len(paragraph)
            cursor = end + 2
            inside = {c for s, e, c in spans[document.doc_id] if s < end and e > start}
            by_chunk = bool(inside) and inside <= matched
            by_passage = bool(set(passage_prints(paragraph)) & set(index.passages))
            rows["paragraphs"] += 1
            rows["in_a_matched_chunk"] += by_chunk
            rows["own_passage_matched"] += by_passage
            rows["either"] += by_chunk or by_passage
            if not (by_chunk or by_passage):
                rows["neither_words"].append(len(paragraph.split()))
    return rows


def repeated_texts(documents: pa.Table) -> dict:
    """Chunk texts shared by different documents, and runs of 24+ words in common (part 3 of the docstring)."""
    found: dict = {}
    for size in (1000, 300, 100):
        chunks = chunk_documents(documents, ChunkingConfig(chunk_size=size, chunk_overlap=0)).chunks
        owners: dict[str, set[str]] = {}
        for doc, text in zip(chunks.column("doc_id").to_pylist(), chunks.column("og_chunk").to_pylist(), strict=True):
            owners.setdefault(normalise(text), set()).add(doc)
        shared = [text for text, docs in owners.items() if len(docs) > 1]
        found[f"chunk_texts_in_two_documents@{size}"] = len(shared)
        found[f"longest_such_chunk_words@{size}"] = max((len(words(text)) for text in shared), default=0)
    run = 24
    texts = dict(zip(documents.column("doc_id").to_pylist(), documents.column("text").to_pylist(), strict=True))
    grams = {doc: [" ".join(w[i : i + run]) for i in range(len(w) - run + 1)] for doc, w in
             ((doc, words(text)) for doc, text in texts.items())}  # fmt: skip
    owners = {}
    for doc, shingles in grams.items():
        for shingle in shingles:
            owners.setdefault(shingle, set()).add(doc)
    longest, pairs = 0, set()
    for doc, shingles in grams.items():
        others = set().union(*(owners[g] for g in shingles)) - {doc}
        for other in others:
            theirs = set(grams[other])
            current = 0
            for shingle in shingles:
                current = current + 1 if shingle in theirs else 0
                longest = max(longest, current + run - 1 if current else 0)
            pairs.add(tuple(sorted((doc, other))))
    found["document_pairs_with_a_24_word_run_in_common"] = len(pairs)
    found["longest_run_in_common_words"] = longest
    return found


def split_sources(
    documents: pa.Table, queries: pa.Table, assignment: dict[str, str], split: str
) -> tuple[pa.Table, pa.Table]:
    """The source documents (and queries) of ``split``."""
    kept = pa.array(sorted(d for d, assigned in assignment.items() if assigned == split), pa.string())
    return (
        documents.filter(pc.is_in(documents.column("doc_id"), kept)),
        queries.filter(pc.is_in(queries.column("doc_id"), kept)),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    rows: list[dict] = []
    result = result_header(args, rows)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        config = load_config(registry(work))
        data_dir = work / "data"
        started = time.perf_counter()
        squad_docs, squad_queries, squad_split = publish(config, "squad", data_dir)
        model = trained_on(dataset_dir(data_dir, "squad"), work / "models" / "squad-train")
        ids_only = trained_on(dataset_dir(data_dir, "squad"), work / "models" / "squad-train-ids", ids_only=True)
        train_ids = {d for d, s in squad_split.items() if s == "train"}
        print(f"SQuAD v1.1 dev: {len(squad_split)} articles, {len(train_ids)} in train (seed 0)")
        for name in ("xquad", "xquad-seed0", "xquad-seed1"):
            publish(config, name, data_dir)
            target = find_target(config.tasks, config.evaluation, data_dir, name)
            corpus = target.load()
            row = {"case": f"squad train vs {name} (split {target.split})", **counts(model, corpus)}
            row["same_id_as_a_train_document"] = len(set(corpus.document_order) & train_ids)
            problem = training_overlap_problem(model, corpus)
            row["refused"] = problem is not None
            row["refused_by_the_id_rule"] = training_overlap_problem(ids_only, corpus) is not None
            row["paragraphs"] = paragraph_coverage(model, corpus, train_ids)
            rows.append(row)
            print(json.dumps(row, indent=1))
            if problem:
                print("  reason:", problem)
        for name in ("squad", "covidqa", "sotu", "sample"):
            if name == "squad":
                documents, queries, assignment, trained = squad_docs, squad_queries, squad_split, model
            else:
                documents, queries, assignment = publish(config, name, data_dir)
                trained = trained_on(dataset_dir(data_dir, name), work / "models" / f"{name}-train")
            test_documents, test_queries = split_sources(documents, queries, assignment, "test")
            for size in (1000, 300, 100):
                corpus = rechunk_corpus(test_documents, test_queries, size, name=name)
                row = {"case": f"{name} train vs {name} test re-chunked at {size}", **counts(trained, corpus)}
                rows.append(row)
                print(json.dumps(row))
            row = {"case": f"{name}: texts repeated between different documents", **repeated_texts(documents)}
            rows.append(row)
            print(json.dumps(row))
            train_documents, train_queries = split_sources(documents, queries, assignment, "train")
            for size in (300, 100):  # the control: the training documents themselves, chunked otherwise
                corpus = rechunk_corpus(train_documents, train_queries, size, name=name)
                row = {"case": f"{name} train vs {name} train re-chunked at {size}", **counts(trained, corpus)}
                rows.append(row)
                print(json.dumps(row))
        result["seconds"] = round(time.perf_counter() - started, 1)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
