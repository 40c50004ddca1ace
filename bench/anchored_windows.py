"""Anchored windows for late chunking: untrained offline MiniLM, plain vs anchored windows, against independent
chunks and the title-prefix baseline, on original chunks and on the context-dependent (masked) variant.

Corpora (``../shared/data``): XQuAD (en), SQuAD v1.1 dev, COVID-QA, loaded with the project's source loader
(:func:`curation.sources.squad.load_squad_json`), chunked at 1000 characters and paired by answer span
(:func:`evaluation.rechunk.rechunk_corpus`: :mod:`curation.chunking` + :func:`curation.pairing.pair_by_span`).

Variants:

* ``original``: every chunk as written;
* ``masked``: the context-dependent variant the pipeline builds without an LLM: themes from titles
  (:func:`curation.themes.stage.themes_table` with no LLM results) and
  :func:`curation.reformulation.apply_reformulations` with no LLM results, i.e. every chunk but each document's first
  has its theme mentions masked ("the subject").
  Queries and gold chunks are unchanged (pairing is on the original text).

Systems (the same configs as ``evaluation.config.default_systems``): ``independent``, ``title-prefix``,
``late-chunking`` (plain windows), ``late-chunking-anchored`` (``anchor_share`` 0.4 unless told). Chunks are encoded
with the evaluation's own pieces (:func:`evaluation.systems.embedders.setup_encoder`,
:func:`evaluation.systems.dense.encode_chunks`,
:func:`evaluation.systems.headers.title_texts`, :func:`~evaluation.systems.dense.document_titles`), as
``prepare_single_vector``
does; the queries, the same for every system (one model, one query prefix), are encoded once per corpus, which is
the only difference from ``prepare_system`` (it saves one query encode per system on CPU). Scoring:
``dense_scorer`` → ``rank_corpus`` → ``metrics_from_gold_rank`` → ``summarize`` (bootstrap 95% CI) and
``paired_test`` (randomization). Encode cost per system: seconds, windows and tokens forwarded (head tokens included,
and counted apart as ``anchor_tokens``).

Trained models (``--trained TEMPLATE=FOLDER``, repeatable): the system ``TEMPLATE`` (e.g. ``late-chunking-anchored``)
with the model saved in ``FOLDER`` (e.g. by ``make reproduce``), named ``TEMPLATE@<folder name>``. Every document
listed in a trained folder's ``training_data.json`` is removed from the corpus first, for every system (XQuAD's
articles are SQuAD v1.1 dev articles, so a model trained on SQuAD dev has seen some of them); the count removed is
printed and recorded. Query vectors come from :func:`evaluation.systems.embedders.encode_queries_cached` (once per
model).
``--max-documents N`` keeps the first N documents of the source (as a task's ``max_documents``);
``--window-overlap-chunks`` sets the late systems' overlap (default 2, the evaluation default).

Usage (from the repository root)::

    nice -n 10 python bench/anchored_windows.py --corpus xquad --json /tmp/anchored-xquad.json
    python bench/anchored_windows.py --corpus covidqa --window-overlap-chunks 0 \
        --trained late-chunking=data/models/reproduce/insent-plain \
        --trained late-chunking-anchored=data/models/reproduce/insent-anchored
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import dataclasses
import json
import time

import numpy as np
import pyarrow as pa
from record import result_header  # bench/record.py (the script's folder is on sys.path)

from conteb.config import ChunkingConfig
from curation.chunking import chunk_documents
from curation.reformulation import apply_reformulations
from curation.sources.squad import load_squad_json
from curation.themes.stage import themes_table
from embedding.model_folder import read_training_data
from evaluation.config import DenseSystem
from evaluation.corpus import EvalCorpus
from evaluation.metrics.retrieval import metrics_from_gold_rank
from evaluation.metrics.stats import paired_test, summarize
from evaluation.rechunk import rechunk_corpus
from evaluation.systems.dense import document_rows, document_titles, encode_chunks
from evaluation.systems.embedders import EncoderSetup, encode_queries_cached, setup_encoder
from evaluation.systems.headers import title_texts
from evaluation.systems.ranking import dense_scorer, rank_corpus

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
CORPORA = {"xquad": "xquad-en.json.gz", "squad": "squad-v1.1-dev.json.gz", "covidqa": "covidqa-2020-04-23.json.gz"}
CHUNK_SIZE = 1000
COMPARISONS = (
    ("late-chunking-anchored", "late-chunking"),
    ("late-chunking-anchored", "independent"),
    ("late-chunking", "independent"),
    ("title-prefix", "independent"),
)


def systems(anchor_share: float, window_overlap_chunks: int = 2) -> dict[str, DenseSystem]:
    return {
        "independent": DenseSystem(kind="dense", name="independent", context="independent"),
        "title-prefix": DenseSystem(kind="dense", name="title-prefix", context="title"),
        "late-chunking": DenseSystem(
            kind="dense", name="late-chunking", context="late", window_overlap_chunks=window_overlap_chunks
        ),
        "late-chunking-anchored": DenseSystem(
            kind="dense",
            name="late-chunking-anchored",
            context="late",
            window_policy="anchored",
            anchor_share=anchor_share,
            window_overlap_chunks=window_overlap_chunks,
        ),
    }


def trained_systems(specs: list[str], templates: dict[str, DenseSystem]) -> dict[str, DenseSystem]:
    """``TEMPLATE=FOLDER`` specs -> systems named ``TEMPLATE@<folder name>`` (the template with that model)."""
    found: dict[str, DenseSystem] = {}
    for spec in specs:
        template, sep, folder = spec.partition("=")
        if not sep or template not in templates:
            raise SystemExit(f"--trained {spec!r}: expected TEMPLATE=FOLDER with TEMPLATE one of {sorted(templates)}")
        path = Path(folder).resolve()
        if not (path / "modules.json").is_file():
            raise SystemExit(f"--trained {spec!r}: {path} holds no saved sentence-transformers model")
        name = f"{template}@{path.name}"
        found[name] = templates[template].model_copy(update={"name": name, "model": str(path)})
    return found


def trained_documents(trained: dict[str, DenseSystem]) -> set[str]:
    """Every document id recorded in the trained folders' ``training_data.json`` (any task, any split)."""
    seen: set[str] = set()
    for system in trained.values():
        for entry in read_training_data(Path(system.model)) or []:
            seen.update(str(doc_id) for doc_id in entry["doc_ids"])
    return seen


