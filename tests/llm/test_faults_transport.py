"""Server faults that used to stall or break the client (issue 11), over real HTTP with the real SDK.

A trickled answer is cut at the per-attempt deadline; ``Retry-After`` is parsed (seconds, HTTP dates),
garbage ignored and long waits capped; a 200 that is not a chat completion (HTML, wrong JSON shape,
too large) is a transient server fault, retried, and reported with what came back.
"""

import email.utils
import json
import time

from llm.retries import parse_retry_after, request_rejected
from llm.settings import LLMSettings
from tests.llm.conftest import make_request
from tests.support.openai_server import Fault

NOW = 784111777.0  # Sun, 06 Nov 1994 08:49:37 GMT, the example date of RFC 9110


# --- 1. a total deadline per attempt ---------------------------------------------------------------


def test_a_trickled_answer_is_cut_at_the_deadline_and_retried(server, make_client, logs) -> None:
    server.inject(Fault.trickle(0.1))  # ~400 bytes, one every 100 ms: ~40 s, far past timeout_s
    start = time.monotonic()
    [result] = make_client(timeout_s=2.0).run([make_request(1)], scope="t/s")
    assert result.ok and result.attempts == 2
    assert time.monotonic() - start < 12.0  # generous on a loaded machine; without the deadline: 40 s
    assert any("no complete answer within 2 s" in line and "retry 1/" in line for line in logs)


def test_a_server_that_always_trickles_fails_the_item_within_the_deadlines(server, make_client) -> None:
    server.inject(*[Fault.trickle(0.1)] * 2)
    start = time.monotonic()
    [result] = make_client(timeout_s=1.0, max_attempts=2).run([make_request(1)])
    assert not result.ok and result.attempts == 2
    assert "no complete answer within 1 s" in result.error
    assert time.monotonic() - start < 12.0  # without the deadline: 80 s


# --- 2. Retry-After ----------------------------------------------------------------------------------


def test_retry_after_seconds_and_http_dates_are_parsed() -> None:
    assert parse_retry_after("120", NOW) == 120.0
    assert parse_retry_after(" 0 ", NOW) == 0.0
    assert parse_retry_after("1.5", NOW) == 1.5  # not RFC 9110, but sent by some servers
    assert parse_retry_after("Sun, 06 Nov 1994 08:50:37 GMT", NOW) == 60.0  # IMF-fixdate
    assert parse_retry_after("Sunday, 06-Nov-94 08:50:07 GMT", NOW) == 30.0  # obsolete RFC 850
    assert parse_retry_after("Sun Nov  6 08:49:47 1994", NOW) == 10.0  # obsolete asctime, GMT
    assert parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", NOW) == 0.0  # a date in the past: now


def test_transient_statuses_are_timeouts_conflicts_rate_limits_and_server_errors() -> None:
    statuses = (400, 401, 403, 404, 408, 409, 422, 429)
    assert [status for status in statuses if not request_rejected(status, "")] == [408, 409, 429]
    assert not any(request_rejected(status, "Internal Server Error") for status in (500, 502, 503, 504, 599))
    assert request_rejected(500, "1 validation error for CreateChatCompletionRequest: Input should be 'text'")


def test_garbage_retry_after_is_ignored() -> None:
    for value in ("soon", "", "-5", "nan", "inf", "1e400", "Mon, 99 Foo 1994 25:61:00 GMT"):
        assert parse_retry_after(value, NOW) is None, value


def test_retry_after_soon_is_retried_with_the_normal_backoff(server, make_client, logs) -> None:
    server.inject(Fault.rate_limited(retry_after="soon"))
    [result] = make_client().run([make_request(1)], scope="t/s")
    assert result.ok and result.attempts == 2
    assert any("Retry-After 'soon' ignored" in line for line in logs)


def test_a_long_retry_after_is_capped_by_the_setting(server, make_client, logs) -> None:
    assert LLMSettings().max_retry_after_s == 60.0
    server.inject(Fault.rate_limited(retry_after=86400))
    start = time.monotonic()
    [result] = make_client(max_retry_after_s=0.3).run([make_request(1)], scope="t/s")
    assert result.ok and result.attempts == 2
    assert 0.3 <= time.monotonic() - start < 12.0  # without the cap: a day
    assert any("Retry-After '86400' = 86400 s, capped at 0.3 s" in line and "retry 1/" in line for line in logs)


def test_retry_after_as_an_http_date_is_waited_for(server, make_client, logs) -> None:
    server.inject(Fault.rate_limited(retry_after=email.utils.formatdate(time.time() + 2, usegmt=True)))
    start = time.monotonic()
    [result] = make_client().run([make_request(1)], scope="t/s")
    assert result.ok and result.attempts == 2
    assert 0.9 <= time.monotonic() - start < 12.0  # the date has whole seconds: 1 to 2 s from now
    assert any("Retry-After" in line and "GMT" in line for line in logs)


# --- 3. a 200 that is not a chat completion ----------------------------------------------------------

HTML = "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"


def test_an_html_page_with_status_200_is_retried(server, make_client, logs) -> None:
    server.inject(Fault.http_body(HTML))
    [result] = make_client().run([make_request(1)], scope="t/s")
    assert result.ok and result.attempts == 2
    assert any("text/html" in line and "<html><head><title>502" in line for line in logs)


def test_an_html_page_every_time_fails_saying_what_came_back(server, make_client) -> None:
    server.inject(*[Fault.http_body(HTML)] * 3)
    [result] = make_client(max_attempts=3).run([make_request(1)])
    assert not result.ok and result.attempts == 3
    assert "not a chat completion" in result.error
    assert "text/html" in result.error and "<html><head><title>502 Bad Gateway" in result.error


def test_json_of_the_wrong_shape_is_a_server_fault_not_an_empty_answer(server, make_client) -> None:
    wrong = json.dumps({"result": {"index": 1, "echo": "x"}})
    server.inject(*[Fault.http_body(wrong, "application/json")] * 2)
    [result] = make_client(max_attempts=2).run([make_request(1)])
    assert not result.ok and result.attempts == 2
    assert "empty" not in result.error
    assert "not a chat completion" in result.error and "choices" in result.error and '{"result"' in result.error
    server.inject(Fault.http_body(wrong, "application/json"))
    [again] = make_client().run([make_request(2)])
    assert again.ok and again.attempts == 2


def test_an_oversized_answer_is_refused_and_retried(server, make_client) -> None:
    assert LLMSettings().max_answer_bytes == 1024 * 1024
    huge = json.dumps({"id": "x", "choices": [{"message": {"content": "x" * 5000}}]})
    server.inject(Fault.http_body(huge, "application/json"))
    [result] = make_client(max_answer_bytes=2048).run([make_request(1)])
    assert result.ok and result.attempts == 2
    server.set_responder(lambda body: {"index": 1, "echo": "y" * 5000})  # every answer too large
    [failed] = make_client(max_answer_bytes=2048, max_attempts=2).run([make_request(2)])
    assert not failed.ok and "larger than llm.max_answer_bytes (2048 bytes)" in failed.error
