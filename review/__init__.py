"""Human review of LLM proposals: the review store (SQLite) that the web UI, the CLI and the assets share.

Pure library (no Dagster import); see :mod:`review.store` for the contracts.
"""

from review.store import (
    ACTIONS,
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
)

__all__ = [
    "ACTIONS",
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
]
