"""Curation at scale (``bench/scale.py``): the real ``build_conteb`` job and the same curation without Dagster.

Both run one SQuAD-format corpus file (a k× replica, ``bench/scale_corpus.py``) in a fresh process under
``/usr/bin/time -v`` (``bench/scale_runs.py``), so wall time and peak RSS are measured the same way:

* **dagster**: ``dagster job execute -m pipelines.definitions -j build_conteb`` with a registry of one task
  (``squad_json`` source = the corpus, split ``validation``, 1000-character chunks, span pairing, no LLM stage,
  ``answerability: false``) and ``execution.executor: in_process``; ``CONTEB_CONFIG``, ``CONTEB_DATA_DIR`` and
  ``DAGSTER_HOME`` are fresh folders, ``OPENAI_*`` unset. Read back: the run's duration and each step's from the
  event log, and the published row counts (``documents``/``queries`` Parquet of the ConTEB folder).
* **direct**: ``python bench/scale_curation.py direct CORPUS OUT JSON``: one pass of
  ``bench/curation_overhead.py``'s ``curation_pass`` (load, chunk, pair, write the seven stage tables and the
  published folder; the curation functions a run calls, without Dagster), its step seconds and counts written to
  ``JSON``.

A run whose exit status is not 0, or whose published chunks/queries differ from the direct pass's, raises
:class:`~bench.scale_runs.BenchError`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `import bench`, `import curation` from a checkout

import json
import time
from dataclasses import asdict, dataclass
from typing import Any

from bench.scale_runs import (
    BenchError,
    ProcessMeasure,
    RunTiming,
    clean_env,
    dagster_home,
    registry_text,
    run_timing,
    tail,
    timed_process,
)

TASK = "squad-scale"
SPLIT = "validation"


def curation_registry(corpus: Path) -> dict[str, Any]:
    """The registry of the measured ``build_conteb`` run (see the module docstring)."""
    return {
        "llm": {"base_url": None},
        "execution": {"executor": "in_process"},
        "tasks": [
            {
                "name": TASK,
                "source": {"kind": "squad_json", "path": str(corpus)},
                "split": SPLIT,
                "chunking": {"chunk_size": 1000, "chunk_overlap": 0},
                "pairing": "span",
                "answerability": False,
            }
        ],
    }


@dataclass
class DirectCuration:
    """One direct pass: process measure, the pass's own seconds (no start-up), step seconds, counts."""

    process: ProcessMeasure
    pass_s: float
    steps_s: dict[str, float]
    counts: dict[str, int]


@dataclass
class DagsterCuration:
    """One ``build_conteb`` run: process measure, the run's event-log timing, published counts."""

    process: ProcessMeasure
    timing: RunTiming
    published: dict[str, int]


def published_counts(data_dir: Path) -> dict[str, int]:
    """Rows of the published ``documents`` (chunks) and ``queries`` tables of :data:`TASK`."""
    import pyarrow.parquet as pq

    folder = data_dir / "conteb" / TASK
    out = {}
    for config, name in (("documents", "chunks"), ("queries", "queries")):
        files = sorted((folder / config).glob(f"{SPLIT}-*.parquet"))
        if not files:
            raise BenchError(f"{folder / config}: no {SPLIT} Parquet file published")
        out[name] = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    return out


def run_direct(corpus: Path, work: Path) -> DirectCuration:
    """The direct pass of ``corpus`` in a fresh process, output under ``work``."""
    work.mkdir(parents=True, exist_ok=True)
    result = work / "direct.json"
    command = [sys.executable, str(Path(__file__).resolve()), "direct", str(corpus), str(work / "out"), str(result)]
    process = timed_process(command, clean_env(), work / "direct.log")
    if process.returncode != 0:
        raise BenchError(f"direct curation of {corpus} exited {process.returncode}:\n{tail(process.log)}")
    payload = json.loads(result.read_text())
    return DirectCuration(process, payload["pass_s"], payload["steps_s"], payload["counts"])


def run_dagster(corpus: Path, work: Path) -> DagsterCuration:
    """``build_conteb`` on ``corpus`` in a fresh process, registry, data folder and Dagster home under ``work``."""
    work.mkdir(parents=True, exist_ok=True)
    registry = work / "conteb.yaml"
    registry.write_text(registry_text(curation_registry(corpus)), encoding="utf-8")
    home, data = dagster_home(work / "dagster-home"), work / "data"
    env = clean_env(CONTEB_CONFIG=str(registry), CONTEB_DATA_DIR=str(data), DAGSTER_HOME=str(home))
    command = [str(Path(sys.executable).parent / "dagster"), "job", "execute", "-m", "pipelines.definitions"]
    process = timed_process([*command, "-j", "build_conteb"], env, work / "dagster.log")
    if process.returncode != 0:
        raise BenchError(f"build_conteb on {corpus} exited {process.returncode}:\n{tail(process.log)}")
    return DagsterCuration(process, run_timing(home), published_counts(data))


def check_same(direct: DirectCuration, dagster: DagsterCuration, corpus: Path) -> None:
    """Both paths published the same number of chunks and queries (else :class:`BenchError`)."""
    want = {"chunks": direct.counts["chunks"], "queries": direct.counts["paired"]}
    if dagster.published != want:
        raise BenchError(f"{corpus}: build_conteb published {dagster.published}, the direct pass {want}")


def _direct_main(corpus: Path, out: Path, result: Path) -> int:
    """``direct`` mode: one timed ``curation_pass`` into ``out``; seconds and counts to ``result``."""
    from bench.curation_overhead import curation_pass
    from conteb.config import ChunkingConfig

    start = time.perf_counter()
    steps, counts = curation_pass(corpus, out, ChunkingConfig())
    pass_s = time.perf_counter() - start
    result.write_text(json.dumps({"pass_s": pass_s, "steps_s": steps, "counts": asdict(counts)}), encoding="utf-8")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] != "direct":
        sys.exit(f"usage: {sys.argv[0]} direct CORPUS OUT_FOLDER RESULT_JSON (called by bench/scale.py)")
    sys.exit(_direct_main(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])))