def without_documents(documents: pa.Table, queries: pa.Table, excluded: set[str]) -> tuple[pa.Table, pa.Table]:
    """Source tables without the documents ``excluded`` (and their queries)."""
    keep = pa.array([doc_id not in excluded for doc_id in documents.column("doc_id").to_pylist()])
    keep_queries = pa.array([doc_id not in excluded for doc_id in queries.column("doc_id").to_pylist()])
    return documents.filter(keep), queries.filter(keep_queries)


def masked_variant(corpus: EvalCorpus, documents: pa.Table) -> tuple[EvalCorpus, dict[str, int]]:
    """``corpus`` with the texts of the pipeline's offline reformulation (mask method, first chunks unchanged)."""
    chunks = chunk_documents(documents, ChunkingConfig(chunk_size=CHUNK_SIZE, chunk_overlap=0)).chunks
    themes, _ = themes_table(documents, None, None)
    output = apply_reformulations(chunks, themes, {}, None, None, None)
    text_of = dict(
        zip(output.table.column("chunk_id").to_pylist(), output.table.column("chunk").to_pylist(), strict=True)
    )
    missing = [cid for cid in corpus.chunk_ids if cid not in text_of]
    if missing:
        raise SystemExit(f"reformulation has no row for {len(missing)} chunk(s), e.g. {missing[:3]}")
    texts = [text_of[cid] for cid in corpus.chunk_ids]
    changed = sum(a != b for a, b in zip(texts, corpus.chunks, strict=True))
    stats = {**output.stats, "chunks_changed": changed}
    return dataclasses.replace(corpus, chunks=texts, notes=[*corpus.notes, f"masked variant: {stats}"]), stats


def encode_system(system: DenseSystem, corpus: EvalCorpus) -> tuple[np.ndarray, dict, EncoderSetup]:
    """float32 ``[C, D]`` chunk vectors of ``system`` (as ``prepare_single_vector``), its encode cost, its encoder."""
    setup = setup_encoder(system, ROOT / "data" / "models")
    groups = document_rows(corpus)
    if system.context == "title":
        texts, missing = title_texts(system.title_template, corpus)
        mode = "independent"
    else:
        texts, missing, mode = list(corpus.chunks), None, system.context
    titles = document_titles(corpus, groups) if mode == "late" else None
    encoder = setup.encoder
    started = time.perf_counter()
    vectors = encode_chunks(setup, texts, groups, mode, False, titles)
    cost = {
        "encode_s": round(time.perf_counter() - started, 1),
        "windows": encoder.forwarded_windows,
        "tokens_forwarded": encoder.forwarded_tokens,
        "anchor_tokens": encoder.anchor_tokens,
        "chunks_without_title": missing,
        "truncated_chunks": encoder.truncated_chunks,
    }
    print(f"{system.name}: {cost}", flush=True)
    return vectors, cost, setup


