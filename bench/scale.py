"""How cost grows with the work (issue 13, part 4): curation and an LLM stage on 1×, 10×, 50× SQuAD v1.1 dev.

Corpus: ``../shared/data/squad-v1.1-dev.json.gz`` (48 articles, 10,570 questions; the benchmark says so and exits 0
when it is absent), replicated k times by ``bench/scale_corpus.py`` (copy i of an article titled
``"<title> (copy i)"``, question ids ``"<id>-copy-i"``, contexts and answers unchanged) into a temporary folder.

1. **Curation** (``bench/scale_curation.py``), for each k of ``--sizes`` (default 1,10,50), ``--repeat`` times,
   alternating: the real ``build_conteb`` job (``dagster job execute``, in-process executor, no LLM) and the
   same curation functions without Dagster (``bench/curation_overhead.py``'s ``curation_pass``), each a fresh
   process under ``/usr/bin/time -v``: wall seconds (process start-up included), the run's own seconds (Dagster:
   ``RUN_START`` -> ``RUN_SUCCESS`` in the event log; direct: the pass, imports excluded), peak RSS (MiB),
   documents/s and queries/s (source documents and queries over the run's own seconds). Linearity of size k:
   ``t_k / (k × t_1)`` with ``t_1`` the median 1× time of the same session (1.00 = linear; below 1: a fixed cost
   is spread over more work). Both paths must publish the same chunks and queries.
2. **An LLM stage** (``bench/scale_llm.py``): ``chunk_contexts`` (one request per chunk) on the
   ``--llm-copies`` × corpus (default 5: 11,790 requests) against the local test server with ``--latency``
   seconds per request (default 0.05), in process and on ``--workers`` Celery workers (when dagster-celery and
   redis-server are installed; else said and skipped): wall, the run's seconds, the stage's (its first step's
   start to its last step's end) and its shard steps' (first shard start to last shard end), requests/s over the
   shard steps, CPU seconds, peak RSS, the ledger's tokens, and whether both runs stored the same contexts.
   Bound: a client with no overhead takes ``requests × latency / max_concurrency`` per shard step running at
   once (one in process, ``--workers`` on Celery).

Usage (from the repository root)::

    .venv/bin/python bench/scale.py [--sizes 1,10,50] [--repeat 2] [--llm-copies 5] [--latency 0.05]
        [--max-concurrency 16] [--shard-documents 24] [--workers 2] [--skip-curation] [--skip-llm]
        [--skip-celery] [--keep DIR] [--json out.json]
"""

from __future__ import annotations

import sys
from pathlib import Path

# The repository root on sys.path: `import bench`, the project's packages, and tests.support (the test server and
# the Celery cluster helper live with the tests, outside the installed packages).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import tempfile
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.scale_corpus import count_questions, read_squad, replicate_squad, write_squad
from bench.scale_curation import DagsterCuration, DirectCuration, check_same, run_dagster, run_direct
from bench.scale_runs import ROOT, BenchError

SQUAD = ROOT.parent / "shared" / "data" / "squad-v1.1-dev.json.gz"


@dataclass
class SizeResult:
    """Every repetition of one corpus size k."""

    copies: int
    documents: int
    queries: int
    chunks: int
    corpus_mib: float
    direct: list[DirectCuration] = field(default_factory=list)
    dagster: list[DagsterCuration] = field(default_factory=list)

    def medians(self) -> dict[str, float]:
        """Median seconds / MiB over the repetitions."""
        med = statistics.median
        return {
            "dagster_wall_s": med(r.process.wall_s for r in self.dagster),
            "dagster_run_s": med(r.timing.run_s for r in self.dagster),
            "dagster_steps_s": med(sum(r.timing.steps_s.values()) for r in self.dagster),
            "dagster_rss_mib": med(r.process.peak_rss_mib for r in self.dagster),
            "dagster_cpu_s": med(r.process.cpu_s for r in self.dagster),
            "direct_wall_s": med(r.process.wall_s for r in self.direct),
            "direct_pass_s": med(r.pass_s for r in self.direct),
            "direct_rss_mib": med(r.process.peak_rss_mib for r in self.direct),
            "direct_cpu_s": med(r.process.cpu_s for r in self.direct),
        }

    def steps(self) -> dict[str, float]:
        """Median seconds per Dagster step (step keys without the task prefix)."""
        keys = self.dagster[0].timing.steps_s
        return {k.split("__", 1)[-1]: statistics.median(r.timing.steps_s[k] for r in self.dagster) for k in keys}


