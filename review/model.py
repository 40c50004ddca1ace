"""The review queue's vocabulary and value types, shared by the store, its files, the web UI and the CLI.

Contracts:

* :data:`STATUSES`, :data:`ACTIONS` and :data:`AUDIT_ACTIONS` are the strings stored in the
  ``items.status`` and ``audit.action`` columns; values are only ever added.
* An automatic decision is recorded under :func:`auto_reviewer`: ``auto``, or ``auto:<method>``
  for a decision taken because of the proposal's method; :func:`is_auto_reviewer` tells such a recorded name
  from a person's (:func:`reviewer_label` marks it; agreement statistics leave it out, :mod:`review.agreement`).
* A reviewer name is 1 to :data:`MAX_REVIEWER_CHARS` characters, stripped (Unicode whitespace, line and
  paragraph separators included), with no control, format, line or paragraph separator character inside
  (categories C*, Zl, Zp: :func:`clean_reviewer`); decision texts and notes hold no NUL character
  (:func:`check_no_nul`). Both raise :class:`InvalidDecisionError`.
* The automatic reviewer's names are reserved: a person cannot name themselves ``auto``, ``Auto``,
  ``ａｕｔｏ``, ``auto:x`` or ``auto (automatic)`` (:func:`is_reserved_reviewer`: after NFKC and case
  folding, ``auto`` alone or followed by a character that is not a letter or digit). Every entry point
  where a person gives their name (the web form and its cookie, ``conteb review`` ``--reviewer`` or the OS
  user, an import's ``--reviewer`` and each imported row it applies) goes through
  :func:`clean_person_reviewer`; the store itself records any clean name, so the pipeline's review gate
  decides as ``auto``.
* An item whose LLM answer failed or was refused (after the client's retries, by the schema or by a detector)
  carries the flag :func:`llm_failure_flag` (``llm_failed: <the reason in words>``) and a proposal a person can
  accept, edit or reject (the stage's fallback: the original text or the offline mask); :func:`is_llm_failure`
  tells such an item by its flags. No automatic decision applies to it (:mod:`review.gate`).
* ``proposed_sha256`` is the SHA-256 hex digest of the proposal's UTF-8 bytes (:func:`proposal_sha256`).

Pure: standard library and :mod:`conteb.text` only (cheap to import from a command line).
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from conteb.text import is_blank

STATUSES = ("pending", "accepted", "rejected", "edited")
"""Every status an item can be in."""

ACTIONS = ("accept", "reject", "edit")
"""The decisions a reviewer can make."""

ACTION_STATUS = {"accept": "accepted", "reject": "rejected", "edit": "edited"}
"""The status each decision sets."""

STATUS_ACTION = {status: action for action, status in ACTION_STATUS.items()}
"""The decision that sets each decided status."""

AUDIT_ACTIONS = ("push", "reopen", "accept", "reject", "edit", "undo", "import")
"""Every action recorded in the audit log."""

DECISION_ACTIONS = frozenset({"accept", "reject", "edit", "import"})
"""Audit actions that decide an item (``import`` applies a decision from a file)."""

RESET_ACTIONS = frozenset({"push", "reopen"})
"""Audit actions after which an item is pending with no decision to undo."""

MAX_REVIEWER_CHARS = 64

REVIEW_COMMAND = "conteb review serve"
"""The command that serves the review queue, named by every message that asks for decisions."""

AUTO_REVIEWER = "auto"
"""The reviewer name of automatic decisions (``auto``, or ``auto:<method>``: :func:`auto_reviewer`)."""


def auto_reviewer(method: str | None = None) -> str:
    """The reviewer name recorded for an automatic decision: ``auto``, or ``auto:<method>`` when the
    decision follows from the proposal's method."""
    return AUTO_REVIEWER if method is None else f"{AUTO_REVIEWER}:{method}"


def is_auto_reviewer(reviewer: str) -> bool:
    """True for a name :func:`auto_reviewer` makes."""
    return reviewer == AUTO_REVIEWER or reviewer.startswith(f"{AUTO_REVIEWER}:")


LLM_FAILED_FLAG = "llm_failed"
"""The flag name of an item whose LLM answer failed or was refused (:func:`llm_failure_flag`)."""


