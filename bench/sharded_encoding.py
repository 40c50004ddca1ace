"""Sharded corpus encoding in evaluation: peak memory of an encode step, wall time, and whether the numbers move.

Corpus: SQuAD v1.1 dev (``../shared/data/squad-v1.1-dev.json.gz``), its first ``--articles`` articles, replicated
``--copies`` times under new ids (``bench/scale_corpus.py``), made an evaluation corpus the way the chunk-size study
makes one (``evaluation.rechunk.rechunk_corpus``: the project's recursive splitter at 1,000 characters, queries paired
by answer span). One system: ``dense`` with ``context: late`` (late chunking).

For each size, two ways, each unit in a fresh Python process (as a step of the multiprocess or Celery executor
runs), its peak resident set size read by ``/usr/bin/time -f %M``:

- ``whole``: ``evaluation.systems.dispatch.encode_system`` over the whole corpus (the ``[task]/evaluation`` of before:
one
  step encodes everything);
- ``sharded``: ``evaluation.sharding.encode_shard`` on each shard of ``--shard-documents`` documents
  (``evaluation.sharding.encoding_shards``), one process per shard, one after the other.

Then, in this process, the shards are joined (``evaluation.encoded.merge_outcomes``) and compared with ``whole``:
the largest absolute difference of any vector component, and nDCG@10 of both through the evaluation's own ranking
(``evaluation.runner.evaluate_task`` with the encodings; bootstrap 100), with the number of queries whose gold rank
differs. Ratios: peak RSS ``largest shard / whole`` and wall ``sum of shards / whole`` (same run).

``--model``: ``offline-minilm`` (the bundled all-MiniLM-L6-v2: the real model, slow on a CPU) or ``tiny`` (a random
2-layer ModernBERT from ``tests/support/tiny_models.py``: fast, for the memory curve at larger sizes; its numbers are
meaningless as retrieval quality, only their agreement counts).

Usage (from the repository root)::

    python bench/sharded_encoding.py [--model offline-minilm] [--articles 12] [--copies 1] [--shard-documents 3]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # bench.* and tests.support

SQUAD = ROOT.parent / "shared" / "data" / "squad-v1.1-dev.json.gz"
SYSTEM = "late-chunking"


def system_config(model: str) -> Any:
    from evaluation.config import DenseSystem

    return DenseSystem(kind="dense", name=SYSTEM, model=model, context="late")


def build_corpus(articles: int, copies: int, folder: Path) -> tuple[Any, Any]:
    """The evaluation corpus and its span sources (module doc)."""
    from bench.scale_corpus import read_squad, replicate_squad, write_squad
    from curation.sources.squad import load_squad_json
    from evaluation.rechunk import SpanSources, rechunk_corpus

    payload = read_squad(SQUAD)
    payload["data"] = payload["data"][:articles]
    path = write_squad(replicate_squad(payload, copies), folder / "squad.json.gz")
    source = load_squad_json(path)
    documents, queries = source.documents_table(), source.queries_table()
    corpus = rechunk_corpus(documents, queries, 1000, name="squad-dev")
    return corpus, SpanSources(documents, queries)


def child(args: argparse.Namespace) -> int:
    """One unit in this process: ``whole`` or shard ``--shard``; writes the encoding and its wall time."""
    from evaluation.encoded import EncodingKey
    from evaluation.sharding import EncodingJob, encode_shard, encoding_shards
    from evaluation.systems.dispatch import encode_system

    with open(args.corpus, "rb") as handle:
        corpus, system, models = pickle.load(handle)
    started = time.perf_counter()
    if args.unit == "whole":
        value: Any = encode_system(system, corpus, models)
    else:
        shard = encoding_shards(corpus, None, args.shard_documents)[args.shard]
        value = encode_shard(shard, [EncodingJob(EncodingKey(system.name), system)], models)
    with open(args.out, "wb") as handle:
        pickle.dump((value, time.perf_counter() - started), handle)
    return 0


def run_unit(corpus_file: Path, out: Path, unit: str, shard: int = 0, shard_documents: int = 1) -> dict[str, Any]:
    """Run one unit in a fresh process; its wall time (process start to exit), encode seconds and peak RSS."""
    command = [sys.executable, __file__, "--child", "--corpus", str(corpus_file), "--out", str(out), "--unit", unit]
    command += ["--shard", str(shard), "--shard-documents", str(shard_documents)]
    # Through /usr/bin/time (a small process): Linux starts an exec'd child's peak RSS at its parent's, so a child
    # forked by this process (which holds the corpus and the earlier units' vectors) would report at least that.
    peak = out.with_suffix(".rss")
    command = ["/usr/bin/time", "-f", "%M", "-o", str(peak), *command]
    started = time.perf_counter()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    subprocess.run(command, env=env, check=True)
    wall = time.perf_counter() - started
    with open(out, "rb") as handle:
        value, seconds = pickle.load(handle)
    rss_kib = int(peak.read_text().split()[-1])
    return {"value": value, "wall_s": wall, "work_s": seconds, "rss_mib": rss_kib / 1024}


def ndcg(corpus: Any, config: Any, models: Path, reports: Path, encodings: dict) -> Any:
    from evaluation.runner import evaluate_task

    evaluation = evaluate_task(
        corpus,
        config,
        models_dir=models,
        reports_dir=reports,
        chunk_sizes=False,
        encodings=encodings,
        log=lambda _: None,
    )
    (run,) = evaluation.runs
    assert run.status == "ok", run.reason
    return run


def measure(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    import numpy as np

    from evaluation.config import EvaluationConfig
    from evaluation.encoded import EncodingKey, merge_outcomes
    from evaluation.sharding import encoding_shards
    from tests.support.tiny_models import tiny_modernbert

    model = args.model
    if model == "tiny":
        model = str(folder / "tiny")
        tiny_modernbert().save(model)
    system = system_config(model)
    corpus, _ = build_corpus(args.articles, args.copies, folder)
    models = folder / "models"
    corpus_file = folder / "corpus.pickle"
    with open(corpus_file, "wb") as handle:
        pickle.dump((corpus, system, models), handle)
    n_shards = len(encoding_shards(corpus, None, args.shard_documents))
    print(f"{corpus.n_documents} documents, {corpus.n_chunks} chunks, {corpus.n_queries} queries, {n_shards} shards")

    whole = run_unit(corpus_file, folder / "whole.pickle", "whole")
    print(f"whole: {whole['wall_s']:.1f} s, {whole['rss_mib']:.0f} MiB")
    shards = []
    for index in range(n_shards):
        shards.append(run_unit(corpus_file, folder / f"shard{index}.pickle", "shard", index, args.shard_documents))
        print(f"shard {index}: {shards[-1]['wall_s']:.1f} s, {shards[-1]['rss_mib']:.0f} MiB")
    key = EncodingKey(SYSTEM)
    merged = merge_outcomes([shard["value"] for shard in shards])[key].aligned(corpus.chunk_ids)
    reference = whole["value"]
    difference = float(np.abs(merged.vectors - reference.vectors).max())
    identical = int(np.sum(np.all(merged.vectors == reference.vectors, axis=1)))

    config = EvaluationConfig(
        systems=(system,), bootstrap={"resamples": 100}, significance={"comparisons": []}, chunk_sizes={"systems": []}
    )
    run_whole = ndcg(corpus, config, models, folder / "reports-whole", {key: reference})
    run_sharded = ndcg(corpus, config, models, folder / "reports-sharded", {key: merged})
    import pyarrow.parquet as pq

    ranks = [
        pq.read_table(folder / name / "runs" / "squad-dev" / f"{SYSTEM}.metrics.parquet").column("ndcg@10").to_pylist()
        for name in ("reports-whole", "reports-sharded")
    ]
    changed = sum(a != b for a, b in zip(*ranks, strict=True))
    largest = max(shards, key=lambda shard: shard["rss_mib"])
    return {
        "model": args.model,
        "documents": corpus.n_documents,
        "chunks": corpus.n_chunks,
        "queries": corpus.n_queries,
        "shard_documents": args.shard_documents,
        "shards": n_shards,
        "whole_wall_s": round(whole["wall_s"], 1),
        "whole_work_s": round(whole["work_s"], 1),
        "whole_rss_mib": round(whole["rss_mib"]),
        "shards_wall_s": round(sum(s["wall_s"] for s in shards), 1),
        "shards_work_s": round(sum(s["work_s"] for s in shards), 1),
        "largest_shard_rss_mib": round(largest["rss_mib"]),
        "smallest_shard_rss_mib": round(min(s["rss_mib"] for s in shards)),
        "rss_ratio": round(largest["rss_mib"] / whole["rss_mib"], 3),
        "wall_ratio": round(sum(s["wall_s"] for s in shards) / whole["wall_s"], 3),
        "max_abs_difference": difference,
        "identical_vectors": identical,
        "ndcg10_whole": run_whole.metrics["ndcg@10"].value,
        "ndcg10_sharded": run_sharded.metrics["ndcg@10"].value,
        "queries_with_other_ndcg10": changed,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="offline-minilm")
    parser.add_argument("--articles", type=int, default=12)
    parser.add_argument("--copies", type=int, default=1)
    parser.add_argument("--shard-documents", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--unit", help=argparse.SUPPRESS)
    parser.add_argument("--shard", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    if not SQUAD.is_file():
        print(f"{SQUAD} missing: this benchmark reads the shared SQuAD v1.1 dev file", file=sys.stderr)
        return 2
    from bench.record import result_header

    with tempfile.TemporaryDirectory(prefix="bench-sharded-encoding-") as tmp:
        row = measure(args, Path(tmp))
    result = result_header(args, [row])
    print(json.dumps(row, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
