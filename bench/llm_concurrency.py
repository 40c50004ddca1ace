"""LLM client concurrency: wall time of ``LLMClient.run`` against the ideal ``requests × latency / concurrency``.

A local OpenAI-compatible server (``tests.support.openai_server``) answers every chat request after sleeping
``--latency`` seconds in its handler thread. It runs in a separate process (``--server process``,
the default) so that its CPU time does not compete with the client for the GIL. For each level in
``--levels`` a fresh ``LLMClient`` with ``max_concurrency = level`` and a fresh temporary
``AnswerCache`` answers ``--requests`` distinct requests (distinct ``custom_id`` and message text,
so nothing comes from the cache); level 1 answers ``--requests-at-1`` requests only (its bound
is for that count; ×(requests / requests-at-1) extrapolates it). The bound is what a perfect
client would take: ``requests × latency / concurrency``; ratio = wall / bound (target ≤ 1.3× at
concurrency 32).

``--reference`` also times the raw SDK (``openai.AsyncOpenAI`` + ``asyncio.Semaphore``, no
cache, no validation) on the same server and requests, as a floor for what the SDK allows here.
``--profile N`` adds a cProfile of one extra ``LLMClient`` run at concurrency N.

Every run is checked: each answer must be valid (``{"n": i}`` for request ``i``), uncached,
answered in one attempt, and the server must have received exactly one chat request per request.
The script exits 1 if any request failed, was retried or cached, or was not served exactly once.

Usage (from the repository root)::

    python bench/llm_concurrency.py [--requests 1000] [--latency 0.1] [--levels 1,8,32,64]
        [--requests-at-1 200] [--repeat 3] [--server process|thread] [--reference] [--profile 32]
        [--json out.json]

Each cell is the median of ``--repeat`` runs (client and SDK runs alternate), after one untimed
warm-up run of 64 requests.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The repository root on sys.path: `import llm` without installing the package, and `tests.support`
# (the local OpenAI-compatible server lives with the tests, outside the installed packages).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import asyncio
import cProfile
import datetime as dt
import io
import json
import multiprocessing
import os
import platform
import pstats
import re
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from typing import Any

import openai

from llm.cache import AnswerCache
from llm.client import LLMClient
from llm.settings import LLMSettings
from llm.types import LLMRequest, LLMResult
from tests.support.openai_server import OpenAICompatibleServer

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
    "additionalProperties": False,
}
MODEL = "bench-model"
API_KEY = "bench-key"
_NUMBER = re.compile(r"request (\d+)")


def responder(body: dict[str, Any]) -> dict[str, Any]:
    """``{"n": i}`` for the request whose user message says ``request i``."""
    match = _NUMBER.search(body["messages"][-1]["content"])
    return {"n": int(match.group(1)) if match else -1}


# --- the server, in this process or in a child process ----------------------------------------


def _serve(latency: float, conn: Connection) -> None:
    """Child process: serve until told to stop; answer ``"count"`` with the chat requests so far."""
    with OpenAICompatibleServer(responder, latency_s=latency) as server:
        conn.send(server.url)
        while (command := conn.recv()) != "stop":
            if command == "count":
                conn.send(len(server.chat_requests()))
            elif command == "cpu":
                conn.send(time.process_time())
    conn.send("stopped")


class BenchServer:
    """The test server in a child process (``process``) or in a thread of this one (``thread``)."""

    def __init__(self, latency: float, where: str) -> None:
        self.where = where
        if where == "thread":
            self._server = OpenAICompatibleServer(responder, latency_s=latency).start()
            self.url = self._server.url
            return
        self._conn, child = multiprocessing.get_context("spawn").Pipe()
        self._process = multiprocessing.get_context("spawn").Process(target=_serve, args=(latency, child), daemon=True)
        self._process.start()
        self.url = self._conn.recv()

    def chat_count(self) -> int:
        if self.where == "thread":
            return len(self._server.chat_requests())
        self._conn.send("count")
        return int(self._conn.recv())

    def cpu_s(self) -> float:
        """CPU seconds used by the server process so far (0 when it shares this process)."""
        if self.where == "thread":
            return 0.0
        self._conn.send("cpu")
        return float(self._conn.recv())

    def stop(self) -> None:
        if self.where == "thread":
            self._server.stop()
            return
        self._conn.send("stop")
        self._conn.recv()
        self._process.join(timeout=10)


# --- the measured runs -------------------------------------------------------------------------


@dataclass
class Row:
    client: str  # "LLMClient" or "raw SDK"
    concurrency: int
    requests: int
    wall_s: float
    bound_s: float
    ratio: float
    requests_per_s: float
    failed: int
    retried: int
    cached: int
    server_requests: int
    cpu_s: float  # CPU time of this (client) process during the run
    server_cpu_s: float  # CPU time of the server process during the run (0 with --server thread)


def make_requests(count: int, offset: int) -> list[LLMRequest]:
    """``count`` distinct requests; ``offset`` keeps message texts distinct across levels."""
    return [
        LLMRequest(
            custom_id=f"bench-{offset + i}",
            messages=(
                {"role": "system", "content": "You count. Answer with a JSON object."},
                {"role": "user", "content": f"Return n for request {offset + i}."},
            ),
            schema_name="bench",
            schema=SCHEMA,
            prompt_tag="bench@v1:0",
        )
        for i in range(count)
    ]


def make_client(url: str, concurrency: int, cache_dir: Path) -> LLMClient:
    """An ``LLMClient`` on ``url`` with ``max_concurrency = concurrency`` and a new cache in ``cache_dir``."""
    settings = LLMSettings(model=MODEL, base_url=url, max_concurrency=concurrency, timeout_s=60.0)
    return LLMClient(settings, AnswerCache(cache_dir / "llm.sqlite"), api_key=API_KEY)


def check(results: list[LLMResult], requests: list[LLMRequest]) -> tuple[int, int, int]:
    """``(failed, retried, cached)``; a wrong answer counts as failed."""
    failed = retried = cached = 0
    for result, request in zip(results, requests, strict=True):
        expected = int(request.custom_id.split("-")[1])
        if not result.ok or result.value != {"n": expected} or result.custom_id != request.custom_id:
            failed += 1
        retried += result.attempts > 1
        cached += result.cached
    return failed, retried, cached


def run_client(server: BenchServer, concurrency: int, count: int, latency: float, offset: int) -> Row:
    """One timed ``LLMClient.run`` of ``count`` new requests.

    The client and its cache are built before the clock starts; ``run`` builds its SDK client inside.
    """
    requests = make_requests(count, offset)
    with tempfile.TemporaryDirectory(prefix="llm-bench-") as tmp:
        client = make_client(server.url, concurrency, Path(tmp))
        before = server.chat_count(), server.cpu_s()
        cpu0, start = time.process_time(), time.perf_counter()
        results = client.run(requests, scope="bench")
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
        client.cache.close()
    failed, retried, cached = check(results, requests)
    return _row("LLMClient", concurrency, count, latency, wall, cpu, failed, retried, cached, server, before)


async def _sdk_run(url: str, concurrency: int, requests: list[LLMRequest]) -> list[str | None]:
    semaphore = asyncio.Semaphore(concurrency)
    async with openai.AsyncOpenAI(base_url=url, api_key=API_KEY, max_retries=0, timeout=60.0) as sdk:

        async def one(request: LLMRequest) -> str | None:
            async with semaphore:
                response = await sdk.chat.completions.create(
                    model=MODEL,
                    messages=list(request.messages),  # type: ignore[arg-type]
                    response_format={
                        "type": "json_schema",
                        "json_schema": {"name": request.schema_name, "schema": request.schema, "strict": True},
                    },
                )
            return response.choices[0].message.content

        return list(await asyncio.gather(*(one(r) for r in requests), return_exceptions=False))


def run_sdk(server: BenchServer, concurrency: int, count: int, latency: float, offset: int) -> Row:
    """One timed raw-SDK run of ``count`` new requests (SDK client built inside the timed region)."""
    requests = make_requests(count, offset)
    before = server.chat_count(), server.cpu_s()
    cpu0, start = time.process_time(), time.perf_counter()
    contents = asyncio.run(_sdk_run(server.url, concurrency, requests))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
    failed = sum(
        json.loads(c or "null") != {"n": int(r.custom_id.split("-")[1])}
        for c, r in zip(contents, requests, strict=True)
    )
    return _row("raw SDK", concurrency, count, latency, wall, cpu, failed, 0, 0, server, before)


def _row(
    client: str,
    concurrency: int,
    count: int,
    latency: float,
    wall: float,
    cpu: float,
    failed: int,
    retried: int,
    cached: int,
    server: BenchServer,
    before: tuple[int, float],
) -> Row:
    bound = count * latency / concurrency
    served, server_cpu = server.chat_count() - before[0], server.cpu_s() - before[1]
    return Row(
        client, concurrency, count, round(wall, 3), round(bound, 3), round(wall / bound, 3),
        round(count / wall, 1), failed, retried, cached, served, round(cpu, 3), round(server_cpu, 3),
    )  # fmt: skip


def profile_client(server: BenchServer, concurrency: int, count: int, offset: int, top: int = 25) -> str:
    """cProfile of one ``LLMClient.run`` (the event loop thread), sorted by own time."""
    requests = make_requests(count, offset)
    with tempfile.TemporaryDirectory(prefix="llm-bench-") as tmp:
        client = make_client(server.url, concurrency, Path(tmp))
        profiler = cProfile.Profile()
        profiler.enable()
        client.run(requests, scope="bench")
        profiler.disable()
        client.cache.close()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


# --- output --------------------------------------------------------------------------------------


@dataclass
class Summary:
    """The median over the repetitions of one (client, concurrency) cell."""

    client: str
    concurrency: int
    requests: int
    runs: int
    wall_s: float  # median
    wall_min_s: float
    wall_max_s: float
    bound_s: float
    ratio: float  # median wall / bound
    requests_per_s: float
    cpu_s: float  # median client CPU
    server_cpu_s: float  # median server CPU
    failed: int  # over all runs


def summarize(rows: list[Row]) -> list[Summary]:
    """One ``Summary`` per (client, concurrency), in first-run order."""
    cells: dict[tuple[str, int], list[Row]] = {}
    for row in rows:
        cells.setdefault((row.client, row.concurrency), []).append(row)
    out = []
    for (client, concurrency), runs in cells.items():
        wall = statistics.median(r.wall_s for r in runs)
        first = runs[0]
        out.append(
            Summary(
                client=client,
                concurrency=concurrency,
                requests=first.requests,
                runs=len(runs),
                wall_s=round(wall, 3),
                wall_min_s=min(r.wall_s for r in runs),
                wall_max_s=max(r.wall_s for r in runs),
                bound_s=first.bound_s,
                ratio=round(wall / first.bound_s, 3),
                requests_per_s=round(first.requests / wall, 1),
                cpu_s=round(statistics.median(r.cpu_s for r in runs), 3),
                server_cpu_s=round(statistics.median(r.server_cpu_s for r in runs), 3),
                failed=sum(r.failed for r in runs),
            )
        )
    return out


def table(summaries: list[Summary], total: int) -> str:
    """The Markdown results table (level-1 bounds also shown extrapolated to ``total`` requests)."""
    lines = [
        "| client | concurrency | requests | wall s (median) | min–max s | bound s | ratio | requests/s "
        "| client CPU s | server CPU s | failed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in summaries:
        scaled = total * r.bound_s / r.requests  # the bound extrapolated to --requests (level 1)
        note = f" ({scaled:.0f} for {total:,})" if r.requests != total else ""
        lines.append(
            f"| {r.client} | {r.concurrency} | {r.requests:,} | {r.wall_s:.2f} | {r.wall_min_s:.2f}–{r.wall_max_s:.2f} "
            f"| {r.bound_s:.2f}{note} | **{r.ratio:.2f}×** | {r.requests_per_s:.0f} | {r.cpu_s:.2f} "
            f"| {r.server_cpu_s:.2f} | {r.failed} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 1 when any request failed or was not served exactly once, else 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000, help="requests per level (default 1000)")
    parser.add_argument("--requests-at-1", type=int, default=200, help="requests at concurrency 1 (default 200)")
    parser.add_argument("--latency", type=float, default=0.1, help="server latency per request, s (default 0.1)")
    parser.add_argument("--levels", default="1,8,32,64", help="comma-separated concurrency levels")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per level, median reported (default 3)")
    parser.add_argument("--server", choices=("process", "thread"), default="process", help="where the server runs")
    parser.add_argument("--reference", action="store_true", help="also time the raw SDK at each level")
    parser.add_argument("--profile", type=int, metavar="N", help="cProfile one extra client run at concurrency N")
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    levels = [int(level) for level in args.levels.split(",")]

    started = dt.datetime.now(dt.UTC)
    load_before = os.getloadavg()
    print(
        f"{args.requests} requests per level ({args.requests_at_1} at concurrency 1), server latency "
        f"{args.latency * 1000:.0f} ms, server in a {args.server}, {args.repeat} run(s) per level; levels {levels}; "
        f"load average {load_before[0]:.2f}"
    )
    server = BenchServer(args.latency, args.server)
    rows: list[Row] = []
    offset = 0
    profile = ""
    try:
        # Warm-up (imports, SDK client construction, first connections); not reported.
        warm = min(64, args.requests)
        run_client(server, 8, warm, args.latency, offset)
        offset += warm
        for level in levels:
            count = args.requests_at_1 if level == 1 else args.requests
            for _ in range(args.repeat):  # client and SDK alternate, so that noise falls on both
                for runner in (run_client, run_sdk) if args.reference else (run_client,):
                    row = runner(server, level, count, args.latency, offset)
                    offset += count
                    rows.append(row)
                    print(
                        f"  {row.client:9s} c={level:3d}: {row.requests} requests in {row.wall_s:.2f} s "
                        f"(bound {row.bound_s:.2f} s, {row.ratio:.2f}×), CPU {row.cpu_s:.2f} s, failed {row.failed}, "
                        f"retried {row.retried}, cached {row.cached}, served {row.server_requests}",
                        flush=True,
                    )
        if args.profile:
            profile = profile_client(server, args.profile, args.requests, offset)
    finally:
        server.stop()

    load_after = os.getloadavg()
    summaries = summarize(rows)
    print(f"\nload average after: {load_after[0]:.2f}\n")
    print(table(summaries, args.requests))
    if profile:
        print(f"\ncProfile of one LLMClient run at concurrency {args.profile}:\n{profile}")
    bad = [r for r in rows if r.failed or r.retried or r.cached or r.server_requests != r.requests]
    if args.json:
        payload = {
            "benchmark": "llm_concurrency",
            "date": started.isoformat(timespec="seconds"),
            "load_average": {"before": load_before, "after": load_after},
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "platform": platform.platform(),
                "openai": openai.__version__,
            },
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "summary": [asdict(r) for r in summaries],
            "runs": [asdict(r) for r in rows],
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {args.json}")
    if bad:
        print(f"\nFAILED: {len(bad)} run(s) with failed, retried or cached requests", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