def replicate(source: Path, copies: int, folder: Path) -> tuple[Path, int, int]:
    """The ``copies``× corpus written as ``folder/squad-x<copies>.json.gz``: ``(path, articles, questions)``."""
    payload = replicate_squad(read_squad(source), copies)
    path = write_squad(payload, folder / f"squad-x{copies}.json.gz")
    return path, len(payload["data"]), count_questions(payload)


def load() -> float:
    return os.getloadavg()[0]


def bench_curation(sizes: list[int], repeat: int, folder: Path, log: list[str]) -> list[SizeResult]:
    """Every size, ``repeat`` times each, direct then Dagster (see the module docstring)."""
    results = []
    for copies in sizes:
        corpus, documents, queries = replicate(SQUAD, copies, folder / "corpora")
        size = SizeResult(copies, documents, queries, 0, corpus.stat().st_size / 2**20)
        for rep in range(repeat):
            work = folder / f"curation-x{copies}-{rep}"
            before = load()
            direct = run_direct(corpus, work / "direct")
            dagster = run_dagster(corpus, work / "dagster")
            check_same(direct, dagster, corpus)
            size.chunks = direct.counts["chunks"]
            size.direct.append(direct)
            size.dagster.append(dagster)
            line = (
                f"x{copies} rep {rep + 1}: direct {direct.process.wall_s:.1f} s wall ({direct.pass_s:.1f} s pass, "
                f"{direct.process.peak_rss_mib:.0f} MiB), dagster {dagster.process.wall_s:.1f} s wall "
                f"({dagster.timing.run_s:.1f} s run, {dagster.process.peak_rss_mib:.0f} MiB); "
                f"load {before:.2f} -> {load():.2f}"
            )
            log.append(line)
            print(line, flush=True)
        results.append(size)
    return results


