"""``llm.structured_output: auto`` gives a mode up only for a refusal that repeats (issue 33): one transient error
about ``response_format`` demotes nothing, the same refusal on two requests does (kept in the answer store, and the
log says so), and a lesser mode kept longer than ``llm.mode_reprobe_after_s`` is asked in ``json_schema`` again."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from tests.llm.conftest import make_request
from tests.support.openai_server import Fault

TRANSIENT = Fault("status", status=400, content="response_format json_schema is temporarily unavailable")


def kinds(server) -> list[str | None]:
    """The ``response_format`` type of each chat request received (None: none sent)."""
    return [(json.loads(r.body).get("response_format") or {}).get("type") for r in server.chat_requests()]


def test_one_refusal_then_answers_keeps_json_schema(server, make_client, logs) -> None:
    server.inject(TRANSIENT)
    client = make_client()
    assert all(result.ok for result in client.run([make_request(n) for n in range(3)]))
    assert kinds(server) == ["json_schema"] * 4  # the refused request asked again, alone, in the same mode
    assert client.cache.structured_mode(server.url, "gpt-4o")[0] == "json_schema"  # type: ignore[index]
    assert not [line for line in logs if "structured mode json_schema ->" in line]


def test_the_same_refusal_on_two_requests_demotes_the_mode(server, make_client, logs) -> None:
    server.inject(TRANSIENT, TRANSIENT)
    client = make_client()
    assert all(result.ok for result in client.run([make_request(n) for n in range(3)]))
    assert kinds(server) == ["json_schema"] * 2 + ["json_object"] * 3
    assert client.cache.structured_mode(server.url, "gpt-4o")[0] == "json_object"  # type: ignore[index]
    assert (
        f"llm: {server.url}: structured mode json_schema -> json_object: the server refused json_schema (HTTP 400: "
        in "\n".join(logs)
    )


@pytest.mark.parametrize(("age_s", "asked"), [(2 * 24 * 3600, "json_schema"), (3600, "json_object")])
def test_a_demotion_kept_longer_than_the_reprobe_time_is_asked_in_json_schema_again(
    server, make_client, logs, tmp_path: Path, age_s: float, asked: str
) -> None:
    client = make_client()  # the default llm.mode_reprobe_after_s: one day
    client.cache.remember_structured_mode(server.url, "gpt-4o", "json_object", "the server refused json_schema")
    with sqlite3.connect(tmp_path / "llm.sqlite") as db:
        db.execute("UPDATE structured_modes SET created_at = ?", (time.time() - age_s,))
    assert all(result.ok for result in client.run([make_request(n) for n in range(2)]))
    assert kinds(server) == [asked] * 2
    assert client.cache.structured_mode(server.url, "gpt-4o")[0] == asked  # type: ignore[index]
    changed = [line for line in logs if "structured mode json_object -> json_schema" in line]
    assert len(changed) == (asked == "json_schema")
