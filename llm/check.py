"""``conteb llm check``'s look at an endpoint: its models, the structured-output modes it accepts, its speed.

:func:`check_endpoint` asks the server at ``settings.resolved_base_url()``, with the official ``openai`` client:

1. ``GET /v1/models``: the models it serves (a server without the endpoint, or refusing it, is said so and the
   check carries on with the configured model; an unset ``llm.model`` becomes the first model served);
2. one tiny request per structured-output mode (:data:`llm.structured.PROBE_ORDER`), each answer read as the
   client reads it (:func:`llm.structured.parse_json_object`, then the tiny schema, strictly);
3. one short answer in the best mode, timed: tokens per second from the answer's ``usage.completion_tokens``, or
   estimated from its characters (4 per token) when the server reports no usage (the report says which).

The report (:class:`EndpointReport`) gives the ``llm:`` block to paste into ``conteb.yaml``. An endpoint that cannot
be reached raises :class:`EndpointUnreachable` (one line). Nothing is cached or written.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import openai

from llm.settings import LLMSettings
from llm.structured import PROBE_ORDER, Mode, error_summary, mode_refusal, parse_json_object, shape_body

TINY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}
_SYSTEM = "You check that a server answers in JSON."
_CHARS_PER_TOKEN = 4


class EndpointUnreachable(RuntimeError):
    """The endpoint could not be reached (connection refused, name unknown, no answer in time)."""


@dataclass(frozen=True)
class ModeTrial:
    """How the server treated one mode: ``accepted`` (an HTTP 200), and whether its answer was ``valid``."""

    mode: Mode
    accepted: bool
    valid: bool
    detail: str


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

    def yaml_block(self) -> str:
        """The ``llm:`` block for ``conteb.yaml`` (the mode ``auto`` would find, written out)."""
        refused = [trial.mode for trial in self.trials if not trial.accepted]
        why = f"  # the server refused {', '.join(refused)}" if refused else ""
        return (
            f"llm:\n  base_url: {self.url}\n  model: {self.model}\n"
            f"  structured_output: {self.best or 'json_instruction'}{why}\n"
        )

    def lines(self) -> list[str]:
        out = [f"endpoint {self.url}", self.models_note]
        for trial in self.trials:
            verdict = "valid answer" if trial.valid else "answer refused" if trial.accepted else "refused"
            out.append(f"  {trial.mode:<16} {verdict}: {trial.detail}")
        if self.speed:
            out.append(self.speed)
        return out


def check_endpoint(settings: LLMSettings, api_key: str | None, model_given: bool) -> EndpointReport:
    """Look at the endpoint of ``settings`` (module doc); ``model_given``: ``settings.model`` was set (else the
    first model the server lists is used). Raises :class:`EndpointUnreachable`."""
    url = settings.resolved_base_url().rstrip("/")
    timeout = min(settings.timeout_s, 120.0)
    client = openai.OpenAI(api_key=api_key or "not-needed", base_url=url, timeout=timeout, max_retries=0)
    try:
        models, note = _models(client, url)
        model = settings.model if model_given or not models else models[0]
        if models is not None and model not in models:
            note += f"; llm.model {model!r} is not among them"
        report = EndpointReport(url, model, models, note)
        report.trials = [_trial(client, settings, model, mode) for mode in PROBE_ORDER]
        usable = [trial for trial in report.trials if trial.valid] or [t for t in report.trials if t.accepted]
        report.best = usable[0].mode if usable else None
        if report.best is not None:
            report.speed = _speed(client, settings, model, report.best)
    except (openai.APIConnectionError, openai.APITimeoutError) as error:
        raise EndpointUnreachable(f"cannot reach the LLM endpoint at {url}: {error} (check llm.base_url)") from None
    finally:
        client.close()
    return report


def _models(client: openai.OpenAI, url: str) -> tuple[list[str] | None, str]:
    """The served models and a line saying so (or why they are unknown)."""
    try:
        models = [entry.id for entry in client.models.list()]
    except openai.APIStatusError as error:
        why = "the server has no /v1/models" if error.status_code == 404 else "GET /v1/models was refused"
        return None, f"models: unknown ({why}, HTTP {error.status_code}); carrying on with the configured model"
    return models, f"models served: {', '.join(models) or '(none listed)'}"


def _ask(client: openai.OpenAI, body: dict[str, Any]) -> tuple[str, Any]:
    """One chat call: ``(content, usage)`` of its answer."""
    completion = client.chat.completions.create(**body)
    return completion.choices[0].message.content or "", completion.usage


def _body(settings: LLMSettings, model: str, mode: Mode, question: str, max_tokens: int) -> dict[str, Any]:
    body = {
        "model": model,
        "messages": [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": question}],
        "temperature": settings.temperature,
        "max_tokens": max_tokens,
    }
    return shape_body(body, mode, "check", TINY_SCHEMA)


def _trial(client: openai.OpenAI, settings: LLMSettings, model: str, mode: Mode) -> ModeTrial:
    """Ask for the tiny schema in ``mode``: refused (and why), or accepted with a valid answer or not."""
    try:
        content, _ = _ask(client, _body(settings, model, mode, 'Reply with "ok" as the answer.', 64))
    except openai.APIStatusError as error:
        text = f"{error.message} {error.body}"
        kind = "" if mode_refusal(error.status_code, text) else " (not about the response format)"
        return ModeTrial(mode, False, False, f"HTTP {error.status_code}: {error_summary(error.message)}{kind}")
    try:
        value = parse_json_object(content, lenient=mode != "json_schema")
        jsonschema.validate(value, TINY_SCHEMA)
    except (ValueError, jsonschema.ValidationError) as error:
        message = error.message if isinstance(error, jsonschema.ValidationError) else str(error)
        return ModeTrial(mode, True, False, f"{message}: {content[:60]!r}")
    return ModeTrial(mode, True, True, f"{content.strip()[:60]!r}")


def _speed(client: openai.OpenAI, settings: LLMSettings, model: str, mode: Mode) -> str:
    """Time a short answer in ``mode``: a line with seconds and tokens per second (reported, or estimated)."""
    question = "Describe a river in two short sentences, as the answer."
    started = time.perf_counter()
    try:
        content, usage = _ask(client, _body(settings, model, mode, question, 128))
    except openai.APIStatusError as error:
        return f"speed: not measured (HTTP {error.status_code}: {error_summary(error.message)})"
    seconds = max(time.perf_counter() - started, 1e-6)
    if usage is not None and usage.completion_tokens:
        tokens, source = usage.completion_tokens, "usage.completion_tokens"
    else:
        tokens, source = max(1, len(content) // _CHARS_PER_TOKEN), f"estimated from {len(content)} characters"
    return (
        f"speed: {tokens} tokens in {seconds:.2f} s = {tokens / seconds:.1f} tokens/s ({source}, {mode}, "
        "one request at a time)"
    )
