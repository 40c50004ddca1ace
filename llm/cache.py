"""Persistent, content-addressed store of paid LLM answers and of the cost ledger (SQLite, WAL).

* ``answers``: key -> validated JSON answer. The key is the SHA-256 of the canonical JSON of
  everything that determines an answer (model, endpoint family, messages, schema, parameters,
  prompt tag), see :func:`cache_key`. Each answer is committed as soon as it arrives, so a process
  killed mid-stage loses nothing it paid for and a rerun asks only for what is missing.
* ``usage``: one row per paid call (scope, tokens, estimated dollars): the cost ledger.
* ``batches``: Batch API jobs in flight, so a restarted stage resumes polling instead of paying twice.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY, custom_id TEXT, model TEXT, prompt_tag TEXT, value TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS usage (
    id INTEGER PRIMARY KEY, scope TEXT NOT NULL, custom_id TEXT, model TEXT, prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL, cost_usd REAL NOT NULL, mode TEXT NOT NULL, created_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS usage_scope ON usage(scope);
CREATE TABLE IF NOT EXISTS batches (
    batch_id TEXT PRIMARY KEY, scope TEXT NOT NULL, keys_digest TEXT NOT NULL, status TEXT NOT NULL,
    created_at REAL NOT NULL, updated_at REAL NOT NULL);
"""


def cache_key(parts: dict[str, Any]) -> str:
    """SHA-256 hex of the canonical JSON (sorted keys, no spaces) of ``parts``."""
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedAnswer:
    value: dict[str, Any]
    prompt_tokens: int
    completion_tokens: int
    model: str | None


@dataclass(frozen=True)
class UsageSummary:
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float


class AnswerCache:
    """The SQLite file at ``path`` (created with its folder when missing). Thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # durable across process crashes in WAL mode
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def get(self, key: str) -> CachedAnswer | None:
        with self._lock:
            row = self._db.execute(
                "SELECT value, prompt_tokens, completion_tokens, model FROM answers WHERE key = ?", (key,)
            ).fetchone()
        return CachedAnswer(json.loads(row[0]), row[1], row[2], row[3]) if row else None

    def get_many(self, keys: Iterable[str]) -> dict[str, CachedAnswer]:
        """Cached answers among ``keys``."""
        found: dict[str, CachedAnswer] = {}
        keys = list(dict.fromkeys(keys))
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                rows = self._db.execute(
                    f"SELECT key, value, prompt_tokens, completion_tokens, model FROM answers "
                    f"WHERE key IN ({','.join('?' * len(chunk))})",
                    chunk,
                ).fetchall()
                for key, value, prompt_tokens, completion_tokens, model in rows:
                    found[key] = CachedAnswer(json.loads(value), prompt_tokens, completion_tokens, model)
        return found

    def put(
        self, key: str, custom_id: str, model: str, prompt_tag: str, value: dict[str, Any], usage: tuple[int, int]
    ) -> None:
        """Store a validated answer (committed at once)."""
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (key, custom_id, model, prompt_tag, json.dumps(value, ensure_ascii=False), *usage, time.time()),
            )

    def record_usage(
        self, scope: str, custom_id: str, model: str, usage: tuple[int, int], cost_usd: float, mode: str
    ) -> None:
        """Append one paid call to the ledger."""
        with self._lock:
            self._db.execute(
                "INSERT INTO usage (scope, custom_id, model, prompt_tokens, completion_tokens, cost_usd, mode, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (scope, custom_id, model, *usage, cost_usd, mode, time.time()),
            )

    def usage(self, scope_prefix: str = "", since: float | None = None) -> UsageSummary:
        """Ledger totals for scopes starting with ``scope_prefix`` (e.g. ``"squad/"`` for a task)."""
        query = (
            "SELECT COUNT(*), COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0), "
            "COALESCE(SUM(cost_usd), 0) FROM usage WHERE scope LIKE ? ESCAPE '\\'"
        )
        escaped = scope_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        params: list[Any] = [escaped + "%"]
        if since is not None:
            query += " AND created_at >= ?"
            params.append(since)
        with self._lock:
            calls, prompt, completion, cost = self._db.execute(query, params).fetchone()
        return UsageSummary(calls, prompt, completion, round(cost, 6))

    def usage_by_scope(self) -> dict[str, UsageSummary]:
        """Ledger totals per scope (``<task>/<stage>``), sorted by scope."""
        with self._lock:
            rows = self._db.execute(
                "SELECT scope, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(cost_usd) "
                "FROM usage GROUP BY scope ORDER BY scope"
            ).fetchall()
        return {
            scope: UsageSummary(calls, prompt, completion, round(cost, 6))
            for scope, calls, prompt, completion, cost in rows
        }

    # --- Batch API bookkeeping -----------------------------------------------------------------

    def open_batch(self, scope: str, keys_digest: str) -> str | None:
        """Id of an unfinished batch submitted for the same scope and request set, if any."""
        with self._lock:
            row = self._db.execute(
                "SELECT batch_id FROM batches WHERE scope = ? AND keys_digest = ? AND status = 'submitted' "
                "ORDER BY created_at DESC LIMIT 1",
                (scope, keys_digest),
            ).fetchone()
        return row[0] if row else None

    def mark_batch(self, batch_id: str, scope: str, keys_digest: str, status: str) -> None:
        now = time.time()
        with self._lock:
            self._db.execute(
                "INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(batch_id) DO UPDATE SET "
                "status = excluded.status, updated_at = excluded.updated_at",
                (batch_id, scope, keys_digest, status, now, now),
            )
