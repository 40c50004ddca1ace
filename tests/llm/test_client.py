"""The LLM client against a real local HTTP server: retries, re-asks, cache, ledger, secrecy."""

import asyncio
import json
import time
from pathlib import Path

import pytest

from llm.cache import AnswerCache
from llm.client import LLMClient, RateLimiter
from llm.settings import LLMSettings
from tests.llm.conftest import API_KEY, answers, make_request
from tests.support.openai_server import Fault


def test_answers_come_back_in_order_and_are_cached(server, make_client) -> None:
    client = make_client()
    requests = [make_request(n) for n in range(20)]
    results = client.run(requests, scope="t/stage")
    assert [r.custom_id for r in results] == [f"item-{n}" for n in range(20)]
    assert all(r.ok and not r.cached for r in results)
    assert results[3].value["echo"] == "question 3"
    assert len(server.chat_requests()) == 20
    body = answers(server)[0]
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["strict"] is True

    again = make_client().run(requests, scope="t/stage")  # a new process would see the same file
    assert all(r.cached and r.ok for r in again)
    assert [r.value for r in again] == [r.value for r in results]
    assert len(server.chat_requests()) == 20  # zero requests for answers already paid for


def test_identical_requests_are_asked_once(server, make_client) -> None:
    results = make_client().run([make_request(1), make_request(1)])
    assert len(server.chat_requests()) == 1 and all(r.ok for r in results)


def test_rate_limited_with_retry_after_waits_that_long(server, make_client) -> None:
    server.inject(Fault.rate_limited(retry_after=0.4))
    start = time.monotonic()
    [result] = make_client().run([make_request(1)])
    assert result.ok and result.attempts == 2
    assert time.monotonic() - start >= 0.4
    assert len(server.chat_requests()) == 2


def test_rate_limited_without_retry_after_and_server_errors_back_off(server, make_client, logs) -> None:
    server.inject(Fault.rate_limited(), Fault.server_error(), Fault.server_error())
    [result] = make_client().run([make_request(1)], scope="t/x")
    assert result.ok and result.attempts == 4
    assert sum("retry" in line for line in logs) == 3


def test_hung_request_times_out_and_is_retried(server, make_client) -> None:
    server.inject(Fault.hang(6.0))
    [result] = make_client(timeout_s=1.5).run([make_request(1)])  # timeout_s bounds a whole try
    assert result.ok and result.attempts == 2


def test_truncated_body_is_retried(server, make_client) -> None:
    server.inject(Fault.truncated())
    [result] = make_client().run([make_request(1)])
    assert result.ok and result.attempts == 2


def test_malformed_json_is_reasked_once_with_the_problem(server, make_client) -> None:
    server.inject(Fault.malformed_json())
    [result] = make_client().run([make_request(1)])
    assert result.ok
    second = answers(server)[1]["messages"]
    assert second[-1]["role"] == "user" and "not valid JSON" in second[-1]["content"]


def test_out_of_range_index_is_reasked_then_failed_without_failing_the_others(server, make_client) -> None:
    bad = json.dumps({"index": 9, "echo": "x"})
    server.inject(Fault.raw(bad), Fault.raw(bad), match=lambda body: "question 0" in body["messages"][1]["content"])
    results = make_client().run([make_request(n) for n in range(3)])
    assert [r.ok for r in results] == [False, True, True]
    assert "maximum of 3" in results[0].error and results[0].error.startswith("invalid answer")


def test_validator_message_is_sent_back(server, make_client) -> None:
    calls = []

    def validator(value):
        calls.append(value)
        return None if len(calls) > 1 else "echo must differ"

    [result] = make_client().run([make_request(1, validator)])
    assert result.ok and len(calls) == 2
    assert "echo must differ" in answers(server)[1]["messages"][-1]["content"]


def test_client_errors_other_than_429_are_not_retried(server, make_client) -> None:
    server.inject(Fault(kind="status", status=400))
    [result] = make_client().run([make_request(1)])
    assert not result.ok and "BadRequestError" in result.error
    assert len(server.chat_requests()) == 1


def test_tries_are_bounded(server, make_client) -> None:
    server.inject(*[Fault.server_error()] * 10)
    [result] = make_client(max_attempts=3).run([make_request(1)])
    assert not result.ok and result.attempts == 3 and "InternalServerError" in result.error


def test_concurrency_is_bounded(make_client, server) -> None:
    """At most ``max_concurrency`` requests in flight, and more than one: counted by the server, not timed (a timed
    bound failed on a loaded machine)."""
    server.latency_s = 0.3
    results = make_client(max_concurrency=4).run([make_request(n) for n in range(12)])
    assert all(r.ok for r in results)
    assert 2 <= server.most_in_flight <= 4, server.most_in_flight


def test_rate_limiter_window() -> None:
    async def scenario() -> float:
        limiter = RateLimiter(requests_per_minute=2, tokens_per_minute=None, window_s=0.3)
        start = time.monotonic()
        for _ in range(5):
            await limiter.acquire(10)
        return time.monotonic() - start

    assert asyncio.run(scenario()) >= 0.6  # 5 requests, 2 per 0.3 s window


def test_ledger_counts_tokens_and_dollars(server, make_client) -> None:
    client = make_client(model="gpt-4o")
    client.run([make_request(n) for n in range(3)], scope="squad/synthetic_queries")
    client.run([make_request(9)], scope="covid/synthetic_queries")
    usage = client.cache.usage("squad/")
    assert usage.calls == 3 and usage.prompt_tokens > 0 and usage.completion_tokens > 0
    expected = (usage.prompt_tokens * 2.50 + usage.completion_tokens * 10.00) / 1e6
    assert usage.cost_usd == pytest.approx(expected, abs=1e-6)
    assert client.cache.usage("").calls == 4


def test_json_instruction_mode_for_servers_without_structured_outputs(server, make_client) -> None:
    server.set_responder(lambda body: '```json\n{"index": 1, "echo": "fenced"}\n```')
    [result] = make_client(structured_output="json_instruction").run([make_request(1)])
    assert result.value == {"index": 1, "echo": "fenced"}
    body = answers(server)[0]
    assert "response_format" not in body
    assert "matches this JSON schema" in body["messages"][0]["content"]


def test_the_api_key_never_leaks(server, make_client, logs, tmp_path: Path) -> None:
    server.inject(Fault.rate_limited(), Fault(kind="status", status=401), match=lambda b: "question 1" in str(b))
    client = make_client()
    results = client.run([make_request(n) for n in range(3)], scope="t/secret")
    assert server.chat_requests()[0].headers.get("authorization") == f"Bearer {API_KEY}"  # it is used...
    text = "\n".join(logs) + repr(client) + "".join(str(r) for r in results)
    assert API_KEY not in text  # ...but never shown
    client.cache.close()  # the last connection: the WAL is checkpointed into the file, and no lock is held
    assert API_KEY.encode() not in (tmp_path / "llm.sqlite").read_bytes()
    assert client.scrub(f"echo {API_KEY}") == "echo ***"


def test_unconfigured_client_is_not_available(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert not LLMClient(LLMSettings(), AnswerCache(tmp_path / "c.sqlite")).available
    assert LLMClient(LLMSettings(base_url="http://127.0.0.1:9/v1"), AnswerCache(tmp_path / "c.sqlite")).available
