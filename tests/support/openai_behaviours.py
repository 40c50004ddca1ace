"""How the local test server (``tests/support/openai_server.py``) imitates the OpenAI-compatible servers users run.

``OpenAICompatibleServer(responder, behaviour=...)`` picks one of :data:`BEHAVIOURS`; each says, from the server's
own documentation and issue tracker, how its ``/v1/chat/completions`` treats ``response_format``, what its ``usage``
holds and what ``GET /v1/models`` answers:

- ``openai`` (the default): the OpenAI API: ``json_schema`` and ``json_object``; ``usage`` with
  ``prompt_tokens_details.cached_tokens``; ``/v1/models`` lists ``test-model``.
- ``llama_cpp_python``: llama-cpp-python's server (``python -m llama_cpp.server``, 0.3.x): its request model only
  knows ``text`` and ``json_object``, and its route error handler answers the validation error of a ``json_schema``
  request with HTTP 500 and ``{"error": {"message": <pydantic's message>, "type": "internal_server_error", ...}}``
  (llama.cpp issue 23463); ``usage`` without details; models owned by ``me``.
- ``vllm``: vLLM's OpenAI server: ``json_schema`` and ``json_object`` through guided decoding; ``usage`` with
  ``prompt_tokens_details: null``; models owned by ``vllm`` with ``max_model_len``.
- ``ollama``: Ollama's ``/v1`` (0.5+): ``json_schema`` (grammar-constrained) and ``json_object`` (JSON mode);
  ``usage`` with the three counts only; models owned by ``library``.
- ``no_models_endpoint``: a minimal server: ``GET /v1/models`` is a 404, any ``response_format`` is refused with
  HTTP 400 (only instructions in the prompt work), and its answers carry no ``usage``.

Servers that lie (:data:`LYING`, :func:`lie`): each accepts every ``response_format`` with HTTP 200 and does not do
what it asks, as reported in the servers' own trackers:

- ``llama_cpp_grammar_failed``: llama.cpp's server when the grammar of a ``json_schema`` fails to build: the text
  is generated unconstrained (prose, no JSON at all; ggml-org/llama.cpp#19051);
- ``llama_cpp_schema_unenforced``: ``json_schema`` accepted and not enforced: valid JSON of another shape
  (``{"result": <the answer>}``; ggml-org/llama.cpp#24097);
- ``vllm_reasoning_content``: vLLM with a reasoning parser: ``content`` null and the answer in
  ``reasoning_content`` (vllm-project/vllm#19222, #47027, #50948);
- ``ollama_format_ignored``: ``response_format`` ignored (Ollama's OpenAI endpoint with streaming or thinking,
  ollama/ollama#10001, #14440): the answer comes as prose around a fenced JSON block.

:func:`requested_schema` gives a responder the schema a request asks for in every mode (``response_format`` or
the instruction in the system message), so one responder serves every behaviour. Standard library only.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Literal, get_args

from tests.support.openai_http import HTTPError

Behaviour = Literal[
    "openai",
    "llama_cpp_python",
    "vllm",
    "ollama",
    "no_models_endpoint",
    "llama_cpp_grammar_failed",
    "llama_cpp_schema_unenforced",
    "vllm_reasoning_content",
    "ollama_format_ignored",
]
BEHAVIOURS: tuple[Behaviour, ...] = get_args(Behaviour)
LYING: tuple[Behaviour, ...] = BEHAVIOURS[5:]
"""The behaviours of servers that accept a request and do not do what it asks (:func:`lie`)."""
PROSE = "Sure! The answer is the second one, as the question says."

LLAMA_CPP_PYTHON_VALIDATION = (
    "1 validation error for CreateChatCompletionRequest\nresponse_format.type\n"
    "  Input should be 'text' or 'json_object' [type=literal_error, input_value='json_schema', input_type=str]"
)
_INSTRUCTION_MARK = "matches this JSON schema:\n"


@dataclass(frozen=True)
class Refusal:
    """An error answer: HTTP ``status`` with JSON ``body``."""

    status: int
    body: dict[str, Any]


def refusal(behaviour: Behaviour, body: dict[str, Any]) -> Refusal | None:
    """How ``behaviour`` refuses a chat request ``body`` for its ``response_format`` (None: accepted)."""
    kind = (body.get("response_format") or {}).get("type")
    if kind is None or kind == "text":
        return None
    if behaviour == "llama_cpp_python" and kind != "json_object":
        error = {"message": LLAMA_CPP_PYTHON_VALIDATION, "type": "internal_server_error", "param": None, "code": None}
        return Refusal(500, {"error": error})
    if behaviour == "no_models_endpoint":
        message = f"Unsupported parameter: response_format ({kind}) is not supported by this server"
        error = {"message": message, "type": "invalid_request_error", "param": "response_format", "code": None}
        return Refusal(400, {"error": error})
    return None


def usage(
    behaviour: Behaviour, prompt_tokens: int, completion_tokens: int, cached_tokens: int
) -> dict[str, Any] | None:
    """The ``usage`` object ``behaviour`` answers with (None: the answer has none)."""
    if behaviour == "no_models_endpoint":
        return None
    counts: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if behaviour == "openai":
        counts["prompt_tokens_details"] = {"cached_tokens": cached_tokens, "audio_tokens": 0}
    elif behaviour == "vllm":
        counts["prompt_tokens_details"] = None
    return counts


def models(behaviour: Behaviour, model: str) -> dict[str, Any]:
    """The ``GET /v1/models`` answer of ``behaviour`` serving ``model``; raises a 404 ``HTTPError`` for a server
    without the endpoint."""
    created = int(time.time())
    if behaviour == "no_models_endpoint":
        raise HTTPError(404, "Not Found", "not_found")
    entry: dict[str, Any] = {"id": model, "object": "model"}
    if behaviour == "llama_cpp_python":
        entry |= {"owned_by": "me", "permissions": []}
    elif behaviour == "vllm":
        entry |= {"created": created, "owned_by": "vllm", "root": model, "parent": None, "max_model_len": 32768}
    elif behaviour == "ollama":
        entry |= {"created": created, "owned_by": "library"}
    return {"object": "list", "data": [entry]}


def requested_schema(body: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    """``(schema name, schema)`` a chat request asks for: from ``response_format`` (``json_schema``), else from the
    instruction appended to its system message (no name: ``None``); ``(None, None)`` when it asks for none."""
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        spec = response_format["json_schema"]
        return spec.get("name"), spec.get("schema")
    system = str(body["messages"][0].get("content") or "")
    if _INSTRUCTION_MARK not in system:
        return None, None
    return None, json.loads(system.rsplit(_INSTRUCTION_MARK, 1)[1])


def lie(behaviour: Behaviour, body: dict[str, Any], content: str) -> tuple[str | None, str | None]:
    """``(content, reasoning_content)`` a lying ``behaviour`` answers instead of ``content`` (the honest answer to
    chat request ``body``); ``(content, None)`` for an honest one."""
    kind = (body.get("response_format") or {}).get("type")
    if behaviour == "llama_cpp_grammar_failed" and kind == "json_schema":
        return PROSE, None
    if behaviour == "llama_cpp_schema_unenforced" and kind == "json_schema":
        try:
            honest: Any = json.loads(content)
        except ValueError:
            honest = content
        return json.dumps({"result": honest}), None
    if behaviour == "vllm_reasoning_content":
        return None, content
    if behaviour == "ollama_format_ignored":
        return f"Here is the JSON you asked for:\n```json\n{content}\n```\nLet me know if you need more.", None
    return content, None
