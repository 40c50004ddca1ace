"""A :class:`~evaluation.reports.document.Document` as a self-contained HTML page.

Contract: :func:`render_html` fills ``templates/report.html.j2`` (which extends ``base.html.j2``, the
page's style) with the document; Jinja autoescapes every text, so user text and ``verbatim`` spans
alike are safe. Tables become ``<table id="<name>">`` with numeric columns classed ``num``; images are
``<img src>`` with the ``src`` the builder chose.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from evaluation.reports.document import Document

TEMPLATES = Path(__file__).parent / "templates"


@lru_cache(maxsize=1)
def _environment() -> Environment:
    return Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_html(document: Document) -> str:
    """``document`` as a self-contained HTML page (tables as ``<table>``, images as ``<img src>``)."""
    return _environment().get_template("report.html.j2").render(document=document)