def curation_table(results: list[SizeResult]) -> str:
    """The Markdown curation table against the smallest size's medians (1×).

    ``run / (k·run₁)``: the run's seconds over k times the 1× run's (1.00 = linear); ``Δ per copy``: what each copy
    beyond the first adds, ``(x_k - x_1) / (k - 1)`` for run seconds, CPU seconds and peak RSS (equal across sizes =
    linear with a fixed cost ``x_1 - Δ``).
    """
    base = results[0]
    b = base.medians()
    lines = [
        "| size | documents | queries | chunks | path | wall s | run s | CPU s | peak RSS MiB | run / (k·run₁) "
        "| Δ run s per copy | Δ CPU s per copy | Δ MiB per copy | docs/s | queries/s |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        m, k = r.medians(), r.copies / base.copies
        for path in ("dagster", "direct"):
            wall, rss, cpu = f"{path}_wall_s", f"{path}_rss_mib", f"{path}_cpu_s"
            run = "dagster_run_s" if path == "dagster" else "direct_pass_s"

            def delta(name: str, digits: int, m: dict[str, float] = m, k: float = k) -> str:
                return f"{(m[name] - b[name]) / (k - 1):.{digits}f}" if k > 1 else "–"

            lines.append(
                f"| {r.copies}× | {r.documents:,} | {r.queries:,} | {r.chunks:,} | {path} | {m[wall]:.1f} "
                f"| {m[run]:.2f} | {m[cpu]:.1f} | {m[rss]:,.0f} | {m[run] / (k * b[run]):.2f} | {delta(run, 2)} "
                f"| {delta(cpu, 2)} | {delta(rss, 1)} | {r.documents / m[run]:,.0f} | {r.queries / m[run]:,.0f} |"
            )
    return "\n".join(lines)


def steps_table(results: list[SizeResult]) -> str:
    """Median seconds of each Dagster step per size."""
    names = list(results[0].steps())
    lines = ["| step | " + " | ".join(f"{r.copies}×" for r in results) + " |", "|---|" + "---:|" * len(results)]
    for name in names:
        lines.append(f"| {name} | " + " | ".join(f"{r.steps().get(name, float('nan')):.2f}" for r in results) + " |")
    return "\n".join(lines)


def bench_llm(args: argparse.Namespace, folder: Path, log: list[str]) -> dict[str, Any]:
    """The LLM stage in process and (when possible) on Celery; the rows of its table and what was skipped."""
    from bench.scale_llm import CountingServer, LLMSetup, celery_missing, run_celery, run_in_process

    corpus, documents, queries = replicate(SQUAD, args.llm_copies, folder / "corpora")
    from conteb.config import ChunkingConfig
    from curation.chunking import chunk_documents
    from curation.sources.squad import load_squad_json

    chunks = chunk_documents(load_squad_json(corpus).documents_table(), ChunkingConfig()).chunks.num_rows
    setup = LLMSetup(args.max_concurrency, args.shard_documents, args.workers)
    missing = "skipped (--skip-celery)" if args.skip_celery else celery_missing()
    runs = []
    with CountingServer(args.latency) as server:
        for rep in range(args.llm_repeat):
            for executor in ("in_process", "celery"):
                if executor == "celery" and missing:
                    continue
                before = load()
                work = folder / f"llm-{executor}-{rep}"
                run = (run_in_process if executor == "in_process" else run_celery)(corpus, work, server, setup, chunks)
                runs.append(run)
                line = (
                    f"llm {executor} rep {rep + 1}: {run.requests:,} requests, wall {run.process.wall_s:.1f} s, "
                    f"stage {run.stage_s:.1f} s, shards {run.shards_s:.1f} s "
                    f"({run.requests / run.shards_s:.0f} req/s), {run.shard_steps} shard steps on "
                    f"{len(run.steps_by_pid)} process(es), rss {run.process.peak_rss_mib:.0f} MiB, "
                    f"CPU {run.client_cpu_s:.1f} s (server {run.server_cpu_s:.1f} s), "
                    f"workers {run.worker_peak_rss_mib}; load {before:.2f} -> {load():.2f}"
                )
                log.append(line)
                print(line, flush=True)
    digests = {run.contexts_digest for run in runs}
    return {
        "copies": args.llm_copies,
        "documents": documents,
        "queries": queries,
        "chunks": chunks,
        "setup": asdict(setup),
        "latency_s": args.latency,
        "celery": missing or "ran",
        "outputs_match": len(digests) == 1,
        "runs": runs,
    }


def llm_table(llm: dict[str, Any]) -> str:
    """The Markdown LLM-stage table."""
    setup, latency = llm["setup"], llm["latency_s"]
    lines = [
        "| executor | requests | shard steps | steps at once | wall s | run s | stage s | shards s | bound s "
        "| shards / bound | requests/s | client CPU s | server CPU s | run process peak RSS MiB "
        "| worker peak RSS MiB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in llm["runs"]:
        at_once = setup["workers"] if run.executor == "celery" else 1
        bound = run.requests * latency / setup["max_concurrency"] / at_once
        workers = ", ".join(f"{v:.0f}" for v in run.worker_peak_rss_mib.values()) or "–"
        lines.append(
            f"| {run.executor} | {run.requests:,} | {run.shard_steps} | {at_once} | {run.process.wall_s:.1f} "
            f"| {run.timing.run_s:.1f} | {run.stage_s:.1f} | {run.shards_s:.1f} | {bound:.1f} "
            f"| {run.shards_s / bound:.2f}× | {run.requests / run.shards_s:.0f} "
            f"| {run.client_cpu_s:.1f} | {run.server_cpu_s:.1f} | {run.process.peak_rss_mib:,.0f} | {workers} |"
        )
    lines += [
        "",
        "| executor | calls | prompt tokens | cached tokens | cached | completion tokens | USD (gpt-4o, ledger) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for run in llm["runs"]:
        u = run.usage
        share = u["cached_tokens"] / u["prompt_tokens"] if u["prompt_tokens"] else 0.0
        lines.append(
            f"| {run.executor} | {u['calls']:,} | {u['prompt_tokens']:,} | {u['cached_tokens']:,} | {share:.1%} "
            f"| {u['completion_tokens']:,} | {u['cost_usd']:.2f} |"
        )
    return "\n".join(lines)


def _jsonable(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return {k: _jsonable(v) for k, v in asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 also when the corpus is absent, 1 when a run failed its checks."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,10,50", help="corpus sizes (copies), smallest first (default 1,10,50)")
    parser.add_argument("--repeat", type=int, default=2, help="curation runs per size and path (default 2)")
    parser.add_argument("--llm-copies", type=int, default=5, help="corpus copies for the LLM stage (default 5)")
    parser.add_argument("--llm-repeat", type=int, default=1, help="runs per executor of the LLM stage (default 1)")
    parser.add_argument("--latency", type=float, default=0.05, help="server seconds per request (default 0.05)")
    parser.add_argument("--max-concurrency", type=int, default=16, help="llm.max_concurrency (default 16)")
    parser.add_argument("--shard-documents", type=int, default=24, help="execution.shard_documents (default 24)")
    parser.add_argument("--workers", type=int, default=2, help="Celery workers (default 2)")
    parser.add_argument("--skip-curation", action="store_true")
    parser.add_argument("--skip-llm", action="store_true")
    parser.add_argument("--skip-celery", action="store_true")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if sizes != sorted(sizes) or sizes[0] < 1 or args.repeat < 1 or args.llm_repeat < 1:
        parser.error("--sizes must be increasing and >= 1; --repeat and --llm-repeat >= 1")
    if not SQUAD.is_file():
        print(f"SQuAD v1.1 dev not available: {SQUAD} is missing (see shared/data/MANIFEST.md); nothing measured")
        return 0

    started = dt.datetime.now(dt.UTC)
    print(f"{platform.python_version()} on {platform.platform()}, {os.cpu_count()} CPUs, load {load():.2f}, {started}")
    log: list[str] = []
    payload: dict[str, Any] = {"benchmark": "scale", "date": started.isoformat(timespec="seconds"),
                               "cpus": os.cpu_count(), "args": {k: str(v) for k, v in vars(args).items()}}  # fmt: skip
    out: list[str] = []
    holder = tempfile.TemporaryDirectory(prefix="conteb-scale-") if args.keep is None else None
    folder = Path(holder.name) if holder else args.keep
    folder.mkdir(parents=True, exist_ok=True)
    try:
        if not args.skip_curation:
            results = bench_curation(sizes, args.repeat, folder, log)
            out += ["", curation_table(results), "", "Dagster steps (median s):", "", steps_table(results)]
            payload["curation"] = [
                {**_jsonable({k: v for k, v in asdict(r).items() if k not in ("direct", "dagster")}),
                 "medians": r.medians(), "steps": r.steps(),
                 "direct": _jsonable(r.direct), "dagster": _jsonable(r.dagster)}
                for r in results
            ]  # fmt: skip
        if not args.skip_llm:
            llm = bench_llm(args, folder, log)
            out += ["", llm_table(llm), "", f"Celery: {llm['celery']}; outputs match: {llm['outputs_match']}"]
            payload["llm"] = _jsonable({k: v for k, v in llm.items()})
    except BenchError as error:
        print(f"FAILED: {error}", file=sys.stderr)
        return 1
    finally:
        if holder:
            holder.cleanup()
    ended = dt.datetime.now(dt.UTC)
    payload.update({"ended": ended.isoformat(timespec="seconds"), "log": log})
    print("\n".join(out))
    print(f"\n{(ended - started).total_seconds() / 60:.1f} min, load after {load():.2f}")
    if args.json:
        args.json.write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0 if payload.get("llm", {}).get("outputs_match", True) else 1


if __name__ == "__main__":
    sys.exit(main())
