"""Batch API mode: same rows as online mode, resumable, through the same cache."""

import json
from pathlib import Path

from llm.structured import CUT_OFF
from tests.llm.conftest import make_request
from tests.support.openai_server import Fault


def test_batch_mode_gives_the_same_answers_as_online(server, make_client, tmp_path: Path) -> None:
    requests = [make_request(n) for n in range(6)]
    online = make_client(cache_path=tmp_path / "online.sqlite").run(requests, scope="t/s")
    batch_client = make_client(cache_path=tmp_path / "batch.sqlite", mode="batch", batch_poll_s=0.05)
    batch = batch_client.run(requests, scope="t/s")
    assert [r.value for r in batch] == [r.value for r in online]
    assert all(r.ok for r in batch)
    assert any(r.path == "/v1/batches" for r in server.requests)
    usage = batch_client.cache.usage("t/")
    assert usage.calls == 6
    # cached afterwards: no new batch, no new request
    before = len(server.requests)
    assert all(r.cached for r in batch_client.run(requests, scope="t/s"))
    assert len(server.requests) == before


def test_failed_batch_lines_are_failed_results(server, make_client, tmp_path: Path) -> None:
    server.inject(Fault(kind="status", status=400), match=lambda body: "question 2" in str(body))
    results = make_client(mode="batch", batch_poll_s=0.05).run([make_request(n) for n in range(4)])
    assert [r.ok for r in results] == [True, True, False, True]
    assert "batch" in results[2].error


def test_transient_batch_line_failures_are_retried_online(server, make_client, tmp_path: Path) -> None:
    server.inject(Fault.server_error(), match=lambda body: "question 1" in str(body))
    results = make_client(mode="batch", batch_poll_s=0.05).run([make_request(n) for n in range(3)])
    assert all(r.ok for r in results)
    assert len(server.chat_requests()) == 1  # the one line, asked again online


def test_a_batch_line_refused_for_the_request_itself_is_not_asked_again_online(server, make_client) -> None:
    """A 500 whose body is a request-validation error (llama-cpp-python's answer to a format it lacks) is the request's
    fault, as online (llm.retries.request_rejected): a failed result, no online retry."""
    refusal = "1 validation error for CreateChatCompletionRequest: Input should be 'text' or 'json_object'"
    server.inject(Fault(kind="status", status=500, content=refusal), match=lambda body: "question 1" in str(body))
    results = make_client(mode="batch", batch_poll_s=0.05).run([make_request(n) for n in range(3)])
    assert [r.ok for r in results] == [True, False, True]
    assert "Input should be" in results[1].error
    assert server.chat_requests() == []  # nothing asked again online


def test_an_unfinished_batch_is_resumed_not_paid_twice(server, make_client, tmp_path: Path) -> None:
    server.batch_polls_to_complete = 50
    cache = tmp_path / "b.sqlite"
    requests = [make_request(n) for n in range(3)]
    first = make_client(cache_path=cache, mode="batch", batch_poll_s=0.01, batch_timeout_s=0.05).run(requests, "t/s")
    assert not any(r.ok for r in first)  # still running when the stage gave up (or crashed)
    server.batch_polls_to_complete = 0
    second = make_client(cache_path=cache, mode="batch", batch_poll_s=0.01).run(requests, "t/s")
    assert all(r.ok for r in second)
    assert sum(1 for r in server.requests if r.method == "POST" and r.path == "/v1/batches") == 1


def test_an_invalid_batch_answer_is_kept_with_its_call_and_only_re_asked_online(server, make_client) -> None:
    """Issue 33: the refused batch answer and its ledger row are stored together, the online path sends only the
    re-ask; an answer cut off by max_tokens is refused, not re-asked."""
    server.inject(Fault.raw('{"index": 9, "echo": "x"}'), match=lambda body: "question 1" in str(body))
    server.inject(Fault.cut_off('{"index": 1, "echo": "x"}'), match=lambda body: "question 2" in str(body))
    client = make_client(mode="batch", batch_poll_s=0.05)
    results = client.run([make_request(n) for n in range(4)], scope="t/s")
    assert [r.ok for r in results] == [True, True, False, True] and CUT_OFF in (results[2].error or "")
    [reask] = [json.loads(r.body)["messages"] for r in server.chat_requests()]
    assert reask[1]["content"] == "question 1" and len(reask) == 4  # the re-ask, not the first question again
    assert client.cache.usage("t/").calls == 5 and client.cache.failure_counts("t") == {"t/s": 1}
