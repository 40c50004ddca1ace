"""``conteb llm check``'s look at an endpoint: its models, the structured-output modes it accepts, its speed.

:func:`check_endpoint` asks the server at ``settings.resolved_base_url()``, with the official ``openai`` client:

1. ``GET /v1/models``: the models it serves (a server without the endpoint, or refusing it, is said so and the
   check carries on with the configured model; an unset ``llm.model`` becomes the first model served);
2. one tiny request per structured-output mode (:data:`llm.structured.PROBE_ORDER`), each answer read as the
   client reads it (:func:`llm.structured.parse_json_object`, then the tiny schema, strictly);
3. one short answer in the best mode, timed: tokens per second from the answer's ``usage.completion_tokens``, or
   estimated from its characters (4 per token) when the server reports no usage (the report says which).

Each answer is read as the client reads its answers (``llm/client.py``): at most ``llm.max_answer_bytes``, within
``llm.timeout_s`` (at most 120 s) from sending to the last byte, and a chat answer must be a chat completion; a model
list or an answer that is not (HTML, JSON of another shape, too large, never finished) is said so in its line, and an
answer put in ``reasoning_content`` is read from there. The report says in words how the server treats what it is
asked (:attr:`EndpointReport.notes`): a ``response_format`` accepted and not enforced, answers in
``reasoning_content``. The whole check ends within :func:`deadline_s` (three times the per-call limit).

The report (:class:`EndpointReport`) gives the ``llm:`` block to paste into ``conteb.yaml``. An endpoint that cannot
be reached, or a check that does not end within its deadline, raises :class:`EndpointUnreachable` (one line).
Nothing is cached or written.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import openai

from llm.settings import LLMSettings
from llm.structured import PROBE_ORDER, Mode, error_summary, mode_refusal, parse_json_object, shape_body
from llm.types import Completion
from llm.wire import ServerFault, answer_in_reasoning, fetch_capped, parse_completion

TINY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}
_SYSTEM = "You check that a server answers in JSON."
_CHARS_PER_TOKEN = 4


class EndpointUnreachable(RuntimeError):
    """The endpoint could not be reached (connection refused, name unknown, no answer in time), or the check did not
    end within its deadline."""


@dataclass(frozen=True)
class ModeTrial:
    """How the server treated one mode: ``accepted`` (an HTTP 200 with a chat completion), whether its answer was
    ``valid``; ``fault``: no usable chat completion came back (HTML, too large, never finished)."""

    mode: Mode
    accepted: bool
    valid: bool
    detail: str
    fault: bool = False


@dataclass
class EndpointReport:
    """What :func:`check_endpoint` found; :meth:`lines` says it, :meth:`yaml_block` is the block to paste."""

    url: str
    model: str
    models: list[str] | None
    models_note: str
    trials: list[ModeTrial] = field(default_factory=list)
    speed: str = ""
    best: Mode | None = None
    notes: list[str] = field(default_factory=list)

    def yaml_block(self) -> str:
        """The ``llm:`` block for ``conteb.yaml`` (the mode ``auto`` would find, written out)."""
        refused = [trial.mode for trial in self.trials if not trial.accepted and not trial.fault]
        why = f"  # the server refused {', '.join(refused)}" if refused else ""
        return (
            f"llm:\n  base_url: {self.url}\n  model: {self.model}\n"
            f"  structured_output: {self.best or 'json_instruction'}{why}\n"
        )

    def lines(self) -> list[str]:
        out = [f"endpoint {self.url}", self.models_note]
        for trial in self.trials:
            verdict = (
                "valid answer" if trial.valid else "answer refused" if trial.accepted
                else "no usable answer" if trial.fault else "refused"
            )  # fmt: skip
            out.append(f"  {trial.mode:<16} {verdict}: {trial.detail}")
        out += [f"note: {note}" for note in self.notes]
        if self.speed:
            out.append(self.speed)
        return out


def deadline_s(settings: LLMSettings) -> float:
    """The longest a whole check may take: three times the limit of one call (``llm.timeout_s``, at most 120 s)."""
    return 3 * _call_limit(settings)


def check_endpoint(settings: LLMSettings, api_key: str | None, model_given: bool) -> EndpointReport:
    """Look at the endpoint of ``settings`` (module doc); ``model_given``: ``settings.model`` was set (else the
    first model the server lists is used). Raises :class:`EndpointUnreachable`."""
    return asyncio.run(_check(settings, api_key, model_given))


def _call_limit(settings: LLMSettings) -> float:
    return min(settings.timeout_s, 120.0)


async def _check(settings: LLMSettings, api_key: str | None, model_given: bool) -> EndpointReport:
    url = settings.resolved_base_url().rstrip("/")
    total = deadline_s(settings)
    try:
        async with (
            asyncio.timeout(total),
            openai.AsyncOpenAI(
                api_key=api_key or "not-needed", base_url=url, timeout=_call_limit(settings), max_retries=0
            ) as client,
        ):
            check = _Check(client, settings)
            models, note = await check.models()
            model = settings.model if model_given or not models else models[0]
            if models is not None and model not in models:
                note += f"; llm.model {model!r} is not among them"
            report = EndpointReport(url, model, models, note)
            report.trials = [await check.trial(model, mode, report.notes) for mode in PROBE_ORDER]
            usable = [trial for trial in report.trials if trial.valid] or [t for t in report.trials if t.accepted]
            report.best = usable[0].mode if usable else None
            if report.best is not None:
                report.speed = await check.speed(model, report.best)
    except (openai.APIConnectionError, openai.APITimeoutError) as error:
        raise EndpointUnreachable(f"cannot reach the LLM endpoint at {url}: {error} (check llm.base_url)") from None
    except TimeoutError:
        raise EndpointUnreachable(
            f"the check of the LLM endpoint at {url} did not end within {total:g} s (three times llm.timeout_s, at "
            "most 120 s a call): the server does not finish its answers"
        ) from None
    return report


class _Check:
    """The calls of one check: each within the per-call limit, its answer read at most ``llm.max_answer_bytes``."""

    def __init__(self, client: openai.AsyncOpenAI, settings: LLMSettings) -> None:
        self.client = client
        self.settings = settings

    async def _fetch(self, path: str, body: dict[str, Any] | None) -> tuple[str, bytes]:
        """``(content type, body)`` of ``GET path`` (``body`` None) or ``POST path``: :func:`llm.wire.fetch_capped`
        within the per-call limit."""
        content_type, data, _server = await fetch_capped(
            self.client, path, body, _call_limit(self.settings), self.settings.max_answer_bytes
        )
        return content_type, data

    async def models(self) -> tuple[list[str] | None, str]:
        """The served models and a line saying so (or why they are unknown)."""
        try:
            content_type, data = await self._fetch("/models", None)
        except openai.APIStatusError as error:
            why = "the server has no /v1/models" if error.status_code == 404 else "GET /v1/models was refused"
            return None, f"models: unknown ({why}, HTTP {error.status_code}); carrying on with the configured model"
        except ServerFault as fault:
            return None, f"models: unknown (GET /v1/models: {fault}); carrying on with the configured model"
        models = _model_ids(data)
        if models is None:
            what = f"{content_type or 'no content type'}, {len(data):,} bytes"
            preview = data[:80].decode("utf-8", "replace")
            return None, (
                f"models: unknown (GET /v1/models answered {what}, not a model list: {preview!r}); carrying on with "
                "the configured model"
            )
        return models, f"models served: {', '.join(models) or '(none listed)'}"

    async def ask(self, body: dict[str, Any]) -> Completion:
        """One chat call: its answer (:class:`ServerFault` when it is not a chat completion)."""
        content_type, data = await self._fetch("/chat/completions", body)
        return parse_completion(content_type, data)

    async def trial(self, model: str, mode: Mode, notes: list[str]) -> ModeTrial:
        """Ask for the tiny schema in ``mode``: refused (and why), no usable answer, or accepted with a valid answer
        or not; what the answer shows of the server goes to ``notes``."""
        try:
            completion = await self.ask(_body(self.settings, model, mode, 'Reply with "ok" as the answer.', 64))
        except openai.APIStatusError as error:
            text = f"{error.message} {error.body}"
            kind = "" if mode_refusal(error.status_code, text) else " (not about the response format)"
            return ModeTrial(mode, False, False, f"HTTP {error.status_code}: {error_summary(error.message)}{kind}")
        except ServerFault as fault:
            return ModeTrial(mode, False, False, str(fault), fault=True)
        read = answer_in_reasoning(completion)
        if read.content is not completion.content:
            _note(
                notes, "puts its answer in reasoning_content with an empty content: read from there (as the stages do)"
            )
        content = read.content or ""
        try:
            value = parse_json_object(content, lenient=mode != "json_schema")
            jsonschema.validate(value, TINY_SCHEMA)
        except (ValueError, jsonschema.ValidationError) as error:
            message = error.message if isinstance(error, jsonschema.ValidationError) else str(error)
            if mode != "json_instruction":
                _note(notes, f"accepts {mode} but does not enforce it: answers must be validated (they are)")
            return ModeTrial(mode, True, False, f"{message}: {content[:60]!r}")
        return ModeTrial(mode, True, True, f"{content.strip()[:60]!r}")

    async def speed(self, model: str, mode: Mode) -> str:
        """Time a short answer in ``mode``: a line with seconds and tokens per second (reported, or estimated)."""
        question = "Describe a river in two short sentences, as the answer."
        started = time.perf_counter()
        try:
            completion = answer_in_reasoning(await self.ask(_body(self.settings, model, mode, question, 128)))
        except openai.APIStatusError as error:
            return f"speed: not measured (HTTP {error.status_code}: {error_summary(error.message)})"
        except ServerFault as fault:
            return f"speed: not measured ({fault})"
        seconds = max(time.perf_counter() - started, 1e-6)
        content = completion.content or ""
        if completion.usage.completion_tokens:
            tokens, source = completion.usage.completion_tokens, "usage.completion_tokens"
        else:
            tokens, source = max(1, len(content) // _CHARS_PER_TOKEN), f"estimated from {len(content)} characters"
        return (
            f"speed: {tokens} tokens in {seconds:.2f} s = {tokens / seconds:.1f} tokens/s ({source}, {mode}, "
            "one request at a time)"
        )


def _model_ids(data: bytes) -> list[str] | None:
    """The ids of a ``GET /v1/models`` answer, None when it is not a model list."""
    try:
        value = json.loads(data)
    except ValueError:
        return None
    entries = value.get("data") if isinstance(value, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("id"), str) for e in entries):
        return None
    return [entry["id"] for entry in entries]


def _note(notes: list[str], note: str) -> None:
    if note not in notes:
        notes.append(note)


def _body(settings: LLMSettings, model: str, mode: Mode, question: str, max_tokens: int) -> dict[str, Any]:
    body = {
        "model": model,
        "messages": [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": question}],
        "temperature": settings.temperature,
        "max_tokens": max_tokens,
    }
    return shape_body(body, mode, "check", TINY_SCHEMA)
