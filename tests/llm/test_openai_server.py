"""The local OpenAI-compatible test server, driven by the real ``openai`` SDK over real HTTP."""

from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.support.openai_server import Fault, OpenAICompatibleServer

MESSAGES = [{"role": "system", "content": "Answer in JSON."}, {"role": "user", "content": "Which chunk? 0..7"}]


def _responder(body: dict[str, Any]) -> dict[str, Any]:
    """Echo the length of the last message, so answers depend on the request."""
    return {"chunk": 3, "echo": len(body["messages"][-1]["content"])}


@pytest.fixture
def server() -> Iterator[OpenAICompatibleServer]:
    with OpenAICompatibleServer(_responder) as srv:
        yield srv


@pytest.fixture
def client(server: OpenAICompatibleServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.url, api_key="test-key", max_retries=0, timeout=5.0) as sdk:
        yield sdk


def _ask(client: openai.OpenAI, text: str = "Which chunk? 0..7", **kwargs: Any) -> Any:
    messages = [MESSAGES[0], {"role": "user", "content": text}]
    return client.chat.completions.create(model="test-model", messages=messages, **kwargs)  # type: ignore[arg-type]


def test_dict_answer_round_trips_with_usage(server: OpenAICompatibleServer, client: openai.OpenAI) -> None:
    completion = _ask(client, response_format={"type": "json_object"})
    assert completion.model == "test-model"
    assert completion.choices[0].finish_reason == "stop"
    assert json.loads(completion.choices[0].message.content) == {"chunk": 3, "echo": len("Which chunk? 0..7")}
    usage = completion.usage
    assert usage is not None
    prompt = '{"type":"json_object"}<|system|>Answer in JSON.<|user|>Which chunk? 0..7'  # tests/support/prompt_cache.py
    assert usage.prompt_tokens == -(-len(prompt) // 4)
    assert usage.prompt_tokens_details.cached_tokens == 0  # below 1024 tokens nothing is cached
    assert usage.completion_tokens >= 1
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    (recorded,) = server.chat_requests()
    assert recorded.headers["authorization"] == "Bearer test-key"
    assert recorded.json()["response_format"] == {"type": "json_object"}


def test_string_answer_is_verbatim_and_responder_can_be_replaced(
    server: OpenAICompatibleServer, client: openai.OpenAI
) -> None:
    server.set_responder(lambda body: "plain text")
    assert _ask(client).choices[0].message.content == "plain text"


def test_rate_limit_carries_retry_after_and_is_consumed(server: OpenAICompatibleServer, client: openai.OpenAI) -> None:
    server.inject(Fault.rate_limited(retry_after=2))
    with pytest.raises(openai.RateLimitError) as info:
        _ask(client)
    assert info.value.status_code == 429
    assert info.value.response.headers["retry-after"] == "2"
    assert info.value.code == "rate_limit_exceeded"
    assert server.pending_faults == 0
    assert _ask(client).choices[0].message.content  # the next request is answered
    server.inject(Fault.rate_limited())
    with pytest.raises(openai.RateLimitError) as info:
        _ask(client)
    assert "retry-after" not in info.value.response.headers


def test_server_error_and_responder_exception_are_500s(server: OpenAICompatibleServer, client: openai.OpenAI) -> None:
    server.inject(Fault.server_error())
    with pytest.raises(openai.InternalServerError) as info:
        _ask(client)
    assert info.value.status_code == 500
    assert info.value.type == "server_error"

    def broken(body: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("oops")

    server.set_responder(broken)
    with pytest.raises(openai.InternalServerError, match="KeyError"):
        _ask(client)
    server.set_responder(_responder)
    assert _ask(client).choices[0].message.content  # the server thread survived


def test_hang_past_client_timeout_is_a_timeout(server: OpenAICompatibleServer, client: openai.OpenAI) -> None:
    server.inject(Fault.hang(3.0))
    start = time.perf_counter()
    with pytest.raises(openai.APITimeoutError):
        _ask(client.with_options(timeout=0.3))
    assert time.perf_counter() - start < 1.5
    assert _ask(client).choices[0].message.content  # still serving while the hung handler sleeps


def test_truncated_body_is_a_connection_error(server: OpenAICompatibleServer, client: openai.OpenAI) -> None:
    server.inject(Fault.truncated())
    with pytest.raises(openai.APIConnectionError) as info:
        _ask(client)
    assert not isinstance(info.value, openai.APITimeoutError)
    assert "complete message body" in repr(info.value.__cause__)  # httpx RemoteProtocolError
    assert _ask(client).choices[0].message.content  # a fresh connection works


def test_malformed_and_raw_content(server: OpenAICompatibleServer, client: openai.OpenAI) -> None:
    server.inject(Fault.malformed_json(), Fault.raw('{"chunk": 99}'))
    malformed = _ask(client).choices[0].message.content
    assert isinstance(malformed, str)
    with pytest.raises(json.JSONDecodeError):
        json.loads(malformed)
    assert _ask(client).choices[0].message.content == '{"chunk": 99}'
    assert json.loads(_ask(client).choices[0].message.content)["chunk"] == 3


def test_match_targets_only_matching_requests_in_order(server: OpenAICompatibleServer, client: openai.OpenAI) -> None:
    server.inject(
        Fault.server_error(), Fault.raw("second"), match=lambda body: "target" in body["messages"][-1]["content"]
    )
    assert json.loads(_ask(client, "other").choices[0].message.content)["chunk"] == 3
    with pytest.raises(openai.InternalServerError):
        _ask(client, "the target")
    assert json.loads(_ask(client, "other again").choices[0].message.content)["chunk"] == 3
    assert _ask(client, "target again").choices[0].message.content == "second"
    assert json.loads(_ask(client, "target, faults used up").choices[0].message.content)["chunk"] == 3
    assert len(server.chat_requests()) == 5


def test_latency_is_concurrent() -> None:
    async def main(url: str) -> float:
        async with openai.AsyncOpenAI(base_url=url, api_key="test-key", max_retries=0, timeout=5.0) as sdk:
            start = time.perf_counter()
            await asyncio.gather(
                *(
                    sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": str(i)}])
                    for i in range(10)
                )
            )
            return time.perf_counter() - start

    with OpenAICompatibleServer(_responder, latency_s=0.2) as srv:
        elapsed = asyncio.run(main(srv.url))
    assert 0.2 <= elapsed < 1.0  # 10 × 0.2 s would be 2 s if requests were served one at a time


def test_unknown_path_is_openai_style_404(server: OpenAICompatibleServer) -> None:
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{server.url}/nope", timeout=5)
    assert info.value.code == 404
    assert json.loads(info.value.read())["error"]["code"] == "unknown_url"


def test_request_cut_short_is_not_recorded(server: OpenAICompatibleServer, client: openai.OpenAI) -> None:
    port = int(server.url.rsplit(":", 1)[1].split("/")[0])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:  # a client killed mid-request
        raw.sendall(b'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"model": ')
        raw.shutdown(socket.SHUT_WR)
        assert raw.recv(100) == b""  # closed without an answer
    assert server.chat_requests() == []
    assert _ask(client).choices[0].message.content
    assert len(server.chat_requests()) == 1


def _batch_line(custom_id: str, text: str) -> dict[str, Any]:
    body = {"model": "test-model", "messages": [{"role": "user", "content": text}]}
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


def test_files_and_batch_lifecycle(server: OpenAICompatibleServer, client: openai.OpenAI) -> None:
    lines = [_batch_line(f"item-{i}", "x" * i) for i in range(5)]
    payload = b"".join(json.dumps(line).encode() + b"\r\n" for line in lines)  # CRLF bytes must survive
    uploaded = client.files.create(file=("in.jsonl", payload), purpose="batch")
    assert (uploaded.filename, uploaded.purpose, uploaded.bytes) == ("in.jsonl", "batch", len(payload))
    assert client.files.retrieve(uploaded.id).id == uploaded.id
    assert client.files.content(uploaded.id).content == payload

    server.inject(Fault.server_error(503), match=lambda body: body["messages"][0]["content"] == "xxx")
    batch = client.batches.create(
        input_file_id=uploaded.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"stage": "test"},
    )
    assert batch.status == "validating"
    assert batch.metadata == {"stage": "test"}
    statuses = [batch.status]
    while batch.status != "completed":
        batch = client.batches.retrieve(batch.id)
        statuses.append(batch.status)
        assert len(statuses) < 10
    assert statuses == ["validating", "in_progress", "completed"]
    assert batch.request_counts is not None
    assert (batch.request_counts.total, batch.request_counts.completed, batch.request_counts.failed) == (5, 4, 1)

    assert batch.output_file_id is not None
    output = [json.loads(line) for line in client.files.content(batch.output_file_id).text.splitlines()]
    assert [row["custom_id"] for row in output] == ["item-0", "item-1", "item-2", "item-4"]
    for row in output:
        assert row["response"]["status_code"] == 200
        answer = json.loads(row["response"]["body"]["choices"][0]["message"]["content"])
        assert answer == {"chunk": 3, "echo": int(row["custom_id"].split("-")[1])}
    assert batch.error_file_id is not None
    (error,) = [json.loads(line) for line in client.files.content(batch.error_file_id).text.splitlines()]
    assert error["custom_id"] == "item-3"
    assert error["response"]["status_code"] == 503
    assert error["response"]["body"]["error"]["type"] == "server_error"
    assert server.chat_requests() == []  # batch lines are not chat requests


def test_batch_cancel(server: OpenAICompatibleServer, client: openai.OpenAI) -> None:
    uploaded = client.files.create(file=("in.jsonl", json.dumps(_batch_line("a", "hi")).encode()), purpose="batch")
    batch = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h")
    cancelled = client.batches.cancel(batch.id)
    assert cancelled.status == "cancelled"
    assert client.batches.retrieve(batch.id).status == "cancelled"
    assert client.batches.retrieve(batch.id).output_file_id is None
