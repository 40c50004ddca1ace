"""Persistent, content-addressed store of paid LLM answers and of the cost ledger (SQLite, WAL).

* ``answers``: key -> validated JSON answer. The key is the SHA-256 of the canonical JSON of
  everything that determines an answer (model, endpoint family, messages, schema, parameters,
  prompt tag), see :func:`cache_key`, with ``server``: what identified the server that answered (its
  ``system_fingerprint`` or ``Server`` header; NULL when unknown or stored before the column existed).
  Each answer is committed as soon as it arrives, in the transaction that records its call in ``usage``
  (:meth:`AnswerCache.writes`), so a process killed mid-stage loses nothing it paid for, pays for nothing twice,
  and a rerun asks only for what is missing.
* ``usage``: one row per paid call (scope, prompt / cached / completion tokens, estimated dollars): the cost
  ledger. ``cached_tokens`` (the prompt tokens the provider served from its prompt cache, part of
  ``prompt_tokens``) is also kept with each answer. ``implausible_usage`` is 1 for a call whose answer reported
  impossible counts (:mod:`llm.usage`): recorded as 0 tokens and $0, so no count can overflow SQLite's INTEGER.
* ``batches``: Batch API jobs in flight, so a restarted stage resumes polling instead of paying twice.
* ``failures``: key -> the last answer that failed validation (after the re-ask) and why, with the scope
  (``<task>/<stage>``) that asked. A rerun does not pay for the same refusal again: the key changes with
  the prompt, model or settings, and ``conteb llm retry-failed`` forgets a task's or stage's failures.
  A valid answer for the key replaces its failure. A row with ``reask = 1`` is not a failure yet: the first,
  refused answer of a request whose re-ask has not come back (committed with the first call's ``usage`` row);
  :meth:`AnswerCache.awaiting_reask` gives it to a rerun, which sends only the re-ask.
* ``structured_modes``: (endpoint URL, model) -> the structured-output mode ``llm.structured_output: auto`` found
  the server to accept, and why (:mod:`llm.structured`), so that a rerun does not find it again. A file made before
  the table existed gets it when opened (the migration below).

The file is the project's LLM answer store (:data:`ANSWER_STORE`), opened and used under the one connection policy
of :mod:`conteb.sqlite_files` (WAL, ``synchronous=FULL``, one connection per cache object, reopened in a forked
child): an existing 0-byte, foreign, damaged or review-store file is refused (``StoreFileError``), never silently
started fresh, and damage met later raises ``StoreFileError`` naming the file and what to do. Every method is one
transaction; :meth:`AnswerCache.writes` makes several writes one commit. A file made before a column existed is
migrated when opened, additively (``ADDED_COLUMNS``: ``ALTER TABLE ... ADD COLUMN`` with a default, so old rows
read 0; no row is rewritten or dropped), in the transaction that creates what is missing and re-reads the columns
under the write lock, so two processes opening the same old file at once migrate it once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conteb.sqlite_files import SQLiteStore
from conteb.sqlite_kinds import StoreKind, created_names, table_columns
from llm.usage import TokenUsage, storable_usage

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY, custom_id TEXT, model TEXT, prompt_tag TEXT, value TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, created_at REAL NOT NULL,
    cached_tokens INTEGER NOT NULL DEFAULT 0, server TEXT)""",
    """CREATE TABLE IF NOT EXISTS usage (
    id INTEGER PRIMARY KEY, scope TEXT NOT NULL, custom_id TEXT, model TEXT, prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL, cost_usd REAL NOT NULL, mode TEXT NOT NULL, created_at REAL NOT NULL,
    cached_tokens INTEGER NOT NULL DEFAULT 0)""",
    "CREATE INDEX IF NOT EXISTS usage_scope ON usage(scope)",
    """CREATE TABLE IF NOT EXISTS batches (
    batch_id TEXT PRIMARY KEY, scope TEXT NOT NULL, keys_digest TEXT NOT NULL, status TEXT NOT NULL,
    created_at REAL NOT NULL, updated_at REAL NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS failures (
    key TEXT PRIMARY KEY, scope TEXT NOT NULL, custom_id TEXT, model TEXT, prompt_tag TEXT, error TEXT NOT NULL,
    answer TEXT, prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, created_at REAL NOT NULL,
    reask INTEGER NOT NULL DEFAULT 0)""",
    "CREATE INDEX IF NOT EXISTS failures_scope ON failures(scope)",
    """CREATE TABLE IF NOT EXISTS structured_modes (
    base_url TEXT NOT NULL, model TEXT NOT NULL, mode TEXT NOT NULL, reason TEXT NOT NULL, created_at REAL NOT NULL,
    PRIMARY KEY (base_url, model))""",
)
_SCHEMA_NAMES = created_names(_SCHEMA)
ADDED_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "answers": (("cached_tokens", "INTEGER NOT NULL DEFAULT 0"), ("server", "TEXT")),
    "failures": (("reask", "INTEGER NOT NULL DEFAULT 0"),),
    "usage": (("cached_tokens", "INTEGER NOT NULL DEFAULT 0"), ("implausible_usage", "INTEGER NOT NULL DEFAULT 0")),
}
"""Columns added to the tables after their first release: ``table -> ((column, declaration), ...)``."""
ANSWER_STORE = StoreKind(
    "LLM answer store",
    "the paid LLM answers and the cost ledger",
    created_names(_SCHEMA, "TABLE"),
    "conteb llm check",
    table_columns(_SCHEMA, {table: [name for name, _ in columns] for table, columns in ADDED_COLUMNS.items()}),
)
"""The kind of store the file is (:mod:`conteb.sqlite_files`): its mark, its tables and their columns (those of
``_SCHEMA``; a file of an earlier version may lack the ``ADDED_COLUMNS``)."""


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
    cached_tokens: int = 0


