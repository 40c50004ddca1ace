"""The document model every report is built as, before a renderer writes it out.

Contract: a :class:`Document` is a title and a sequence of blocks (:class:`Heading`, :class:`Paragraph`,
:class:`BulletList`, :class:`Table`, :class:`Image`), all frozen dataclasses holding plain text. Text is
raw: the renderers escape it (Markdown: :mod:`evaluation.reports.markdown`, HTML:
:mod:`evaluation.reports.html`), except spans marked ``verbatim`` (our own number formatting), which
Markdown writes as they are. Each block's ``kind`` is the name the HTML template dispatches on. Builders
(:mod:`evaluation.reports.task`, :mod:`evaluation.reports.overall`, :mod:`evaluation.reports.subsets`,
:mod:`evaluation.reports.reproduce`) make table cells with :func:`text` (user text) and :func:`number`
(a formatted number, right-aligned).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from evaluation.reports.formatting import DASH


@dataclass(frozen=True)
class Span:
    """A run of inline text. ``verbatim``: our own formatting (numbers), written to Markdown unescaped."""

    text: str
    bold: bool = False
    href: str | None = None
    verbatim: bool = False


Inline = tuple[Span, ...]


@dataclass(frozen=True)
class Cell:
    spans: Inline
    numeric: bool = False


@dataclass(frozen=True)
class Heading:
    kind: ClassVar[str] = "heading"
    text: str
    level: int = 2


@dataclass(frozen=True)
class Paragraph:
    kind: ClassVar[str] = "paragraph"
    spans: Inline


@dataclass(frozen=True)
class BulletList:
    kind: ClassVar[str] = "list"
    items: tuple[Inline, ...]


@dataclass(frozen=True)
class Table:
    """``name`` becomes the HTML table's id (unique within a document)."""

    kind: ClassVar[str] = "table"
    name: str
    header: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]

    @property
    def numeric_columns(self) -> tuple[bool, ...]:
        """Per column: every cell is a number (or ``—``), so the column is right-aligned."""
        return tuple(
            bool(self.rows) and all(row[i].numeric or _cell_text(row[i]) == DASH for row in self.rows)
            for i in range(len(self.header))
        )


@dataclass(frozen=True)
class Image:
    """A figure: ``src`` (a path or ``data:`` URI, what Markdown shows); ``name`` becomes the HTML figure's id;
    ``svg`` (our own inline ``<svg>``, its labels real text) replaces the ``<img>`` in HTML when given."""

    kind: ClassVar[str] = "image"
    alt: str
    src: str
    name: str = ""
    svg: str = ""


Block = Heading | Paragraph | BulletList | Table | Image


@dataclass(frozen=True)
class Document:
    title: str
    blocks: tuple[Block, ...]


def _cell_text(cell: Cell) -> str:
    return "".join(s.text for s in cell.spans)


def text(value: str, bold: bool = False, href: str | None = None) -> Cell:
    """A table cell of user text (escaped on output)."""
    return Cell((Span(value, bold=bold, href=href),))


def number(value: str, bold: bool = False) -> Cell:
    """A table cell of a formatted number (right-aligned)."""
    return Cell((Span(value, bold=bold and value != DASH, verbatim=True),), numeric=True)
