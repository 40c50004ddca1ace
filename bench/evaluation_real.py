"""Evaluation on real data: BM25, independent chunks and late chunking with the offline MiniLM, and the
chunk-size robustness curve (the paper: late chunking flattens the drop at small chunk sizes).

For each corpus (``../shared/data``: SQuAD v1.1 dev, COVID-QA) the original documents and span-annotated
questions are loaded with the project's source loader, then for every chunk size the task is re-chunked and
re-paired by answer span (``evaluation.rechunk.rechunk_corpus``) and every system is evaluated with the same
code as ``evaluate_conteb`` (``prepare_system`` → ``rank_corpus`` → ``metrics_from_gold_rank`` + bootstrap CI).

Usage (from the repository root)::

    python bench/evaluation_real.py --corpus squad --sizes 8000 1000 500 300 200 100 --json out.json
    python bench/evaluation_real.py --corpus covidqa --sizes 1000 --max-docs 40
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import json
import random
import time

import pyarrow as pa
import pyarrow.compute as pc
import torch
from record import result_header  # bench/record.py (the script's folder is on sys.path)

from curation.sources.squad import load_squad_json
from evaluation.config import BM25System, DenseSystem
from evaluation.metrics.retrieval import metrics_from_gold_rank
from evaluation.metrics.stats import paired_test, summarize
from evaluation.rechunk import rechunk_corpus
from evaluation.systems.dispatch import prepare_system
from evaluation.systems.ranking import rank_corpus

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
CORPORA = {"squad": "squad-v1.1-dev.json.gz", "covidqa": "covidqa-2020-04-23.json.gz"}
SYSTEMS = {
    "bm25": BM25System(kind="bm25", name="bm25"),
    "bm25-subword": BM25System(kind="bm25", name="bm25-subword", tokenizer="model", stemmer=None, stopwords=None),
    "independent": DenseSystem(kind="dense", name="independent", context="independent"),
    "late-chunking": DenseSystem(kind="dense", name="late-chunking", context="late"),
}


def load_sources(corpus: str, max_docs: int | None, seed: int) -> tuple[pa.Table, pa.Table]:
    result = load_squad_json(SHARED / CORPORA[corpus])
    documents, queries = result.documents_table(), result.queries_table()
    if max_docs and max_docs < documents.num_rows:
        keep = sorted(random.Random(seed).sample(range(documents.num_rows), max_docs))
        documents = documents.take(keep)
        queries = queries.filter(pc.is_in(queries.column("doc_id"), documents.column("doc_id")))
    return documents, queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="squad")
    parser.add_argument("--sizes", type=int, nargs="+", default=[8000, 1000, 500, 300, 200, 100])
    parser.add_argument("--systems", nargs="+", default=["bm25", "bm25-subword", "independent", "late-chunking"])
    parser.add_argument("--max-docs", type=int, default=None, help="random subset of documents (seeded)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if not SHARED.is_dir():
        sys.exit(f"{SHARED} is missing: the real corpora are needed (see shared/data/MANIFEST.md)")
    torch.set_num_threads(max(1, torch.get_num_threads()))
    documents, queries = load_sources(args.corpus, args.max_docs, args.seed)
    print(f"{args.corpus}: {documents.num_rows} documents, {queries.num_rows} questions", flush=True)
    rows = []
    for size in args.sizes:
        corpus = rechunk_corpus(documents, queries, size, name=args.corpus)
        per_query = {}
        for name in args.systems:
            started = time.perf_counter()
            indexed = prepare_system(SYSTEMS[name], corpus, ROOT / "data" / "models", show_progress=True, log=print)
            ranking = rank_corpus(
                indexed.score_block,
                corpus.n_queries,
                corpus.chunk_ids,
                corpus.gold,
                corpus.chunk_doc_index(),
                corpus.document_order,
            )
            metrics = metrics_from_gold_rank(ranking.gold_rank, (10,))
            later = corpus.chunk_index[corpus.gold] > 0
            summary = summarize(metrics["ndcg@10"])
            per_query[name] = metrics["ndcg@10"]
            row = {
                "corpus": args.corpus,
                "chunk_size": size,
                "system": name,
                "ndcg@10": round(summary.value, 4),
                "ci_low": round(summary.ci_low, 4),
                "ci_high": round(summary.ci_high, 4),
                "ndcg@10_later_chunks": round(float(metrics["ndcg@10"][later].mean()), 4) if later.any() else None,
                "doc_ndcg@10": round(float(metrics_from_gold_rank(ranking.doc_rank, (10,))["ndcg@10"].mean()), 4),
                "n_queries": corpus.n_queries,
                "n_chunks": corpus.n_chunks,
                "index_s": round(indexed.index_seconds, 1),
                "total_s": round(time.perf_counter() - started, 1),
                "notes": corpus.notes,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
        if "late-chunking" in per_query and "independent" in per_query:
            p = paired_test(per_query["late-chunking"], per_query["independent"])
            rows.append(
                {
                    "corpus": args.corpus,
                    "chunk_size": size,
                    "comparison": "late-chunking vs independent",
                    "difference": round(float((per_query["late-chunking"] - per_query["independent"]).mean()), 4),
                    "p_value": p,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    result = result_header(args, rows)
    print("\n| chunk size | system | nDCG@10 [95% CI] | later chunks | doc-level | chunks | index s |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for row in rows:
        if "system" in row:
            print(
                f"| {row['chunk_size']} | {row['system']} | {row['ndcg@10']:.3f} [{row['ci_low']:.3f}, "
                f"{row['ci_high']:.3f}] | {row['ndcg@10_later_chunks']} | {row['doc_ndcg@10']:.3f} | "
                f"{row['n_chunks']:,} | {row['index_s']} |"
            )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
