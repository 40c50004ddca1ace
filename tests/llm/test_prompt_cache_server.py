"""The local server reports automatic prompt caching as the OpenAI API does (tests/support/prompt_cache.py)."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.support.openai_server import OpenAICompatibleServer
from tests.support.prompt_cache import PromptCache, count_tokens, prompt_text

DOCUMENT = " ".join(f"word{n:05d}" for n in range(1000))  # 9,999 characters: about 2,500 tokens
SYSTEM = {"role": "system", "content": "Answer in JSON."}


def _messages(document: str, item: str, item_first: bool = False) -> list[dict[str, str]]:
    parts = [f"Passage: {item}", f"Document: {document}"]
    return [SYSTEM, {"role": "user", "content": "\n\n".join(parts if item_first else parts[::-1])}]


@pytest.fixture
def server() -> Iterator[OpenAICompatibleServer]:
    with OpenAICompatibleServer(lambda body: {"ok": True}, batch_polls_to_complete=0) as running:
        yield running


@pytest.fixture
def sdk(server: OpenAICompatibleServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.url, api_key="k", max_retries=0, timeout=5.0) as client:
        yield client


def _cached(sdk: openai.OpenAI, messages: list[dict[str, str]], model: str = "gpt-4o") -> tuple[int, int]:
    usage = sdk.chat.completions.create(model=model, messages=messages).usage  # type: ignore[arg-type]
    return usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens


def test_the_tokenizer_is_four_characters_a_token() -> None:
    body = {"response_format": {"type": "json_object"}, "messages": [{"role": "user", "content": "abcdefgh"}]}
    assert prompt_text(body) == '{"type":"json_object"}<|user|>abcdefgh'
    assert count_tokens("") == 1 and count_tokens("abcd") == 1 and count_tokens("abcde") == 2


def test_the_rule_blocks_of_128_from_1024_per_model() -> None:
    cache = PromptCache()
    long = "x" * 4096 * 2  # 2,048 tokens
    assert cache.answer("m", long) == (2048, 0)  # first time: nothing cached
    assert cache.answer("m", long) == (2048, 1920)  # identical: every whole block but the last token's
    assert cache.answer("m", long[:4000] + "y" * 4192)[1] == 0  # 1,000 shared tokens: under 1,024
    shared = long[: 512 * 9 + 100]  # 9 whole blocks and a bit
    assert cache.answer("m", shared + "z" * 3000)[1] == 9 * 128
    assert cache.answer("other", long)[1] == 0  # per model
    assert cache.answer("m", "x" * 3000)[1] == 0  # under 1,024 tokens: never cached
    cache.clear()
    assert cache.answer("m", long)[1] == 0


def test_chat_reports_cached_tokens_for_a_repeated_prefix(sdk: openai.OpenAI) -> None:
    prompt, cached = _cached(sdk, _messages(DOCUMENT, "first passage"))
    assert prompt > 1024 and cached == 0
    prompt, cached = _cached(sdk, _messages(DOCUMENT, "second passage"))
    assert cached >= 1024 and cached % 128 == 0 and prompt - cached < 128 + len("second passage")
    assert _cached(sdk, _messages(DOCUMENT, "second passage"), model="gpt-4o-mini")[1] == 0  # per model


def test_a_chunk_first_layout_gets_nothing_cached(sdk: openai.OpenAI) -> None:
    _cached(sdk, _messages(DOCUMENT, "first passage", item_first=True))
    assert _cached(sdk, _messages(DOCUMENT, "second passage", item_first=True))[1] == 0


def test_batch_output_lines_report_cached_tokens(server: OpenAICompatibleServer, sdk: openai.OpenAI) -> None:
    lines = [
        {"custom_id": f"c{n}", "method": "POST", "url": "/v1/chat/completions",
         "body": {"model": "gpt-4o", "messages": _messages(DOCUMENT, f"passage {n}")}}
        for n in range(3)
    ]  # fmt: skip
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    upload = sdk.files.create(file=("in.jsonl", io.BytesIO(data)), purpose="batch")
    batch = sdk.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h")
    deadline = time.monotonic() + 5
    while batch.status != "completed" and time.monotonic() < deadline:
        batch = sdk.batches.retrieve(batch.id)
    output: list[dict[str, Any]] = [
        json.loads(line) for line in sdk.files.content(batch.output_file_id).text.splitlines()
    ]
    cached = [line["response"]["body"]["usage"]["prompt_tokens_details"]["cached_tokens"] for line in output]
    assert cached[0] == 0 and all(c >= 1024 for c in cached[1:])
