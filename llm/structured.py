"""How an answer's structure is asked for (``llm.structured_output``), and how the answer is read back.

Modes, best first (:data:`PROBE_ORDER`):

* ``json_schema``: ``response_format: {"type": "json_schema", ...}`` with the request's schema (OpenAI, vLLM,
  Ollama, llama.cpp's llama-server: the server constrains the answer to the schema);
* ``json_object``: ``response_format: {"type": "json_object"}`` (JSON mode: any JSON object) and the schema
  stated in the system message (llama-cpp-python's server, which refuses ``json_schema``);
* ``json_instruction``: no ``response_format``; the schema stated in the system message only.

``auto`` (the default) is not a mode: the client finds the best mode the server accepts (``llm/client.py``).

A server refuses a mode with a non-transient error whose message is about the request's ``response_format``
(:func:`mode_refusal`): OpenAI and vLLM answer 400, FastAPI servers 422, llama-cpp-python 500 with a pydantic
validation body ("Input should be 'text' or 'json_object'"), old llama-server builds 500 "response_format type
must be one of ...". Answers of the instruction modes are read leniently (:func:`parse_json_object`: a code fence,
prose around the object, a trailing comma, with the maintained ``json_repair`` parser); the schema check that
follows stays strict. No I/O.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import json_repair

from llm.retries import request_rejected

Mode = Literal["json_schema", "json_object", "json_instruction"]
PROBE_ORDER: tuple[Mode, ...] = ("json_schema", "json_object", "json_instruction")
"""The modes ``auto`` tries, best first."""
CUT_OFF = "the answer was cut off by max_tokens (finish_reason: length)"
"""The refusal of an answer the server stopped at ``llm.max_tokens`` (never read, never re-asked)."""

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)
_ABOUT_FORMAT = re.compile(r"response_format|json_schema|json_object|structured output|guided", re.IGNORECASE)


def instruction(schema: dict[str, Any]) -> str:
    """The text appended to the system message in the instruction modes (it names JSON: OpenAI's JSON mode
    requires the word in the messages)."""
    return "\n\nReply with one JSON object, and nothing else, that matches this JSON schema:\n" + json.dumps(
        schema, ensure_ascii=False
    )


def shape_body(body: dict[str, Any], mode: Mode, schema_name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """``body`` (a chat-completions body whose first message is the system message) asking for ``schema`` in
    ``mode``; a new dict, ``body`` is not changed."""
    messages = [dict(message) for message in body["messages"]]
    shaped = {**body, "messages": messages}
    if mode == "json_schema":
        shaped["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": schema_name, "schema": schema, "strict": True},
        }
        return shaped
    messages[0] = {**messages[0], "content": messages[0]["content"] + instruction(schema)}
    if mode == "json_object":
        shaped["response_format"] = {"type": "json_object"}
    return shaped


def mode_refusal(status: int | None, message: str) -> bool:
    """True when a failed call (HTTP ``status``, error ``message``) refused the structured-output mode: a rejected
    request (:func:`request_rejected`) whose message is about the response format (a 4xx that names something
    else, a wrong key or model, is not a mode refusal)."""
    if status is None or status in (401, 403, 404) or not request_rejected(status, message):
        return False
    return bool(_ABOUT_FORMAT.search(message))


def parse_json_object(content: str, lenient: bool) -> Any:
    """The JSON value of an answer: strict JSON (inside a code fence too); with ``lenient`` (the instruction
    modes) a small model's answer as it comes (prose around the object, a trailing comma, single quotes), read by
    ``json_repair``. Lenient reading accepts one whole object only: the text must hold exactly one top-level
    ``{...}`` and every ``{`` or ``[`` it opens must close (outside JSON strings), so an answer cut off by
    ``max_tokens``, even after a complete object, is refused, never completed by guesswork.

    Raises ``ValueError`` saying what is wrong."""
    fenced = _FENCE.match(content)
    text = fenced.group(1) if fenced else content
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        if not lenient:
            raise ValueError(f"the answer is not valid JSON ({error.msg} at position {error.pos})") from None
        strict_error = f"{error.msg} at position {error.pos}"
    spans, closed = _objects(content)
    if not closed:
        raise ValueError(f"the answer is cut off: a JSON object in it does not close ({strict_error})")
    if len(spans) != 1:
        found = "no" if not spans else f"{len(spans)}"
        raise ValueError(f"the answer holds {found} complete JSON objects, expected one ({strict_error})")
    start, end = spans[0]
    value = json_repair.loads(content[start:end], skip_json_loads=True)
    if not isinstance(value, dict):
        raise ValueError(f"the answer holds no JSON object that can be read ({strict_error})")
    return value


def _objects(text: str) -> tuple[list[tuple[int, int]], bool]:
    """The ``(start, end)`` of each top-level ``{...}`` in ``text`` (braces and brackets inside JSON strings not
    counted; quotes outside an object are prose), and whether everything opened from the first ``{`` on closes."""
    spans: list[tuple[int, int]] = []
    depth, in_string, escaped, start = 0, False, False, 0
    for index, char in enumerate(text):
        if depth == 0:
            if char == "{":
                depth, start = 1, index
        elif escaped:
            escaped = False
        elif in_string:
            escaped = char == "\\"
            in_string = char != '"'
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                spans.append((start, index + 1))
    return spans, depth == 0


class ModeRefused(Exception):
    """A call's structured-output ``mode`` was refused by the server (HTTP ``status``, ``summary`` of its error)."""

    def __init__(self, mode: Mode, status: int, summary: str) -> None:
        super().__init__(f"{mode} (HTTP {status}: {summary})")
        self.mode = mode
        self.status = status
        self.summary = summary


class StructuredOutputRefused(RuntimeError):
    """The server refuses the structured-output mode the settings ask for (or every mode): one line, naming the
    setting to change. It stops the stage: every request would fail the same way."""


def error_summary(text: str, limit: int = 160) -> str:
    """The telling part of a server's error message: a pydantic message's ``Input should be ...`` clause, else its
    first line, at most ``limit`` characters."""
    clause = re.search(r"Input should be [^\n\[]*", text)
    line = clause.group(0).strip() if clause else (text.strip().splitlines() or [""])[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


def refused_setting(url: str, refusal: ModeRefused) -> str:
    """The one line that stops a stage whose explicit ``llm.structured_output`` the server at ``url`` refused."""
    after = PROBE_ORDER[PROBE_ORDER.index(refusal.mode) + 1 :]
    instead = f"{after[0]} or auto" if after else "auto"
    what = f"response_format {refusal.mode}" if refusal.mode != "json_instruction" else "the json_instruction request"
    return (
        f"the server at {url} refused {what} (HTTP {refusal.status}: {refusal.summary}); "
        f"set llm.structured_output: {instead} in conteb.yaml"
    )
