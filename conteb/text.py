"""What counts as blank text: the one rule every emptiness check of the project uses (queries, documents, chunks,
answers, LLM outputs, reviewers' edits).

A text is *blank* when a reader would see nothing in it: it is None or empty, or every character is whitespace
(``str.isspace``) or one of :data:`BLANK_CATEGORIES` (space, line and paragraph separators, format characters such
as U+200B ZERO WIDTH SPACE, U+FEFF, U+2060 WORD JOINER, U+180E, and control characters) or of
:data:`BLANK_CHARACTERS` (letters and symbols that render as nothing: Hangul fillers, the blank Braille pattern,
the combining grapheme joiner). ``str.strip()`` alone only knows the whitespace: ``"\\u200b\\u00a0\\u3000"`` is not
empty to it.

Pure: standard library only.
"""

from __future__ import annotations

import unicodedata

BLANK_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cf", "Cc"})
"""Unicode general categories whose characters show nothing on their own."""

BLANK_CHARACTERS = frozenset("\u034f\u115f\u1160\u2800\u3164\uffa0")
"""Characters of other categories that render as nothing (U+034F, the Hangul fillers U+115F, U+1160, U+3164,
U+FFA0, and U+2800 BRAILLE PATTERN BLANK)."""


def is_blank_character(char: str) -> bool:
    """True for a character that shows nothing (the module's rule)."""
    return char.isspace() or char in BLANK_CHARACTERS or unicodedata.category(char) in BLANK_CATEGORIES


def is_blank(text: str | None) -> bool:
    """True when ``text`` is None, empty, or made only of characters that show nothing (the module's rule)."""
    return not text or all(is_blank_character(char) for char in text)
