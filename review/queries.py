"""The read side of the review store: items, queue positions, counts, history and reviewer agreement.

Contracts: every query is read-only and sees one consistent snapshot where it needs several
statements. Items are ordered by task, kind, item_id (``flagged_first``: flagged items first within
each queue); a ``status`` filter must be one of :data:`review.model.STATUSES` (ValueError);
:class:`review.model.UnknownItemError` for an item id the store does not hold. A reviewer's "last
decision" and the agreement between people (automatic decisions left out) count only live decisions
(:mod:`review.history`).
"""

from __future__ import annotations

import itertools
from collections import defaultdict

from review.agreement import Agreement, queue_agreement
from review.connection import StoreConnection
from review.history import decision_label, live_decisions
from review.model import (
    DECISION_ACTIONS,
    LLM_FAILED_FLAG,
    STATUSES,
    AuditEntry,
    QueueStats,
    ReviewItem,
    clean_reviewer,
    is_auto_reviewer,
)
from review.schema import entry_from_row, item_from_row, where_clause


class QueueQueries(StoreConnection):
    """Read-only queries over the review database (:class:`review.store.ReviewStore` adds the changes)."""

    # --- items --------------------------------------------------------------------------------

    def get(self, item_id: str) -> ReviewItem:
        """The item ``item_id`` (UnknownItemError when absent)."""
        with self._read() as conn:
            return item_from_row(self._item_row(conn, item_id))

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
        where, params = where_clause(task, kind, status, flagged)
        order = "task, kind, flagged DESC, item_id" if flagged_first else "task, kind, item_id"
        sql = f"SELECT * FROM items{where} ORDER BY {order} LIMIT ? OFFSET ?"
        with self._read() as conn:
            rows = conn.execute(sql, (*params, -1 if limit is None else limit, offset)).fetchall()
        return [item_from_row(row) for row in rows]

    def count(
        self, task: str | None = None, kind: str | None = None, status: str | None = None, flagged: bool | None = None
    ) -> int:
        """How many items match every given filter."""
        where, params = where_clause(task, kind, status, flagged)
        with self._read() as conn:
            return conn.execute(f"SELECT COUNT(*) FROM items{where}", params).fetchone()[0]

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
            where, params = where_clause(row["task"], row["kind"], status)
            total = conn.execute(f"SELECT COUNT(*) FROM items{where}", params).fetchone()[0]
            if status is not None and row["status"] != status:
                return None, total
            before = conn.execute(f"SELECT COUNT(*) FROM items{where} AND item_id < ?", (*params, item_id))
            return before.fetchone()[0] + 1, total

    # --- decisions ----------------------------------------------------------------------------

    def last_decision(self, reviewer: str, task: str | None = None, kind: str | None = None) -> AuditEntry | None:
        """``reviewer``'s latest accept/reject/edit that is still live (not undone, not superseded by a reopen)."""
        name = clean_reviewer(reviewer)
        where, params = where_clause(task, kind, prefix="i.")
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
                    live[item_id] = {row["id"] for row in live_decisions(self._audit_rows(conn, item_id))}
                if candidate["id"] in live[item_id]:
                    return entry_from_row(candidate)
        return None

    # --- queues and history -------------------------------------------------------------------

    def stats(self, task: str | None = None, kind: str | None = None) -> list[QueueStats]:
        """One :class:`QueueStats` per ``(task, kind)`` queue ever pushed, ordered by task, kind."""
        where, params = where_clause(task, kind, prefix="q.")
        sql = (
            "SELECT q.task, q.kind, q.revision, "
            + ", ".join(f"COALESCE(SUM(i.status = '{status}'), 0) AS {status}" for status in STATUSES)
            + ", COUNT(i.item_id) AS total, "
            "COALESCE(SUM(i.status = 'pending' AND i.flagged = 1), 0) AS flagged_pending, "
            "COALESCE(SUM(i.status = 'pending' AND EXISTS (SELECT 1 FROM json_each(i.flags) f "
            f"WHERE substr(f.value, 1, {len(LLM_FAILED_FLAG) + 1}) = '{LLM_FAILED_FLAG}:')), 0) AS failed_pending "
            f"FROM queues q LEFT JOIN items i ON i.task = q.task AND i.kind = q.kind{where} "
            "GROUP BY q.task, q.kind ORDER BY q.task, q.kind"
        )
        with self._read() as conn:
            rows = conn.execute(sql, params).fetchall()
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
                failed_pending=row["failed_pending"],
            )
            for row in rows
        ]

    def deciders(
        self, task: str | None = None, kind: str | None = None
    ) -> dict[tuple[str, str], dict[str | None, int]]:
        """Per ``(task, kind)`` queue with decided items: how many of them each reviewer decided last (None:
        no reviewer recorded), most first, ties by name."""
        where, params = where_clause(task, kind)
        where = f"{where} AND status != 'pending'" if where else " WHERE status != 'pending'"
        sql = f"SELECT task, kind, reviewer, COUNT(*) AS n FROM items{where} GROUP BY task, kind, reviewer"
        with self._read() as conn:
            rows = conn.execute(sql, params).fetchall()
        found: dict[tuple[str, str], dict[str | None, int]] = defaultdict(dict)
        for row in sorted(rows, key=lambda r: (r["task"], r["kind"], -r["n"], r["reviewer"] or "")):
            found[(row["task"], row["kind"])][row["reviewer"]] = row["n"]
        return dict(found)

    def person_decided(self, task: str, kind: str) -> set[str]:
        """The ids of the ``task``/``kind`` items a person (not :func:`review.model.is_auto_reviewer`) has decided at
        any version, from the audit log (decisions undone or reset by a new proposal included)."""
        actions = ", ".join(f"'{action}'" for action in sorted(DECISION_ACTIONS))
        sql = (
            "SELECT DISTINCT a.item_id, a.reviewer FROM audit a JOIN items i ON i.item_id = a.item_id "
            f"WHERE i.task = ? AND i.kind = ? AND a.action IN ({actions}) AND a.reviewer IS NOT NULL"
        )
        with self._read() as conn:
            rows = conn.execute(sql, (task, kind)).fetchall()
        return {row["item_id"] for row in rows if not is_auto_reviewer(row["reviewer"])}

    def revision(self, task: str, kind: str) -> int:
        """The queue's revision counter (0 for a queue never pushed)."""
        with self._read() as conn:
            row = conn.execute("SELECT revision FROM queues WHERE task = ? AND kind = ?", (task, kind)).fetchone()
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
        return [entry_from_row(row) for row in reversed(rows)]

    # --- agreement ----------------------------------------------------------------------------

    def agreement(self, task: str | None = None, kind: str | None = None) -> list[Agreement]:
        """Agreement between people per queue, from the audit log (:func:`review.agreement.queue_agreement`).

        Per item and reviewer, the reviewer's latest live decision on the current proposal counts
        (accept/reject/edit; an ``import`` counts as the action its status means). Automatic decisions
        (``auto``, ``auto:<method>``) are left out, counted in ``automatic``. Among items decided by at
        least two people, the pair sharing the most items is reported (ties: alphabetical) with observed
        agreement and Cohen's kappa over accept/reject/edit. Queues with no such item get
        ``items=0, reviewers=None``.
        """
        where, params = where_clause(task, kind, prefix="i.")
        queue_where, _ = where_clause(task, kind, prefix="q.")
        with self._read() as conn:
            queues = conn.execute(
                f"SELECT q.task, q.kind FROM queues q{queue_where} ORDER BY q.task, q.kind", params
            ).fetchall()
            rows = conn.execute(
                f"SELECT a.*, i.task AS q_task, i.kind AS q_kind FROM audit a JOIN items i ON i.item_id = a.item_id"
                f"{where} ORDER BY a.item_id, a.id",
                params,
            ).fetchall()
        # (task, kind) -> item_id -> reviewer -> label
        labels: dict[tuple[str, str], dict[str, dict[str, str]]] = defaultdict(dict)
        for item_id, group in itertools.groupby(rows, key=lambda row: row["item_id"]):
            item_rows = list(group)
            by_reviewer = {row["reviewer"]: decision_label(row) for row in live_decisions(item_rows)}
            if by_reviewer:  # single decisions too: automatic ones are counted
                labels[(item_rows[0]["q_task"], item_rows[0]["q_kind"])][item_id] = by_reviewer
        return [
            queue_agreement(queue["task"], queue["kind"], labels.get((queue["task"], queue["kind"]), {}))
            for queue in queues
        ]
