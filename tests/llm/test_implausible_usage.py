"""Implausible token counts in an answer's usage (a server fault): the paid answer is kept, the ledger records the call
as 0 tokens and $0 with the call flagged and counted, and no count can crash the store (issue 19, part 5, item 5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm.cache import AnswerCache
from llm.usage import (
    IMPLAUSIBLE,
    MAX_PLAUSIBLE_TOKENS,
    TEMPLATE_TOKENS,
    TokenUsage,
    parse_usage,
    request_token_limits,
)
from tests.llm.conftest import make_request
from tests.support.openai_server import OpenAICompatibleServer

HUGE = [10**20, 10**15, 5_000_000]  # past SQLite's INTEGER; $2.5 billion at gpt-4o prices; past what 100 bytes can be


def _report(server: OpenAICompatibleServer, monkeypatch: pytest.MonkeyPatch, prompt_tokens: int) -> None:
    """Have the server report ``prompt_tokens`` for every prompt (its answers stay valid)."""
    monkeypatch.setattr(server.prompt_cache, "lookup", lambda model, text: (prompt_tokens, 0))


@pytest.mark.parametrize("mode", ["online", "batch"])
@pytest.mark.parametrize("prompt_tokens", HUGE)
def test_an_answer_with_implausible_usage_is_kept_flagged_and_counted(
    server: OpenAICompatibleServer,
    make_client,
    logs: list[str],
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
    prompt_tokens: int,
) -> None:
    _report(server, monkeypatch, prompt_tokens)
    client = make_client(model="gpt-4o", mode=mode, batch_poll_s=0.01)
    results = client.run([make_request(n) for n in range(3)], scope="t/stage")
    assert all(result.ok for result in results), [result.error for result in results]
    assert all(result.prompt_tokens == 0 for result in results)
    usage = client.cache.usage("t/")
    assert (usage.calls, usage.prompt_tokens, usage.cost_usd, usage.implausible_usage) == (3, 0, 0.0, 3)
    assert client.cache.usage_by_scope()["t/stage"].implausible_usage == 3
    flagged = [line for line in logs if "implausible usage" in line]
    assert len(flagged) == 3 and f"prompt_tokens={prompt_tokens:,}" in flagged[0], logs
    monkeypatch.undo()
    again = client.run([make_request(n) for n in range(3)], scope="t/stage")  # the answers were stored
    assert all(result.cached for result in again) and len(server.chat_requests()) == (3 if mode == "online" else 0)


def test_plausible_usage_is_not_flagged(server: OpenAICompatibleServer, make_client, logs: list[str]) -> None:
    client = make_client(model="gpt-4o")
    assert all(result.ok for result in client.run([make_request(n) for n in range(2)], scope="t/stage"))
    usage = client.cache.usage("t/")
    assert usage.prompt_tokens > 0 and usage.cost_usd > 0 and usage.implausible_usage == 0
    assert not any("implausible" in line for line in logs)


def test_the_store_never_overflows_on_a_huge_count(tmp_path: Path) -> None:
    cache = AnswerCache(tmp_path / "llm.sqlite")
    cache.record_usage("t/stage", "item-0", "gpt-4o", TokenUsage(10**20, 10**19, 10**20), 2.5e14, "online")
    cache.put("k", "item-0", "gpt-4o", "p@v1:0", {"index": 1}, TokenUsage(10**20, 3))
    cache.record_usage("t/stage", "item-1", "gpt-4o", TokenUsage(1000, 10), 0.0026, "online")
    usage = cache.usage("t/")
    assert (usage.calls, usage.prompt_tokens, usage.completion_tokens, usage.implausible_usage) == (2, 1000, 10, 1)
    assert usage.cost_usd == 0.0026
    answer = cache.get("k")
    assert answer is not None and answer.value == {"index": 1} and answer.prompt_tokens == 0
    cache.close()


def test_the_bounds() -> None:
    assert parse_usage({"prompt_tokens": 10**20, "completion_tokens": 1}) == IMPLAUSIBLE
    assert parse_usage({"prompt_tokens": MAX_PLAUSIBLE_TOKENS, "completion_tokens": 1}).implausible is False
    assert parse_usage({"prompt_tokens": 1, "prompt_tokens_details": {"cached_tokens": 10**20}}).cached_tokens == 1
    body = {"model": "m", "messages": [{"role": "user", "content": "x" * 1000}], "max_tokens": 100}
    prompt, completion = request_token_limits(body)
    assert 2 * 1000 + TEMPLATE_TOKENS < prompt < 2 * 1100 + TEMPLATE_TOKENS
    assert completion == 2 * 100 + TEMPLATE_TOKENS
    assert request_token_limits({"messages": []})[1] == MAX_PLAUSIBLE_TOKENS  # no max_tokens: the fixed bound
