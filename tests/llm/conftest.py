"""Fixtures for LLM tests: the local OpenAI-compatible server and a client pointed at it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llm.cache import AnswerCache
from llm.client import LLMClient
from llm.settings import LLMSettings
from llm.types import LLMRequest
from tests.support.openai_server import OpenAICompatibleServer

API_KEY = "sk-test-SECRET-0123456789abcdef"
SCHEMA = {
    "type": "object",
    "properties": {"index": {"type": "integer", "minimum": 0, "maximum": 3}, "echo": {"type": "string"}},
    "required": ["index", "echo"],
    "additionalProperties": False,
}


def echo_responder(body: dict[str, Any]) -> dict[str, Any]:
    """Answers with the last user message, and index = its length mod 4 (always valid)."""
    text = body["messages"][-1]["content"]
    return {"index": len(text) % 4, "echo": text}


def make_request(n: int, validator=None) -> LLMRequest:
    return LLMRequest(
        custom_id=f"item-{n}",
        messages=({"role": "system", "content": "Answer in JSON."}, {"role": "user", "content": f"question {n}"}),
        schema_name="answer",
        schema=SCHEMA,
        prompt_tag="test@v1:000000000000",
        validator=validator,
    )


@pytest.fixture
def server() -> Iterator[OpenAICompatibleServer]:
    with OpenAICompatibleServer(echo_responder) as running:
        yield running


@pytest.fixture
def logs() -> list[str]:
    return []


@pytest.fixture
def make_client(server: OpenAICompatibleServer, tmp_path: Path, logs: list[str]):
    """``make_client(**settings)``: a client on the local server with fast backoff."""

    def factory(cache_path: Path | None = None, **overrides: Any) -> LLMClient:
        settings = {
            "base_url": server.url,
            "timeout_s": 5.0,
            "backoff_initial_s": 0.01,
            "backoff_max_s": 0.2,
            "max_attempts": 4,
            **overrides,
        }
        return LLMClient(
            LLMSettings(**settings), AnswerCache(cache_path or tmp_path / "llm.sqlite"), API_KEY, logs.append
        )

    return factory


def answers(server: OpenAICompatibleServer) -> list[dict[str, Any]]:
    """Bodies of the chat requests the server received."""
    return [json.loads(request.body) for request in server.chat_requests()]
