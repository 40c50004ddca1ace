"""The title header of a chunk: the one place that fills ``title_template`` (``evaluation.config.TitleTemplate``).

Every system that reads a chunk under its document's title calls :func:`title_texts`: dense ``context: title`` (each
chunk embedded alone), dense ``context: late`` with ``header: title`` (each chunk's text inside the late-chunking
sequence), and ``bm25`` ``context: title`` (contextual BM25). So the three see exactly the same text per chunk:
``title_template.format(title=title.strip(), chunk=chunk)``, and a chunk whose title is missing or blank
(:func:`conteb.text.is_blank`) is its own text, counted as without a title.
"""

from __future__ import annotations

from conteb.text import is_blank
from evaluation.corpus import EvalCorpus


def header_text(template: str, title: str | None, chunk: str) -> str | None:
    """``chunk`` under its title (``template`` filled), or None when the title is missing or blank."""
    if title is None or is_blank(title):
        return None
    return template.format(title=title.strip(), chunk=chunk)


def title_texts(template: str, corpus: EvalCorpus) -> tuple[list[str], int]:
    """Per chunk of ``corpus`` (corpus order), its text under its title, and how many chunks had no title (kept as
    they are)."""
    texts, missing = [], 0
    for chunk, title in zip(corpus.chunks, corpus.titles, strict=True):
        text = header_text(template, title, chunk)
        if text is None:
            missing += 1
            texts.append(chunk)
        else:
            texts.append(text)
    return texts, missing
