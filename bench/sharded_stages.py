"""Sharded LLM stages: peak memory and wall time of ``build_conteb`` with an LLM stage over ~1,000 documents.

Corpus: SQuAD v1.1 dev (``../shared/data/squad-v1.1-dev.json.gz``, 48 articles) replicated ``--copies`` times
(21: 1,008 documents), each copy's titles suffixed so that every document id is distinct, without its questions (with
them, the source, span pairing and publishing of 222k questions set the build's peak memory and hide the LLM stage's).
One task, ``chunk_contexts: true`` (one LLM request per chunk, showing its document cut to a 20,000-character window),
``answerability: false``, chunks of ``--chunk-size`` characters (4,000: a quarter of the requests of the default
1,000 — each costs time of its own, mostly the answer store's two commits — with the same 20,000-character windows,
which are most of a request's memory); span pairing and the published folder run as usual.

Variants, each a fresh ``dagster job execute -m pipelines.definitions -j build_conteb`` (one task: the in-process
executor) under ``/usr/bin/time -v``, with a fresh data folder (no cached answer) and ``DAGSTER_HOME``:

- ``sharded``: ``execution.shard_documents: --shard-documents`` (50);
- ``one``: one shard holding the whole corpus (``shard_documents`` = the number of documents);
- ``today``: ``--baseline-tree DIR``, a copy of the code before sharding (the stage as one multi-asset asking every
  request in one step; e.g. ``git worktree add /tmp/conteb-before <commit before sharding>``), same registry without
  its ``execution`` block. (The recorded figures used this working tree with ``assets/contexts.py`` and the
  ``llm_stage_outputs`` helper as they were before sharding, so that everything else — the LLM client included —
  is the same code.)

The local OpenAI-compatible server (``tests/support/openai_server.py``, latency 0, requests not recorded) runs in
a thread of this process, so its memory and CPU are outside the measured process. Measured: the peak resident set
size of the ``dagster`` process (``Maximum resident set size``), the job's wall time, and the stage's own span
(first step start to last step end of ``<task>__chunk_contexts``, from the run's step stats). Ratios: RSS
``sharded / one``; wall ``sharded / today`` and ``one / today``. Every run is checked: the job succeeded, the
chunk_contexts table has one row per chunk and the server answered exactly one request per chunk.

Usage (from the repository root)::

    python bench/sharded_stages.py --baseline-tree /tmp/conteb-before [--copies 21] [--shard-documents 50]
        [--chunk-size 4000] [--variants sharded,one,today] [--json out.json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.support (the local server lives with the tests)

from tests.support.openai_server import OpenAICompatibleServer  # noqa: E402

SQUAD = ROOT.parent / "shared" / "data" / "squad-v1.1-dev.json.gz"
TASK = "bench"


def replicated_squad(source: Path, copies: int, target: Path) -> int:
    """Write ``copies`` copies of the SQuAD file ``source``'s articles, without questions, as one SQuAD file;
    returns the number of articles."""
    with gzip.open(source, "rt", encoding="utf-8") as handle:
        data = json.load(handle)["data"]
    articles = []
    for copy in range(copies):
        for article in data:
            paragraphs = [{"context": p["context"], "qas": []} for p in article["paragraphs"]]
            articles.append({"title": f"{article['title']} copy {copy}", "paragraphs": paragraphs})
    target.write_text(json.dumps({"version": "1.1", "data": articles}), encoding="utf-8")
    return len(articles)


def registry(folder: Path, corpus: Path, base_url: str, shard_documents: int | None, chunk_size: int) -> Path:
    execution = f"execution: {{shard_documents: {shard_documents}}}\n" if shard_documents else ""
    path = folder / "conteb.yaml"
    path.write_text(
        f"llm: {{base_url: {base_url}, max_concurrency: 32}}\n{execution}"
        f"tasks:\n  - name: {TASK}\n    source: {{kind: squad_json, path: {corpus}}}\n"
        f"    chunking: {{chunk_size: {chunk_size}, chunk_overlap: 0}}\n"
        "    chunk_contexts: true\n    answerability: false\n"
    )
    return path


def answer(body: dict[str, Any]) -> dict[str, Any]:
    return {"context": "A passage from a SQuAD article, situated in the article's subject."}


class Counter:
    """Counts the server's chat requests instead of recording them (a run sends tens of MB of prompts)."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def __call__(self, request: Any) -> None:
        with self._lock:
            self.count += 1


