"""The review store's SQLite layout: its tables, kind of store and schema version, and how rows map
to and from the types of :mod:`review.model`.

Contracts:

* Tables ``items`` (one row per review item and its current decision), ``audit`` (append-only:
  triggers refuse UPDATE and DELETE) and ``queues`` (one revision counter per ``(task, kind)``).
* The file is the project's review store (:data:`REVIEW_STORE`, opened under the connection policy of
  :mod:`conteb.sqlite_files`). :func:`is_current` tells whether a file already has everything, so
  opening a current file writes nothing; :func:`migrate` (inside the caller's write transaction)
  creates what is missing and records :data:`SCHEMA_VERSION` in ``PRAGMA user_version``. Both refuse
  (:class:`conteb.sqlite_kinds.StoreFileError`, a RuntimeError) a file written by a newer schema.
* A pushed ``REVIEW_ITEMS`` row is validated and normalised by :func:`pushed_row` (ValueError for
  a malformed one): ``context`` becomes a JSON object text (null -> ``{}``, keys sorted, UTF-8
  kept), ``flags`` a JSON list, ``flagged`` 0/1 (from ``flags`` when absent), and
  ``proposed_sha256`` is :func:`review.model.proposal_sha256` of ``proposed``.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from conteb.sqlite_kinds import StoreFileError, StoreKind, created_names, table_columns
from review.model import AUDIT_ACTIONS, STATUSES, AuditEntry, ReviewItem, proposal_sha256

SCHEMA_VERSION = 1


ITEM_COLUMNS = tuple(field.name for field in dataclasses.fields(ReviewItem))
"""The columns of the ``items`` table, in :class:`review.model.ReviewItem` field order."""

AUDIT_COLUMNS = tuple(field.name for field in dataclasses.fields(AuditEntry))
"""The columns of the ``audit`` table read into an :class:`review.model.AuditEntry`."""

SCHEMA = (
    f"""CREATE TABLE IF NOT EXISTS items (
        item_id TEXT PRIMARY KEY,
        task TEXT NOT NULL,
        kind TEXT NOT NULL,
        object_id TEXT NOT NULL,
        doc_id TEXT NOT NULL,
        title TEXT,
        original TEXT,
        proposed TEXT NOT NULL,
        context TEXT NOT NULL DEFAULT '{{}}',
        flags TEXT NOT NULL DEFAULT '[]',
        flagged INTEGER NOT NULL CHECK (flagged IN (0, 1)),
        method TEXT NOT NULL,
        proposed_sha256 TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN {STATUSES!r}),
        edited_text TEXT,
        reviewer TEXT,
        note TEXT,
        version INTEGER NOT NULL CHECK (version >= 1),
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS items_queue ON items (task, kind, status, item_id)",
    "CREATE INDEX IF NOT EXISTS items_order ON items (task, kind, item_id)",
    f"""CREATE TABLE IF NOT EXISTS audit (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        item_id TEXT NOT NULL REFERENCES items (item_id),
        at REAL NOT NULL,
        reviewer TEXT,
        action TEXT NOT NULL CHECK (action IN {AUDIT_ACTIONS!r}),
        from_status TEXT,
        to_status TEXT NOT NULL CHECK (to_status IN {STATUSES!r}),
        version INTEGER NOT NULL,
        proposed_sha256 TEXT,
        text TEXT,
        note TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS audit_item ON audit (item_id, id)",
    "CREATE INDEX IF NOT EXISTS audit_reviewer ON audit (reviewer, id)",
    """CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
    BEGIN SELECT RAISE(ABORT, 'audit is append-only: UPDATE is not allowed'); END""",
    """CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
    BEGIN SELECT RAISE(ABORT, 'audit is append-only: DELETE is not allowed'); END""",
    """CREATE TABLE IF NOT EXISTS queues (
        task TEXT NOT NULL,
        kind TEXT NOT NULL,
        revision INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (task, kind)
    )""",
)
"""The DDL, idempotent (``IF NOT EXISTS``)."""
_SCHEMA_NAMES = created_names(SCHEMA)
REVIEW_STORE = StoreKind("review store", "the review queue (items, their decisions and the audit log)",
                         created_names(SCHEMA, "TABLE"), "conteb review check", table_columns(SCHEMA))  # fmt: skip
"""The kind of store the file is (:mod:`conteb.sqlite_files`): its mark, its tables and their columns (those of
:data:`SCHEMA`: schema version 1 is the only one, so an older file has every column)."""


def is_current(conn: sqlite3.Connection, path: Path) -> bool:
    """Whether the file already has :data:`SCHEMA_VERSION` and everything :data:`SCHEMA` makes (then opening it
    writes nothing); StoreFileError for a store written by a newer schema."""
    found = conn.execute("PRAGMA user_version").fetchone()[0]
    if found > SCHEMA_VERSION:
        raise StoreFileError(
            f"{path}: review store schema version {found} is newer than this code ({SCHEMA_VERSION}). Nothing was "
            "changed: use the conteb version that wrote it."
        )
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    return found == SCHEMA_VERSION and names >= _SCHEMA_NAMES


def migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Create the missing tables, indexes and triggers and record :data:`SCHEMA_VERSION` (in the caller's write
    transaction); StoreFileError for a store written by a newer schema."""
    if is_current(conn, path):
        return
    for statement in SCHEMA:
        conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _context_json(value: Any, item_id: str) -> str:
    """The JSON object text stored for a pushed ``context`` (null -> ``{}``)."""
    if value is None:
        return "{}"
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"review item {item_id!r}: context is not JSON ({exc})") from exc
    else:
        parsed = value
    if not isinstance(parsed, Mapping):
        raise ValueError(f"review item {item_id!r}: context must be a JSON object")
    return json.dumps(dict(parsed), sort_keys=True, ensure_ascii=False)


