"""The review store: the repository of review items, their decisions and the append-only audit log.

Contracts:

* One database file (layout: :mod:`review.schema`), created with its folder when missing; an
  existing file that is empty or not a sound SQLite database is refused
  (:class:`conteb.sqlite_kinds.StoreFileError`), never started fresh. Safe to open from several
  processes and threads: each :class:`ReviewStore` holds one connection guarded by a lock; every
  read-modify-write runs in its own ``BEGIN IMMEDIATE`` transaction, so every decision is
  committed on its own and a crash between two decisions loses neither.
* Items come from ``REVIEW_ITEMS`` rows (:meth:`ReviewStore.push`, idempotent). A decision
  (:meth:`ReviewStore.decide`) names the version the reviewer saw; a different current version
  raises :class:`review.model.ConflictError`, never a lost update.
* Every change appends to the audit log (append-only). Undo is derived from it by replaying the
  item's rows (:mod:`review.history`): only the reviewer who made the latest live decision may
  undo it. Reads (items, counts, history, agreement) are :class:`review.queries.QueueQueries`';
  export/import files are :mod:`review.exchange`'s.
* Reviewer names, decision texts and notes follow :mod:`review.model`'s rules
  (:class:`review.model.InvalidDecisionError` otherwise).
* The ``queues`` table holds one revision counter per ``(task, kind)``, bumped by every push that
  changes the queue and by every decision or undo (a UI polls it to know when to reload).

No Dagster import: the web UI, the CLI and the Dagster assets all use this module.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from review.exchange import ImportedDecision, ImportRejected, parse_import_row, read_import_rows, write_export
from review.history import live_decisions
from review.model import (
    ACTION_STATUS,
    ACTIONS,
    STATUSES,
    ConflictError,
    ImportReport,
    InvalidDecisionError,
    PushReport,
    ReviewItem,
    UnknownItemError,
    check_no_nul,
    clean_person_reviewer,
    clean_reviewer,
    has_text,
    is_auto_reviewer,
    is_llm_failure,
    reviewer_label,
)
from review.queries import QueueQueries
from review.schema import item_from_row, pushed_row, where_clause


class ReviewStore(QueueQueries):
    """The review database at ``path`` (see the module doc for the contracts): the queries of
    :class:`review.queries.QueueQueries`, and every change (push, decisions, undo, imports).

    Raises :class:`conteb.sqlite_kinds.StoreFileError` (naming the file and what to do) when ``path``
    exists but is empty, not a SQLite database or damaged.
    """

    # --- writing plumbing -----------------------------------------------------------------------

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
        return item_from_row(self._item_row(conn, row["item_id"]))

    # --- items --------------------------------------------------------------------------------

    def push(self, items: pa.Table | Iterable[Mapping[str, Any]]) -> PushReport:
        """Add ``REVIEW_ITEMS`` rows, idempotently, in one transaction.

        A new item_id is inserted pending (audit ``push``); an existing item with the same
        ``proposed_sha256`` is left untouched (its decision is kept); one whose proposal changed
        gets the new proposal and fields, goes back to pending with version+1 (audit ``reopen``,
        earlier history kept). An item whose LLM answer failed (:func:`review.model.is_llm_failure` of the pushed
        flags) and that an automatic reviewer decided (a store from before that rule) is reopened the same way:
        an automatic decision never stands for a failed item; a person's decision on it is kept. An unchanged
        proposal whose LLM failure flag appeared, changed or went away gets the pushed flags (its decision, version
        and history untouched), so the flags say what the last run met. Raises ValueError
        (and writes nothing) for a malformed row, an
        item_id repeated in the push, or an existing item whose task/kind/object_id differ.
        """
        source = items.to_pylist() if isinstance(items, pa.Table) else items
        rows = [pushed_row(row) for row in source]
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
                auto_decided_failure = _auto_decided_failure(current, row)
                if current["proposed_sha256"] == row["proposed_sha256"] and not auto_decided_failure:
                    if _failure_flags_changed(current, row):  # same proposal, another LLM outcome: say so
                        conn.execute(
                            "UPDATE items SET flags = ?, flagged = ? WHERE item_id = ?",
                            (row["flags"], row["flagged"], row["item_id"]),
                        )
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
                    note=(
                        "the LLM answer failed: an automatic decision does not stand for it"
                        if auto_decided_failure
                        else f"proposal changed (was {current['proposed_sha256'][:12]})"
                    ),
                )
                reopened += 1
                changed.add(queue)
            for task, kind in sorted(changed):
                self._bump(conn, task, kind)
        return PushReport(added=added, unchanged=unchanged, reopened=reopened, total=len(rows))

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
        as edited); ``accept``/``reject`` must not carry one; an item that proposes nothing (an empty
        ``proposed``: its LLM answer failed and the stage has no fallback) cannot be accepted. Raises
        InvalidDecisionError for a
        malformed decision (``expected_version`` must be an int, the reviewer name must pass
        :func:`clean_reviewer`, text and note hold no NUL), UnknownItemError, or
        ConflictError when the item is no longer at ``expected_version``. One transaction:
        version+1, reviewer/note/updated_at set, an audit row, the queue revision bumped.
        """
        if action not in ACTIONS:
            raise InvalidDecisionError(f"unknown action {action!r} (expected one of {', '.join(ACTIONS)})")
        name = clean_reviewer(reviewer)
        if action == "edit" and not has_text(edited_text):
            raise InvalidDecisionError("an edit needs a non-empty edited_text")
        if action != "edit" and edited_text is not None:
            raise InvalidDecisionError(f"{action} takes no edited_text (use edit)")
        check_no_nul("edited text", edited_text)
        check_no_nul("note", note)
        with self._write() as conn:
            row = self._item_row(conn, item_id)
            self._check_version(conn, row, expected_version)
            if action == "accept" and row["proposed"] == "":
                raise InvalidDecisionError(
                    f"review item {item_id!r} proposes nothing (its LLM answer failed): edit it with what is missing, "
                    "or reject it"
                )
            return self._set_state(
                conn,
                row,
                action=action,
                status=ACTION_STATUS[action],
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
            stack = live_decisions(self._audit_rows(conn, item_id))
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
        concurrently since the selection is skipped. ``edit`` is refused (it needs a text per item); ``accept``
        leaves out the items that propose nothing.
        """
        if action not in ACTIONS:
            raise InvalidDecisionError(f"unknown action {action!r} (expected one of {', '.join(ACTIONS)})")
        if action == "edit":
            raise InvalidDecisionError("bulk edit is not possible: an edit needs its own text")
        clean_reviewer(reviewer)
        check_no_nul("note", note)
        where, params = where_clause(task, kind, "pending" if pending_only else None, False if unflagged_only else None)
        if action == "accept":  # an item that proposes nothing cannot be accepted (decide says why)
            where += " AND proposed != ''" if where else " WHERE proposed != ''"
        with self._read() as conn:
            if ids is not None:
                wanted = set(ids)
                known: set[str] = set()
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

    # --- files --------------------------------------------------------------------------------

    def export(
        self,
        target: Path,
        task: str,
        kind: str | None = None,
        fmt: str = "jsonl",
        *,
        replace: bool = False,
        stores: Mapping[str, Path] | None = None,
    ) -> int:
        """Write the queue's items to ``target`` as ``fmt`` (``jsonl`` or ``csv``, :mod:`review.exchange`); returns
        rows written. :class:`review.exchange.ExportRefused` for a target that is this store, one of ``stores``
        (``what it is -> path``) or any SQLite file, a folder, a symbolic link, FIFO, device or socket, or an existing
        file without ``replace``."""
        targets = {"the review store": self.path, **(stores or {})}
        return write_export(target, self.items(task=task, kind=kind), fmt, replace=replace, stores=targets)

    def import_file(self, source: Path, reviewer: str | None = None) -> ImportReport:
        """Apply the decisions of an edited export (``.jsonl``/``.ndjson`` or ``.csv``); one transaction per row.

        Each row needs item_id, version, proposed_sha256 and status as exported; a row is rejected
        (with its line number and the reason) when the item is unknown, its version is not the
        current one, its proposal changed, its status is unknown, it is edited without text, it
        asks for pending, or it has no reviewer or one reserved for the automatic reviewer (the ``reviewer``
        argument overrides the row's; the reserved names are refused only in rows that would change the item, so
        an export re-imported as it is stays unchanged).
        A row matching the current status (and text, for edited) is unchanged. Others are applied
        as a decision: audit action ``import``, version+1, queue revision bumped. Reading the file and
        the checks a row allows on its own are :mod:`review.exchange`'s (line numbers, CSV escapes,
        reviewer names). ValueError for another suffix; InvalidDecisionError for a ``reviewer`` override that
        :func:`clean_person_reviewer` refuses (blank, reserved).
        """
        override = None if reviewer is None else clean_person_reviewer(reviewer)
        applied = unchanged = 0
        rejected: list[tuple[int, str]] = []
        for line, row in read_import_rows(Path(source)):
            if isinstance(row, str):
                rejected.append((line, row))
                continue
            try:
                outcome = self._import_row(parse_import_row(row, override))
            except ImportRejected as exc:
                rejected.append((line, str(exc)))
                continue
            if outcome:
                applied += 1
            else:
                unchanged += 1
        return ImportReport(applied=applied, unchanged=unchanged, rejected=rejected)

    def _import_row(self, row: ImportedDecision) -> bool:
        """Apply one imported decision; True when applied, False when unchanged, ImportRejected otherwise."""
        status, text, name, note = row.status, row.edited_text, row.reviewer, row.note
        with self._write() as conn:
            current = conn.execute("SELECT * FROM items WHERE item_id = ?", (row.item_id,)).fetchone()
            if current is None:
                raise ImportRejected("unknown item")
            if row.version != current["version"]:
                raise ImportRejected(f"conflict: item is at version {current['version']}")
            if row.proposed_sha256 != current["proposed_sha256"]:
                raise ImportRejected("proposal changed since export")
            if status not in STATUSES:
                raise ImportRejected(f"unknown status {status!r} (expected one of {', '.join(STATUSES)})")
            if status == "edited" and text is None:
                raise ImportRejected("edited without text")
            if status == current["status"] and (status != "edited" or text == current["edited_text"]):
                return False
            if status == "pending":
                raise ImportRejected("pending is not a decision")
            if status == "accepted" and current["proposed"] == "":
                raise ImportRejected("the item proposes nothing (its LLM answer failed): edit or reject it")
            if name is None:
                raise ImportRejected("missing reviewer")
            try:
                clean_person_reviewer(name)
            except InvalidDecisionError as exc:
                raise ImportRejected(f"{exc} (put your name in the reviewer column or pass --reviewer)") from None
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


def _auto_decided_failure(current: sqlite3.Row, row: Mapping[str, Any]) -> bool:
    """True when the pushed ``row`` (:func:`review.schema.pushed_row`) is an LLM failure and the stored item
    ``current`` holds an automatic decision."""
    decided_by = current["reviewer"]
    automatic = current["status"] != "pending" and decided_by is not None and is_auto_reviewer(decided_by)
    return automatic and is_llm_failure(json.loads(row["flags"]))


def _failure_flags_changed(current: sqlite3.Row, row: Mapping[str, Any]) -> bool:
    """True when the stored item ``current`` or the pushed ``row`` carries an LLM failure flag and their flags
    differ."""
    before, after = json.loads(current["flags"]), json.loads(row["flags"])
    return before != after and (is_llm_failure(before) or is_llm_failure(after))
