"""Shared core of conteb-pipeline: configuration, paths, ids, Parquet schemas and atomic I/O.

Nothing in this package imports Dagster. ``from conteb import mteb_task`` (a published task folder as an MTEB
retrieval task, :mod:`conteb.mteb_tasks`) is resolved on first use, so ``import conteb`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conteb.mteb_tasks import mteb_task

__all__ = ["mteb_task"]


def __getattr__(name: str) -> Any:
    """Lazy attributes (PEP 562): ``mteb_task`` imports :mod:`conteb.mteb_tasks` when first asked for."""
    if name == "mteb_task":
        from conteb.mteb_tasks import mteb_task

        return mteb_task
    raise AttributeError(f"module 'conteb' has no attribute {name!r}")
