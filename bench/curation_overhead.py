"""Curation overhead: our curation path against LangChain's splitter alone, on real corpora.

For each corpus in ``../shared/data`` (relative to the repository root) this times:

* **baseline**: ``splitter.split_text(text)`` over every document text our loader builds (texts
  already in memory, splitter built once with ``ChunkingConfig()`` defaults);
* **curation**: what a Dagster run does for one task, from the ``.gz`` file to the published
  folder, in four steps: ``load`` (``load_squad_json`` and its three tables), ``chunk``
  (``chunk_documents``), ``pair`` (``pair_by_span``) and ``write`` (the seven stage tables with
  ``write_parquet_atomic`` as the stage IO manager stores them, then ``conteb_documents`` and
  ``write_conteb_dataset`` into a temporary folder).

Each is the median of ``--repeat`` timed repetitions after one warm-up (``time.perf_counter``);
within a repetition the baseline runs right before curation, so that load from other processes
falls on both.
Peak Python memory (``tracemalloc``) comes from one extra, untimed pass of each. ``--profile``
adds a cProfile of one curation pass per corpus.

Usage (from the repository root)::

    python bench/curation_overhead.py [--repeat N] [--json out.json] [--profile]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `import curation` without installing the package

import argparse
import cProfile
import datetime as dt
import gc
import io
import json
import os
import platform
import pstats
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import pyarrow as pa
from langchain_text_splitters import RecursiveCharacterTextSplitter
from tqdm import tqdm

from conteb.config import ChunkingConfig, SquadJsonSource, TaskConfig
from conteb.storage import write_parquet_atomic
from curation.chunking import chunk_documents, make_splitter
from curation.dataset import publish_task
from curation.pairing import pair_by_span
from curation.quarantine import quarantine_table
from curation.sources.squad import load_squad_json

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
CORPORA = {
    "squad-v1.1-dev": "squad-v1.1-dev.json.gz",
    "covidqa": "covidqa-2020-04-23.json.gz",
}
STEPS = ("load", "chunk", "pair", "write")
# What a squad_json task of conteb.yaml would be; the path is set per corpus.
BENCH_TASK = TaskConfig(name="bench", source=SquadJsonSource(kind="squad_json", path=Path("unset")))
TARGET_RATIO = 1.5
MIB = 1024 * 1024


@dataclass
class PassCounts:
    """What one curation pass produced."""

    documents: int
    queries: int
    chunks: int
    paired: int
    quarantined: int


@dataclass
class CorpusResult:
    """Timings (seconds) and memory (bytes) of one corpus; lists hold every timed repetition."""

    corpus: str
    path: str
    counts: PassCounts
    baseline_chunks: int
    baseline_runs: list[float] = field(default_factory=list)
    curation_runs: list[float] = field(default_factory=list)
    step_runs: dict[str, list[float]] = field(default_factory=lambda: {step: [] for step in STEPS})
    baseline_peak_bytes: int = 0
    curation_peak_bytes: int = 0

    @property
    def baseline_s(self) -> float:
        return statistics.median(self.baseline_runs)

    @property
    def curation_s(self) -> float:
        return statistics.median(self.curation_runs)

    @property
    def ratio(self) -> float:
        return self.curation_s / self.baseline_s

    def step_s(self, step: str) -> float:
        return statistics.median(self.step_runs[step])

    def summary(self) -> dict:
        """JSON-ready medians, rates and raw repetitions."""
        return {
            "corpus": self.corpus,
            "path": self.path,
            "counts": asdict(self.counts),
            "baseline_chunks": self.baseline_chunks,
            "baseline_s": self.baseline_s,
            "curation_s": self.curation_s,
            "ratio": self.ratio,
            "target_ratio": TARGET_RATIO,
            "documents_per_s": self.counts.documents / self.curation_s,
            "queries_per_s": self.counts.queries / self.curation_s,
            "steps_s": {step: self.step_s(step) for step in STEPS},
            "baseline_peak_mib": self.baseline_peak_bytes / MIB,
            "curation_peak_mib": self.curation_peak_bytes / MIB,
            "runs": {"baseline_s": self.baseline_runs, "curation_s": self.curation_runs, "steps_s": self.step_runs},
        }


def baseline_pass(splitter: RecursiveCharacterTextSplitter, texts: list[str]) -> int:
    """Split every text with LangChain alone; returns the number of chunks."""
    return sum(len(splitter.split_text(text)) for text in texts)


def curation_pass(path: Path, out_root: Path, config: ChunkingConfig) -> tuple[dict[str, float], PassCounts]:
    """One task's curation from ``path`` to ``out_root``: per-step seconds and counts."""
    times: dict[str, float] = {}
    clock = time.perf_counter

    start = clock()
    source = load_squad_json(path)
    documents, queries, source_quarantine = source.documents_table(), source.queries_table(), source.quarantine_table()
    times["load"] = clock() - start

    start = clock()
    chunking = chunk_documents(documents, config)
    chunks, chunk_quarantine = chunking.chunks, quarantine_table(chunking.quarantine)
    times["chunk"] = clock() - start

    start = clock()
    pairing = pair_by_span(queries, documents, chunks)
    paired, pairing_quarantine = pairing.table(), quarantine_table(pairing.quarantine)
    times["pair"] = clock() - start

    start = clock()
    stages = out_root / "stages" / "bench"
    stage_tables: dict[str, pa.Table] = {  # what StageTableIOManager stores, one file per asset
        "source_documents": documents,
        "source_queries": queries,
        "source_quarantine": source_quarantine,
        "chunks": chunks,
        "chunk_quarantine": chunk_quarantine,
        "paired_queries": paired,
        "pairing_quarantine": pairing_quarantine,
    }
    for name, table in stage_tables.items():
        write_parquet_atomic(table, stages / f"{name}.parquet")
    published = publish_task(
        out_root / "conteb" / "bench",
        BENCH_TASK.model_copy(update={"source": SquadJsonSource(kind="squad_json", path=path)}),
        str(path),
        chunks,
        paired,
        {"source": source_quarantine, "chunking": chunk_quarantine, "pairing": pairing_quarantine},
    )
    times["write"] = clock() - start

    return times, PassCounts(
        documents=documents.num_rows,
        queries=queries.num_rows,
        chunks=chunks.num_rows,
        paired=paired.num_rows,
        quarantined=published.counts["quarantined rows"],
    )


