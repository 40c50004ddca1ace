"""Cached prompt tokens: read from every answer, kept in the ledger at the cached price, old stores migrated."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from llm.cache import AnswerCache
from llm.settings import DEFAULT_PRICES, LLMSettings, Price
from llm.types import LLMRequest
from llm.usage import TokenUsage, parse_usage
from tests.llm.conftest import SCHEMA


def document(name: str) -> str:
    """A document of about 3,000 tokens on the test server, different for each ``name`` from its first line."""
    return f"{name}\n" + " ".join(f"fact{n:05d}" for n in range(1200))


def document_request(n: int, group: str | None = "doc") -> LLMRequest:
    """A request on document ``group`` (first) asking question ``n`` (last): the cache-friendly layout."""
    return LLMRequest(
        custom_id=f"item-{n}",
        messages=(
            {"role": "system", "content": "Answer in JSON."},
            {"role": "user", "content": f"Document:\n{document(str(group))}\n\nquestion {n}"},
        ),
        schema_name="answer",
        schema=SCHEMA,
        prompt_tag="test@v1:000000000000",
        prefix_group=group,
    )


# --- usage and prices --------------------------------------------------------------------------


def test_parse_usage_reads_cached_tokens_and_tolerates_their_absence() -> None:
    full = {"prompt_tokens": 2000, "completion_tokens": 30, "prompt_tokens_details": {"cached_tokens": 1792}}
    assert parse_usage(full) == TokenUsage(2000, 30, 1792)
    assert parse_usage({"prompt_tokens": 10, "completion_tokens": 2}) == TokenUsage(10, 2, 0)  # absent: 0
    assert parse_usage({"prompt_tokens": 10, "prompt_tokens_details": None}) == TokenUsage(10, 0, 0)
    assert parse_usage({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": "5"}}).cached_tokens == 0
    assert parse_usage({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 50}}).cached_tokens == 10
    assert parse_usage(None) == TokenUsage() and parse_usage([1]) == TokenUsage()


def test_cost_bills_cached_tokens_at_the_cached_price() -> None:
    settings = LLMSettings(model="gpt-4o")
    assert DEFAULT_PRICES["gpt-4o"] == Price(prompt=2.50, cached_prompt=1.25, completion=10.00)
    expected = ((2000 - 1792) * 2.50 + 1792 * 1.25 + 30 * 10.00) / 1e6
    assert settings.cost_usd(2000, 30, cached_tokens=1792) == pytest.approx(expected)
    assert settings.cost_usd(2000, 30, batch=True, cached_tokens=1792) == pytest.approx(expected * 0.5)
    assert settings.cost_usd(2000, 30) == pytest.approx((2000 * 2.50 + 30 * 10.00) / 1e6)
    assert settings.cost_usd(100, 0, cached_tokens=500) == pytest.approx(100 * 1.25 / 1e6)  # capped at the prompt
    mini = LLMSettings(model="gpt-4o-mini").cost_usd(1000, 100, cached_tokens=1000)
    assert mini == pytest.approx((1000 * 0.075 + 100 * 0.60) / 1e6)


def test_prices_are_overridable_and_old_price_keys_still_work() -> None:
    old_style = LLMSettings.model_validate({"model": "local", "prices": {"local": {"prompt": 1.0, "completion": 2.0}}})
    assert old_style.prices["local"].cached_rate == 1.0  # no cached price given: no discount assumed
    assert old_style.cost_usd(1000, 0, cached_tokens=1000) == pytest.approx(1000 * 1.0 / 1e6)
    new_style = LLMSettings.model_validate(
        {"model": "local", "prices": {"local": {"prompt": 1.0, "cached_prompt": 0.1, "completion": 2.0}}}
    )
    assert new_style.cost_usd(1000, 0, cached_tokens=1000) == pytest.approx(1000 * 0.1 / 1e6)
    with pytest.raises(ValueError, match="cached_prompt"):
        LLMSettings.model_validate({"prices": {"m": {"prompt": 1, "completion": 1, "cached_prompt": -1}}})


# --- the client and the ledger ---------------------------------------------------------------------


def test_online_answers_record_cached_tokens_at_the_cached_price(server, make_client) -> None:
    client = make_client(model="gpt-4o", max_concurrency=4)
    results = client.run([document_request(n) for n in range(4)], scope="t/stage")
    assert all(r.ok for r in results)
    assert results[0].cached_tokens == 0 and all(r.cached_tokens >= 1024 for r in results[1:])
    usage = client.cache.usage("t/")
    assert usage.cached_tokens == sum(r.cached_tokens for r in results)
    assert usage.cached_share == pytest.approx(usage.cached_tokens / usage.prompt_tokens)
    uncached = usage.prompt_tokens - usage.cached_tokens
    expected = (uncached * 2.50 + usage.cached_tokens * 1.25 + usage.completion_tokens * 10.00) / 1e6
    assert usage.cost_usd == pytest.approx(expected, abs=1e-6)
    again = client.run([document_request(n) for n in range(4)], scope="t/stage")  # from the answer cache
    assert [r.cached_tokens for r in again] == [r.cached_tokens for r in results] and all(r.cached for r in again)
    assert client.cache.usage_by_scope()["t/stage"].cached_tokens == usage.cached_tokens


def test_batch_answers_record_cached_tokens_at_the_batch_discount(server, make_client) -> None:
    client = make_client(model="gpt-4o", mode="batch", batch_poll_s=0.01)
    results = client.run([document_request(n) for n in range(3)], scope="t/batch")
    assert all(r.ok for r in results) and sum(r.cached_tokens > 0 for r in results) == 2
    usage = client.cache.usage("t/batch")
    assert usage.cached_tokens == sum(r.cached_tokens for r in results) > 0
    uncached = usage.prompt_tokens - usage.cached_tokens
    expected = (uncached * 2.50 + usage.cached_tokens * 1.25 + usage.completion_tokens * 10.00) / 1e6 * 0.5
    assert usage.cost_usd == pytest.approx(expected, abs=1e-6)


# --- migration of a store made before cached_tokens --------------------------------------------

OLD_SCHEMA = """
CREATE TABLE answers (
    key TEXT PRIMARY KEY, custom_id TEXT, model TEXT, prompt_tag TEXT, value TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, created_at REAL NOT NULL);
