"""Window layout for late chunking, chosen by measurement: the chunk-to-window ownership rule and the window overlap.

With a 512-token model a long document is read in windows of whole chunks (:mod:`embedding.windows`). Two choices
shape what each chunk's vector sees: how many chunks consecutive windows share (``window_overlap_chunks``: 0, 1, 2)
and, for a chunk seen in several windows, which window it takes its vector from (``ownership``: ``balanced``, the
most context on the chunk's poorer side; ``earliest``, the first window holding it, i.e. the closest to the head;
``head``, a window holding the document's head, then ``balanced``). This script measures quality (nDCG@10 with 95%
bootstrap CIs and paired randomization tests) and cost (windows and tokens forwarded, seconds) of every combination,
for plain and anchored windows, with the untrained offline MiniLM (512-token windows), on:

* ``sample``: the bundled same-template corpus (``data/sample``: the entity named only in the first paragraph, the
  head-dependent case);
* ``xquad``, ``squad``, ``covidqa``: real corpora from ``../shared/data`` (original chunks and the ``masked``
  context-dependent variant the pipeline builds offline, as ``bench/anchored_windows.py``);
* ``controlled:<templates>[/<documents per template>]``: a generated controlled task (``curation/sources/controlled``,
  seed 0, uninformative titles; e.g. ``controlled:city,composer/10``): same-template documents whose entity is named
  only in the first paragraph, two windows long.

Ownership changes only which window's token states a chunk is pooled from, never the windows forwarded, so the
token states of each (policy, overlap) are computed once and reused for every ownership rule (a memo on the
encoder's ``_hidden``; the windows of the three rules are identical, only ``owned`` differs).

Queries are encoded once per corpus. Subset ``beyond window 0``: the queries whose gold chunk is not in the first
window of the plain overlap-0 layout (the chunks whose window never sees the head without context from elsewhere).

Usage (from the repository root)::

    nice -n 10 .venv/bin/python bench/window_layout.py --corpus sample --json /tmp/layout-sample.json
    nice -n 10 .venv/bin/python bench/window_layout.py --corpus covidqa --max-documents 30 --json /tmp/l-covid.json
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import json
import time
from typing import Any

import numpy as np
from anchored_windows import CHUNK_SIZE, CORPORA, SHARED, masked_variant  # bench/anchored_windows.py
from record import result_header  # bench/record.py (the script's folder is on sys.path)

from embedding.windows import OWNERSHIP_RULES
from evaluation.config import DenseSystem
from evaluation.corpus import EvalCorpus
from evaluation.metrics.retrieval import metrics_from_gold_rank
from evaluation.metrics.stats import paired_test, summarize
from evaluation.rechunk import rechunk_corpus
from evaluation.systems.dense import document_rows, document_titles, encode_chunks
from evaluation.systems.embedders import encode_queries_cached, setup_encoder
from evaluation.systems.ranking import dense_scorer, rank_corpus

ROOT = Path(__file__).resolve().parents[1]
OVERLAPS = (0, 1, 2)
POLICIES = ("plain", "anchored")
BASELINE = ("plain", 2, "balanced")  # the evaluation's default before this measurement


def load_source(corpus: str, max_documents: int | None):
    """Source documents and queries of ``corpus`` (module docstring), with the project's own loaders."""
    if corpus == "sample":
        from curation.sources.sample import load_sample

        source = load_sample(ROOT / "data" / "sample")
    elif corpus.startswith("controlled:"):
        from conteb.config import ControlledSource
        from curation.sources import load_source as load_registry_source

        templates, _, per_template = corpus.split(":", 1)[1].partition("/")
        source = load_registry_source(
            ControlledSource(
                kind="controlled",
                templates=tuple(templates.split(",")),
                documents_per_template=int(per_template or 10),
                seed=0,
                titles="uninformative",
            )
        )
    else:
        from curation.sources.squad import load_squad_json

        source = load_squad_json(SHARED / CORPORA[corpus])
    if max_documents:
        source.keep_first_documents(max_documents)
    return source.documents_table(), source.queries_table()


def memoize_hidden(encoder: Any) -> dict:
    """Cache the encoder's forward passes by batch (windows are the same for every ownership rule)."""
    cache: dict = {}
    forward = encoder._hidden

    def hidden(windows):
        key = tuple(tuple(w.input_ids) for w in windows)
        if key not in cache:
            cache[key] = forward(windows)
        return cache[key]

    encoder._hidden = hidden
    return cache


def first_window_chunks(corpus: EvalCorpus) -> np.ndarray:
    """Per chunk, whether it lies in the first window of its document (plain windows, no overlap)."""
    setup = setup_encoder(
        DenseSystem(kind="dense", name="probe", context="late", window_overlap_chunks=0), ROOT / "data" / "models"
    )
    groups = document_rows(corpus)
    inside = np.zeros(corpus.n_chunks, dtype=bool)
    for rows in groups:
        windows = setup.encoder.planner.layout([corpus.chunks[r] for r in rows])
        for local in windows[0].chunk_ids:
            inside[rows[local]] = True
    return inside