def timed_curation(path: Path, config: ChunkingConfig) -> tuple[float, dict[str, float], PassCounts]:
    """Total seconds, step seconds and counts of one curation pass into a fresh temporary folder."""
    with tempfile.TemporaryDirectory(prefix="conteb-bench-") as tmp:
        start = time.perf_counter()
        steps, counts = curation_pass(path, Path(tmp), config)
        total = time.perf_counter() - start
    return total, steps, counts


def peak_memory(run: Callable[[], object]) -> int:
    """Peak bytes traced by ``tracemalloc`` while ``run()`` executes (Python allocations only)."""
    gc.collect()
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def bench_corpus(name: str, path: Path, repeat: int) -> CorpusResult:
    """Baseline and curation timings of one corpus (one warm-up each, then ``repeat`` runs)."""
    config = ChunkingConfig()
    texts = [document.text for document in load_squad_json(path).documents]
    splitter = make_splitter(config)
    baseline_chunks = baseline_pass(splitter, texts)  # warm-up of the baseline
    _, _, counts = timed_curation(path, config)  # warm-up of curation (imports, caches, page cache)
    result = CorpusResult(name, str(path), counts, baseline_chunks)

    # Baseline and curation alternate within each repetition, so that a burst of load from other
    # processes hits both sides rather than skewing the ratio.
    for _ in tqdm(range(repeat), desc=name, unit="rep", leave=False):
        gc.collect()
        start = time.perf_counter()
        baseline_pass(splitter, texts)
        result.baseline_runs.append(time.perf_counter() - start)
        gc.collect()
        total, steps, _ = timed_curation(path, config)
        result.curation_runs.append(total)
        for step in STEPS:
            result.step_runs[step].append(steps[step])

    result.baseline_peak_bytes = peak_memory(lambda: baseline_pass(splitter, texts))
    result.curation_peak_bytes = peak_memory(lambda: timed_curation(path, config))
    return result


