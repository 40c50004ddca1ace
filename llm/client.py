"""The LLM client: many structured-output requests in flight, cached, retried and accounted.

``LLMClient.run(requests, scope=...)`` returns one :class:`LLMResult` per request, in order:

1. Answers already in the :class:`AnswerCache` are returned without a request (``cached=True``),
   and so are remembered failures (``remembered=True``): answers refused by validation in an earlier
   run with the same key (prompt, model, settings). A remembered answer that the request's current
   validator accepts becomes a cached answer.
2. The rest are sent with ``openai.AsyncOpenAI`` (SDK retries off: we retry ourselves), at most
   ``max_concurrency`` at a time and within the requests/tokens-per-minute budget, grouped by
   ``prefix_group`` with each group's first request sent alone (the prompt-cache policy of
   ``llm/scheduling.py``). Each try has a total deadline of ``timeout_s`` (the SDK's timeout only
   bounds the wait between two bytes) and reads at most ``max_answer_bytes``.
3. 429, 408, 409, 5xx, timeouts, connection errors and a 200 that is not a chat completion (an HTML
   page, JSON of another shape, too large: :class:`ServerFault`) are retried with exponential
   backoff and jitter, up to ``max_attempts`` tries; any other 4xx, and a 5xx whose body is a request-validation
   error, is not retried (:func:`llm.retries.request_rejected`). ``Retry-After``
   (seconds or an HTTP date) is honoured up to ``max_retry_after_s``; a value that is neither is
   ignored (normal backoff).
   The structure is asked for in ``llm.structured_output``'s mode (:mod:`llm.structured`); ``auto`` finds the
   mode the server accepts (:mod:`llm.modes`), and a refused explicit mode stops the run
   (:class:`llm.structured.StructuredOutputRefused`).
4. The answer must be JSON (read leniently in the instruction modes) whose every text (key or string) can be
   kept (no lone surrogate, no NUL: :func:`conteb.text.text_problem`), that matches the request's schema and
   passes its validator; if not, the model is re-asked once with the problem stated (the refused answer's lone
   surrogates as escapes). An answer cut off by ``max_tokens`` (``finish_reason: length``) is refused in every
   mode and not re-asked (:meth:`LLMClient._answer_now` says why).
   Every paid call goes to the cost ledger under ``scope`` with its prompt, cached
   (``usage.prompt_tokens_details.cached_tokens``) and completion tokens, in one transaction with what it left:
   the valid answer (with the server that gave it), or the refused answer, awaiting its re-ask or, still refused
   after it, remembered as a failure with its text, lone surrogates as their JSON escapes (which read back as the
   same answer) (see 1; ``conteb llm retry-failed`` forgets it). A process killed at any point leaves no ledger
   row without its answer or failure and no answer without its row, and a rerun pays for nothing stored again.
5. An item that still fails is returned with its error: one bad item never fails the stage. A broken endpoint does:
   the circuit breaker (:mod:`llm.breaker`, ``llm.breaker_failures``) stops the run with
   :class:`llm.breaker.EndpointBroken` (one line) before more is sent; the requests not answered are not remembered.

``mode: batch`` sends the uncached requests through the Batch API instead (see ``llm/batch.py``).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import dataclasses
import os
import random
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import jsonschema
import openai

from conteb.text import escape_surrogates, text_problem
from llm.batch import run_batch
from llm.breaker import CircuitBreaker, EndpointBroken
from llm.cache import AnswerCache, RememberedFailure, cache_key
from llm.ledger import PaidCall, reask_messages, record_answer, record_refusal
from llm.modes import ModeFinder
from llm.retries import parse_retry_after, request_rejected, retry_after_header
from llm.scheduling import OrderedSlots, PrefixGate, group_order, groups_of
from llm.settings import LLMSettings
from llm.structured import CUT_OFF, Mode, ModeRefused, error_summary, mode_refusal, parse_json_object, shape_body
from llm.types import Completion, LLMRequest, LLMResult, Progress
from llm.usage import TokenUsage, checked_usage
from llm.wire import ServerFault, answer_in_reasoning, failure_kind, fetch_capped, parse_completion


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
        self.modes = ModeFinder(settings, cache, lambda message: self.log(message))
        endpoint = settings.resolved_base_url().rstrip("/")
        self.breaker = CircuitBreaker(endpoint, settings.breaker_failures, settings.max_attempts)
        self._sending: set[asyncio.Task[Any]] = set()  # the calls whose HTTP request is under way (in _post)
        self._calm: asyncio.Event | None = None  # set while the breaker is not suspect: new requests may start
        self._retrying: set[asyncio.Task[Any]] = set()  # the calls with a failed try since the last answer

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
                "structured_output": self.structured_mode,
                "prompt": request.prompt_tag,
            }
        )

    @property
    def structured_mode(self) -> Mode:
        """The structured-output mode requests are asked in: the setting, the one ``auto`` found (or recalled from
        the answer store), else the mode ``auto`` is trying (:mod:`llm.structured`)."""
        return self.modes.current

    def body(self, request: LLMRequest, extra_messages: Sequence[dict[str, str]] = ()) -> dict[str, Any]:
        """The chat-completions request body (also the Batch API line body), in :attr:`structured_mode`."""
        s = self.settings
        body: dict[str, Any] = {
            "model": s.model,
            "messages": list(request.messages) + list(extra_messages),
            "temperature": s.temperature,
            "max_tokens": s.max_tokens,
        }
        return shape_body(body, self.structured_mode, request.schema_name, request.schema)

    def read_answer(self, request: LLMRequest, content: str | None) -> dict[str, Any]:
        """:meth:`parse_answer` of ``content``, read leniently in the instruction modes (:attr:`structured_mode`)."""
        return self.parse_answer(request, content, lenient=self.structured_mode != "json_schema")

    @staticmethod
    def parse_answer(request: LLMRequest, content: str | None, lenient: bool = False) -> dict[str, Any]:
        """The validated answer object; raises :class:`AnswerError` saying what is wrong. ``lenient``: read as
        small models write (:func:`llm.structured.parse_json_object`); the schema check is strict either way."""
        if not content:
            raise AnswerError("the answer was empty")
        try:
            value = parse_json_object(content, lenient)
        except ValueError as error:
            raise AnswerError(str(error)) from None
        except RecursionError:
            raise AnswerError("the answer is JSON nested too deeply to read") from None
        if not isinstance(value, dict):
            raise AnswerError("the answer must be a JSON object")
        unstorable = _unstorable_text(value)
        if unstorable:
            raise AnswerError(unstorable)
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
        """``text`` with the API key removed (error messages may echo request details) and any lone surrogate
        escaped (a message may quote the text that held it; it is stored and published with the item)."""
        return escape_surrogates(text.replace(self._api_key, "***") if self._api_key else text)

    # --- running -------------------------------------------------------------------------------

    def run(self, requests: Sequence[LLMRequest], scope: str = "", progress: Progress | None = None) -> list[LLMResult]:
        """Answer ``requests`` (see the module docstring); results are in request order.

        With ``structured_output: auto`` the mode is recalled from the answer store, else found (:class:`ModeFinder`):
        a mode the server refuses gives way to the next and the requests are asked again in it. A refused explicit
        mode, or every mode refused, raises :class:`StructuredOutputRefused` (one line)."""
        self.modes.recall()
        while True:
            try:
                return self._run_in_mode(requests, scope, progress)
            except ModeRefused as refusal:
                self.modes.next_after(refusal)

    def _run_in_mode(self, requests: Sequence[LLMRequest], scope: str, progress: Progress | None) -> list[LLMResult]:
        keys = [self.key(request) for request in requests]
        results: dict[str, LLMResult] = {}
        for key, cached in self.cache.get_many(keys).items():
            results[key] = LLMResult(
                "", cached.value, cached=True, prompt_tokens=cached.prompt_tokens,
                completion_tokens=cached.completion_tokens, model=cached.model, cached_tokens=cached.cached_tokens,
            )  # fmt: skip
        pending = {key: request for key, request in zip(keys, requests, strict=True) if key not in results}
        remembered = self._remembered(pending)
        results.update(remembered)
        pending = group_order({key: request for key, request in pending.items() if key not in remembered})
        skipped = sum(result.remembered for result in remembered.values())
        if pending or skipped:
            self.log(
                f"{scope or 'llm'}: {len(results) - skipped} of {len(set(keys))} answers cached, {skipped} remembered "
                f"failure{'s' * (skipped != 1)} not asked again; asking {self.settings.model} for {len(pending)} "
                f"({self.settings.mode} mode)"
            )
            if pending and not self.modes.confirmed and self.settings.mode == "online":  # the first request tries it
                first = next(iter(pending))
                results.update(self.run_online({first: pending.pop(first)}, scope))
            if pending and self.settings.mode == "batch":
                results.update(run_batch(self, pending, scope, progress))
            elif pending:
                results.update(self.run_online(pending, scope, progress))
        return [
            dataclasses.replace(results[key], custom_id=request.custom_id)  # identical requests share an answer
            for key, request in zip(keys, requests, strict=True)
        ]

    def _remembered(self, pending: dict[str, LLMRequest]) -> dict[str, LLMResult]:
        """Results of the ``pending`` requests with a remembered failure, without asking: the remembered
        answer when the request's current validator accepts it (stored as an answer), else the failure."""
        out: dict[str, LLMResult] = {}
        for key, failure in self.cache.failures(pending).items():
            request = pending[key]
            tokens = TokenUsage(failure.prompt_tokens, failure.completion_tokens)
            try:
                if CUT_OFF in failure.error:  # never read, whatever the validator says now
                    raise AnswerError(CUT_OFF)
                value = self.read_answer(request, failure.answer)
            except AnswerError:
                out[key] = LLMResult(request.custom_id, error=_remembered_error(failure), model=failure.model,
                                     remembered=True)  # fmt: skip
                continue
            self.cache.put(key, request.custom_id, failure.model or self.settings.model, request.prompt_tag, value,
                           tokens)  # fmt: skip
            out[key] = LLMResult(request.custom_id, value, cached=True, prompt_tokens=tokens.prompt_tokens,
                                 completion_tokens=tokens.completion_tokens, model=failure.model)  # fmt: skip
        return out

    async def _run_online(
        self, pending: dict[str, LLMRequest], scope: str, progress: Progress | None
    ) -> dict[str, LLMResult]:
        results: dict[str, LLMResult] = {}
        if self.breaker.open:  # opened by an earlier run of this client, which stopped: this run starts afresh
            self.breaker.reset()
        self._calm = asyncio.Event()
        self._calm_down()
        async with openai.AsyncOpenAI(
            api_key=self._api_key or "not-needed",
            base_url=self.settings.resolved_base_url(),
            timeout=self.settings.timeout_s,
            max_retries=0,
        ) as client:
            flight = _Flight(
                client,
                _BreakerSlots(self.settings.max_concurrency, self),
                RateLimiter(self.settings.requests_per_minute, self.settings.tokens_per_minute),
                PrefixGate(groups_of(pending.values())),
                scope,
            )
            calls: list[asyncio.Task[Any]] = [
                asyncio.ensure_future(self._answer(flight, rank, key, request))
                for rank, (key, request) in enumerate(pending.items())
            ]
            try:
                for done, call in enumerate(asyncio.as_completed(calls), start=1):
                    key, result = await call
                    if self.breaker.open:
                        break
                    results[key] = result
                    if progress is not None:
                        progress(done, len(calls))
            except ModeRefused:  # the mode changes or the run stops: the calls still in flight are dropped
                for call in calls:
                    call.cancel()
                await asyncio.gather(*calls, return_exceptions=True)
                raise
            if self.breaker.open:  # the endpoint is broken: send nothing more, stop the run (nothing remembered)
                await self._wind_down(calls)
                raise EndpointBroken(self.breaker.reason)
        return results

    async def _wind_down(self, calls: list[asyncio.Task[Any]]) -> None:
        """Cancel the ``calls`` not sending now; wait for those whose request is under way (each ends within
        ``timeout_s``), so that an answer paid for is still stored."""
        for call in calls:
            if call not in self._sending:
                call.cancel()
        await asyncio.gather(*calls, return_exceptions=True)

    async def _answer(self, flight: _Flight, rank: int, key: str, request: LLMRequest) -> tuple[str, LLMResult]:
        """Ask for request number ``rank`` of the flight, once its prefix group lets it go (leader: at once)."""
        await flight.gate.wait(rank, request.prefix_group)
        try:
            return await self._answer_now(flight, rank, key, request)
        finally:
            flight.gate.release(request.prefix_group)  # a leader that failed lets its followers go too

    async def _answer_now(self, flight: _Flight, rank: int, key: str, request: LLMRequest) -> tuple[str, LLMResult]:
        """Ask for ``request``'s answer: one call, and one re-ask with the problem stated when its answer is invalid.
        Each paid call is recorded with what it left in one transaction (:mod:`llm.ledger`).

        A refused first answer is stored, with its call, as awaiting its re-ask, so a rerun after a kill sends only
        the re-ask (:meth:`AnswerCache.awaiting_reask`). An answer cut off by ``max_tokens`` (``finish_reason:
        length``) is refused whatever the mode and remembered as a failure at once, without a re-ask: the re-ask
        would run under the same ``llm.max_tokens`` with a longer prompt, so it would most likely be cut off again
        and paid twice (a larger ``llm.max_tokens`` is a new key: the next run asks again)."""
        result = LLMResult(request.custom_id, model=self.settings.model)
        extra: list[dict[str, str]] = []
        asks = 2  # the first answer, then one re-ask when it is invalid
        awaiting = self.cache.awaiting_reask(key)
        if awaiting is not None:  # the first call was paid and refused in a run that was killed before the re-ask
            result.prompt_tokens, result.completion_tokens = awaiting.prompt_tokens, awaiting.completion_tokens
            extra, asks = reask_messages(awaiting.answer, awaiting.error.removeprefix("invalid answer: ")), 1
        for ask in range(asks):
            try:
                completion, call = await self._complete(flight, rank, request, extra, result)
            except ModeRefused:
                raise  # every request would fail the same way: the run changes mode or stops
            except Exception as error:  # transport failure after retries, or a non-retryable status
                result.error = self.scrub(f"{type(error).__name__}: {error}")
                return key, result
            cut_off = completion.finish_reason == "length"
            try:
                if cut_off:
                    raise AnswerError(CUT_OFF)
                result.value = self.read_answer(request, completion.content)
            except AnswerError as problem:
                result.error = f"invalid answer: {problem}"
                again = not cut_off and ask + 1 < asks
                record_refusal(self.cache, call, key, request, result.error, completion.content,
                               (result.prompt_tokens, result.completion_tokens), again)  # fmt: skip
                if not again:
                    return key, result
                extra = reask_messages(completion.content, str(problem))
                continue
            result.error = None
            paid = TokenUsage(result.prompt_tokens, result.completion_tokens, result.cached_tokens)
            record_answer(self.cache, call, key, request, result.value, paid, completion.server)
            return key, result
        raise AssertionError("unreachable")  # pragma: no cover

    async def _complete(
        self, flight: _Flight, rank: int, request: LLMRequest, extra: list[dict[str, str]], result: LLMResult
    ) -> tuple[Completion, PaidCall]:
        """One call, retried on transient failures: the answer, and the call as the ledger records it (its checked
        tokens, also added to ``result``, and estimated dollars; the caller records it, :mod:`llm.ledger`). The first
        answer from the server releases the request's prefix group (the provider has seen the prefix)."""
        scope = flight.scope
        body = self.body(request, extra)
        estimate = sum(len(m["content"]) for m in body["messages"]) // 4 + self.settings.max_tokens
        for attempt in range(1, self.settings.max_attempts + 1):
            result.attempts += 1
            try:
                async with flight.slots.hold(rank):
                    await flight.limiter.acquire(estimate)
                    completion = await self._post(flight.client, body)
            except (openai.APIConnectionError, openai.APIStatusError, ServerFault) as error:
                status = getattr(error, "status_code", None)
                text = _error_text(error)
                retryable = status is None or not request_rejected(status, text)
                if status is not None and not retryable and mode_refusal(status, text):
                    raise ModeRefused(self.structured_mode, status, error_summary(text)) from None
                if not retryable or attempt == self.settings.max_attempts:
                    raise
                delay, why = self._delay(attempt, error)
                what = f": {error}" if isinstance(error, ServerFault) else f" {status}" if status else ""
                self.log(
                    f"{scope or 'llm'}: {request.custom_id}: {type(error).__name__}{what}, "
                    f"retry {attempt}/{self.settings.max_attempts - 1} in {delay:.1f}s{why}"
                )
                await asyncio.sleep(delay)
                continue
            flight.gate.release(request.prefix_group)
            self.modes.settle()
            usage = checked_usage(completion.usage, body, self.log, f"{scope or 'llm'}: {request.custom_id}")
            result.prompt_tokens += usage.prompt_tokens
            result.completion_tokens += usage.completion_tokens
            result.cached_tokens += usage.cached_tokens
            cost = self.settings.cost_usd(usage.prompt_tokens, usage.completion_tokens,
                                          cached_tokens=usage.cached_tokens)  # fmt: skip
            return completion, PaidCall(scope, self.settings.model, "online", usage, cost)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _post(self, client: openai.AsyncOpenAI, body: dict[str, Any]) -> Completion:
        """One chat-completions call: its answer as :class:`llm.types.Completion`.

        The whole call, from sending to the answer's last byte, must end within ``timeout_s`` and the
        answer may not exceed ``max_answer_bytes``, else :class:`ServerFault`; status and connection
        errors are raised as the SDK raises them. Each outcome goes to the circuit breaker
        (:mod:`llm.breaker`; a refused structured-output mode is not counted): nothing is sent once it is
        open, and the failure that opens it raises :class:`llm.breaker.EndpointBroken` (not retried). An
        answer whose ``content`` is empty with the answer in ``reasoning_content`` (vLLM's reasoning
        parser) is read from there (:func:`llm.wire.answer_in_reasoning`).
        """
        self.breaker.check()
        task = asyncio.current_task()
        if task is not None:
            self._sending.add(task)
        try:
            completion = await self._post_once(client, body)
        except (openai.APIConnectionError, openai.APIStatusError, ServerFault) as error:
            status = getattr(error, "status_code", None)
            text = _error_text(error)
            refused_mode = status is not None and mode_refusal(status, text)  # `auto` moves on
            rejected = status is not None and request_rejected(status, text)
            # a request's tries share one body, alive while it is tried: its id tells the tries of a request apart
            self.breaker.failure(None if refused_mode else failure_kind(error), id(body), rejected)
            if task is not None and task not in self._retrying:
                self._retrying.add(task)
                task.add_done_callback(lambda _: self._calm_down())
            self._calm_down()
            if self.breaker.open:
                raise EndpointBroken(self.breaker.reason) from error
            raise
        finally:
            self._sending.discard(task)  # type: ignore[arg-type]
        self.breaker.answer()
        self._retrying.clear()
        self._calm_down()
        return answer_in_reasoning(completion)

    def _may_send(self) -> bool:
        """Whether the current call may take a slot: not while the breaker is suspect, unless it retries (its answer
        says whether the endpoint is back or gone)."""
        return self._calm is None or self._calm.is_set() or asyncio.current_task() in self._retrying

    async def _admit(self) -> None:
        """Wait until :meth:`_may_send`."""
        while not self._may_send() and self._calm is not None:
            await self._calm.wait()

    def _calm_down(self) -> None:
        """Let new requests start unless the breaker is suspect while a request under retry can settle it."""
        if self._calm is not None:
            if self.breaker.suspect and any(not task.done() for task in self._retrying):
                self._calm.clear()
            else:
                self._calm.set()

    async def _post_once(self, client: openai.AsyncOpenAI, body: dict[str, Any]) -> Completion:
        """:meth:`_post` without the circuit breaker."""
        content_type, data, server = await fetch_capped(
            client, "/chat/completions", body, self.settings.timeout_s, self.settings.max_answer_bytes
        )
        return parse_completion(content_type, data, server)

    def _delay(self, attempt: int, error: Exception) -> tuple[float, str]:
        """Seconds to wait before try ``attempt + 1``, and a note for the log: the server's ``Retry-After``
        (capped at ``max_retry_after_s``) when it can be read, else backoff with jitter."""
        header, value = retry_after_header(error)
        if value is not None:
            seconds = parse_retry_after(value, time.time())
            if header == "retry-after-ms" and seconds is not None:
                seconds /= 1000
            cap = self.settings.max_retry_after_s
            if seconds is not None and seconds > cap:
                return cap, f" ({header} {value!r} = {seconds:g} s, capped at {cap:g} s: llm.max_retry_after_s)"
            if seconds is not None:
                return seconds, f" ({header} {value!r})"
            note = f" ({header} {value!r} ignored: neither seconds nor an HTTP date)"
        else:
            note = ""
        ceiling = min(self.settings.backoff_max_s, self.settings.backoff_initial_s * 2 ** (attempt - 1))
        return ceiling / 2 + random.uniform(0, ceiling / 2), note  # "equal jitter"


