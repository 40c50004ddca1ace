"""Prompt caching: tokens and dollars billed with the cache-friendly layout and send policy, against a chunk-first
layout and against sending a document's requests all at once (issue 13, parts 3 and 4).

Corpus: the first ``--documents`` articles of SQuAD v1.1 dev (``../shared/data/squad-v1.1-dev.json.gz``, read by the
project's ``squad_json`` loader; the benchmark says so and exits 0 when the file is absent), chunked at 1000
characters by the project's chunker; themes from the titles (``theme_from_title``, no LLM) for reformulation.
Requests: the real builders of the four stages whose prompts carry a document (reformulation carries its theme
only): ``reformulation``, ``chunk_contexts``, ``synthetic_queries`` (2 per chunk) and ``llm_pairing`` (every query).

Server: the local OpenAI-compatible test server (``tests/support/openai_server.py``) in a thread of this process,
answering after ``--latency`` seconds and reporting ``cached_tokens`` as the OpenAI API does (longest prefix
answered before, in 128-token steps from 1024 tokens; 4 characters a token: ``tests/support/prompt_cache.py``).
Client: ``LLMClient``, ``max_concurrency`` ``--concurrency``, model ``gpt-4o``; the dollars are the ledger's, at
gpt-4o prices (USD per 1M tokens: 2.50 input, 1.25 cached input, 10.00 output). Completion tokens are the test
server's canned answers (the same in every condition).

Conditions (each with a fresh server, so a fresh provider cache, and a fresh answer store):

* ``chunk_first``: every request rebuilt by ``tests.support.layouts.chunk_first`` (the chunk or query before the
  document, same text), sent with the send policy;
* ``all_at_once``: the stages' layout (document first), ``prefix_group`` removed: a document's requests go out
  together, as the client sent them before this change;
* ``leader_first``: the layout and the send policy of this change (``llm/scheduling.py``);
* ``aligned_windows``: ``leader_first`` with the document window of ``chunk_contexts`` and ``synthetic_queries``
  taken from a fixed grid (windows of ``max_document_chars`` starting every half window, the one whose middle is
  nearest the chunk) instead of centred on each chunk, so a long document's chunks share few windows (a proposed
  change of ``curation/windows.py``, patched in here).

Each run is checked: every request answered and valid. Usage (from the repository root)::

    python bench/prompt_cache.py [--documents 8] [--latency 0.05] [--concurrency 16] [--json out.json]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `import llm`, and tests.support (the test server)

import argparse
import contextlib
import dataclasses
import json
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import pyarrow as pa

import curation.windows as windows_module
from bench.record import result_header
from conteb.config import ChunkingConfig
from conteb.names import Stage
from conteb.schemas import THEMES
from curation import contextual, synthetic_queries
from curation.chunking import chunk_documents
from curation.contextual import build_context_requests
from curation.llm_pairing import build_pairing_requests
from curation.reformulation import build_reformulation_requests
from curation.sources.squad import load_squad_json
from curation.synthetic_queries import build_synthetic_requests
from curation.themes.naming import theme_from_title
from curation.windows import ELLIPSIS, window_bounds
from llm.cache import AnswerCache
from llm.client import LLMClient
from llm.settings import LLMSettings
from llm.types import LLMRequest
from tests.support.layouts import chunk_first
from tests.support.openai_server import OpenAICompatibleServer

SQUAD = Path(__file__).resolve().parents[2] / "shared" / "data" / "squad-v1.1-dev.json.gz"
CONDITIONS = ("chunk_first", "all_at_once", "leader_first", "aligned_windows")
_PASSAGE = re.compile(r"Passage:\n(.*?)(?:\n\nSubject: |\Z)", re.DOTALL)


def responder(body: dict[str, Any]) -> dict[str, Any]:
    """A valid answer for each stage's schema (the rewrite returns its passage unchanged)."""
    stage = body["response_format"]["json_schema"]["name"]
    if stage == "reformulation":
        return {"rewritten": _PASSAGE.search(body["messages"][-1]["content"]).group(1)}
    if stage == "chunk_context":
        return {"context": "This passage is part of the article about its subject, on one of its aspects."}
    if stage == "synthetic_queries":
        return {"queries": [{"query": f"Which fact does the article give ({k})?", "answer": "a"} for k in (1, 2)]}
    if stage == "chunk_pairing":
        return {"chunk_indices": [0]}
    raise ValueError(f"unexpected schema {stage}")


# --- the proposed window rule -----------------------------------------------------------------------------------