CREATE TABLE usage (
    id INTEGER PRIMARY KEY, scope TEXT NOT NULL, custom_id TEXT, model TEXT, prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL, cost_usd REAL NOT NULL, mode TEXT NOT NULL, created_at REAL NOT NULL);
CREATE INDEX usage_scope ON usage(scope);
CREATE TABLE batches (
    batch_id TEXT PRIMARY KEY, scope TEXT NOT NULL, keys_digest TEXT NOT NULL, status TEXT NOT NULL,
    created_at REAL NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE failures (
    key TEXT PRIMARY KEY, scope TEXT NOT NULL, custom_id TEXT, model TEXT, prompt_tag TEXT, error TEXT NOT NULL,
    answer TEXT, prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, created_at REAL NOT NULL);
"""  # llm/cache.py's schema before cached_tokens (commit b1e802a)


def old_store(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.executescript(OLD_SCHEMA)
        db.execute("INSERT INTO answers VALUES ('k1', 'item-1', 'gpt-4o', 'p@v1:0', '{\"index\": 1}', 900, 20, 1.0)")
        db.execute(
            "INSERT INTO usage (scope, custom_id, model, prompt_tokens, completion_tokens, cost_usd, mode, created_at) "
            "VALUES ('squad/reformulation', 'item-1', 'gpt-4o', 900, 20, 0.00245, 'online', 1.0)"
        )
    db.close()


def test_an_old_store_is_migrated_additively(tmp_path: Path) -> None:
    path = tmp_path / "answers.sqlite"
    old_store(path)
    cache = AnswerCache(path)
    answer = cache.get("k1")
    assert answer is not None and answer.value == {"index": 1} and answer.prompt_tokens == 900
    assert answer.cached_tokens == 0
    assert cache.usage("squad/") == type(cache.usage("squad/"))(1, 900, 20, 0.00245, 0)  # old rows: 0 cached
    cache.record_usage("squad/reformulation", "item-2", "gpt-4o", TokenUsage(2000, 10, 1792), 0.003, "online")
    cache.put("k2", "item-2", "gpt-4o", "p@v1:0", {"index": 2}, TokenUsage(2000, 10, 1792))
    cache.close()
    reopened = AnswerCache(path)  # migrating again changes nothing
    assert reopened.usage("squad/").cached_tokens == 1792 and reopened.usage("squad/").calls == 2
    assert reopened.get_many(["k1", "k2"])["k2"].cached_tokens == 1792
    reopened.close()
    with sqlite3.connect(path) as db:
        row = db.execute("SELECT key, value, prompt_tokens, completion_tokens FROM answers WHERE key = 'k1'").fetchone()
    db.close()
    assert row == ("k1", '{"index": 1}', 900, 20)  # the old answer, untouched


def test_two_processes_opening_an_old_store_at_once_migrate_it_once(tmp_path: Path) -> None:
    path = tmp_path / "answers.sqlite"
    old_store(path)
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            AnswerCache(path).close()
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with sqlite3.connect(path) as db:
        columns = [row[1] for row in db.execute("PRAGMA table_info(usage)")]
    db.close()
    assert columns.count("cached_tokens") == 1
