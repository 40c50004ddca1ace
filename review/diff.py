"""Word-level differences between an original text and its proposed rewrite, as escaped HTML.

Texts are split into word, punctuation and whitespace tokens (joining the tokens gives the text
back), :class:`difflib.SequenceMatcher` aligns them, and every piece of text is HTML-escaped
before it is wrapped: removed pieces in ``<del>``, inserted pieces in ``<ins>``. Documents are
untrusted input, so nothing from them ever reaches the page unescaped.
"""

from __future__ import annotations

import difflib
import html
import re
from dataclasses import dataclass

from markupsafe import Markup

_TOKEN = re.compile(r"\w+|\s+|[^\w\s]", re.UNICODE)


def tokens(text: str) -> list[str]:
    """Word, whitespace and single-punctuation tokens of ``text``; ``"".join(tokens(t)) == t``."""
    return _TOKEN.findall(text)


def _escape(text: str) -> str:
    return html.escape(text, quote=True)


@dataclass(frozen=True)
class WordDiff:
    """Both sides of a diff as safe HTML, plus the number of changed segments."""

    original: Markup
    proposed: Markup
    changes: int


def _opcodes(old: list[str], new: list[str]) -> list[tuple[str, int, int, int, int]]:
    """Opcodes where whitespace-only runs between two changes are folded into one change."""
    raw = difflib.SequenceMatcher(str.isspace, old, new, autojunk=False).get_opcodes()
    merged: list[tuple[str, int, int, int, int]] = []
    for position, (tag, i1, i2, j1, j2) in enumerate(raw):
        between_changes = 0 < position < len(raw) - 1 and raw[position + 1][0] != "equal"
        if tag == "equal" and between_changes and all(not token.strip() for token in old[i1:i2]):
            tag = "replace"
        if merged and tag != "equal" and merged[-1][0] != "equal":
            _, a1, _, b1, _ = merged[-1]
            merged[-1] = ("replace", a1, i2, b1, j2)
        else:
            merged.append((tag, i1, i2, j1, j2))
    return merged


def word_diff(original: str | None, proposed: str) -> WordDiff:
    """Side-by-side word diff: ``<del>`` marks what ``proposed`` drops, ``<ins>`` what it adds.

    With no ``original`` (a new object) the left side is empty and the right side is the escaped
    proposal without marks.
    """
    if original is None:
        return WordDiff(Markup(""), Markup(_escape(proposed)), 0)
    old, new = tokens(original), tokens(proposed)
    left: list[str] = []
    right: list[str] = []
    changes = 0
    for tag, i1, i2, j1, j2 in _opcodes(old, new):
        removed, added = _escape("".join(old[i1:i2])), _escape("".join(new[j1:j2]))
        if tag == "equal":
            left.append(removed)
            right.append(added)
            continue
        changes += 1
        if removed:
            left.append(f"<del>{removed}</del>")
        if added:
            right.append(f"<ins>{added}</ins>")
    return WordDiff(Markup("".join(left)), Markup("".join(right)), changes)


def inline_diff(original: str | None, proposed: str) -> Markup:
    """One-column diff: removed pieces in ``<del>`` followed by their replacement in ``<ins>``."""
    if original is None:
        return Markup(f"<ins>{_escape(proposed)}</ins>") if proposed else Markup("")
    old, new = tokens(original), tokens(proposed)
    parts: list[str] = []
    for tag, i1, i2, j1, j2 in _opcodes(old, new):
        removed, added = _escape("".join(old[i1:i2])), _escape("".join(new[j1:j2]))
        if tag == "equal":
            parts.append(added)
            continue
        if removed:
            parts.append(f"<del>{removed}</del>")
        if added:
            parts.append(f"<ins>{added}</ins>")
    return Markup("".join(parts))


def _kept_words(pieces: list[str], words: int, head: bool) -> tuple[list[str], bool]:
    """The first (``head``) or last ``words`` whitespace-separated words of ``pieces`` (tokens), whole; and whether
    anything was left out."""
    gaps = 0
    order = range(len(pieces)) if head else range(len(pieces) - 1, -1, -1)
    for position in order:
        if pieces[position].isspace():
            gaps += 1
            if gaps > words:
                return (pieces[:position], True) if head else (pieces[position + 1 :], True)
    return pieces, False


def _clipped(text: str, limit: int) -> str:
    """``text`` escaped, cut to its first ``limit`` characters (then ``…``)."""
    return _escape(text if len(text) <= limit else text[:limit].rstrip() + "…")


def changed_words(original: str | None, proposed: str, words: int = 4, limit: int = 160) -> Markup:
    """A compact one-column diff for a list: each change (``<del>`` then ``<ins>``, each piece cut to ``limit``
    characters) with up to ``words`` words of unchanged text on either side, longer unchanged stretches elided as
    ``…``. Empty when nothing changed; ``proposed`` (cut) in ``<ins>`` when there is no ``original``."""
    if original is None:
        return Markup(f"<ins>{_clipped(proposed, limit)}</ins>") if proposed else Markup("")
    old, new = tokens(original), tokens(proposed)
    opcodes = _opcodes(old, new)
    if all(tag == "equal" for tag, *_ in opcodes):
        return Markup("")
    parts: list[str] = []
    for position, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        if tag != "equal":
            removed, added = _clipped("".join(old[i1:i2]), limit), _clipped("".join(new[j1:j2]), limit)
            parts.extend(
                piece for piece in (removed and f"<del>{removed}</del>", added and f"<ins>{added}</ins>") if piece
            )
            continue
        same = new[j1:j2]
        first, last = position == 0, position == len(opcodes) - 1
        if first or last:
            kept, cut = _kept_words(same, words, head=last)
            text = _escape("".join(kept))
            parts.append(f"…{text}" if first and cut else f"{text}…" if cut else text)
            continue
        head, cut = _kept_words(same, words, head=True)
        if not cut or len(same) <= 4 * words:
            parts.append(_escape("".join(same)))
            continue
        tail, _ = _kept_words(same, words, head=False)
        parts.append(f"{_escape(''.join(head))} … {_escape(''.join(tail))}")
    return Markup("".join(parts))
