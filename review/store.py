"""The review store: a SQLite database of review items, their decisions and an append-only audit log.

Contracts:

* One database file (WAL mode, ``synchronous=NORMAL``, foreign keys on, a busy timeout), created
  with its folder when missing; an existing file that is empty or not a sound SQLite database is
  refused (:class:`conteb.sqlite_files.StoreFileError`), never started fresh. Safe to open from
  several processes and threads: each :class:`ReviewStore` holds one connection guarded by a
  lock; every read-modify-write runs in its own ``BEGIN IMMEDIATE`` transaction, so every
  decision is committed on its own and a crash between two decisions loses neither.
* Items come from ``REVIEW_ITEMS`` rows (:meth:`ReviewStore.push`, idempotent). A decision
  (:meth:`ReviewStore.decide`) names the version the reviewer saw; a different current version
  raises :class:`ConflictError`, never a lost update.
* The ``audit`` table is append-only (triggers refuse UPDATE and DELETE). Undo, "last decision"
  and reviewer agreement are all derived from it by replaying each item's log: ``push``/``reopen``
  start from a pending item with an empty decision stack, ``accept``/``reject``/``edit``/``import``
  push a decision, ``undo`` pops the latest one, and only the reviewer who made it may undo it.
* Reviewer names are 1 to 64 characters with no control or format character; decision texts and
  notes hold no NUL character (:class:`InvalidDecisionError` otherwise).
* A CSV export escapes every text cell a spreadsheet would run as a formula (OWASP: a leading
  ``'`` before ``= + - @``, tab, CR, or a leading ``'``); a CSV import removes one leading ``'``.
* The ``queues`` table holds one revision counter per ``(task, kind)``, bumped by every push that
  changes the queue and by every decision or undo (a UI polls it to know when to reload).

No Dagster import: the web UI, the CLI and the Dagster assets all use this module.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import itertools
import json
import os
import sqlite3
import threading
import time
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from conteb.sqlite_files import connect_store
from conteb.storage import atomic_path

STATUSES = ("pending", "accepted", "rejected", "edited")
"""Every status an item can be in."""

ACTIONS = ("accept", "reject", "edit")
"""The decisions a reviewer can make."""

AUDIT_ACTIONS = ("push", "reopen", "accept", "reject", "edit", "undo", "import")
"""Every action recorded in the audit log."""

EXPORT_FORMATS = ("jsonl", "csv")

BUSY_TIMEOUT_S = 30.0
"""How long a connection waits for another writer's lock before giving up (``sqlite3.OperationalError``)."""

SCHEMA_VERSION = 1

STORE_CONTENTS = "the review queue (items, their decisions and the audit log)"
"""What the store file holds, for :func:`conteb.sqlite_files.connect_store`'s messages."""

MAX_REVIEWER_CHARS = 64

AUTO_REVIEWER = "auto"
"""The reviewer name of automatic decisions (``auto``, or ``auto:<method>``)."""

CSV_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r", "'")
"""A CSV text cell starting with one of these gets a leading ``'`` (OWASP CSV injection; ``'`` keeps it reversible)."""

_ACTION_STATUS = {"accept": "accepted", "reject": "rejected", "edit": "edited"}
_STATUS_ACTION = {status: action for action, status in _ACTION_STATUS.items()}
_DECISION_ACTIONS = frozenset({"accept", "reject", "edit", "import"})
_RESET_ACTIONS = frozenset({"push", "reopen"})

_ITEM_COLUMNS = (
    "item_id",
    "task",
    "kind",
    "object_id",
    "doc_id",
    "title",
    "original",
    "proposed",
    "context",
    "flags",
    "flagged",
    "method",
    "proposed_sha256",
    "status",
    "edited_text",
    "reviewer",
    "note",
    "version",
    "created_at",
    "updated_at",
)
EXPORT_COLUMNS = _ITEM_COLUMNS
"""The columns of an export file, in order (every :class:`ReviewItem` field)."""

_AUDIT_COLUMNS = (
    "id",
    "item_id",
    "at",
    "reviewer",
    "action",
    "from_status",
    "to_status",
    "version",
    "text",
    "note",
    "proposed_sha256",
)