def llm_failure_flag(reason: str) -> str:
    """The flag of an item whose LLM answer failed or was refused: ``llm_failed: <reason>`` (``reason`` in words,
    e.g. "the LLM call failed after 5 tries: InternalServerError: ...")."""
    return f"{LLM_FAILED_FLAG}: {reason}"


def is_llm_failure(flags: Iterable[str]) -> bool:
    """True when ``flags`` hold an :func:`llm_failure_flag`."""
    return any(flag.startswith(f"{LLM_FAILED_FLAG}:") for flag in flags)


def proposal_sha256(proposed: str) -> str:
    """SHA-256 hex digest of ``proposed`` encoded as UTF-8 (what ``proposed_sha256`` holds)."""
    return hashlib.sha256(proposed.encode("utf-8")).hexdigest()


def iso_time(at: float) -> str:
    """A store timestamp (seconds since the epoch) as ISO 8601 UTC, to the second."""
    return datetime.fromtimestamp(at, tz=UTC).isoformat(timespec="seconds")


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
        when = iso_time(changed_at) if changed_at is not None else "an unknown time"
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
    failed_pending: int = 0  # pending items whose LLM answer failed or was refused (is_llm_failure)

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


NAME_REFUSED_CATEGORIES = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")
"""Unicode categories a reviewer name may not contain: control, format, surrogate, private-use and unassigned
characters, line and paragraph separators (they break one-line logs, listings and CSV cells, or hide text)."""


def clean_reviewer(reviewer: object) -> str:
    """``reviewer`` without surrounding whitespace; InvalidDecisionError (saying why) unless it is 1 to
    :data:`MAX_REVIEWER_CHARS` characters with none of :data:`NAME_REFUSED_CATEGORIES`."""
    if not isinstance(reviewer, str) or not reviewer.strip():
        raise InvalidDecisionError("a reviewer name is required")
    name = reviewer.strip()
    if len(name) > MAX_REVIEWER_CHARS:
        raise InvalidDecisionError(f"a reviewer name has at most {MAX_REVIEWER_CHARS} characters (got {len(name)})")
    bad = next((char for char in name if unicodedata.category(char) in NAME_REFUSED_CATEGORIES), None)
    if bad is not None:
        raise InvalidDecisionError(
            f"a reviewer name cannot contain control characters or line separators (found U+{ord(bad):04X})"
        )
    return name


def is_reserved_reviewer(name: str) -> bool:
    """True for a name a person may not take because it reads as the automatic reviewer: after NFKC
    normalisation and case folding, ``auto`` alone or followed by a character that is not a letter or digit
    (``auto:mask``, ``auto (automatic)``)."""
    folded = unicodedata.normalize("NFKC", name).casefold().strip()
    if not folded.startswith(AUTO_REVIEWER):
        return False
    rest = folded[len(AUTO_REVIEWER) :]
    return not rest or not rest[0].isalnum()


def clean_person_reviewer(reviewer: object) -> str:
    """:func:`clean_reviewer`'s name of a person: InvalidDecisionError also when it is reserved for the
    automatic reviewer (:func:`is_reserved_reviewer`)."""
    name = clean_reviewer(reviewer)
    if is_reserved_reviewer(name):
        raise InvalidDecisionError(
            f"the reviewer name {name!r} is reserved for the pipeline's automatic decisions "
            f"({AUTO_REVIEWER}, {AUTO_REVIEWER}:<method>); use your own name"
        )
    return name


def reviewer_or_none(reviewer: object) -> str | None:
    """:func:`clean_person_reviewer`'s name, or None where it would refuse ``reviewer``."""
    try:
        return clean_person_reviewer(reviewer)
    except InvalidDecisionError:
        return None


def reviewer_label(reviewer: str | None, missing: str = "unknown") -> str:
    """How a recorded reviewer reads in listings: automatic ones are marked, None reads as ``missing``."""
    if reviewer is None:
        return missing
    if is_auto_reviewer(reviewer):
        return f"{reviewer} (automatic)"
    return reviewer


def check_no_nul(field: str, text: str | None) -> None:
    """InvalidDecisionError when ``text`` holds a NUL character (it would be cut short by many tools)."""
    if isinstance(text, str) and "\x00" in text:
        raise InvalidDecisionError(f"the {field} contains a NUL character (\\x00); remove it")


def has_text(text: Any) -> bool:
    """True for a string that is not blank (:func:`conteb.text.is_blank`: something a reader can see)."""
    return isinstance(text, str) and not is_blank(text)
