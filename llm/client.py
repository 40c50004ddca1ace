"""The LLM client: many structured-output requests in flight, cached, retried and accounted.

``LLMClient.run(requests, scope=...)`` returns one :class:`LLMResult` per request, in order:

1. Answers already in the :class:`AnswerCache` are returned without a request (``cached=True``).
2. The rest are sent with ``openai.AsyncOpenAI`` (SDK retries off: we retry ourselves), at most
   ``max_concurrency`` at a time and within the requests/tokens-per-minute budget.
3. 429, 408, 409, 5xx, timeouts and connection errors are retried with exponential backoff and
   jitter (``Retry-After`` honoured), up to ``max_attempts`` tries; any other 4xx is not retried.
4. The answer must be JSON that matches the request's schema and passes its validator; if not,
   the model is re-asked once with the problem stated. Valid answers are committed to the cache
   at once; every paid call goes to the cost ledger under ``scope``.
5. An item that still fails is returned with its error: one bad item never fails the stage.

``mode: batch`` sends the uncached requests through the Batch API instead (see ``llm/batch.py``).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import email.utils
import json
import os
import random
import re
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import jsonschema
import openai
from openai.types.chat import ChatCompletion

from llm.cache import AnswerCache, cache_key
from llm.settings import LLMSettings
from llm.types import LLMRequest, LLMResult

Progress = Callable[[int, int], None]
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)
RETRYABLE_STATUS = {408, 409, 429}
MAX_RETRY_AFTER_S = 600.0


class AnswerError(ValueError):
    """The model's answer is not usable (not JSON, wrong shape, or rejected by the validator)."""