def evaluate(name: str, system: DenseSystem, corpus: EvalCorpus) -> tuple[dict, np.ndarray]:
    chunk_vectors, cost, setup = encode_system(system, corpus)
    started = time.perf_counter()
    query_vectors, reused = encode_queries_cached(setup, list(corpus.queries))
    if not reused:
        print(f"{name}: {corpus.n_queries} queries encoded in {time.perf_counter() - started:.1f} s", flush=True)
    ranking = rank_corpus(
        dense_scorer(query_vectors, chunk_vectors),
        corpus.n_queries,
        corpus.chunk_ids,
        corpus.gold,
        corpus.chunk_doc_index(),
        corpus.document_order,
    )
    ndcg = metrics_from_gold_rank(ranking.gold_rank, (10,))["ndcg@10"]
    summary = summarize(ndcg)
    later = corpus.chunk_index[corpus.gold] > 0
    row = {
        "system": name,
        "ndcg@10": round(summary.value, 4),
        "ci_low": round(summary.ci_low, 4),
        "ci_high": round(summary.ci_high, 4),
        "ndcg@10_later_chunks": round(float(ndcg[later].mean()), 4) if later.any() else None,
        "later_queries": int(later.sum()),
        "n_queries": corpus.n_queries,
        "n_chunks": corpus.n_chunks,
        "n_documents": corpus.n_documents,
        **cost,
    }
    return row, ndcg


def _trained_anchored_vs_plain(trained: dict[str, DenseSystem]) -> list[tuple[str, str]]:
    anchored = [n for n in trained if n.startswith("late-chunking-anchored@")]
    plain = [n for n in trained if n.startswith("late-chunking@")]
    return [(a, b) for a in anchored for b in plain]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="xquad")
    parser.add_argument("--variants", nargs="+", choices=["original", "masked"], default=["original", "masked"])
    parser.add_argument("--systems", nargs="*", default=list(systems(0.4)))
    parser.add_argument("--trained", action="append", default=[], metavar="TEMPLATE=FOLDER")
    parser.add_argument("--anchor-share", type=float, default=0.4)
    parser.add_argument("--window-overlap-chunks", type=int, default=2)
    parser.add_argument("--max-documents", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if not SHARED.is_dir():
        sys.exit(f"{SHARED} is missing: the real corpora are needed (see shared/data/MANIFEST.md)")
    configs = systems(args.anchor_share, args.window_overlap_chunks)
    trained = trained_systems(args.trained, configs)
    configs.update(trained)
    names = [*args.systems, *trained]
    source = load_squad_json(SHARED / CORPORA[args.corpus])
    if args.max_documents:
        source.keep_first_documents(args.max_documents)
    documents, queries = source.documents_table(), source.queries_table()
    excluded = trained_documents(trained) & set(documents.column("doc_id").to_pylist())
    if excluded:
        documents, queries = without_documents(documents, queries, excluded)
        print(f"left out {len(excluded)} document(s) the trained models saw: {sorted(excluded)}", flush=True)
    original = rechunk_corpus(documents, queries, CHUNK_SIZE, name=args.corpus)
    print(f"{args.corpus}: {documents.num_rows} documents, {original.n_chunks} chunks, {original.n_queries} queries")
    rows: list[dict] = []
    result = result_header(args, rows)
    result["documents_left_out_as_training_data"] = sorted(excluded)
    for variant in args.variants:
        corpus, stats = (original, None) if variant == "original" else masked_variant(original, documents)
        if stats:
            print(f"masked variant: {stats}", flush=True)
        per_query = {}
        for name in names:
            row, ndcg = evaluate(name, configs[name], corpus)
            row = {"corpus": args.corpus, "variant": variant, **row}
            rows.append(row)
            per_query[name] = ndcg
            print(json.dumps(row), flush=True)
        trained_pairs = [(name, name.partition("@")[0]) for name in trained]  # trained vs its untrained template
        for a, b in [*COMPARISONS, *trained_pairs, *_trained_anchored_vs_plain(trained)]:
            if a in per_query and b in per_query:
                row = {
                    "corpus": args.corpus,
                    "variant": variant,
                    "comparison": f"{a} vs {b}",
                    "difference": round(float((per_query[a] - per_query[b]).mean()), 4),
                    "p_value": paired_test(per_query[a], per_query[b]),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
        if args.json:  # after every variant, so that a stopped run keeps what finished
            args.json.write_text(json.dumps(result, indent=2, default=str))
    print("\n| variant | system | nDCG@10 [95% CI] | later chunks | encode s | windows | tokens (head) |")
    print("|---|---|---|---:|---:|---:|---:|")
    for row in rows:
        if "system" in row:
            print(
                f"| {row['variant']} | {row['system']} | {row['ndcg@10']:.3f} [{row['ci_low']:.3f}, "
                f"{row['ci_high']:.3f}] | {row['ndcg@10_later_chunks']} | {row['encode_s']} | {row['windows']:,} | "
                f"{row['tokens_forwarded']:,} ({row['anchor_tokens']:,}) |"
            )
    for row in rows:
        if "comparison" in row:
            print(f"{row['variant']}: {row['comparison']}: {row['difference']:+.4f} (p = {row['p_value']:.4g})")


if __name__ == "__main__":
    main()