def pushed_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """Validate and normalise one pushed ``REVIEW_ITEMS`` row into ``items`` column values (raises ValueError)."""
    item_id = row.get("item_id")
    if not isinstance(item_id, str) or not item_id:
        raise ValueError(f"review item without an item_id: {dict(row)!r}")
    for name in ("task", "kind", "object_id", "doc_id", "proposed", "method"):
        if not isinstance(row.get(name), str):
            raise ValueError(f"review item {item_id!r}: {name} must be a string")
    proposed = row["proposed"]
    sha = row.get("proposed_sha256") or proposal_sha256(proposed)
    if sha != proposal_sha256(proposed):
        raise ValueError(f"review item {item_id!r}: proposed_sha256 is not the SHA-256 of proposed")
    flags = row.get("flags")
    flags = [] if flags is None else list(flags)
    if not all(isinstance(flag, str) for flag in flags):
        raise ValueError(f"review item {item_id!r}: flags must be strings")
    flagged = row.get("flagged")
    return {
        "item_id": item_id,
        "task": row["task"],
        "kind": row["kind"],
        "object_id": row["object_id"],
        "doc_id": row["doc_id"],
        "title": row.get("title"),
        "original": row.get("original"),
        "proposed": proposed,
        "context": _context_json(row.get("context"), item_id),
        "flags": json.dumps(flags, ensure_ascii=False),
        "flagged": int(bool(flags) if flagged is None else bool(flagged)),
        "method": row["method"],
        "proposed_sha256": sha,
    }


def item_from_row(row: sqlite3.Row) -> ReviewItem:
    """The :class:`review.model.ReviewItem` of an ``items`` row (context and flags decoded)."""
    values = {name: row[name] for name in ITEM_COLUMNS}
    values.update(context=json.loads(row["context"]), flags=json.loads(row["flags"]), flagged=bool(row["flagged"]))
    return ReviewItem(**values)


def entry_from_row(row: sqlite3.Row) -> AuditEntry:
    """The :class:`review.model.AuditEntry` of an ``audit`` row."""
    return AuditEntry(**{name: row[name] for name in AUDIT_COLUMNS})


def where_clause(
    task: str | None, kind: str | None, status: str | None = None, flagged: bool | None = None, prefix: str = ""
) -> tuple[str, list[Any]]:
    """A ``WHERE`` clause (possibly empty) and its parameters for the usual item filters (ValueError for an
    unknown ``status``); ``prefix`` qualifies the columns (``"i."``)."""
    if status is not None and status not in STATUSES:
        raise ValueError(f"unknown status {status!r} (expected one of {', '.join(STATUSES)})")
    clauses: list[str] = []
    params: list[Any] = []
    for column, value in (("task", task), ("kind", kind), ("status", status)):
        if value is not None:
            clauses.append(f"{prefix}{column} = ?")
            params.append(value)
    if flagged is not None:
        clauses.append(f"{prefix}flagged = ?")
        params.append(int(flagged))
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params