_SCHEMA = (
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


class ConflictError(Exception):
    """The item changed since the caller loaded it (``expected_version`` is stale): reload and decide again."""

    def __init__(
        self,
        item_id: str,
        expected_version: int,
        current_version: int,
        changed_by: str | None,
        changed_at: float | None,
        action: str | None,
    ) -> None:
        self.item_id = item_id
        self.expected_version = expected_version
        self.current_version = current_version
        self.changed_by = changed_by
        self.changed_at = changed_at
        self.action = action
        who = repr(changed_by) if changed_by else "the pipeline"
        when = _iso(changed_at) if changed_at is not None else "an unknown time"
        how = f" ({action})" if action else ""
        super().__init__(
            f"review item {item_id!r} was changed by {who}{how} at {when} and is now at version "
            f"{current_version} (you had version {expected_version}); reload it and decide again"
        )

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across processes despite the custom __init__
        fields = (self.item_id, self.expected_version, self.current_version, self.changed_by, self.changed_at)
        return (type(self), (*fields, self.action))


class UnknownItemError(KeyError):
    """No review item has this id."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else "unknown review item"


class InvalidDecisionError(ValueError):
    """The decision itself is malformed (unknown action, edit without text, empty reviewer, nothing to undo)."""


@dataclass(frozen=True)
class ReviewItem:
    """One review item with its current decision."""

    item_id: str
    task: str
    kind: str
    object_id: str
    doc_id: str
    title: str | None
    original: str | None
    proposed: str
    context: dict[str, Any]
    flags: list[str]
    flagged: bool
    method: str
    proposed_sha256: str
    status: str
    edited_text: str | None
    reviewer: str | None
    note: str | None
    version: int
    created_at: float
    updated_at: float

    @property
    def final_text(self) -> str | None:
        """``edited_text`` if edited, ``proposed`` if accepted, None otherwise (pending or rejected)."""
        if self.status == "edited":
            return self.edited_text
        if self.status == "accepted":
            return self.proposed
        return None


@dataclass(frozen=True)
class AuditEntry:
    """One row of the append-only audit log; ``version`` is the item's version after the action."""

    id: int
    item_id: str
    at: float
    reviewer: str | None
    action: str
    from_status: str | None
    to_status: str
    version: int
    text: str | None
    note: str | None
    proposed_sha256: str | None = None  # the proposal the action applied to


@dataclass(frozen=True)
class PushReport:
    """What a push did; ``total`` = items in the push = ``added + unchanged + reopened``."""

    added: int
    unchanged: int
    reopened: int
    total: int


@dataclass(frozen=True)
class QueueStats:
    """Counts of one ``(task, kind)`` queue and its revision."""

    task: str
    kind: str
    pending: int
    accepted: int
    rejected: int
    edited: int
    total: int
    flagged_pending: int
    revision: int

    @property
    def complete(self) -> bool:
        """True when the queue has items and none is pending."""
        return self.total > 0 and self.pending == 0


@dataclass(frozen=True)
class ImportReport:
    """What an import did; ``rejected`` lists ``(line number, reason)`` for every refused row."""

    applied: int
    unchanged: int
    rejected: list[tuple[int, str]]


@dataclass(frozen=True)
class Agreement:
    """Inter-reviewer agreement of one queue over the items both reviewers of ``reviewers`` decided.

    ``observed`` is the fraction of those items with the same action (0.0 when ``items == 0``);
    ``kappa`` is Cohen's kappa over accept/reject/edit, None when undefined (no pair, or chance
    agreement of 1).
    """

    task: str
    kind: str
    items: int
    reviewers: tuple[str, str] | None
    observed: float
    kappa: float | None


@dataclass
class _Replay:
    """The result of replaying one item's audit log."""

    stack: list[sqlite3.Row]  # live decisions on the current proposal, oldest first
    undone: set[int]  # audit ids of decisions popped by an undo


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, tz=UTC).isoformat(timespec="seconds")


def _replay(rows: Iterable[sqlite3.Row]) -> _Replay:
    """Replay one item's audit rows (oldest first): push/reopen reset, decisions push, undo pops."""
    replay = _Replay(stack=[], undone=set())
    for row in rows:
        action = row["action"]
        if action in _RESET_ACTIONS:
            replay.stack.clear()
        elif action in _DECISION_ACTIONS:
            replay.stack.append(row)
        elif action == "undo" and replay.stack:
            replay.undone.add(replay.stack.pop()["id"])
    return replay


def _decision_label(row: sqlite3.Row) -> str:
    """accept/reject/edit for a decision row (an ``import`` row is labelled by the status it set)."""
    action = row["action"]
    return action if action in _ACTION_STATUS else _STATUS_ACTION[row["to_status"]]


def clean_reviewer(reviewer: object) -> str:
    """``reviewer`` without surrounding whitespace; InvalidDecisionError (saying why) unless it is 1 to
    :data:`MAX_REVIEWER_CHARS` characters with no control or format character (Unicode category C)."""
    if not isinstance(reviewer, str) or not reviewer.strip():
        raise InvalidDecisionError("a reviewer name is required")
    name = reviewer.strip()
    if len(name) > MAX_REVIEWER_CHARS:
        raise InvalidDecisionError(f"a reviewer name has at most {MAX_REVIEWER_CHARS} characters (got {len(name)})")
    bad = next((char for char in name if unicodedata.category(char).startswith("C")), None)
    if bad is not None:
        raise InvalidDecisionError(f"a reviewer name cannot contain control characters (found U+{ord(bad):04X})")
    return name


def reviewer_label(reviewer: str | None, missing: str = "unknown") -> str:
    """How a recorded reviewer reads in listings: automatic ones are marked, None reads as ``missing``."""
    if reviewer is None:
        return missing
    if reviewer == AUTO_REVIEWER or reviewer.startswith(f"{AUTO_REVIEWER}:"):
        return f"{reviewer} (automatic)"
    return reviewer


def _check_no_nul(field: str, text: str | None) -> None:
    """InvalidDecisionError when ``text`` holds a NUL character (it would be cut short by many tools)."""
    if isinstance(text, str) and "\x00" in text:
        raise InvalidDecisionError(f"the {field} contains a NUL character (\\x00); remove it")


def _has_text(text: Any) -> bool:
    return isinstance(text, str) and bool(text.strip())


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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


