"""Scoring speed: ``dense_scorer`` + ``rank_corpus`` against a plain NumPy matrix product of the same size.

Data (seeded, ``--seed``): ``--queries`` query and ``--chunks`` chunk vectors of ``--dim`` dimensions, standard
normal float32 normalised to unit length; documents of 1 to ``2 * --chunks-per-doc - 1`` chunks (uniform),
contiguous in corpus order; one random gold chunk per query; ids ``c0000001``-style.

Timed cases, each in its own subprocess so that its peak RSS (``resource.getrusage(RUSAGE_SELF).ru_maxrss``) is
its own; the data are generated first, untimed, and the RSS after generation is reported so that the extra
memory of each case can be read off:

* ``product``: ``q @ c.T`` in one go (a ``Q x C`` float32 matrix: 4 GB at 10k x 100k);
* ``block_matmul``: the same product ``--block`` queries at a time into one reused ``[block, C]`` buffer, and
  nothing else (the floor of any block-wise ranking);
* ``rank``: ``rank_corpus(dense_scorer(q, c), ..., top_k=--top-k, block=--block)``: gold ranks, top-k in trec
  order, document ranks;
* ``rank_subsets``: the same plus the corpus-size scaling subsets of the pipeline
  (``sample_subsets(D, scaling_sizes(D, 8), repeats=5)``: 36 subsets at D ~ 10k);
* ``rank_callable``: ``rank`` with a plain ``lambda rows: q[rows] @ c.T`` scorer: no reused buffer and no
  position-major layout (document maxima by ``np.maximum.reduceat``), what any other scorer gets.

Each time is the minimum of ``--repeat`` runs (``time.perf_counter``), one per subprocess, the cases interleaved
(all cases, then all again, ...) so that load from other processes on a shared machine falls on every case
alike; peak RSS is the largest of the runs. Ratio = case time /
``product`` time (target <= 2 for ``rank``). A few gold ranks of each ``rank*`` case are checked against a direct
count after timing (:func:`check_gold_ranks`).

Usage (from the repository root)::

    python bench/scoring_speed.py [--queries 10000] [--chunks 100000] [--dim 384] [--json out.json]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `import evaluation` without installing the package

import argparse
import datetime as dt
import json
import os
import platform
import resource
import subprocess
import time

import numpy as np

from evaluation.metrics.views import sample_subsets, scaling_sizes
from evaluation.systems.ranking import dense_scorer, rank_corpus

CASES = ("product", "block_matmul", "rank", "rank_subsets", "rank_callable")
TARGET_RATIO = 2.0


def _peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def make_data(args: argparse.Namespace) -> dict:
    """Seeded vectors, document structure and gold chunks (see the module docstring)."""
    rng = np.random.default_rng(args.seed)
    queries = rng.standard_normal((args.queries, args.dim), dtype=np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    chunks = rng.standard_normal((args.chunks, args.dim), dtype=np.float32)
    chunks /= np.linalg.norm(chunks, axis=1, keepdims=True)
    lengths = rng.integers(1, 2 * args.chunks_per_doc, size=args.chunks)
    n_docs = int(np.searchsorted(np.cumsum(lengths), args.chunks)) + 1
    chunk_doc = np.repeat(np.arange(n_docs), lengths[:n_docs])[: args.chunks]
    return {
        "queries": queries,
        "chunks": chunks,
        "chunk_doc": chunk_doc,
        "chunk_ids": [f"c{i:07d}" for i in range(args.chunks)],
        "doc_ids": [f"d{i:06d}" for i in range(n_docs)],
        "gold": rng.integers(0, args.chunks, size=args.queries),
    }


def run_case(case: str, args: argparse.Namespace) -> dict:
    """Time one case in this process; returns seconds (min over repeats), all times and RSS figures."""
    data = make_data(args)
    q, c = data["queries"], data["chunks"]
    rss_data = _peak_rss_gib()
    subsets = None
    if case == "rank_subsets":
        n_docs = len(data["doc_ids"])
        subsets, _ = sample_subsets(n_docs, scaling_sizes(n_docs, 8), repeats=5, seed=args.seed)
    times, result = [], None
    for _ in range(args.repeat):
        result = None
        start = time.perf_counter()
        if case == "product":
            result = q @ c.T
        elif case == "block_matmul":
            buffer = np.empty((min(args.block, len(q)), len(c)), dtype=np.float32)
            for s in range(0, len(q), args.block):
                np.matmul(q[s : s + args.block], c.T, out=buffer[: min(args.block, len(q) - s)])
        else:
            scorer = dense_scorer(q, c) if case != "rank_callable" else (lambda rows: q[rows] @ c.T)
            result = rank_corpus(
                scorer,
                len(q),
                data["chunk_ids"],
                data["gold"],
                data["chunk_doc"],
                data["doc_ids"],
                top_k=args.top_k,
                block=args.block,
                subsets=subsets,
            )
        times.append(time.perf_counter() - start)
    record = {
        "case": case,
        "seconds": min(times),
        "times": times,
        "peak_rss_gib": _peak_rss_gib(),
        "rss_after_data_gib": rss_data,
        "subsets": 0 if subsets is None else len(subsets),
        "documents": len(data["doc_ids"]),
    }
    if case.startswith("rank"):
        record["checked_gold_ranks"] = check_gold_ranks(result, data, args.seed)
    return record


def check_gold_ranks(ranking, data: dict, seed: int, n: int = 16, eps: float = 1e-5) -> int:
    """Check the gold rank of ``n`` random queries against a direct count with a matrix-vector product.

    The product is not bit-identical to the blocked one (another accumulation order), so the check is
    ``1 + #{s > s_gold + eps} <= rank <= 1 + #{s >= s_gold - eps}``; raises on a violation.
    """
    rows = np.random.default_rng(seed + 1).choice(len(data["gold"]), size=min(n, len(data["gold"])), replace=False)
    for row in rows:
        scores = data["chunks"] @ data["queries"][row]
        gold_score = scores[data["gold"][row]]
        low = 1 + np.count_nonzero(scores > gold_score + eps)
        high = 1 + np.count_nonzero(scores >= gold_score - eps)
        if not low <= ranking.gold_rank[row] <= high:
            raise AssertionError(f"query {row}: gold rank {ranking.gold_rank[row]} outside [{low}, {high}]")
    return len(rows)


def markdown(records: list[dict], args: argparse.Namespace) -> str:
    product = next(r["seconds"] for r in records if r["case"] == "product")
    blocks = next(r["seconds"] for r in records if r["case"] == "block_matmul")
    lines = [
        f"{args.queries:,} queries x {args.chunks:,} chunks x {args.dim} dims, block {args.block}, top_k {args.top_k}, "
        f"{records[0]['documents']:,} documents",
        "",
        "| case | seconds | / plain product | / block matmul | peak RSS (GiB) | RSS after data (GiB) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in records:
        name = r["case"] + (f" ({r['subsets']} subsets)" if r["subsets"] else "")
        lines.append(
            f"| {name} | {r['seconds']:.2f} | {r['seconds'] / product:.2f} | {r['seconds'] / blocks:.2f} "
            f"| {r['peak_rss_gib']:.2f} | {r['rss_after_data_gib']:.2f} |"
        )
    return "\n".join(lines)


def _forwarded(argv: list[str]) -> list[str]:
    """The command line minus ``--json PATH`` and ``--repeat N`` (the subprocess times one run, writes nothing)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--json", "--repeat"):
            skip = True
        elif not arg.startswith(("--json=", "--repeat=")):
            out.append(arg)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--chunks-per-doc", type=int, default=10)
    parser.add_argument("--block", type=int, default=1024)
    parser.add_argument("--top-k", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument("--case", choices=CASES, default=None, help=argparse.SUPPRESS)  # subprocess mode
    args = parser.parse_args()

    if args.case is not None:
        print(json.dumps(run_case(args.case, args)))
        return

    # Interleave the cases (product, block_matmul, rank, rank_subsets, product, ...) so that a change of
    # load on a shared machine hits every case alike; keep each case's fastest run and largest peak RSS.
    runs: dict[str, list[dict]] = {case: [] for case in CASES}
    for repetition in range(args.repeat):
        for case in CASES:
            command = [sys.executable, __file__, *_forwarded(sys.argv[1:]), "--case", case, "--repeat", "1"]
            output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            runs[case].append(json.loads(output.strip().splitlines()[-1]))
            print(
                f"[{repetition + 1}/{args.repeat}] {case}: {runs[case][-1]['seconds']:.2f} s",
                file=sys.stderr,
                flush=True,
            )
    records = []
    for case in CASES:
        best = min(runs[case], key=lambda r: r["seconds"])
        records.append(
            {
                **best,
                "times": [r["seconds"] for r in runs[case]],
                "peak_rss_gib": max(r["peak_rss_gib"] for r in runs[case]),
            }
        )
    table = markdown(records, args)
    print(table)
    if args.json is not None:
        report = {
            "benchmark": "scoring_speed",
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__},
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "case"},
            "target_ratio": TARGET_RATIO,
            "results": records,
            "table": table,
        }
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
