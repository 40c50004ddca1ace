"""The loader of a ``kind: controlled`` source (:mod:`curation.sources.controlled`): the registry's choice of
templates, generated into the tables every source returns."""

from __future__ import annotations

from conteb.config import ControlledSource
from curation.sources.controlled.catalog import select_templates
from curation.sources.controlled.generate import generate_controlled
from curation.sources.model import SourceError, SourceResult


def load_controlled(source: ControlledSource) -> SourceResult:
    """The tables of a ``kind: controlled`` source; :class:`SourceError` for an unknown template or domain."""
    try:
        templates = select_templates(source.templates, source.domains)
    except ValueError as error:
        raise SourceError(f"controlled source: {error}") from None
    return generate_controlled(templates, source.documents_per_template, source.seed, source.titles)
