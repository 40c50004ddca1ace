"""One chat-completions answer off the wire: read capped, parsed, and what a failed call was, in words.

:func:`fetch_capped` makes one call whose whole answer must arrive within a deadline and a size;
:func:`read_capped` reads an answer's body up to a size; :func:`parse_completion` reads it as a chat completion
(:class:`llm.types.Completion`), else raises :class:`ServerFault` saying what came back; :func:`answer_in_reasoning`
reads an answer a reasoning server put in ``reasoning_content``; :func:`failure_kind` names a failed call's failure
for the circuit breaker (:mod:`llm.breaker`). Used by the client (``llm/client.py``) and ``conteb llm check``
(``llm/check.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any, cast

import openai
from openai import AsyncAPIResponse
from openai._constants import RAW_RESPONSE_HEADER  # "stream": the SDK hands back the unread response
from openai.types.chat import ChatCompletion

from llm.types import Completion
from llm.usage import read_usage

_PREVIEW_CHARS = 80


class ServerFault(RuntimeError):
    """No usable chat completion came back (deadline passed, not a completion, too large): retried like a 5xx.
    ``kind``: the failure in words that do not change from call to call (the circuit breaker counts by it)."""

    def __init__(self, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind or message


async def fetch_capped(
    client: openai.AsyncOpenAI, path: str, body: dict[str, Any] | None, timeout_s: float, limit: int
) -> tuple[str, bytes, str]:
    """``(content type, body, Server header)`` of ``GET path`` (``body`` None) or ``POST path``: the whole call, from
    sending to the answer's last byte, within ``timeout_s``, and at most ``limit`` bytes read, else
    :class:`ServerFault`; status and connection errors are raised as the SDK raises them.

    The SDK's generic GET/POST, as ``chat.completions.create(**body)`` without re-validating the parameters we built
    ourselves (CPU that limits the client at high concurrency: bench/BENCHMARKS.md, "LLM client concurrency"); with
    the "stream" header the SDK returns the unread :class:`AsyncAPIResponse` (not the type ``cast_to`` names), so
    that the body's size can be capped while it arrives.
    """
    options: Any = {"headers": {RAW_RESPONSE_HEADER: "stream"}}
    try:
        async with asyncio.timeout(timeout_s):
            if body is None:
                sent = await client.get(path, cast_to=object, options=options)
            else:
                sent = await client.post(path, cast_to=ChatCompletion, body=body, options=options)
            response = cast(AsyncAPIResponse[Any], sent)
            data = await read_capped(response, limit)
    except TimeoutError:
        why = f"no complete answer within {timeout_s:g} s (llm.timeout_s)"
        raise ServerFault(why, kind=f"{why}: the server does not finish its answers") from None
    return response.headers.get("content-type", ""), data, response.headers.get("server", "")


async def read_capped(response: AsyncAPIResponse[Any], limit: int) -> bytes:
    """The body of a streamed ``response`` (closed afterwards); :class:`ServerFault` when it is larger than
    ``limit`` bytes or breaks off."""
    data = bytearray()
    try:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise ServerFault(_too_large(int(declared), limit), _TOO_LARGE)
        async for chunk in response.iter_bytes():
            data += chunk
            if len(data) > limit:
                raise ServerFault(_too_large(len(data), limit), _TOO_LARGE)
    except ServerFault:
        raise
    except Exception as error:  # the HTTP library's own error types (they differ between SDK versions)
        broke = f"{type(error).__name__}: {error}"
        why = f"the answer broke off after {len(data):,} bytes ({broke})"
        raise ServerFault(why, "the answers break off (the connection closes mid-answer)") from error
    finally:
        await response.close()
    return bytes(data)


def parse_completion(content_type: str, data: bytes, server_header: str = "") -> Completion:
    """The :class:`llm.types.Completion` of a chat-completions answer body (tokens as reported,
    :func:`llm.usage.read_usage`; the caller checks them, :func:`llm.usage.checked_usage`); ``server`` is the
    answer's ``system_fingerprint``, else ``server_header`` (the HTTP ``Server`` header).

    Raises :class:`ServerFault` saying what came back (content type, size, first characters) when
    ``data`` is not a JSON object whose ``choices[0].message`` holds a string (or null) ``content``.
    """
    what = f"{content_type or 'no content type'}, {len(data):,} bytes"
    kind = f"the server answers {content_type.split(';')[0].strip() or 'with no content type'}, not a chat completion"
    try:
        value = json.loads(data)
    except ValueError:  # also undecodable bytes
        raise ServerFault(f"the answer is not a chat completion ({what}, not JSON): {_preview(data)}", kind) from None
    choices = value.get("choices") if isinstance(value, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict) or not isinstance(message.get("content"), str | None):
        raise ServerFault(
            f"the answer is not a chat completion ({what}, JSON without choices[0].message.content): {_preview(data)}",
            "the server answers JSON that is not a chat completion (no choices[0].message.content)",
        )
    reasoning = message.get("reasoning_content")
    finish = first.get("finish_reason") if isinstance(first, dict) else None
    fingerprint = value.get("system_fingerprint")
    return Completion(
        content=message.get("content"),
        usage=read_usage(value.get("usage")),
        finish_reason=finish if isinstance(finish, str) else None,
        reasoning_content=reasoning if isinstance(reasoning, str) else None,
        server=fingerprint if isinstance(fingerprint, str) and fingerprint else server_header[:200],
    )


def answer_in_reasoning(completion: Completion) -> Completion:
    """``completion`` with ``reasoning_content`` as its ``content`` when ``content`` is empty or null and the
    answer was not cut off (vLLM's reasoning parser may put the whole answer there), else ``completion``; the
    answer is then read and validated as any other."""
    if completion.content or not completion.reasoning_content or completion.finish_reason == "length":
        return completion
    return dataclasses.replace(completion, content=completion.reasoning_content)


def failure_kind(error: Exception) -> str | None:
    """The failure of a call in words that do not change from call to call, for the circuit breaker; None for a
    rate limit (the server works and asks to wait), not counted."""
    if isinstance(error, ServerFault):
        return error.kind
    if isinstance(error, openai.APIStatusError):
        code = error.code if isinstance(error.code, str) else ""
        if error.status_code == 429 and code != "insufficient_quota":
            return None
        return f"the server answers HTTP {error.status_code}" + (f" ({code})" if code else "")
    if isinstance(error, openai.APITimeoutError):
        return "no answer within llm.timeout_s"
    causes: list[str] = []
    cause: BaseException | None = error
    while cause is not None and len(causes) < 8:
        causes.append(f"{type(cause).__name__}: {cause}")
        cause = cause.__cause__ or cause.__context__
    text = " ".join(causes)
    if "refused" in text.lower():
        return "connection refused: the server is gone (or not started)"
    if "disconnected" in text.lower() or "reset" in text.lower():
        return "the server closes the connection without answering"
    return f"the server cannot be reached ({type(error).__name__})"


def _preview(data: bytes) -> str:
    """The first characters of ``data``, quoted, with ``...`` when there is more."""
    text = data.decode("utf-8", "replace")  # at most max_answer_bytes
    return repr(text[:_PREVIEW_CHARS]) + ("..." if len(text) > _PREVIEW_CHARS else "")


_TOO_LARGE = "the answers are larger than llm.max_answer_bytes"


def _too_large(size: int, limit: int) -> str:
    return f"the answer (at least {size:,} bytes) is larger than llm.max_answer_bytes ({limit} bytes)"
