"""An item's decision history, replayed from its audit rows (pure).

Contract: replaying an item's audit rows oldest first, ``push``/``reopen`` start from a pending
item with an empty decision stack, ``accept``/``reject``/``edit``/``import`` push a decision and
``undo`` pops the latest one. What is left on the stack are the item's live decisions on its
current proposal; undo, "last decision" and reviewer agreement are all derived from it.

A row is anything indexed by the ``audit`` table's column names (a :class:`sqlite3.Row` in the store).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, TypeVar

from review.model import ACTION_STATUS, DECISION_ACTIONS, RESET_ACTIONS, STATUS_ACTION


class AuditRow(Protocol):
    """An ``audit`` row read by column name (a :class:`sqlite3.Row`, or a dict)."""

    def __getitem__(self, key: str, /) -> Any: ...


RowT = TypeVar("RowT", bound=AuditRow)


def live_decisions(rows: Iterable[RowT]) -> list[RowT]:
    """The decision stack left by one item's audit rows (oldest first): push/reopen reset, decisions push,
    undo pops."""
    stack: list[RowT] = []
    for row in rows:
        action = row["action"]
        if action in RESET_ACTIONS:
            stack.clear()
        elif action in DECISION_ACTIONS:
            stack.append(row)
        elif action == "undo" and stack:
            stack.pop()
    return stack


def decision_label(row: AuditRow) -> str:
    """accept/reject/edit for a decision row (an ``import`` row is labelled by the status it set)."""
    action = row["action"]
    return action if action in ACTION_STATUS else STATUS_ACTION[row["to_status"]]