def aligned_bounds(length: int, char_start: int, char_end: int, max_chars: int) -> tuple[int, int]:
    """``[lo, hi)``: the window of a grid (``max_chars`` long, starting every ``max_chars // 2`` and at
    ``length - max_chars``) that holds the chunk with its middle nearest the chunk's; the whole document when it
    fits; the centred window of ``curation.windows.window_bounds`` when no grid window holds the chunk."""
    if length <= max_chars:
        return 0, length
    last = length - max_chars
    starts = sorted({*range(0, last, max(1, max_chars // 2)), last})
    holding = [lo for lo in starts if lo <= char_start and char_end <= lo + max_chars]
    if not holding:
        return window_bounds(length, char_start, char_end, max_chars)
    middle = (char_start + char_end) / 2
    lo = min(holding, key=lambda start: (abs(start + max_chars / 2 - middle), start))
    return lo, lo + max_chars


def aligned_window(text: str, char_start: int, char_end: int, max_chars: int) -> str:
    lo, hi = aligned_bounds(len(text), char_start, char_end, max_chars)
    return f"{f'{ELLIPSIS} ' if lo > 0 else ''}{text[lo:hi]}{f' {ELLIPSIS}' if hi < len(text) else ''}"


@contextlib.contextmanager
def windows(rule: str) -> Iterator[None]:
    """The window rule the builders use: ``centred`` (the project's) or ``aligned`` (patched in)."""
    if rule == "centred":
        yield
        return
    with (
        mock.patch.object(windows_module, "window_bounds", aligned_bounds),
        mock.patch.object(contextual, "document_window", aligned_window),
        mock.patch.object(synthetic_queries, "document_window", aligned_window),
    ):
        yield


# --- requests ---------------------------------------------------------------------------------------------------


def stage_requests(documents: int, rule: str) -> dict[Stage, list[LLMRequest]]:
    """Every request of the four stages on the first ``documents`` SQuAD articles."""
    source = load_squad_json(SQUAD)
    source.keep_first_documents(documents)
    docs, queries = source.documents_table(), source.queries_table()
    chunks = chunk_documents(docs, ChunkingConfig()).chunks
    rows = []
    for doc_id, title in zip(docs.column("doc_id").to_pylist(), docs.column("title").to_pylist(), strict=True):
        theme, aliases = theme_from_title(title or doc_id)
        rows.append({"doc_id": doc_id, "theme": theme, "aliases": aliases, "method": "title"})
    with windows(rule):
        return {
            Stage.REFORMULATION: build_reformulation_requests(chunks, pa.Table.from_pylist(rows, schema=THEMES)),
            Stage.CHUNK_CONTEXTS: build_context_requests(chunks, docs),
            Stage.SYNTHETIC_QUERIES: build_synthetic_requests(chunks, docs, n=2),
            Stage.LLM_PAIRING: build_pairing_requests(queries, docs, chunks),
        }


def variant(condition: str) -> Callable[[LLMRequest], LLMRequest]:
    if condition == "chunk_first":
        return chunk_first
    if condition == "all_at_once":
        return lambda request: dataclasses.replace(request, prefix_group=None)
    return lambda request: request


# --- runs -------------------------------------------------------------------------------------------------------


def run_condition(condition: str, requests: dict[Stage, list[LLMRequest]], args: argparse.Namespace) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as folder, OpenAICompatibleServer(responder, latency_s=args.latency) as server:
        settings = LLMSettings(model="gpt-4o", base_url=server.url, max_concurrency=args.concurrency, timeout_s=120)
        client = LLMClient(settings, AnswerCache(Path(folder) / "answers.sqlite"), "bench-key")
        for stage, stage_requests_ in requests.items():
            sent = [variant(condition)(request) for request in stage_requests_]
            started = time.perf_counter()
            results = client.run(sent, scope=f"squad/{stage}")
            wall = time.perf_counter() - started
            failed = [r for r in results if not r.ok or r.cached or r.attempts != 1]
            if failed:
                raise SystemExit(f"{condition} {stage}: {len(failed)} requests failed or were retried: {failed[0]}")
            usage = client.cache.usage(f"squad/{stage}")
            rows.append(
                {
                    "condition": condition, "stage": str(stage), "requests": len(results),
                    "prompt_tokens": usage.prompt_tokens, "cached_tokens": usage.cached_tokens,
                    "completion_tokens": usage.completion_tokens, "cached_share": round(usage.cached_share, 4),
                    "usd": usage.cost_usd, "wall_s": round(wall, 2),
                }
            )  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
        client.cache.close()
    return rows


def markdown(rows: list[dict]) -> str:
    """One line per stage and condition, then the totals; ratios of dollars against ``chunk_first`` and
    ``all_at_once`` of the same stage."""
    stages = list(dict.fromkeys(row["stage"] for row in rows))
    totals = []
    summed = ("requests", "prompt_tokens", "cached_tokens", "completion_tokens", "usd", "wall_s")
    for condition in CONDITIONS:
        mine = [row for row in rows if row["condition"] == condition]
        total: dict[str, Any] = {key: sum(row[key] for row in mine) for key in summed}
        share = total["cached_tokens"] / total["prompt_tokens"]
        totals.append({**total, "condition": condition, "stage": "all four", "cached_share": share})
    lines = [
        "| stage | layout / policy | requests | prompt tok | cached tok | cached | compl. tok | USD (gpt-4o) "
        "| USD vs chunk-first | USD vs all-at-once | wall s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for stage in [*stages, "all four"]:
        group = [row for row in rows + totals if row["stage"] == stage]
        base = {row["condition"]: row["usd"] for row in group}
        for row in group:
            lines.append(
                f"| {stage} | {row['condition']} | {row['requests']:,} | {row['prompt_tokens']:,} | "
                f"{row['cached_tokens']:,} | {row['cached_share']:.1%} | {row['completion_tokens']:,} | "
                f"{row['usd']:.2f} | {row['usd'] / base['chunk_first']:.2f}x | "
                f"{row['usd'] / base['all_at_once']:.2f}x | {row['wall_s']:.1f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--documents", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not SQUAD.exists():
        print(f"skipped: {SQUAD} is absent (the benchmark needs SQuAD v1.1 dev)")
        return
    rows: list[dict] = []
    centred, aligned = stage_requests(args.documents, "centred"), stage_requests(args.documents, "aligned")
    for condition in CONDITIONS:
        rows += run_condition(condition, aligned if condition == "aligned_windows" else centred, args)
    print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps(result_header(args, rows), indent=2))


if __name__ == "__main__":
    main()