class LLMClient:
    """See the module docstring. ``api_key`` defaults to ``$OPENAI_API_KEY``; it is never logged."""

    def __init__(
        self,
        settings: LLMSettings,
        cache: AnswerCache,
        api_key: str | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.cache = cache
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.log = log or (lambda message: None)

    def __repr__(self) -> str:
        return f"LLMClient(model={self.settings.model!r}, endpoint={self.settings.endpoint_family()!r})"

    @property
    def available(self) -> bool:
        """Whether an API key or an endpoint is configured (the LLM stages can run)."""
        return self.settings.configured(self._api_key)

    # --- keys, bodies, answers -----------------------------------------------------------------

    def key(self, request: LLMRequest) -> str:
        """Cache key of ``request``: everything that determines its answer."""
        s = self.settings
        return cache_key(
            {
                "model": s.model,
                "endpoint": s.endpoint_family(),
                "messages": list(request.messages),
                "schema_name": request.schema_name,
                "schema": request.schema,
                "temperature": s.temperature,
                "max_tokens": s.max_tokens,
                "structured_output": s.structured_output,
                "prompt": request.prompt_tag,
            }
        )

    def body(self, request: LLMRequest, extra_messages: Sequence[dict[str, str]] = ()) -> dict[str, Any]:
        """The chat-completions request body (also the Batch API line body)."""
        s = self.settings
        messages = [dict(message) for message in request.messages]
        if s.structured_output == "json_instruction":
            instruction = (
                "\n\nReply with one JSON object, and nothing else, that matches this JSON schema:\n"
                + json.dumps(request.schema, ensure_ascii=False)
            )
            messages[0] = {**messages[0], "content": messages[0]["content"] + instruction}
        body: dict[str, Any] = {
            "model": s.model,
            "messages": messages + list(extra_messages),
            "temperature": s.temperature,
            "max_tokens": s.max_tokens,
        }
        if s.structured_output == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": request.schema, "strict": True},
            }
        return body

    @staticmethod
    def parse_answer(request: LLMRequest, content: str | None) -> dict[str, Any]:
        """The validated answer object; raises :class:`AnswerError` saying what is wrong."""
        if not content:
            raise AnswerError("the answer was empty")
        fenced = _FENCE.match(content)
        try:
            value = json.loads(fenced.group(1) if fenced else content)
        except json.JSONDecodeError as error:
            raise AnswerError(f"the answer is not valid JSON ({error.msg} at position {error.pos})") from None
        if not isinstance(value, dict):
            raise AnswerError("the answer must be a JSON object")
        problems = sorted(jsonschema.Draft202012Validator(request.schema).iter_errors(value), key=str)
        if problems:
            where = "/".join(str(p) for p in problems[0].absolute_path) or "(root)"
            raise AnswerError(f"the answer does not match the schema at {where}: {problems[0].message}")
        if request.validator is not None:
            problem = request.validator(value)
            if problem:
                raise AnswerError(problem)
        return value

    def sync_sdk(self, max_retries: int = 0) -> openai.OpenAI:
        """A synchronous SDK client for this endpoint (used by the Batch API mode)."""
        return openai.OpenAI(
            api_key=self._api_key or "not-needed",
            base_url=self.settings.resolved_base_url(),
            timeout=self.settings.timeout_s,
            max_retries=max_retries,
        )

    def run_online(
        self, pending: dict[str, LLMRequest], scope: str, progress: Progress | None = None
    ) -> dict[str, LLMResult]:
        """Answer uncached ``pending`` (cache key -> request) with online calls; keyed results."""
        return _run_coroutine(self._run_online(pending, scope, progress))

    def scrub(self, text: str) -> str:
        """``text`` with the API key removed (error messages may echo request details)."""
        return text.replace(self._api_key, "***") if self._api_key else text

    # --- running -------------------------------------------------------------------------------

    def run(self, requests: Sequence[LLMRequest], scope: str = "", progress: Progress | None = None) -> list[LLMResult]:
        """Answer ``requests`` (see the module docstring); results are in request order."""
        keys = [self.key(request) for request in requests]
        results: dict[str, LLMResult] = {}
        for key, cached in self.cache.get_many(keys).items():
            results[key] = LLMResult(
                "", cached.value, cached=True, prompt_tokens=cached.prompt_tokens,
                completion_tokens=cached.completion_tokens, model=cached.model,
            )  # fmt: skip
        pending = {key: request for key, request in zip(keys, requests, strict=True) if key not in results}
        if pending:
            self.log(
                f"{scope or 'llm'}: {len(results)} of {len(set(keys))} answers cached; "
                f"asking {self.settings.model} for {len(pending)} ({self.settings.mode} mode)"
            )
            if self.settings.mode == "batch":
                from llm.batch import run_batch

                results.update(run_batch(self, pending, scope, progress))
            else:
                results.update(self.run_online(pending, scope, progress))
        return [_for_request(results[key], request) for key, request in zip(keys, requests, strict=True)]

    async def _run_online(
        self, pending: dict[str, LLMRequest], scope: str, progress: Progress | None
    ) -> dict[str, LLMResult]:
        semaphore = asyncio.Semaphore(self.settings.max_concurrency)
        limiter = RateLimiter(self.settings.requests_per_minute, self.settings.tokens_per_minute)
        results: dict[str, LLMResult] = {}
        async with openai.AsyncOpenAI(
            api_key=self._api_key or "not-needed",
            base_url=self.settings.resolved_base_url(),
            timeout=self.settings.timeout_s,
            max_retries=0,
        ) as client:
            calls = [self._answer(client, semaphore, limiter, key, request, scope) for key, request in pending.items()]
            for done, call in enumerate(asyncio.as_completed(calls), start=1):
                key, result = await call
                results[key] = result
                if progress is not None:
                    progress(done, len(calls))
        return results

    async def _answer(
        self,
        client: openai.AsyncOpenAI,
        semaphore: asyncio.Semaphore,
        limiter: RateLimiter,
        key: str,
        request: LLMRequest,
        scope: str,
    ) -> tuple[str, LLMResult]:
        result = LLMResult(request.custom_id, model=self.settings.model)
        extra: list[dict[str, str]] = []
        for _ask in range(2):  # the first answer, then one re-ask when it is invalid
            try:
                content = await self._complete(client, semaphore, limiter, request, extra, result, scope)
            except Exception as error:  # transport failure after retries, or a non-retryable status
                result.error = self.scrub(f"{type(error).__name__}: {error}")
                return key, result
            try:
                result.value = self.parse_answer(request, content)
            except AnswerError as problem:
                result.error = f"invalid answer: {problem}"
                extra = [
                    {"role": "assistant", "content": content or ""},
                    {
                        "role": "user",
                        "content": f"That answer is not valid: {problem}. Answer again with one JSON object "
                        "that matches the schema.",
                    },
                ]
                continue
            result.error = None
            self.cache.put(key, request.custom_id, self.settings.model, request.prompt_tag, result.value,
                           (result.prompt_tokens, result.completion_tokens))  # fmt: skip
            return key, result
        return key, result

    async def _complete(
        self,
        client: openai.AsyncOpenAI,
        semaphore: asyncio.Semaphore,
        limiter: RateLimiter,
        request: LLMRequest,
        extra: list[dict[str, str]],
        result: LLMResult,
        scope: str,
    ) -> str | None:
        """One call, retried on transient failures; records usage; returns the message content."""
        body = self.body(request, extra)
        estimate = sum(len(m["content"]) for m in body["messages"]) // 4 + self.settings.max_tokens
        for attempt in range(1, self.settings.max_attempts + 1):
            result.attempts += 1
            try:
                async with semaphore:
                    await limiter.acquire(estimate)
                    # The SDK's generic POST with the typed response: the same HTTP call as
                    # chat.completions.create(**body), without re-validating parameters we built
                    # ourselves (that costs ~1 ms of CPU per call, the bottleneck at 32+ in flight).
                    response = await client.post("/chat/completions", cast_to=ChatCompletion, body=body)
            except (openai.APIConnectionError, openai.APIStatusError) as error:
                status = getattr(error, "status_code", None)
                retryable = status is None or status in RETRYABLE_STATUS or status >= 500
                if not retryable or attempt == self.settings.max_attempts:
                    raise
                delay = self._delay(attempt, error)
                self.log(
                    f"{scope or 'llm'}: {request.custom_id}: {type(error).__name__}"
                    f"{f' {status}' if status else ''}, retry {attempt}/{self.settings.max_attempts - 1} "
                    f"in {delay:.1f}s"
                )
                await asyncio.sleep(delay)
                continue
            usage = response.usage
            prompt_tokens = (usage.prompt_tokens or 0) if usage else 0
            completion_tokens = (usage.completion_tokens or 0) if usage else 0
            result.prompt_tokens += prompt_tokens
            result.completion_tokens += completion_tokens
            self.cache.record_usage(
                scope, request.custom_id, self.settings.model, (prompt_tokens, completion_tokens),
                self.settings.cost_usd(prompt_tokens, completion_tokens), "online",
            )  # fmt: skip
            return response.choices[0].message.content if response.choices else None
        raise AssertionError("unreachable")  # pragma: no cover

    def _delay(self, attempt: int, error: Exception) -> float:
        """Seconds to wait before try ``attempt + 1``: ``Retry-After`` if given, else backoff with jitter."""
        retry_after = _retry_after(error)
        if retry_after is not None:  # the server knows best; capped so a bogus header cannot stall a run
            return min(retry_after, MAX_RETRY_AFTER_S)
        ceiling = min(self.settings.backoff_max_s, self.settings.backoff_initial_s * 2 ** (attempt - 1))
        return ceiling / 2 + random.uniform(0, ceiling / 2)  # "equal jitter"