@dataclasses.dataclass(frozen=True)
class _Flight:
    """What the calls of one online run share: the SDK client, the slots, the rate limiter, the prefix gate."""

    client: openai.AsyncOpenAI
    slots: OrderedSlots
    limiter: RateLimiter
    gate: PrefixGate
    scope: str


class _BreakerSlots(OrderedSlots):
    """:class:`llm.scheduling.OrderedSlots` whose slot goes only to a call the circuit breaker lets send
    (:meth:`LLMClient._may_send`): one granted a slot while it may not gives it back and waits."""

    def __init__(self, size: int, client: LLMClient) -> None:
        super().__init__(size)
        self._client = client

    async def acquire(self, rank: int) -> None:
        while True:
            await self._client._admit()
            await super().acquire(rank)
            if self._client._may_send():
                return
            self.release()


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


def _unstorable_text(value: dict[str, Any]) -> str | None:
    """Why a text of the parsed answer ``value`` (a key or a string, at any depth) cannot be kept
    (:func:`conteb.text.text_problem`), naming where as the schema check does; None when every text can."""
    stack: list[tuple[tuple[str, ...], Any]] = [((), value)]
    while stack:  # a loop: no RecursionError, however deep the answer
        path, item = stack.pop()
        if isinstance(item, str) and (problem := text_problem(item)):
            return f"the answer's text at {'/'.join(path) or '(root)'} cannot be stored: {problem}"
        if isinstance(item, dict):
            for name in item:
                if problem := text_problem(name):
                    return f"a key of the answer at {'/'.join(path) or '(root)'} cannot be stored: {problem}"
        children = item.items() if isinstance(item, dict) else enumerate(item) if isinstance(item, list) else ()
        stack += reversed([((*path, str(name)), inner) for name, inner in children])  # reading order
    return None


def _error_text(error: Exception) -> str:
    """The message of a failed call and, for a status error, the server's designated error message."""
    body = getattr(error, "body", None)
    inner = body.get("error", body) if isinstance(body, dict) else body
    detail = inner.get("message") if isinstance(inner, dict) else inner
    return f"{detail}\n{error}" if isinstance(detail, str) and detail not in str(error) else str(error)


def _remembered_error(failure: RememberedFailure) -> str:
    """The error of a result whose failure was remembered (says how to ask again)."""
    task = failure.scope.split("/", 1)[0]
    command = f"conteb llm retry-failed --task {task}" if task else "conteb llm retry-failed"
    return f"{failure.error} (remembered from an earlier run, not asked again; `{command}` asks again)"


def _run_coroutine(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coroutine`` to completion, also when called from inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