@dataclass(frozen=True)
class RememberedFailure:
    """An answer that failed validation: why (``error``), the answer text itself, and the scope that asked."""

    scope: str
    error: str
    answer: str | None
    prompt_tokens: int
    completion_tokens: int
    model: str | None


@dataclass(frozen=True)
class UsageSummary:
    """Ledger totals: calls, tokens (``cached_tokens`` is part of ``prompt_tokens``) and estimated dollars;
    ``implausible_usage``: the calls among them whose answer reported impossible token counts (recorded as 0)."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    cached_tokens: int = 0
    implausible_usage: int = 0

    @property
    def cached_share(self) -> float:
        """``cached_tokens / prompt_tokens`` (0.0 without prompt tokens)."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def __add__(self, other: UsageSummary) -> UsageSummary:
        return UsageSummary(
            self.calls + other.calls,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            round(self.cost_usd + other.cost_usd, 6),
            self.cached_tokens + other.cached_tokens,
            self.implausible_usage + other.implausible_usage,
        )


class AnswerCache:
    """The SQLite file at ``path`` (created with its folder when missing). Thread-safe.

    Raises :class:`conteb.sqlite_kinds.StoreFileError` when ``path`` exists but is not a usable store.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._store = SQLiteStore(self.path, ANSWER_STORE)
        try:
            self._create_and_migrate()
        except BaseException:
            self._store.close()
            raise

    def _create_and_migrate(self) -> None:
        """The missing tables, and the additive migration of a file made before ``ADDED_COLUMNS`` (module doc).

        A file that lacks nothing is only read, so opening it never waits for another process's write lock."""
        with self._store.read() as db:
            if not _missing(db):
                return
        with self._store.write() as db:  # the schema is read again under the write lock
            for statement in _SCHEMA:
                db.execute(statement)
            for table, name, declaration in _missing(db):  # only columns now: every table exists
                db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {declaration}")

    def close(self) -> None:
        self._store.close()

    def writes(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """Several writes as one transaction: ``with cache.writes(): cache.put(...); ...`` commits once at the end
        (nothing of it when the block raises)."""
        return self._store.write()

    def get(self, key: str) -> CachedAnswer | None:
        with self._store.read() as db:
            row = db.execute(
                "SELECT value, prompt_tokens, completion_tokens, model, cached_tokens FROM answers WHERE key = ?",
                (key,),
            ).fetchone()
        return CachedAnswer(json.loads(row[0]), *row[1:]) if row else None

    def _rows_by_key(self, select: str, keys: Iterable[str]) -> list[tuple[Any, ...]]:
        """Rows of ``select`` (``SELECT key, ... FROM table``) whose key is among ``keys``, 500 keys a query."""
        keys = list(dict.fromkeys(keys))
        rows: list[tuple[Any, ...]] = []
        with self._store.read() as db:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                rows += db.execute(f"{select} WHERE key IN ({','.join('?' * len(chunk))})", chunk).fetchall()
        return rows

    def get_many(self, keys: Iterable[str]) -> dict[str, CachedAnswer]:
        """Cached answers among ``keys``."""
        rows = self._rows_by_key(
            "SELECT key, value, prompt_tokens, completion_tokens, model, cached_tokens FROM answers", keys
        )
        return {key: CachedAnswer(json.loads(value), *rest) for key, value, *rest in rows}

    def put(
        self,
        key: str,
        custom_id: str,
        model: str,
        prompt_tag: str,
        value: dict[str, Any],
        usage: TokenUsage,
        server: str | None = None,
    ) -> None:
        """Store a validated answer with the tokens paid for it and the ``server`` that answered (committed at once,
        or with the enclosing :meth:`writes`); it replaces a remembered failure of ``key``. Implausible counts are
        stored as 0 (:func:`llm.usage.storable_usage`)."""
        usage = storable_usage(usage)
        with self._store.write() as db:
            db.execute(
                "INSERT OR REPLACE INTO answers (key, custom_id, model, prompt_tag, value, prompt_tokens, "
                "completion_tokens, created_at, cached_tokens, server) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key, custom_id, model, prompt_tag, json.dumps(value, ensure_ascii=False), usage.prompt_tokens,
                 usage.completion_tokens, time.time(), usage.cached_tokens, server or None),
            )  # fmt: skip
            db.execute("DELETE FROM failures WHERE key = ?", (key,))

    # --- remembered failures -------------------------------------------------------------------

    def remember_failure(
        self,
        key: str,
        scope: str,
        custom_id: str,
        model: str,
        prompt_tag: str,
        error: str,
        answer: str | None,
        usage: tuple[int, int],
        reask: bool = False,
    ) -> None:
        """Remember that ``key``'s answer (``answer``, the last one received) failed validation with ``error``;
        ``reask``: it is a first answer whose re-ask is about to be sent (a rerun sends only the re-ask), not a
        failure yet."""
        with self._store.write() as db:
            db.execute(
                "INSERT OR REPLACE INTO failures (key, scope, custom_id, model, prompt_tag, error, answer, "
                "prompt_tokens, completion_tokens, created_at, reask) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key, scope, custom_id, model, prompt_tag, error, answer, *usage, time.time(), int(reask)),
            )

    def awaiting_reask(self, key: str) -> RememberedFailure | None:
        """``key``'s first, refused answer whose re-ask never came back (a process killed in between), or None."""
        with self._store.read() as db:
            row = db.execute(
                "SELECT scope, error, answer, prompt_tokens, completion_tokens, model FROM failures "
                "WHERE key = ? AND reask = 1",
                (key,),
            ).fetchone()
        return RememberedFailure(*row) if row else None

    def failures(self, keys: Iterable[str]) -> dict[str, RememberedFailure]:
        """Remembered failures among ``keys`` (not the answers awaiting their re-ask)."""
        rows = self._rows_by_key(
            "SELECT key, reask, scope, error, answer, prompt_tokens, completion_tokens, model FROM failures", keys
        )
        return {key: RememberedFailure(*rest) for key, reask, *rest in rows if not reask}

    def failure_counts(self, task: str) -> dict[str, int]:
        """How many failures are remembered per scope (``<task>/<stage>``) of ``task``, sorted by scope."""
        with self._store.read() as db:
            rows = db.execute(
                "SELECT scope, COUNT(*) FROM failures WHERE scope LIKE ? ESCAPE '\\' AND reask = 0 GROUP BY scope "
                "ORDER BY scope",
                [_like_prefix(f"{task}/")],
            ).fetchall()
        return dict(rows)

    def forget_failures(self, task: str, stage: str | None = None) -> int:
        """Forget the remembered failures of scope ``<task>/<stage>`` (every stage of ``task`` when ``stage`` is
        ``None``), so the next run asks for them again; returns how many were forgotten. An answer awaiting its
        re-ask is kept (the next run sends the re-ask)."""
        if stage is None:
            where, params = "scope LIKE ? ESCAPE '\\'", [_like_prefix(f"{task}/")]
        else:
            where, params = "scope = ?", [f"{task}/{stage}"]
        with self._store.write() as db:
            return db.execute(f"DELETE FROM failures WHERE {where} AND reask = 0", params).rowcount

    def record_usage(
        self, scope: str, custom_id: str, model: str, usage: TokenUsage, cost_usd: float, mode: str
    ) -> None:
        """Append one paid call to the ledger; an implausible ``usage`` (:func:`llm.usage.storable_usage`) as 0
        tokens and $0, flagged."""
        usage = storable_usage(usage)
        cost_usd = 0.0 if usage.implausible else cost_usd
        with self._store.write() as db:
            db.execute(
                "INSERT INTO usage (scope, custom_id, model, prompt_tokens, completion_tokens, cost_usd, mode, "
                "created_at, cached_tokens, implausible_usage) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (scope, custom_id, model, usage.prompt_tokens, usage.completion_tokens, cost_usd, mode, time.time(),
                 usage.cached_tokens, int(usage.implausible)),
            )  # fmt: skip

    def usage(self, scope_prefix: str = "", since: float | None = None) -> UsageSummary:
        """Ledger totals for scopes starting with ``scope_prefix`` (e.g. ``"squad/"`` for a task)."""
        query = (
            "SELECT COUNT(*), COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0), "
            "COALESCE(SUM(cost_usd), 0), COALESCE(SUM(cached_tokens), 0), COALESCE(SUM(implausible_usage), 0) "
            "FROM usage WHERE scope LIKE ? ESCAPE '\\'"
        )
        params: list[Any] = [_like_prefix(scope_prefix)]
        if since is not None:
            query += " AND created_at >= ?"
            params.append(since)
        with self._store.read() as db:
            calls, prompt, completion, cost, cached, implausible = db.execute(query, params).fetchone()
        return UsageSummary(calls, prompt, completion, round(cost, 6), cached, implausible)

    def usage_by_scope(self) -> dict[str, UsageSummary]:
        """Ledger totals per scope (``<task>/<stage>``), sorted by scope."""
        with self._store.read() as db:
            rows = db.execute(
                "SELECT scope, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(cost_usd), "
                "SUM(cached_tokens), SUM(implausible_usage) FROM usage GROUP BY scope ORDER BY scope"
            ).fetchall()
        return {
            scope: UsageSummary(calls, prompt, completion, round(cost, 6), cached, implausible)
            for scope, calls, prompt, completion, cost, cached, implausible in rows
        }

    # --- structured-output modes found by ``auto`` ----------------------------------------------

    def structured_mode(self, base_url: str, model: str) -> tuple[str, str, float] | None:
        """``(mode, reason, when)`` remembered for ``model`` at ``base_url``, or None."""
        with self._store.read() as db:
            row = db.execute(
                "SELECT mode, reason, created_at FROM structured_modes WHERE base_url = ? AND model = ?",
                (base_url, model),
            ).fetchone()
        return (row[0], row[1], row[2]) if row else None

    def remember_structured_mode(self, base_url: str, model: str, mode: str, reason: str) -> None:
        """Remember that ``model`` at ``base_url`` is asked in ``mode`` (replaces what was remembered)."""
        with self._store.write() as db:
            db.execute(
                "INSERT OR REPLACE INTO structured_modes VALUES (?, ?, ?, ?, ?)",
                (base_url, model, mode, reason, time.time()),
            )

    # --- Batch API bookkeeping -----------------------------------------------------------------

    def open_batch(self, scope: str, keys_digest: str) -> str | None:
        """Id of an unfinished batch submitted for the same scope and request set, if any."""
        with self._store.read() as db:
            row = db.execute(
                "SELECT batch_id FROM batches WHERE scope = ? AND keys_digest = ? AND status = 'submitted' "
                "ORDER BY created_at DESC LIMIT 1",
                (scope, keys_digest),
            ).fetchone()
        return row[0] if row else None

    def mark_batch(self, batch_id: str, scope: str, keys_digest: str, status: str) -> None:
        now = time.time()
        with self._store.write() as db:
            db.execute(
                "INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(batch_id) DO UPDATE SET "
                "status = excluded.status, updated_at = excluded.updated_at",
                (batch_id, scope, keys_digest, status, now, now),
            )


def _missing(db: sqlite3.Connection) -> list[tuple[str, str, str]]:
    """What the file lacks: ``(name, "", "")`` for a table or index of ``_SCHEMA``, ``(table, column, declaration)``
    for a column of ``ADDED_COLUMNS`` its table lacks."""
    names = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'index')")}
    missing: list[tuple[str, str, str]] = [(name, "", "") for name in sorted(_SCHEMA_NAMES - names)]
    tables = names & ANSWER_STORE.tables
    for table, columns in ADDED_COLUMNS.items():
        if table in tables:
            present = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
            missing += [(table, name, declaration) for name, declaration in columns if name not in present]
    return missing


def _like_prefix(prefix: str) -> str:
    """A ``LIKE ... ESCAPE '\\'`` pattern matching the strings that start with ``prefix``."""
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