def stage_span(dagster_home: Path, stage: str) -> tuple[float, int]:
    """Seconds from the first step start to the last step end of ``stage``'s steps, and their number."""
    os.environ["DAGSTER_HOME"] = str(dagster_home)
    import dagster as dg

    with dg.DagsterInstance.get() as instance:
        [run] = instance.get_runs(limit=1)
        stats = [s for s in instance.get_run_step_stats(run.run_id) if s.step_key.split(".")[0] == stage]
    return max(s.end_time for s in stats) - min(s.start_time for s in stats), len(stats)


def run_variant(tree: Path, config: Path, work: Path, chunks_expected: int | None) -> dict[str, Any]:
    """One ``dagster job execute`` under ``/usr/bin/time -v``; peak RSS, wall, stage span, checks."""
    data, home = work / "data", work / "dagster-home"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {**os.environ, "CONTEB_CONFIG": str(config), "CONTEB_DATA_DIR": str(data), "DAGSTER_HOME": str(home),
           "OPENAI_API_KEY": "sk-bench", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}  # fmt: skip
    dagster = Path(sys.executable).parent / "dagster"
    job = ["job", "execute", "-m", "pipelines.definitions", "-j", "build_conteb"]
    command = ["/usr/bin/time", "-v", str(dagster), *job]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{tree}: build_conteb failed:\n{done.stderr[-4000:]}")
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1))
    import pyarrow.parquet as pq

    rows = pq.read_table(data / "stages" / TASK / "chunk_contexts.parquet").num_rows
    chunks = pq.read_table(data / "stages" / TASK / "chunks.parquet").num_rows
    if rows != chunks or (chunks_expected is not None and chunks != chunks_expected):
        raise SystemExit(f"{tree}: {rows} contexts for {chunks} chunks")
    span, steps = stage_span(home, f"{TASK}__chunk_contexts")
    return {"peak_rss_mib": round(rss_kb / 1024, 1), "wall_s": round(wall, 1), "stage_s": round(span, 1),
            "stage_steps": steps, "chunks": chunks}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=21, help="copies of SQuAD v1.1 dev (48 articles each)")
    parser.add_argument("--shard-documents", type=int, default=50)
    parser.add_argument("--chunk-size", type=int, default=4000, help="characters per chunk (requests = chunks)")
    parser.add_argument("--variants", default="sharded,one,today")
    parser.add_argument("--baseline-tree", type=Path, help="a copy of the code before sharding (for 'today')")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    variants = args.variants.split(",")
    if "today" in variants and not args.baseline_tree:
        parser.error("the 'today' variant needs --baseline-tree")
    results: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "variants": {}}
    with tempfile.TemporaryDirectory(prefix="conteb-bench-shards-") as tmp:
        root = Path(tmp)
        corpus = root / "squad-replicated.json"
        documents = replicated_squad(SQUAD, args.copies, corpus)
        results["documents"] = documents
        counter = Counter()
        with OpenAICompatibleServer(answer) as server:
            server._record = counter  # count, do not keep the bodies
            chunks = None
            for variant in variants:
                work = root / variant
                work.mkdir()
                size = {"sharded": args.shard_documents, "one": documents, "today": None}[variant]
                tree = args.baseline_tree.resolve() if variant == "today" else ROOT
                before = counter.count
                config = registry(work, corpus, server.url, size, args.chunk_size)
                row = run_variant(tree, config, work, chunks)
                chunks = row["chunks"]
                if counter.count - before != chunks:
                    raise SystemExit(
                        f"{variant}: the server answered {counter.count - before} requests, {chunks} chunks"
                    )
                results["variants"][variant] = row
                print(f"{variant}: {row}", flush=True)
    found = results["variants"]
    ratios = {}
    if {"sharded", "one"} <= found.keys():
        ratios["rss_sharded_over_one"] = round(found["sharded"]["peak_rss_mib"] / found["one"]["peak_rss_mib"], 3)
    if "today" in found:
        for variant in ("sharded", "one"):
            if variant in found:
                ratios[f"wall_{variant}_over_today"] = round(found[variant]["wall_s"] / found["today"]["wall_s"], 3)
                ratios[f"stage_{variant}_over_today"] = round(found[variant]["stage_s"] / found["today"]["stage_s"], 3)
    results["ratios"] = ratios
    print(json.dumps(ratios))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