class RateLimiter:
    """Sliding one-minute window over requests and (estimated) tokens; ``None`` disables a limit."""

    def __init__(self, requests_per_minute: int | None, tokens_per_minute: int | None, window_s: float = 60.0) -> None:
        self.window_s = window_s
        self.requests_per_minute = requests_per_minute
        self.tokens_per_minute = tokens_per_minute
        self._window: collections.deque[tuple[float, int]] = collections.deque()
        self._tokens = 0
        self._lock = asyncio.Lock()

    async def acquire(self, tokens: int) -> None:
        if self.requests_per_minute is None and self.tokens_per_minute is None:
            return
        async with self._lock:
            while True:
                now = time.monotonic()
                while self._window and now - self._window[0][0] >= self.window_s:
                    self._tokens -= self._window.popleft()[1]
                fits_requests = self.requests_per_minute is None or len(self._window) < self.requests_per_minute
                budget = self.tokens_per_minute
                fits_tokens = budget is None or not self._window or self._tokens + tokens <= budget
                if fits_requests and fits_tokens:
                    self._window.append((now, tokens))
                    self._tokens += tokens
                    return
                await asyncio.sleep(max(0.01, self.window_s - (now - self._window[0][0])))


def _retry_after(error: Exception) -> float | None:
    """Seconds from ``Retry-After`` / ``retry-after-ms`` headers of a failed response, if any."""
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    if headers.get("retry-after-ms"):
        try:
            return float(headers["retry-after-ms"]) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def _for_request(result: LLMResult, request: LLMRequest) -> LLMResult:
    """A copy of ``result`` carrying ``request``'s custom id (identical requests share an answer)."""
    return LLMResult(
        request.custom_id, result.value, result.error, result.cached, result.attempts,
        result.prompt_tokens, result.completion_tokens, result.model,
    )  # fmt: skip


def _run_coroutine(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coroutine`` to completion, also when called from inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