def measure(corpus: EvalCorpus, label: str) -> tuple[list[dict], dict[tuple, np.ndarray]]:
    """Every (policy, overlap, ownership) on ``corpus``: one row each, and the per-query nDCG@10 by configuration."""
    groups = document_rows(corpus)
    rows: list[dict] = []
    per_query: dict[tuple, np.ndarray] = {}
    query_vectors = None
    beyond = ~first_window_chunks(corpus)[corpus.gold]
    later = corpus.chunk_index[corpus.gold] > 0
    for policy in POLICIES:
        for overlap in OVERLAPS:
            system = DenseSystem(
                kind="dense", name=f"late-{policy}", context="late", window_policy=policy,
                window_overlap_chunks=overlap,
            )  # fmt: skip
            setup = setup_encoder(system, ROOT / "data" / "models")
            memoize_hidden(setup.encoder)
            if query_vectors is None:
                query_vectors, _ = encode_queries_cached(setup, list(corpus.queries))
            titles = document_titles(corpus, groups)
            for ownership in OWNERSHIP_RULES if overlap else ("balanced",):
                setup.encoder.planner.ownership = ownership
                before = (setup.encoder.forwarded_windows, setup.encoder.forwarded_tokens)
                started = time.perf_counter()
                vectors = encode_chunks(setup, list(corpus.chunks), groups, "late", False, titles)
                seconds = time.perf_counter() - started
                ranking = rank_corpus(
                    dense_scorer(query_vectors, vectors), corpus.n_queries, corpus.chunk_ids, corpus.gold,
                    corpus.chunk_doc_index(), corpus.document_order,
                )  # fmt: skip
                ndcg = metrics_from_gold_rank(ranking.gold_rank, (10,))["ndcg@10"]
                key = (policy, overlap, ownership)
                per_query[key] = ndcg
                summary = summarize(ndcg)
                row = {
                    "corpus": label,
                    "policy": policy,
                    "overlap": overlap,
                    "ownership": ownership,
                    "ndcg@10": round(summary.value, 4),
                    "ci_low": round(summary.ci_low, 4),
                    "ci_high": round(summary.ci_high, 4),
                    "ndcg@10_later_chunks": round(float(ndcg[later].mean()), 4) if later.any() else None,
                    "ndcg@10_beyond_window0": round(float(ndcg[beyond].mean()), 4) if beyond.any() else None,
                    "queries": corpus.n_queries,
                    "queries_beyond_window0": int(beyond.sum()),
                    "windows": setup.encoder.forwarded_windows - before[0],
                    "tokens_forwarded": setup.encoder.forwarded_tokens - before[1],
                    "anchor_tokens": setup.encoder.anchor_tokens,
                    "encode_s": round(seconds, 1),  # the first rule of an overlap pays the forward passes
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows, per_query


def comparisons(label: str, per_query: dict[tuple, np.ndarray]) -> list[dict]:
    """Each configuration against the former default, and each ownership rule against ``balanced``."""
    out = []
    pairs = [(key, BASELINE) for key in per_query if key != BASELINE]
    pairs += [(key, (key[0], key[1], "balanced")) for key in per_query if key[2] != "balanced"]
    for a, b in pairs:
        out.append(
            {
                "corpus": label,
                "comparison": f"{'/'.join(map(str, a))} vs {'/'.join(map(str, b))}",
                "difference": round(float((per_query[a] - per_query[b]).mean()), 4),
                "p_value": paired_test(per_query[a], per_query[b]),
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="sample", help="sample, xquad, squad, covidqa or controlled:<templates>")
    parser.add_argument("--variants", nargs="+", choices=["original", "masked"], default=["original", "masked"])
    parser.add_argument("--max-documents", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    documents, queries = load_source(args.corpus, args.max_documents)
    original = rechunk_corpus(documents, queries, CHUNK_SIZE, name=args.corpus)
    print(f"{args.corpus}: {documents.num_rows} documents, {original.n_chunks} chunks, {original.n_queries} queries")
    rows: list[dict] = []
    result = result_header(args, rows)
    variants = ["original"] if args.corpus == "sample" or args.corpus.startswith("controlled") else args.variants
    for variant in variants:
        corpus = original if variant == "original" else masked_variant(original, documents)[0]
        label = f"{args.corpus}/{variant}"
        measured, per_query = measure(corpus, label)
        rows += measured + comparisons(label, per_query)
        if args.json:
            args.json.write_text(json.dumps(result, indent=2, default=str))
    print("\n| corpus | policy | overlap | ownership | nDCG@10 [95% CI] | beyond window 0 | windows | tokens |")
    print("|---|---|---:|---|---|---:|---:|---:|")
    for row in rows:
        if "policy" in row:
            print(
                f"| {row['corpus']} | {row['policy']} | {row['overlap']} | {row['ownership']} | {row['ndcg@10']:.3f} "
                f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}] | {row['ndcg@10_beyond_window0']} "
                f"({row['queries_beyond_window0']}) | {row['windows']:,} | {row['tokens_forwarded']:,} |"
            )
    for row in rows:
        if "comparison" in row:
            print(f"{row['corpus']}: {row['comparison']}: {row['difference']:+.4f} (p = {row['p_value']:.4g})")


if __name__ == "__main__":
    main()
