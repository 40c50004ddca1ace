"""A broken endpoint stops the stage (issue 33, item 8): the circuit breaker (``llm/breaker.py``) through the real
client and SDK against the test server, and its counting rule alone.

An endpoint answering HTML to every call is stopped after ``llm.breaker_failures`` calls (plus those already in
flight), with one line naming the endpoint and the failure; nothing is remembered, so a rerun after the fix asks every
request. A server that died after answering is stopped too ("connection refused: the server is gone").
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from llm.breaker import CircuitBreaker, EndpointBroken
from llm.cache import AnswerCache
from llm.client import LLMClient
from llm.settings import LLMSettings
from llm.types import LLMResult
from tests.llm.conftest import API_KEY, echo_responder, make_request
from tests.llm.test_local_servers import answer_any_mode
from tests.support.openai_server import Fault, OpenAICompatibleServer

HTML = "<html><head><title>Welcome to nginx!</title></head><body>It works</body></html>"


def test_the_breaker_opens_at_the_limit_of_one_kind_and_after_answers_once_a_request_failed_every_try() -> None:
    breaker = CircuitBreaker("http://x/v1", limit=3, attempts=2)
    breaker.failure("a", 1)
    breaker.failure(None, 2)  # a rate limit: not counted
    breaker.failure("b", 3)
    breaker.failure("a", 4)
    assert not breaker.open
    breaker.failure("a", 5)  # the third of one kind, with no answer between: before any answer, that is enough
    assert breaker.open and breaker.reason is not None
    assert breaker.reason.startswith("http://x/v1: 4 calls in a row failed, 3 of them: a; stopped, nothing more sent")
    with pytest.raises(EndpointBroken):
        breaker.check()
    breaker.reset()
    breaker.check()
    breaker.failure("a", 1)
    breaker.failure("a", 1)
    breaker.answer()  # an answer starts the counts again
    for request in range(5):  # five requests fail a first try each (a brief outage): the retries may ride it out
        breaker.failure("a", request)
    assert not breaker.open
    breaker.failure("a", 0)  # request 0 failed both its tries
    assert breaker.open and "6 calls in a row failed after 1 answered, every try of a request among them: a" in (
        breaker.reason or ""
    )
    never = CircuitBreaker("http://x/v1", limit=None)
    for _ in range(100):
        never.failure("a")
    assert not never.open


def client_for(server: OpenAICompatibleServer, tmp_path: Path, **settings: object) -> LLMClient:
    values = {"base_url": server.url, "structured_output": "json_schema", "backoff_initial_s": 0.01,
              "backoff_max_s": 0.05, **settings}  # fmt: skip
    return LLMClient(LLMSettings(**values), AnswerCache(tmp_path / "a.sqlite"), API_KEY)  # type: ignore[arg-type]


def test_html_to_every_call_stops_the_run_after_the_limit_in_one_line_and_a_rerun_asks_all(tmp_path: Path) -> None:
    broken = [True]
    with OpenAICompatibleServer(echo_responder) as server:
        server.inject(*[Fault.http_body(HTML)] * 400, match=lambda body: broken[0])
        client = client_for(server, tmp_path, breaker_failures=5, max_concurrency=4)
        with pytest.raises(EndpointBroken) as stopped:
            client.run([make_request(n) for n in range(40)], scope="t/s")
        line = str(stopped.value)
        assert "\n" not in line and line.startswith(f"{server.url}: ")
        assert "calls in a row failed" in line and "the server answers text/html, not a chat completion" in line
        assert "conteb llm check" in line
        assert 5 <= len(server.chat_requests()) <= 5 + 3  # the limit, and at most the calls already in flight
        assert client.cache.failures({client.key(make_request(n)): make_request(n) for n in range(40)}) == {}
        broken[0] = False  # the endpoint is fixed: a rerun asks every request
        results = client_for(server, tmp_path).run([make_request(n) for n in range(40)], scope="t/s")
        assert all(result.ok and not result.cached for result in results)


def test_a_server_gone_after_answering_stops_the_run_saying_connection_refused(tmp_path: Path) -> None:
    server = OpenAICompatibleServer(echo_responder).start()
    client = client_for(
        server, tmp_path, breaker_failures=3, max_attempts=2, max_concurrency=4, backoff_initial_s=0.5, backoff_max_s=1
    )
    assert client.run([make_request(0)])[0].ok  # the probe is answered, then the server crashes
    server.stop()
    with pytest.raises(EndpointBroken) as stopped:
        client.run([make_request(n) for n in range(1, 30)], scope="t/s")
    line = str(stopped.value)
    assert "\n" not in line and line.startswith(f"{client.settings.base_url}: ")
    assert "calls in a row failed after 1 answered, every try of a request among them: connection refused: the " in line
    assert "server is gone" in line
    # Once 3 failed, no new request started: the 4 under way were tried again, and the first to fail twice stopped
    # the run (else every one of the 29 requests would have been tried).
    assert int(line.split(": ", 1)[1].split(" calls in a row", 1)[0]) <= 4 + 4


@pytest.mark.parametrize("fault", [Fault.endless(0.05), Fault.stall()], ids=["endless", "headers-then-nothing"])
def test_an_answer_that_never_ends_is_cut_at_timeout_s_and_the_breaker_stops_the_run(
    fault: Fault, tmp_path: Path
) -> None:
    """Each try ends within ``timeout_s`` however the bytes come (a space every 50 ms passes any per-read timeout);
    the tries of a request are bounded (``max_attempts`` x ``timeout_s`` + backoff) and the breaker stops the run."""
    with OpenAICompatibleServer(echo_responder) as server:
        server.inject(*[fault] * 20)
        client = client_for(server, tmp_path, timeout_s=1.0, max_attempts=3, breaker_failures=2, max_concurrency=2)
        started = time.monotonic()
        with pytest.raises(EndpointBroken, match=r"no complete answer within 1 s \(llm.timeout_s\)"):
            client.run([make_request(n) for n in range(6)], scope="t/s")
        assert time.monotonic() - started < 30.0  # two tries of 1 s each, plus slack; without the deadline: never
        assert 2 <= len(server.chat_requests()) <= 3


def test_modes_refused_while_auto_finds_one_are_not_failures_of_the_endpoint(tmp_path: Path) -> None:
    with OpenAICompatibleServer(answer_any_mode, behaviour="no_models_endpoint") as server:  # refuses two modes
        client = client_for(server, tmp_path, structured_output="auto", breaker_failures=1)
        assert all(result.ok for result in client.run([make_request(n) for n in range(3)]))


def test_a_suspect_endpoint_whose_retried_requests_all_ended_lets_new_requests_go(tmp_path: Path) -> None:
    """After an answer, two 503s make the endpoint suspect (new requests wait); both requests then end with a 400 of
    their own (not retried, not counted): nothing can settle the suspicion, so the waiting requests must go."""
    with OpenAICompatibleServer(echo_responder) as server:
        client = client_for(server, tmp_path, breaker_failures=2, max_attempts=3, max_concurrency=1)
        assert client.run([make_request(0)])[0].ok
        server.inject(Fault.server_error(503), Fault.server_error(503), Fault("status", status=400),
                      Fault("status", status=400))  # fmt: skip
        results: list[LLMResult] = []
        run = threading.Thread(target=lambda: results.extend(client.run([make_request(n) for n in range(1, 6)])),
                               daemon=True)  # fmt: skip
        run.start()
        run.join(timeout=60)
        assert not run.is_alive(), "the run waits for ever"
        assert [result.ok for result in results] == [False, False, True, True, True]
