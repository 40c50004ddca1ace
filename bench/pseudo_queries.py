"""Offline pseudo-queries (inverse cloze, ``curation/pseudo_queries.py``) on the State of the Union addresses.

Corpus: ``../shared/data/sotu`` (86 addresses, ``YEAR-President.txt``), one task split by document
``{train: 0.5, test: 0.5, seed: 0}`` with ``pseudo_queries`` as the README declares it (``--per-document``, default 20,
``per_chunk`` 2, seed 0, the ``YEAR-President`` title pattern). Measured:

- the pseudo-query stage alone (``build_pseudo_queries`` over the train split's documents, after the source and
  chunking), best of ``--repeats`` runs, and the source and chunking before it;
- the whole task built in process by Dagster (every asset of the task and its 8 dataset checks: source, chunks,
  span pairing, pseudo-queries, answerability (not run offline), the published folder), one run, wall time;
- pseudo-queries in the train split, per address (min, median, max), sentences considered, the share refused by each
  filter and left out by each bound, and five example queries (every ``n // 5``-th) with their gold chunk's first
  words.

Usage (from the repository root)::

    nice -n 10 .venv/bin/python bench/pseudo_queries.py [--per-document 20] [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `import bench`, `import curation` from a checkout

from bench.record import result_header
from conteb.config import TaskConfig
from curation.chunking import chunk_documents
from curation.pseudo_queries import CAPS, FILTERS, build_pseudo_queries, pseudo_documents
from curation.sources import load_source

ROOT = Path(__file__).resolve().parents[1]
SOTU = ROOT.parent / "shared" / "data" / "sotu"


def task_block(per_document: int) -> dict:
    """The registry entry of the measured task (the README's example)."""
    return {
        "name": "sotu",
        "source": {"kind": "text_folder", "path": str(SOTU)},
        "splits": {"train": 0.5, "test": 0.5, "seed": 0},
        "pseudo_queries": {
            "per_document": per_document,
            "seed": 0,
            "title_pattern": r"(?P<year>\d{4})-(?P<president>[A-Za-z]+)(?:-\d+)?",
            "subject": "the {year} State of the Union address ({president})",
            "template": "In {subject}: {sentence}",
        },
    }


def dagster_build(block: dict) -> float:
    """Wall seconds of materializing every asset and check of the task in process, in a fresh data folder."""
    import dagster as dg

    from pipelines.definitions import build_definitions, task_assets
    from project.config import load_config

    with tempfile.TemporaryDirectory(prefix="bench-pseudo-") as tmp:
        os.environ["CONTEB_DATA_DIR"] = str(Path(tmp) / "data")
        config_path = Path(tmp) / "conteb.yaml"
        config_path.write_text(yaml.safe_dump({"tasks": [block]}, sort_keys=False))
        config = load_config(config_path)
        assets, checks = task_assets(config.tasks[0])
        started = time.perf_counter()
        result = dg.materialize(
            [*assets, *checks],
            resources=build_definitions(config).resources,
            instance=dg.DagsterInstance.ephemeral(),
        )
        wall = time.perf_counter() - started
        assert result.success and all(ev.passed for ev in result.get_asset_check_evaluations())
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-document", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not SOTU.is_dir():
        raise SystemExit(f"{SOTU} is missing (see ../shared/data/MANIFEST.md)")
    block = task_block(args.per_document)
    task = TaskConfig.model_validate(block)
    assert task.pseudo_queries is not None
    started = time.perf_counter()
    documents = load_source(task.source).documents_table()
    loaded = time.perf_counter()
    chunks = chunk_documents(documents, task.chunking).chunks
    chunked = time.perf_counter()
    train = pseudo_documents(task, chunks)
    times = []
    for _ in range(args.repeats):
        begin = time.perf_counter()
        result = build_pseudo_queries(documents, chunks, train, task.pseudo_queries)
        times.append(time.perf_counter() - begin)
    build_wall = dagster_build(block)

    counts = result.stats
    per_doc = [result.queries.column("doc_id").to_pylist().count(doc) for doc in train]
    filtered = sum(counts[str(o)] for o in FILTERS)
    left_out = sum(counts[str(o)] for o in CAPS)
    texts = dict(zip(chunks.column("chunk_id").to_pylist(), chunks.column("og_chunk").to_pylist(), strict=True))
    queries = result.queries.to_pylist()
    examples = [
        {"query": q["query"], "gold": q["chunk_id"], "gold_starts": " ".join(texts[q["chunk_id"]].split()[:10])}
        for q in queries[:: max(1, len(queries) // 5)][:5]
    ]
    row = {
        "documents": documents.num_rows,
        "chunks": chunks.num_rows,
        "train_documents": len(train),
        "pseudo_queries": result.queries.num_rows,
        "per_document": {"min": min(per_doc), "median": statistics.median(per_doc), "max": max(per_doc)},
        "sentences": counts["sentences"],
        "filtered": filtered,
        "filtered_share": round(filtered / counts["sentences"], 4),
        "left_out_by_bounds": left_out,
        "outcomes": {str(o): counts[str(o)] for o in (*FILTERS, *CAPS)},
        "source_s": round(loaded - started, 2),
        "chunking_s": round(chunked - loaded, 2),
        "pseudo_stage_s": round(min(times), 2),
        "dagster_build_s": round(build_wall, 1),
        "examples": examples,
    }
    print(json.dumps(row, indent=2, ensure_ascii=False))
    if args.json:
        args.json.write_text(json.dumps(result_header(args, [row]), indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
