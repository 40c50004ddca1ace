"""What a paid answer leaves (issue 33): an answer cut off by ``max_tokens`` is refused in every mode, never read
as a prefix, and remembered with why; a stored answer records the server that gave it."""

from __future__ import annotations

import sqlite3
import urllib.request
from pathlib import Path

import pytest

from llm.cache import AnswerCache
from llm.structured import CUT_OFF, parse_json_object
from llm.usage import TokenUsage
from tests.llm.conftest import make_request
from tests.llm.test_cached_tokens_ledger import old_store
from tests.support.openai_server import Fault


@pytest.mark.parametrize(
    "content",
    [
        'Note: {} then {"rewritten": "The club was founded in 18',  # a complete object, then a cut-off one
        '{"rewritten": "x"} and {"rewritten": "The club was founded in 18',
        '```json\n{"rewritten": "The club was founded in 18',
    ],
)
def test_the_lenient_parser_refuses_an_answer_cut_off_after_a_complete_object(content: str) -> None:
    with pytest.raises(ValueError, match="cut off"):
        parse_json_object(content, lenient=True)


@pytest.mark.parametrize("mode", ["json_schema", "json_object", "json_instruction"])
def test_an_answer_stopped_by_max_tokens_is_refused_in_every_mode(server, make_client, tmp_path, mode) -> None:
    # Complete, valid JSON: only finish_reason says that generation was cut off.
    server.inject(Fault.cut_off('{"index": 1, "echo": "What is the capital of"}'))
    client = make_client(structured_output=mode)
    [result] = client.run([make_request(1)], scope="t/stage")
    assert not result.ok and result.error == f"invalid answer: {CUT_OFF}"
    assert len(server.chat_requests()) == 1  # not re-asked: the same max_tokens would cut it again
    assert client.cache.failure_counts("t") == {"t/stage": 1}  # counted
    assert client.cache.usage("t/").calls == 1  # and paid for
    [again] = make_client(structured_output=mode).run([make_request(1)], scope="t/stage")
    assert again.remembered and CUT_OFF in (again.error or "") and len(server.chat_requests()) == 1


def test_a_stored_answer_records_the_server_that_gave_it(server, make_client, tmp_path: Path) -> None:
    [result] = make_client().run([make_request(1)], scope="t/stage")
    assert result.ok
    with sqlite3.connect(tmp_path / "llm.sqlite") as db:
        [(stored,)] = db.execute("SELECT server FROM answers").fetchall()
    assert stored == _server_header(server.url) and stored.startswith("BaseHTTP/")


def _server_header(url: str) -> str:
    """The ``Server`` header the test server sends (``http.server``'s ``BaseHTTP/... Python/...``)."""
    with urllib.request.urlopen(f"{url}/models", timeout=10) as response:
        return str(response.headers["Server"])


def test_an_answer_awaiting_its_reask_is_no_failure_yet_in_a_migrated_store(tmp_path: Path) -> None:
    path = tmp_path / "answers.sqlite"
    old_store(path)  # a store from before answers.server and failures.reask
    cache = AnswerCache(path)
    cache.remember_failure("k2", "squad/x", "item-2", "gpt-4o", "p@v1:0", "invalid answer: no", "{}", (10, 2), True)
    assert cache.failures(["k2"]) == {} and cache.failure_counts("squad") == {}  # not remembered, not counted
    assert cache.forget_failures("squad") == 0  # nor forgotten: the next run sends its re-ask
    awaiting = cache.awaiting_reask("k2")
    assert awaiting is not None and (awaiting.error, awaiting.prompt_tokens) == ("invalid answer: no", 10)
    cache.put("k2", "item-2", "gpt-4o", "p@v1:0", {"index": 2}, TokenUsage(20, 4), "fp_test")
    assert cache.awaiting_reask("k2") is None  # the re-ask's answer replaces it
    cache.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT key, server FROM answers ORDER BY key").fetchall() == [
            ("k1", None),
            ("k2", "fp_test"),
        ]
    db.close()
