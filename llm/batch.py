"""Batch API mode: the same requests and results as online mode, at the Batch API's price.

Writes one JSONL line per uncached request (``custom_id`` = the request's cache key), uploads
it, creates the batch, polls with backoff, downloads the output and error files and maps lines
back by ``custom_id``. Lines are written in the client's order (each ``prefix_group`` together,
see ``llm/scheduling.py``). Valid answers go to the same cache and the ledger (at the batch
discount, the line's ``prompt_tokens_details.cached_tokens`` at the cached price). The batch id
is recorded before polling, so a restarted stage resumes the batch it already paid for. Answers
that fail validation are stored with their call as awaiting the re-ask, which the online path sends; lines that
failed transiently (429, 5xx) go through the online path (retries); an answer cut off by ``max_tokens`` and other
failed lines become failed results.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import openai

from llm.cache import AnswerCache
from llm.ledger import PaidCall, record_answer, record_refusal
from llm.retries import request_rejected
from llm.settings import LLMSettings
from llm.structured import CUT_OFF
from llm.types import LLMRequest, LLMResult, Progress
from llm.usage import checked_usage, read_usage

TERMINAL = {"completed", "failed", "expired", "cancelled"}
MAX_POLL_S = 300.0


class BatchClient(Protocol):
    """What the Batch API mode uses of its client (``llm.client.LLMClient`` is one): the settings, the
    cache, the request bodies and answer parsing, the SDK, and the online path for the answers to re-ask.
    Declared here so that the client imports this module and this module never imports the client."""

    settings: LLMSettings
    cache: AnswerCache
    log: Callable[[str], None]

    def body(self, request: LLMRequest, extra_messages: Sequence[dict[str, str]] = ()) -> dict[str, Any]: ...

    def read_answer(self, request: LLMRequest, content: str | None) -> dict[str, Any]: ...

    def sync_sdk(self, max_retries: int = 0) -> openai.OpenAI: ...

    def scrub(self, text: str) -> str: ...

    def run_online(
        self, pending: dict[str, LLMRequest], scope: str, progress: Progress | None = None
    ) -> dict[str, LLMResult]: ...


def batch_lines(client: BatchClient, pending: dict[str, LLMRequest]) -> bytes:
    """The JSONL input file: one ``/v1/chat/completions`` call per pending request."""
    lines = (
        json.dumps(
            {"custom_id": key, "method": "POST", "url": "/v1/chat/completions", "body": client.body(request)},
            ensure_ascii=False,
        )
        for key, request in pending.items()
    )
    return ("\n".join(lines) + "\n").encode("utf-8")


def run_batch(
    client: BatchClient, pending: dict[str, LLMRequest], scope: str, progress: Progress | None
) -> dict[str, LLMResult]:
    """Answer ``pending`` (cache key -> request) through the Batch API; see the module docstring."""
    settings = client.settings
    digest = hashlib.sha256("\n".join(sorted(pending)).encode()).hexdigest()
    sdk = client.sync_sdk(max_retries=3)
    batch_id = client.cache.open_batch(scope, digest)
    if batch_id:
        client.log(f"{scope or 'llm'}: resuming batch {batch_id} ({len(pending)} requests)")
    else:
        upload = sdk.files.create(file=("requests.jsonl", io.BytesIO(batch_lines(client, pending))), purpose="batch")
        batch = sdk.batches.create(
            input_file_id=upload.id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            metadata={"scope": scope[:500]} if scope else None,
        )
        batch_id = batch.id
        client.cache.mark_batch(batch_id, scope, digest, "submitted")
        client.log(f"{scope or 'llm'}: submitted batch {batch_id} ({len(pending)} requests)")
    batch = _wait(sdk, batch_id, settings.batch_poll_s, settings.batch_timeout_s, len(pending), progress)
    results: dict[str, LLMResult] = {}
    if batch.status != "completed":
        if batch.status in TERMINAL:  # failed/expired/cancelled; a batch still running stays open for the next run
            client.cache.mark_batch(batch_id, scope, digest, batch.status)
        for key, request in pending.items():
            results[key] = LLMResult(request.custom_id, error=f"batch {batch_id} is {batch.status}")
        return results
    retry_online: dict[str, LLMRequest] = {}
    for line in _file_lines(sdk, batch.output_file_id):
        custom_id = line.get("custom_id")
        waiting = pending.get(custom_id) if isinstance(custom_id, str) else None
        if custom_id is None or waiting is None:
            continue
        outcome = _line_outcome(client, custom_id, waiting, line, scope)
        if outcome is None:
            retry_online[custom_id] = waiting
        else:
            results[custom_id] = outcome
    for line in _file_lines(sdk, batch.error_file_id):
        custom_id = line.get("custom_id")
        if custom_id in pending and custom_id not in results:
            status = (line.get("response") or {}).get("status_code")
            error = line.get("error") or (line.get("response") or {}).get("body", {}).get("error")
            if status is not None and not request_rejected(status, str(error)):
                retry_online[custom_id] = pending[custom_id]  # transient: the online path retries it with backoff
                continue
            results[custom_id] = LLMResult(pending[custom_id].custom_id, error=client.scrub(f"batch error: {error}"))
    for key, request in pending.items():
        if key not in results and key not in retry_online:
            results[key] = LLMResult(request.custom_id, error=f"batch {batch_id}: no output line for this request")
    client.cache.mark_batch(batch_id, scope, digest, "done")
    if retry_online:
        client.log(f"{scope or 'llm'}: {len(retry_online)} batch answers invalid, asking again online")
        results.update(client.run_online(retry_online, scope))
    return results


def _line_outcome(
    client: BatchClient, key: str, request: LLMRequest, line: dict[str, Any], scope: str
) -> LLMResult | None:
    """The result of one output line, or ``None`` when its answer is invalid (re-ask online)."""
    response = line.get("response") or {}
    body = response.get("body") or {}
    if response.get("status_code") != 200 or not body.get("choices"):
        return LLMResult(request.custom_id, error=client.scrub(f"batch line failed: {line.get('error') or body}"))
    where = f"{scope or 'llm'}: {request.custom_id}"
    tokens = checked_usage(read_usage(body.get("usage")), client.body(request), client.log, where)
    settings = client.settings
    cost = settings.cost_usd(tokens.prompt_tokens, tokens.completion_tokens, batch=True,
                             cached_tokens=tokens.cached_tokens)  # fmt: skip
    choice = body["choices"][0]
    content = choice.get("message", {}).get("content")
    server = body.get("system_fingerprint") if isinstance(body.get("system_fingerprint"), str) else None
    call = PaidCall(scope, settings.model, "batch", tokens, cost)
    cut_off = choice.get("finish_reason") == "length"
    try:
        if cut_off:
            raise ValueError(CUT_OFF)
        value = client.read_answer(request, content)
    except ValueError as problem:  # the call and the refused answer together; online sends only the re-ask
        error = f"invalid answer: {problem}"
        paid = (tokens.prompt_tokens, tokens.completion_tokens)
        record_refusal(client.cache, call, key, request, error, content, paid, reask=not cut_off)
        return LLMResult(request.custom_id, error=error) if cut_off else None
    record_answer(client.cache, call, key, request, value, tokens, server)
    return LLMResult(
        request.custom_id, value, attempts=1, prompt_tokens=tokens.prompt_tokens,
        completion_tokens=tokens.completion_tokens, model=settings.model, cached_tokens=tokens.cached_tokens,
    )  # fmt: skip


def _wait(sdk: openai.OpenAI, batch_id: str, poll_s: float, timeout_s: float, total: int, progress: Progress | None):
    """Poll ``batch_id`` with growing intervals until it reaches a terminal status or ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    interval = poll_s
    while True:
        batch = sdk.batches.retrieve(batch_id)
        counts = batch.request_counts
        if progress is not None and counts is not None:
            progress((counts.completed or 0) + (counts.failed or 0), total)
        if batch.status in TERMINAL or time.monotonic() >= deadline:
            return batch
        time.sleep(interval)
        interval = min(interval * 1.5, MAX_POLL_S)


def _file_lines(sdk: openai.OpenAI, file_id: str | None) -> list[dict[str, Any]]:
    if not file_id:
        return []
    text = sdk.files.content(file_id).text
    return [json.loads(line) for line in text.splitlines() if line.strip()]
