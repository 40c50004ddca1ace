"""Human review of LLM proposals: the review store (SQLite) that the web UI, the CLI and the assets share.

Pure library (no Dagster import); see :mod:`review.store` for the contracts.
"""

from review.store import (
    ACTIONS,
    AUTO_REVIEWER,
    STATUSES,
    Agreement,
    AuditEntry,
    ConflictError,
    ImportReport,
    InvalidDecisionError,
    PushReport,
    QueueStats,
    ReviewItem,
    ReviewStore,
    UnknownItemError,
    clean_reviewer,
    reviewer_label,
)

__all__ = [
    "ACTIONS",
    "AUTO_REVIEWER",
    "STATUSES",
    "Agreement",
    "AuditEntry",
    "ConflictError",
    "ImportReport",
    "InvalidDecisionError",
    "PushReport",
    "QueueStats",
    "ReviewItem",
    "ReviewStore",
    "UnknownItemError",
    "clean_reviewer",
    "reviewer_label",
]
