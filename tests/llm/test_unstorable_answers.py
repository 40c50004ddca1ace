"""An LLM answer whose text no store can keep (a lone surrogate, a NUL) is a malformed answer (issue 25).

Through the local OpenAI-compatible server and the real ``openai`` client: such an answer is re-asked once like any
answer refused by the schema, then the item fails alone with a reason that names the character; the other items
are answered and cached, nothing raises (SQLite refused the text with ``UnicodeEncodeError`` before, failing the
whole stage), and the answer store keeps the refused answer (its lone surrogates as JSON escapes).
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from conteb.storage import llm_cache_path
from llm.client import AnswerError, LLMClient
from tests.llm.conftest import answers, make_request
from tests.support.openai_server import Fault, OpenAICompatibleServer

SURROGATE = "lone surrogate U+D800 at character 0"
NUL = "NUL character (U+0000) at character 1"


def _completion(content: str) -> str:
    """A chat completion whose content is ``content``, as a broken server writes it: not ASCII-escaped, so a lone
    surrogate goes out as its three UTF-8 bytes (ED A0 80), which the client reads back as the surrogate."""
    message = {"role": "assistant", "content": content}
    body = {"id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": "gpt-4o",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}  # fmt: skip
    return json.dumps(body, ensure_ascii=False)


CASES = {
    # the completion's JSON holds "\ud800" in the message content: the content itself holds the surrogate
    "surrogate in the completion": (Fault.raw('{"index": 1, "echo": "\ud800 tram"}'), SURROGATE),
    # the content is ASCII, its JSON holds the escape: the parsed answer holds the surrogate
    "surrogate escape in the answer": (Fault.raw('{"index": 1, "echo": "\\ud800 tram"}'), SURROGATE),
    "raw surrogate bytes": (
        Fault.http_body(_completion('{"index": 1, "echo": "\ud800 tram"}'), "application/json"),
        SURROGATE,
    ),
    "NUL in the answer": (Fault.raw('{"index": 1, "echo": "a\\u0000 tram"}'), NUL),
}


def _first_item(body: dict[str, Any]) -> bool:
    return "question 0" in body["messages"][1]["content"]


@pytest.mark.parametrize("case", CASES)
def test_an_unstorable_answer_fails_its_item_alone_and_is_kept(
    case: str, server: OpenAICompatibleServer, make_client, tmp_path: Path
) -> None:
    fault, reason = CASES[case]
    server.inject(fault, fault, match=_first_item)  # the first answer and the answer to the re-ask
    client = make_client()
    results = client.run([make_request(n) for n in range(3)], scope="demo/reformulation")

    assert [r.ok for r in results] == [False, True, True]
    assert results[0].error.startswith("invalid answer: the answer's text at echo cannot be stored: " + reason)
    assert results[0].error.isascii()  # it is stored and published with the item as it is
    reask = [body["messages"] for body in answers(server) if _first_item(body)]
    assert len(reask) == 2 and reason in reask[1][-1]["content"]  # re-asked once, with the problem stated

    keys = [client.key(make_request(n)) for n in range(3)]
    assert set(client.cache.get_many(keys)) == set(keys[1:])  # the others are answered and cached
    remembered = client.cache.failures(keys)
    assert set(remembered) == {keys[0]} and reason in remembered[keys[0]].error
    kept = json.loads(remembered[keys[0]].answer)  # the paid answer is kept, and reads back as what came
    assert kept["echo"] in ("\ud800 tram", "a\x00 tram")

    server.requests.clear()
    rerun = make_client().run([make_request(n) for n in range(3)], scope="demo/reformulation")
    assert not server.chat_requests()  # the refusal is remembered, not paid for again
    assert [r.ok for r in rerun] == [False, True, True]
    assert rerun[0].remembered and reason in rerun[0].error


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        pytest.param(
            '{"index": 1, "echo": "ok", "\\udc00": 1}',
            "a key of the answer at (root) cannot be stored: lone surrogate",
            id="key",
        ),
        pytest.param(
            '{"index": 1, "echo": ["ok", {"x": "a\\u0000"}]}',
            "the answer's text at echo/1/x cannot be stored: NUL",
            id="nested",
        ),
        pytest.param('{"index": 1, "echo": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply", id="deep"),
    ],
)
def test_where_the_unstorable_text_is_is_named(content: str, problem: str) -> None:
    with pytest.raises(AnswerError, match=re.escape(problem)):  # a RecursionError before, for the deep one
        LLMClient.parse_answer(make_request(0), content)


def test_the_reformulation_stage_completes_around_an_unstorable_answer(
    tmp_path: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """build_conteb against the server: one chunk's rewrite holds a lone surrogate (first answer and re-ask), the
    other rewrites are used; before, the stage failed with UnicodeEncodeError after its Dagster retries."""
    from tests.test_llm_stages_e2e import API_KEY, build, registry, scripted_llm

    bad: list[str] = []  # the prompt of the first reformulation request (its chunk gets the bad rewrite)
    lock = threading.Lock()

    def llm(body: dict[str, Any]) -> dict[str, Any]:
        first = body["messages"][:2]  # a re-ask is about the same chunk
        answer = scripted_llm({**body, "messages": first})
        if body["response_format"]["json_schema"]["name"] == "reformulation":
            with lock:
                bad[:] = bad or [first[1]["content"]]
            if first[1]["content"] == bad[0]:
                answer = {"rewritten": "\ud800 " + answer["rewritten"]}
        return answer

    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    with OpenAICompatibleServer(llm) as server:
        result, _ = build(registry(tmp_path, server.url))

    assert result.success and not [e for e in result.all_events if e.is_step_failure]  # the gate fails no step
    stages = isolated_env / "stages" / "demo"
    quarantine = pq.read_table(stages / "reformulation_quarantine.parquet").to_pylist()
    assert len(quarantine) == 1 and quarantine[0]["reason"] == "llm_failed"
    assert "the answer's text at rewritten cannot be stored: lone surrogate U+D800" in quarantine[0]["detail"]
    chunks = pq.read_table(stages / "reformulated_chunks.parquet").to_pylist()
    later = [row for row in chunks if row["chunk_index"] > 0 and row["chunk_id"] != quarantine[0]["object_id"]]
    assert later and all(row["method"] == "llm" for row in later)  # the other rewrites are used
    with contextlib.closing(sqlite3.connect(llm_cache_path(isolated_env))) as db:
        kept = db.execute("SELECT custom_id, answer FROM failures").fetchall()
    assert [custom_id for custom_id, _ in kept] == [quarantine[0]["row"]]
    assert json.loads(kept[0][1])["rewritten"].startswith("\ud800 ")  # the paid answer, as it came
