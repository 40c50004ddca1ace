"""A :class:`~evaluation.reports.document.Document` as GitHub-flavoured Markdown.

Contract: :func:`render_markdown` writes the title as ``#``, every block in order separated by a blank
line, and ends with one newline. User text goes through :func:`markdown_escape` (safe in a paragraph
and in a table cell); ``verbatim`` spans are written as they are; numeric table columns are
right-aligned (``---:``). Images are written with the ``src`` the builder chose (a relative path or a
``data:`` URI).
"""

from __future__ import annotations

import re

from evaluation.reports.document import BulletList, Document, Heading, Image, Inline, Paragraph, Table

_MD_SPECIAL = re.compile(r"[\\`*<>|]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def markdown_escape(value: str) -> str:
    """User text safe in Markdown (and in a table cell): whitespace runs -> one space, markup escaped.

    Backslash-escapes ``\\ ` * < > |``, underscores at word edges (``insent_model`` stays as is) and the
    ``](`` of an inline link; a leading ``#``, ``+``, ``-`` or ``=`` (block markup).
    """
    escaped = _MD_SPECIAL.sub(lambda m: "\\" + m.group(0), re.sub(r"\s+", " ", value)).replace("](", "]\\(")
    return "\\" + escaped if escaped.startswith(("#", "+", "-", "=")) else escaped


def _md_inline(spans: Inline) -> str:
    parts = []
    for span in spans:
        content = span.text if span.verbatim else markdown_escape(span.text)
        if span.bold and content:
            content = f"**{content}**"
        if span.href:
            content = f"[{content}](<{span.href}>)"
        parts.append(content)
    return "".join(parts)


def render_markdown(document: Document) -> str:
    """``document`` as GitHub-flavoured Markdown."""
    out = [f"# {markdown_escape(document.title)}"]
    for block in document.blocks:
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {markdown_escape(block.text)}")
        elif isinstance(block, Paragraph):
            out.append(_md_inline(block.spans))
        elif isinstance(block, BulletList):
            out.append("\n".join(f"- {_md_inline(item)}" for item in block.items))
        elif isinstance(block, Image):
            out.append(f"![{markdown_escape(block.alt)}]({block.src})")
        elif isinstance(block, Table):
            align = ["---:" if numeric else "---" for numeric in block.numeric_columns]
            lines = [
                "| " + " | ".join(markdown_escape(h) for h in block.header) + " |",
                "| " + " | ".join(align) + " |",
            ]
            lines += ["| " + " | ".join(_md_inline(c.spans) for c in row) + " |" for row in block.rows]
            out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"
