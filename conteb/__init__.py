"""Shared core of conteb-pipeline: configuration, paths, ids, Parquet schemas and atomic I/O.

Nothing in this package imports Dagster. Two names of the public MTEB interface are resolved on first use, so
``import conteb`` stays light: ``conteb.mteb_task`` (a published task folder as an MTEB retrieval task,
:mod:`conteb.mteb_tasks`) and ``conteb.mteb_model`` (a model of this project, late chunking included, as an MTEB search
model, :mod:`evaluation.mteb_model`). The latter lives in ``evaluation`` (it runs the evaluation's systems); this lazy
re-export is the core's one import from a domain package, allowed by name in the layers contract (pyproject.toml).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conteb.mteb_tasks import mteb_task
    from evaluation.mteb_model import mteb_model

__all__ = ["mteb_model", "mteb_task"]


def __getattr__(name: str) -> Any:
    """Lazy attributes (PEP 562): ``mteb_task`` imports :mod:`conteb.mteb_tasks`, ``mteb_model``
    :mod:`evaluation.mteb_model`, when first asked for."""
    if name == "mteb_task":
        from conteb.mteb_tasks import mteb_task

        return mteb_task
    if name == "mteb_model":
        from evaluation.mteb_model import mteb_model

        return mteb_model
    raise AttributeError(f"module 'conteb' has no attribute {name!r}")
