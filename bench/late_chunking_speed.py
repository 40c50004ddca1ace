"""Late-chunking encode speed: chunks/s of late chunking against independent chunk encoding, same model and chunks.

Data: the first ``--articles`` SQuAD v1.1 dev articles from ``../shared/data/squad-v1.1-dev.json.gz`` (read by
path), chunked as the pipeline does (``load_squad_json`` + ``chunk_documents`` with ``ChunkingConfig()``: 1000
characters). Model: the offline all-MiniLM-L6-v2 (``embedding.models.load_offline_minilm``, 512-token windows), on
the device ``pick_device`` gives (CPU here). Inference only: no training step is timed.

Timed passes, each over all chunks of the selected articles, in this order within a repetition:

* ``st_encode``: ``model.encode(all chunks, batch_size=32)``, sentence-transformers' own independent encoding;
* ``independent``: ``LateChunkingEncoder.encode_documents(docs, mode="independent")`` (same chunks, our batching);
* ``late``: ``encode_documents(docs, mode="late")``, windows overlapping by 2 chunks (the default);
* ``late_overlap0``: the same without overlap (each chunk forwarded once).

Each time is the median of ``--repeat`` repetitions after one warm-up (``time.perf_counter``). Ratio = late
chunks/s ÷ independent chunks/s (target ≥ 1.0). Also reported: windows and tokens forwarded per chunk.

Usage (from the repository root)::

    python bench/late_chunking_speed.py [--articles N] [--repeat R] [--json out.json]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `import training` without installing the package

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from conteb.config import ChunkingConfig
from curation.chunking import chunk_documents
from curation.sources.squad import load_squad_json
from embedding.encoder import LateChunkingEncoder
from embedding.models import load_offline_minilm

ROOT = Path(__file__).resolve().parents[1]
SQUAD = ROOT.parent / "shared" / "data" / "squad-v1.1-dev.json.gz"
TARGET_RATIO = 1.0


def squad_documents(articles: int) -> list[list[str]]:
    """Chunk texts of the first ``articles`` SQuAD dev articles, per document in ``chunk_index`` order."""
    documents = load_squad_json(SQUAD).documents_table().slice(0, articles)
    doc_ids = documents.column("doc_id").to_pylist()
    chunks = chunk_documents(documents, ChunkingConfig()).chunks
    by_doc: dict[str, list[tuple[int, str]]] = {doc_id: [] for doc_id in doc_ids}
    for doc_id, index, text in zip(
        *(chunks.column(name).to_pylist() for name in ("doc_id", "chunk_index", "og_chunk")), strict=True
    ):
        by_doc[doc_id].append((index, text))
    return [[text for _, text in sorted(by_doc[doc_id])] for doc_id in doc_ids]


def timed(fn: Callable[[], object]) -> float:
    """Seconds for one call (CUDA synchronised when used)."""
    start = time.perf_counter()
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--articles", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    docs = squad_documents(args.articles)
    flat = [chunk for doc in docs for chunk in doc]
    model = load_offline_minilm()
    late = LateChunkingEncoder(model)
    late0 = LateChunkingEncoder(model, window_overlap_chunks=0)
    passes: dict[str, Callable[[], object]] = {
        "st_encode": lambda: model.encode(flat, batch_size=32),
        "independent": lambda: late.encode_documents(docs, mode="independent"),
        "late": lambda: late.encode_documents(docs, mode="late"),
        "late_overlap0": lambda: late0.encode_documents(docs, mode="late"),
    }
    layouts = {
        "independent": late._layouts(docs, "independent"),
        "late": late._layouts(docs, "late"),
        "late_overlap0": late0._layouts(docs, "late"),
    }
    shape = {
        name: {
            "windows": sum(len(ws) for ws in lay),
            "tokens_per_chunk": sum(len(w.input_ids) for ws in lay for w in ws) / len(flat),
        }
        for name, lay in layouts.items()
    }
    for fn in passes.values():  # warm-up
        fn()
    runs: dict[str, list[float]] = {name: [] for name in passes}
    for _ in range(args.repeat):
        for name, fn in passes.items():
            runs[name].append(timed(fn))
    medians = {name: statistics.median(times) for name, times in runs.items()}
    rates = {name: len(flat) / seconds for name, seconds in medians.items()}
    result = {
        "when": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}",
        "torch": torch.__version__,
        "device": str(model.device),
        "threads": torch.get_num_threads(),
        "articles": len(docs),
        "chunks": len(flat),
        "max_length": late.max_length,
        "truncated_chunks": late.truncated_chunks,
        "median_s": medians,
        "chunks_per_s": rates,
        "ratio_late_vs_independent": rates["late"] / rates["independent"],
        "ratio_late_overlap0_vs_independent": rates["late_overlap0"] / rates["independent"],
        "ratio_late_vs_st_encode": rates["late"] / rates["st_encode"],
        "target_ratio": TARGET_RATIO,
        "layout": shape,
        "runs_s": runs,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "runs_s"}, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