def profile_corpus(path: Path, limit: int = 25) -> str:
    """cProfile of one curation pass: the ``limit`` functions with the most cumulative time."""
    config = ChunkingConfig()
    profiler = cProfile.Profile()
    with tempfile.TemporaryDirectory(prefix="conteb-bench-") as tmp:
        profiler.runcall(curation_pass, path, Path(tmp), config)
    buffer = io.StringIO()
    pstats.Stats(profiler, stream=buffer).strip_dirs().sort_stats("cumulative").print_stats(limit)
    buffer.write("\n--- by own time ---\n")
    pstats.Stats(profiler, stream=buffer).strip_dirs().sort_stats("tottime").print_stats(limit)
    return buffer.getvalue()


def machine() -> dict[str, object]:
    """Where the numbers come from."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "pyarrow": pa.__version__,
    }


def render(results: list[CorpusResult], repeat: int) -> str:
    """Readable tables: results, the per-step breakdown, then the spread of the repetitions."""
    header = (
        f"{'corpus':<16}{'docs':>6}{'queries':>9}{'chunks':>8}{'baseline s':>12}{'curation s':>12}"
        f"{'ratio':>8}{'docs/s':>9}{'queries/s':>11}{'peak MiB base':>15}{'peak MiB cur':>14}"
    )
    lines = [f"median of {repeat} repetitions after 1 warm-up; target ratio <= {TARGET_RATIO}x", "", header]
    for r in results:
        lines.append(
            f"{r.corpus:<16}{r.counts.documents:>6,}{r.counts.queries:>9,}{r.counts.chunks:>8,}"
            f"{r.baseline_s:>12.4f}{r.curation_s:>12.4f}{r.ratio:>7.2f}x"
            f"{r.counts.documents / r.curation_s:>9,.0f}{r.counts.queries / r.curation_s:>11,.0f}"
            f"{r.baseline_peak_bytes / MIB:>15.1f}{r.curation_peak_bytes / MIB:>14.1f}"
        )
    lines += ["", f"{'corpus':<16}" + "".join(f"{step + ' s':>14}" for step in STEPS) + f"{'sum s':>10}"]
    for r in results:
        total = sum(r.step_s(step) for step in STEPS)
        cells = "".join(f"{r.step_s(step):>7.4f} ({r.step_s(step) / total:>3.0%})" for step in STEPS)
        lines.append(f"{r.corpus:<16}{cells}{total:>10.4f}")
    lines += ["", "spread over the repetitions (min-max s):"]
    for r in results:
        lines.append(
            f"{r.corpus:<16}baseline {min(r.baseline_runs):.4f}-{max(r.baseline_runs):.4f}, "
            f"curation {min(r.curation_runs):.4f}-{max(r.curation_runs):.4f}"
        )
    over = [r.corpus for r in results if r.ratio > TARGET_RATIO]
    lines += ["", f"above {TARGET_RATIO}x: {', '.join(over)}" if over else f"all corpora within {TARGET_RATIO}x"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit 0 (also when the corpora are absent)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed repetitions per measure (default 5)")
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of one curation pass per corpus")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    if not SHARED_DATA.is_dir():
        print(f"real corpora not available: {SHARED_DATA} is missing (see shared/data/MANIFEST.md); nothing measured")
        return 0
    corpora = {name: SHARED_DATA / file for name, file in CORPORA.items()}
    for name, path in list(corpora.items()):
        if not path.is_file():
            print(f"skipping {name}: {path} is missing")
            del corpora[name]
    if not corpora:
        print("no corpus found; nothing measured")
        return 0

    info = machine()
    print(f"python {info['python']} on {info['platform']}, {info['cpus']} CPUs, {info['date']}")
    results = [bench_corpus(name, path, args.repeat) for name, path in corpora.items()]
    print(render(results, args.repeat))

    if args.profile:
        for name, path in corpora.items():
            print(f"\n=== cProfile of one curation pass: {name} ===\n{profile_corpus(path)}")
    if args.json:
        payload = {"machine": info, "repeat": args.repeat, "warmup": 1, "results": [r.summary() for r in results]}
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