def _pushed_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """Validate and normalise one pushed ``REVIEW_ITEMS`` row (raises ValueError)."""
    item_id = row.get("item_id")
    if not isinstance(item_id, str) or not item_id:
        raise ValueError(f"review item without an item_id: {dict(row)!r}")
    for name in ("task", "kind", "object_id", "doc_id", "proposed", "method"):
        if not isinstance(row.get(name), str):
            raise ValueError(f"review item {item_id!r}: {name} must be a string")
    proposed = row["proposed"]
    sha = row.get("proposed_sha256") or _sha256(proposed)
    if sha != _sha256(proposed):
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


def _to_item(row: sqlite3.Row) -> ReviewItem:
    return ReviewItem(
        item_id=row["item_id"],
        task=row["task"],
        kind=row["kind"],
        object_id=row["object_id"],
        doc_id=row["doc_id"],
        title=row["title"],
        original=row["original"],
        proposed=row["proposed"],
        context=json.loads(row["context"]),
        flags=json.loads(row["flags"]),
        flagged=bool(row["flagged"]),
        method=row["method"],
        proposed_sha256=row["proposed_sha256"],
        status=row["status"],
        edited_text=row["edited_text"],
        reviewer=row["reviewer"],
        note=row["note"],
        version=row["version"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _to_entry(row: sqlite3.Row) -> AuditEntry:
    return AuditEntry(**{name: row[name] for name in _AUDIT_COLUMNS})


def _where(
    task: str | None, kind: str | None, status: str | None = None, flagged: bool | None = None, prefix: str = ""
) -> tuple[str, list[Any]]:
    """A ``WHERE`` clause (possibly empty) and its parameters for the usual item filters."""
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


def _export_value(name: str, value: Any, fmt: str) -> Any:
    """One item field as written to an export file."""
    if fmt == "jsonl":
        return value
    if name in ("context", "flags"):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    if name == "flagged":
        return "true" if value else "false"
    return "" if value is None else _csv_escape(value)


def _csv_escape(value: Any) -> Any:
    """A text cell as written to CSV: prefixed with ``'`` when it starts with :data:`CSV_FORMULA_PREFIXES`."""
    return f"'{value}" if isinstance(value, str) and value.startswith(CSV_FORMULA_PREFIXES) else value


def _csv_unescape(value: str | None) -> str | None:
    """A CSV cell as read back: one leading ``'`` removed (undoing :func:`_csv_escape`); empty or missing: None."""
    if value is not None and value.startswith("'"):
        value = value[1:]
    return value or None


def _read_import_rows(source: Path) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """``(line number, row dict)`` for each row of ``source``, or ``(line, reason)`` for an unreadable one."""
    suffix = source.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        with source.open(encoding="utf-8-sig") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    yield number, f"invalid JSON: {exc.msg}"
                    continue
                yield (number, row) if isinstance(row, dict) else (number, "invalid row: not a JSON object")
    elif suffix == ".csv":
        with source.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            start = 2  # line 1 is the header
            for row in reader:
                yield start, {key: _csv_unescape(value) for key, value in row.items() if key is not None}
                start = reader.line_num + 1
    else:
        raise ValueError(f"cannot import {source}: expected a .jsonl or .csv file")


class ReviewStore:
    """The review database at ``path`` (see the module doc for the contracts).

    Raises :class:`conteb.sqlite_files.StoreFileError` (naming the file and what to do) when ``path``
    exists but is empty, not a SQLite database or damaged.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        self._conn = connect_store(
            self.path, STORE_CONTENTS, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        self._conn.row_factory = sqlite3.Row
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise RuntimeError(f"{self.path}: could not switch the review store to WAL mode (got {mode!r})")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.execute("PRAGMA foreign_keys = ON")
            with self._write() as conn:
                found = conn.execute("PRAGMA user_version").fetchone()[0]
                if found > SCHEMA_VERSION:
                    raise RuntimeError(
                        f"{self.path}: review store schema version {found} is newer than this code ({SCHEMA_VERSION})"
                    )
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            self._conn.close()
            raise

    # --- plumbing -------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (idempotent); the store cannot be used afterwards."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> ReviewStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ReviewStore({str(self.path)!r})"

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction, committed on success and rolled back on any error."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    @contextlib.contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: a consistent snapshot for several queries."""
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                yield self._conn
            finally:
                if self._conn.in_transaction:
                    self._conn.execute("COMMIT")

    def _item_row(self, conn: sqlite3.Connection, item_id: str) -> sqlite3.Row:
        row = conn.execute("SELECT * FROM items WHERE item_id = ?", (item_id,)).fetchone()
        if row is None:
            raise UnknownItemError(f"unknown review item {item_id!r}")
        return row

    def _audit_rows(self, conn: sqlite3.Connection, item_id: str) -> list[sqlite3.Row]:
        return conn.execute("SELECT * FROM audit WHERE item_id = ? ORDER BY id", (item_id,)).fetchall()

    def _check_version(self, conn: sqlite3.Connection, row: sqlite3.Row, expected_version: int) -> None:
        if isinstance(expected_version, bool) or not isinstance(expected_version, int):
            raise InvalidDecisionError(f"expected_version must be an int, got {expected_version!r}")
        if row["version"] != expected_version:
            last = conn.execute(
                "SELECT reviewer, at, action FROM audit WHERE item_id = ? ORDER BY id DESC LIMIT 1", (row["item_id"],)
            ).fetchone()
            raise ConflictError(
                row["item_id"],
                expected_version,
                row["version"],
                last["reviewer"] if last else row["reviewer"],
                last["at"] if last else row["updated_at"],
                last["action"] if last else None,
            )

    @staticmethod
    def _append_audit(conn: sqlite3.Connection, **values: Any) -> None:
        columns = ", ".join(values)
        conn.execute(f"INSERT INTO audit ({columns}) VALUES ({', '.join('?' * len(values))})", tuple(values.values()))

    @staticmethod
    def _bump(conn: sqlite3.Connection, task: str, kind: str) -> None:
        conn.execute(
            "INSERT INTO queues (task, kind, revision) VALUES (?, ?, 1) "
            "ON CONFLICT (task, kind) DO UPDATE SET revision = revision + 1",
            (task, kind),
        )

    def _set_state(
        self,
        conn: sqlite3.Connection,
        row: sqlite3.Row,
        *,
        action: str,
        status: str,
        edited_text: str | None,
        reviewer: str | None,
        note: str | None,
        audit_reviewer: str,
        audit_note: str | None,
    ) -> ReviewItem:
        """Write a new status on ``row``'s item (version+1), its audit row and the queue bump."""
        now = time.time()
        version = row["version"] + 1
        conn.execute(
            "UPDATE items SET status = ?, edited_text = ?, reviewer = ?, note = ?, version = ?, updated_at = ? "
            "WHERE item_id = ?",
            (status, edited_text, reviewer, note, version, now, row["item_id"]),
        )
        self._append_audit(
            conn,
            item_id=row["item_id"],
            at=now,
            reviewer=audit_reviewer,
            action=action,
            from_status=row["status"],
            to_status=status,
            version=version,
            proposed_sha256=row["proposed_sha256"],
            text=edited_text,
            note=audit_note,
        )
        self._bump(conn, row["task"], row["kind"])
        return _to_item(self._item_row(conn, row["item_id"]))

    # --- items --------------------------------------------------------------------------------

    def push(self, items: pa.Table | Iterable[Mapping[str, Any]]) -> PushReport:
        """Add ``REVIEW_ITEMS`` rows, idempotently, in one transaction.

        A new item_id is inserted pending (audit ``push``); an existing item with the same
        ``proposed_sha256`` is left untouched (its decision is kept); one whose proposal changed
        gets the new proposal and fields, goes back to pending with version+1 (audit ``reopen``,
        earlier history kept). Raises ValueError (and writes nothing) for a malformed row, an
        item_id repeated in the push, or an existing item whose task/kind/object_id differ.
        """
        source = items.to_pylist() if isinstance(items, pa.Table) else items
        rows = [_pushed_row(row) for row in source]
        repeated = [item_id for item_id, n in Counter(row["item_id"] for row in rows).items() if n > 1]
        if repeated:
            raise ValueError(f"item_id repeated in one push: {', '.join(sorted(repeated)[:5])}")
        added = unchanged = reopened = 0
        with self._write() as conn:
            now = time.time()
            changed: set[tuple[str, str]] = set()
            for row in rows:
                queue = (row["task"], row["kind"])
                conn.execute("INSERT OR IGNORE INTO queues (task, kind, revision) VALUES (?, ?, 0)", queue)
                current = conn.execute("SELECT * FROM items WHERE item_id = ?", (row["item_id"],)).fetchone()
                if current is None:
                    conn.execute(
                        f"INSERT INTO items ({', '.join(row)}, status, version, created_at, updated_at) "
                        f"VALUES ({', '.join('?' * len(row))}, 'pending', 1, ?, ?)",
                        (*row.values(), now, now),
                    )
                    self._append_audit(
                        conn,
                        item_id=row["item_id"],
                        at=now,
                        reviewer=None,
                        action="push",
                        from_status=None,
                        to_status="pending",
                        version=1,
                        proposed_sha256=row["proposed_sha256"],
                        text=None,
                        note=None,
                    )
                    added += 1
                    changed.add(queue)
                    continue
                moved = [name for name in ("task", "kind", "object_id") if current[name] != row[name]]
                if moved:
                    raise ValueError(f"review item {row['item_id']!r}: pushed with a different {', '.join(moved)}")
                if current["proposed_sha256"] == row["proposed_sha256"]:
                    unchanged += 1
                    continue
                version = current["version"] + 1
                assignments = ", ".join(f"{name} = ?" for name in row if name != "item_id")
                conn.execute(
                    f"UPDATE items SET {assignments}, status = 'pending', edited_text = NULL, reviewer = NULL, "
                    "note = NULL, version = ?, updated_at = ? WHERE item_id = ?",
                    (*(value for name, value in row.items() if name != "item_id"), version, now, row["item_id"]),
                )
                self._append_audit(
                    conn,
                    item_id=row["item_id"],
                    at=now,
                    reviewer=None,
                    action="reopen",
                    from_status=current["status"],
                    to_status="pending",
                    version=version,
                    proposed_sha256=row["proposed_sha256"],
                    text=None,
                    note=f"proposal changed (was {current['proposed_sha256'][:12]})",
                )
                reopened += 1
                changed.add(queue)
            for task, kind in sorted(changed):
                self._bump(conn, task, kind)
        return PushReport(added=added, unchanged=unchanged, reopened=reopened, total=len(rows))

    def get(self, item_id: str) -> ReviewItem:
        """The item ``item_id`` (UnknownItemError when absent)."""
        with self._lock:
            return _to_item(self._item_row(self._conn, item_id))

    def items(
        self,
        task: str | None = None,
        kind: str | None = None,
        status: str | None = None,
        flagged: bool | None = None,
        limit: int | None = None,
        offset: int = 0,
        flagged_first: bool = False,
    ) -> list[ReviewItem]:
        """Items matching every given filter, ordered by task, kind, item_id; ``limit``/``offset`` page them.

        ``flagged_first``: within each queue, flagged items come before the others (each in item_id order).
        """
        if (limit is not None and limit < 0) or offset < 0:
            raise ValueError("limit and offset must be >= 0")
        where, params = _where(task, kind, status, flagged)
        order = "task, kind, flagged DESC, item_id" if flagged_first else "task, kind, item_id"
        sql = f"SELECT * FROM items{where} ORDER BY {order} LIMIT ? OFFSET ?"
        with self._lock:
            rows = self._conn.execute(sql, (*params, -1 if limit is None else limit, offset)).fetchall()
        return [_to_item(row) for row in rows]

    def count(
        self, task: str | None = None, kind: str | None = None, status: str | None = None, flagged: bool | None = None
    ) -> int:
        """How many items match every given filter."""
        where, params = _where(task, kind, status, flagged)
        with self._lock:
            return self._conn.execute(f"SELECT COUNT(*) FROM items{where}", params).fetchone()[0]

    def neighbours(self, item_id: str, status: str | None = None) -> tuple[str | None, str | None]:
        """``(previous, next)`` item ids of ``item_id``'s queue in item_id order (only ``status`` items if given).

        The item itself need not have ``status``; None at either end.
        """
        status_clause, status_params = ("", ()) if status is None else (" AND status = ?", (status,))
        if status is not None and status not in STATUSES:
            raise ValueError(f"unknown status {status!r}")
        with self._read() as conn:
            row = self._item_row(conn, item_id)
            queue = (row["task"], row["kind"], item_id, *status_params)
            found = []
            for comparison, order in (("<", "DESC"), (">", "ASC")):
                hit = conn.execute(
                    f"SELECT item_id FROM items WHERE task = ? AND kind = ? AND item_id {comparison} ?{status_clause} "
                    f"ORDER BY item_id {order} LIMIT 1",
                    queue,
                ).fetchone()
                found.append(hit[0] if hit else None)
        return found[0], found[1]

    def position(self, item_id: str, status: str | None = None) -> tuple[int | None, int]:
        """``(k, n)``: the item is the k-th of the n items of its queue (only ``status`` items if given), in
        item_id order (the order of :meth:`neighbours`); k is None when the item does not have ``status``."""
        with self._read() as conn:
            row = self._item_row(conn, item_id)
            where, params = _where(row["task"], row["kind"], status)
            total = conn.execute(f"SELECT COUNT(*) FROM items{where}", params).fetchone()[0]
            if status is not None and row["status"] != status:
                return None, total
            before = conn.execute(f"SELECT COUNT(*) FROM items{where} AND item_id < ?", (*params, item_id))
            return before.fetchone()[0] + 1, total

    # --- decisions ----------------------------------------------------------------------------

    def decide(
        self,
        item_id: str,
        action: str,
        reviewer: str,
        expected_version: int,
        edited_text: str | None = None,
        note: str | None = None,
    ) -> ReviewItem:
        """Record ``action`` (accept | reject | edit) on the item at ``expected_version``; returns the new item.

        ``edit`` needs a non-empty ``edited_text`` (equal to the proposal is allowed, still stored
        as edited); ``accept``/``reject`` must not carry one. Raises InvalidDecisionError for a
        malformed decision (``expected_version`` must be an int, the reviewer name must pass
        :func:`clean_reviewer`, text and note hold no NUL), UnknownItemError, or
        ConflictError when the item is no longer at ``expected_version``. One transaction:
        version+1, reviewer/note/updated_at set, an audit row, the queue revision bumped.
        """
        if action not in ACTIONS:
            raise InvalidDecisionError(f"unknown action {action!r} (expected one of {', '.join(ACTIONS)})")
        name = clean_reviewer(reviewer)
        if action == "edit" and not _has_text(edited_text):
            raise InvalidDecisionError("an edit needs a non-empty edited_text")
        if action != "edit" and edited_text is not None:
            raise InvalidDecisionError(f"{action} takes no edited_text (use edit)")
        _check_no_nul("edited text", edited_text)
        _check_no_nul("note", note)
        with self._write() as conn:
            row = self._item_row(conn, item_id)
            self._check_version(conn, row, expected_version)
            return self._set_state(
                conn,
                row,
                action=action,
                status=_ACTION_STATUS[action],
                edited_text=edited_text if action == "edit" else None,
                reviewer=name,
                note=note,
                audit_reviewer=name,
                audit_note=note,
            )

    def undo(self, item_id: str, reviewer: str, expected_version: int) -> ReviewItem:
        """Undo the item's latest live decision, which ``reviewer`` must have made; returns the restored item.

        Status, edited_text, reviewer and note go back to what the previous live decision set (or
        pending when none, since the last push/reopen); version+1, audit ``undo`` by ``reviewer``.
        InvalidDecisionError when there is nothing to undo or the latest decision is someone
        else's (they can undo it, anyone can decide again), ConflictError on a stale version.
        """
        name = clean_reviewer(reviewer)
        with self._write() as conn:
            row = self._item_row(conn, item_id)
            self._check_version(conn, row, expected_version)
            stack = _replay(self._audit_rows(conn, item_id)).stack
            if not stack:
                raise InvalidDecisionError(f"review item {item_id!r} has no decision to undo")
            undone = stack.pop()
            if undone["reviewer"] != name:
                raise InvalidDecisionError(
                    f"the latest decision on review item {item_id!r} ({undone['action']}) was made by "
                    f"{reviewer_label(undone['reviewer'])!r}; only they can undo it (you can decide the item again)"
                )
            previous = stack[-1] if stack else None
            return self._set_state(
                conn,
                row,
                action="undo",
                status=previous["to_status"] if previous else "pending",
                edited_text=previous["text"] if previous else None,
                reviewer=previous["reviewer"] if previous else None,
                note=previous["note"] if previous else None,
                audit_reviewer=name,
                audit_note=f"undoes audit #{undone['id']} ({undone['action']} by {undone['reviewer']})",
            )

    def last_decision(self, reviewer: str, task: str | None = None, kind: str | None = None) -> AuditEntry | None:
        """``reviewer``'s latest accept/reject/edit that is still live (not undone, not superseded by a reopen)."""
        name = clean_reviewer(reviewer)
        where, params = _where(task, kind, prefix="i.")
        where = where.replace(" WHERE ", " AND ") if where else ""
        with self._read() as conn:
            candidates = conn.execute(
                "SELECT a.* FROM audit a JOIN items i ON i.item_id = a.item_id "
                f"WHERE a.reviewer = ? AND a.action IN ('accept', 'reject', 'edit'){where} ORDER BY a.id DESC",
                (name, *params),
            )
            live: dict[str, set[int]] = {}
            for candidate in candidates:
                item_id = candidate["item_id"]
                if item_id not in live:
                    live[item_id] = {row["id"] for row in _replay(self._audit_rows(conn, item_id)).stack}
                if candidate["id"] in live[item_id]:
                    return _to_entry(candidate)
        return None

    def bulk_decide(
        self,
        action: str,
        reviewer: str,
        task: str,
        kind: str | None = None,
        *,
        unflagged_only: bool = False,
        ids: Sequence[str] | None = None,
        pending_only: bool = True,
        note: str | None = None,
    ) -> int:
        """Accept or reject every selected item of ``task`` (and ``kind``); returns how many were decided.

        Selection: the queue's items, pending only unless ``pending_only=False``, unflagged only if
        asked, and among ``ids`` when given (an unknown id raises UnknownItemError before anything
        is written; ids of other queues are not selected). Each item is decided in its own
        versioned transaction (its own audit row, by ``reviewer``, with ``note``); an item changed
        concurrently since the selection is skipped. ``edit`` is refused (it needs a text per item).
        """
        if action not in ACTIONS:
            raise InvalidDecisionError(f"unknown action {action!r} (expected one of {', '.join(ACTIONS)})")
        if action == "edit":
            raise InvalidDecisionError("bulk edit is not possible: an edit needs its own text")
        clean_reviewer(reviewer)
        _check_no_nul("note", note)
        where, params = _where(task, kind, "pending" if pending_only else None, False if unflagged_only else None)
        with self._read() as conn:
            if ids is not None:
                wanted = set(ids)
                known = set()
                ordered = sorted(wanted)
                for start in range(0, len(ordered), 500):
                    chunk = ordered[start : start + 500]
                    marks = ", ".join("?" * len(chunk))
                    found = conn.execute(f"SELECT item_id FROM items WHERE item_id IN ({marks})", chunk)
                    known.update(row[0] for row in found)
                if wanted - known:
                    raise UnknownItemError(f"unknown review items: {', '.join(sorted(wanted - known)[:5])}")
            selected = [
                (row["item_id"], row["version"])
                for row in conn.execute(f"SELECT item_id, version FROM items{where} ORDER BY kind, item_id", params)
                if ids is None or row["item_id"] in wanted
            ]
        decided = 0
        for item_id, version in selected:
            try:
                self.decide(item_id, action, reviewer, version, note=note)
            except ConflictError:
                continue
            decided += 1
        return decided

    # --- queues and history -------------------------------------------------------------------

    def stats(self, task: str | None = None, kind: str | None = None) -> list[QueueStats]:
        """One :class:`QueueStats` per ``(task, kind)`` queue ever pushed, ordered by task, kind."""
        where, params = _where(task, kind, prefix="q.")
        sql = (
            "SELECT q.task, q.kind, q.revision, "
            + ", ".join(f"COALESCE(SUM(i.status = '{status}'), 0) AS {status}" for status in STATUSES)
            + ", COUNT(i.item_id) AS total, "
            "COALESCE(SUM(i.status = 'pending' AND i.flagged = 1), 0) AS flagged_pending "
            f"FROM queues q LEFT JOIN items i ON i.task = q.task AND i.kind = q.kind{where} "
            "GROUP BY q.task, q.kind ORDER BY q.task, q.kind"
        )
        with self._lock:
            rows = self._conn.execute(sql, params).fetchall()
        return [
            QueueStats(
                task=row["task"],
                kind=row["kind"],
                pending=row["pending"],
                accepted=row["accepted"],
                rejected=row["rejected"],
                edited=row["edited"],
                total=row["total"],
                flagged_pending=row["flagged_pending"],
                revision=row["revision"],
            )
            for row in rows
        ]

    def deciders(
        self, task: str | None = None, kind: str | None = None
    ) -> dict[tuple[str, str], dict[str | None, int]]:
        """Per ``(task, kind)`` queue with decided items: how many of them each reviewer decided last (None:
        no reviewer recorded), most first, ties by name."""
        where, params = _where(task, kind)
        where = f"{where} AND status != 'pending'" if where else " WHERE status != 'pending'"
        sql = f"SELECT task, kind, reviewer, COUNT(*) AS n FROM items{where} GROUP BY task, kind, reviewer"
        with self._lock:
            rows = self._conn.execute(sql, params).fetchall()
        found: dict[tuple[str, str], dict[str | None, int]] = defaultdict(dict)
        for row in sorted(rows, key=lambda r: (r["task"], r["kind"], -r["n"], r["reviewer"] or "")):
            found[(row["task"], row["kind"])][row["reviewer"]] = row["n"]
        return dict(found)

    def revision(self, task: str, kind: str) -> int:
        """The queue's revision counter (0 for a queue never pushed)."""
        with self._lock:
            row = self._conn.execute("SELECT revision FROM queues WHERE task = ? AND kind = ?", (task, kind)).fetchone()
        return row[0] if row else 0

    def audit(self, item_id: str | None = None, limit: int | None = None) -> list[AuditEntry]:
        """Audit entries (of ``item_id`` if given), oldest first; with ``limit``, the latest ``limit`` of them."""
        if limit is not None and limit < 0:
            raise ValueError("limit must be >= 0")
        with self._read() as conn:
            if item_id is not None:
                self._item_row(conn, item_id)
            where, params = (" WHERE item_id = ?", [item_id]) if item_id is not None else ("", [])
            rows = conn.execute(
                f"SELECT * FROM audit{where} ORDER BY id DESC LIMIT ?", (*params, -1 if limit is None else limit)
            ).fetchall()
        return [_to_entry(row) for row in reversed(rows)]

    # --- files --------------------------------------------------------------------------------

    def export(self, target: Path, task: str, kind: str | None = None, fmt: str = "jsonl") -> int:
        """Write the queue's items (every :data:`EXPORT_COLUMNS` field) to ``target``; returns rows written.

        ``fmt`` is ``jsonl`` (context a JSON object, flags a list) or ``csv`` (header row; context
        and flags as JSON strings, flagged ``true``/``false``, null as empty, a text cell starting
        with one of :data:`CSV_FORMULA_PREFIXES` prefixed with ``'`` against formula injection). Atomic: written to a
        temporary file next to ``target`` and renamed over it.
        """
        if fmt not in EXPORT_FORMATS:
            raise ValueError(f"unknown export format {fmt!r} (expected one of {', '.join(EXPORT_FORMATS)})")
        target = Path(target)
        rows = [
            {name: _export_value(name, getattr(item, name), fmt) for name in EXPORT_COLUMNS}
            for item in self.items(task=task, kind=kind)
        ]
        with atomic_path(target) as tmp, tmp.open("w", encoding="utf-8", newline="") as handle:
            if fmt == "jsonl":
                for row in rows:
                    handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            else:
                writer = csv.DictWriter(handle, fieldnames=EXPORT_COLUMNS)
                writer.writeheader()
                writer.writerows(rows)
            handle.flush()
            os.fsync(handle.fileno())
        return len(rows)

    def import_file(self, source: Path, reviewer: str | None = None) -> ImportReport:
        """Apply the decisions of an edited export (``.jsonl``/``.ndjson`` or ``.csv``); one transaction per row.

        Each row needs item_id, version, proposed_sha256 and status as exported; a row is rejected
        (with its line number and the reason) when the item is unknown, its version is not the
        current one, its proposal changed, its status is unknown, it is edited without text, it
        asks for pending, or it has no reviewer (the ``reviewer`` argument overrides the row's).
        A row matching the current status (and text, for edited) is unchanged. Others are applied
        as a decision: audit action ``import``, version+1, queue revision bumped. Line numbers are
        the file's physical lines (a CSV header is line 1; a row spanning lines gets its first). A
        CSV cell loses one leading ``'`` (the export's formula escape). A row's reviewer must pass
        :func:`clean_reviewer`, its text and note hold no NUL.
        ValueError for another suffix; InvalidDecisionError for a blank ``reviewer`` override.
        """
        override = None if reviewer is None else clean_reviewer(reviewer)
        applied = unchanged = 0
        rejected: list[tuple[int, str]] = []
        for line, row in _read_import_rows(Path(source)):
            if isinstance(row, str):
                rejected.append((line, row))
                continue
            try:
                outcome = self._import_row(row, override)
            except _Rejected as exc:
                rejected.append((line, str(exc)))
                continue
            if outcome:
                applied += 1
            else:
                unchanged += 1
        return ImportReport(applied=applied, unchanged=unchanged, rejected=rejected)

    def _import_row(self, row: Mapping[str, Any], override: str | None) -> bool:
        """Apply one imported row; True when applied, False when unchanged, _Rejected otherwise."""
        item_id = row.get("item_id")
        if not isinstance(item_id, str) or not item_id:
            raise _Rejected("missing item_id")
        try:
            version = int(row.get("version"))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise _Rejected(f"invalid version {row.get('version')!r}") from None
        status = row.get("status")
        text = row.get("edited_text")
        text = text if _has_text(text) else None
        row_reviewer = row.get("reviewer")
        name = override or (row_reviewer if isinstance(row_reviewer, str) and row_reviewer.strip() else None)
        note = row.get("note") if isinstance(row.get("note"), str) else None
        try:
            name = None if name is None else clean_reviewer(name)
            _check_no_nul("edited text", text)
            _check_no_nul("note", note)
        except InvalidDecisionError as exc:
            raise _Rejected(str(exc)) from None
        with self._write() as conn:
            current = conn.execute("SELECT * FROM items WHERE item_id = ?", (item_id,)).fetchone()
            if current is None:
                raise _Rejected("unknown item")
            if version != current["version"]:
                raise _Rejected(f"conflict: item is at version {current['version']}")
            if row.get("proposed_sha256") != current["proposed_sha256"]:
                raise _Rejected("proposal changed since export")
            if status not in STATUSES:
                raise _Rejected(f"unknown status {status!r} (expected one of {', '.join(STATUSES)})")
            if status == "edited" and text is None:
                raise _Rejected("edited without text")
            if status == current["status"] and (status != "edited" or text == current["edited_text"]):
                return False
            if status == "pending":
                raise _Rejected("pending is not a decision")
            if name is None:
                raise _Rejected("missing reviewer")
            self._set_state(
                conn,
                current,
                action="import",
                status=status,
                edited_text=text if status == "edited" else None,
                reviewer=name,
                note=note,
                audit_reviewer=name,
                audit_note=note,
            )
            return True

    # --- agreement ----------------------------------------------------------------------------

    def agreement(self, task: str | None = None, kind: str | None = None) -> list[Agreement]:
        """Inter-reviewer agreement per queue, from the audit log.

        Per item and reviewer, the reviewer's latest live decision on the current proposal counts
        (accept/reject/edit; an ``import`` counts as the action its status means). Among items
        decided by at least two reviewers, the pair of reviewers sharing the most items is
        reported (ties: alphabetical) with observed agreement and Cohen's kappa over
        accept/reject/edit. Queues with no such item get ``items=0, reviewers=None``.
        """
        where, params = _where(task, kind, prefix="i.")
        queue_where, _ = _where(task, kind, prefix="q.")
        with self._read() as conn:
            queues = conn.execute(f"SELECT q.task, q.kind FROM queues q{queue_where} ORDER BY q.task, q.kind", params)
            queues = queues.fetchall()
            rows = conn.execute(
                f"SELECT a.*, i.task AS q_task, i.kind AS q_kind FROM audit a JOIN items i ON i.item_id = a.item_id"
                f"{where} ORDER BY a.item_id, a.id",
                params,
            ).fetchall()
        # (task, kind) -> item_id -> reviewer -> label
        labels: dict[tuple[str, str], dict[str, dict[str, str]]] = defaultdict(dict)
        for item_id, item_rows in itertools.groupby(rows, key=lambda row: row["item_id"]):
            item_rows = list(item_rows)
            by_reviewer = {row["reviewer"]: _decision_label(row) for row in _replay(item_rows).stack}
            if len(by_reviewer) >= 2:
                labels[(item_rows[0]["q_task"], item_rows[0]["q_kind"])][item_id] = by_reviewer
        return [
            _queue_agreement(queue["task"], queue["kind"], labels.get((queue["task"], queue["kind"]), {}))
            for queue in queues
        ]


class _Rejected(Exception):
    """An imported row refused, with the reason."""


def _queue_agreement(task: str, kind: str, labels: Mapping[str, Mapping[str, str]]) -> Agreement:
    """Agreement of the reviewer pair sharing the most items of ``labels`` (item -> reviewer -> action)."""
    shared: Counter[tuple[str, str]] = Counter()
    for by_reviewer in labels.values():
        shared.update(itertools.combinations(sorted(by_reviewer), 2))
    if not shared:
        return Agreement(task=task, kind=kind, items=0, reviewers=None, observed=0.0, kappa=None)
    pair = min(shared, key=lambda key: (-shared[key], key))
    first, second = pair
    pairs = [(by[first], by[second]) for by in labels.values() if first in by and second in by]
    n = len(pairs)
    observed = sum(a == b for a, b in pairs) / n
    count_a = Counter(a for a, _ in pairs)
    count_b = Counter(b for _, b in pairs)
    chance = sum(count_a[label] * count_b[label] for label in ACTIONS) / (n * n)
    kappa = None if chance >= 1.0 - 1e-12 else (observed - chance) / (1.0 - chance)
    return Agreement(task=task, kind=kind, items=n, reviewers=pair, observed=observed, kappa=kappa)
