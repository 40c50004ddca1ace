"""What counts as blank text: the one rule every emptiness check of the project uses (queries, documents, chunks,
answers, LLM outputs, reviewers' edits); what text no UTF-8 file can store (lone surrogates); and what text the
project refuses to keep from a machine (:func:`text_problem`: a lone surrogate or a NUL).

A text is *blank* when a reader would see nothing in it: it is None or empty, or every character is one of

* Unicode ``White_Space`` (what ``str.isspace`` knows, e.g. U+00A0, U+3000, U+2028);
* Unicode ``Default_Ignorable_Code_Point`` (DI): the characters Unicode says a renderer shows nothing for when it does
  not support them, e.g. U+200B ZERO WIDTH SPACE, U+FEFF, U+2060 WORD JOINER, U+180E, the variation selectors
  U+FE00..U+FE0F and U+180B..U+180F, U+17B4/U+17B5, U+034F, the Hangul fillers U+115F, U+1160, U+3164, U+FFA0;
* a control character (general category ``Cc``, e.g. NUL);
* U+2800 BRAILLE PATTERN BLANK, the one symbol that is an empty cell by definition (neither White_Space nor DI);

or it has no *base character*: every character is of the Unicode general categories M (combining marks), C (control,
format, private use, unassigned) or Z (separators), so there is nothing for a mark to sit on (``"\u0301\u0301"``:
a renderer shows dotted circles at best); a ``Prepended_Concatenation_Mark`` (U+0600 ARABIC NUMBER SIGN, U+06DD: format
characters that are drawn) is a base. :data:`NO_BASE_CHARACTER` is that case in words. The character rule
(:func:`is_blank_character`, used to trim a text's edges) is the first list only: a combining mark after a letter
shows.

The properties come from the ``regex`` package's Unicode tables (no hand list to keep up to date); ``str.strip()``
alone only knows the whitespace: ``"\\u200b\\u00a0\\u3000"`` is not empty to it.
"""

from __future__ import annotations

from functools import cache

import regex

_BLANK_CLASS = r"[\p{White_Space}\p{Default_Ignorable_Code_Point}\p{Cc}\u2800]"
_BLANK_CHARACTER = regex.compile(_BLANK_CLASS)
_BLANK_TEXT = regex.compile(_BLANK_CLASS + "*")
_NO_BASE = r"[[\p{M}\p{C}\p{Z}]--\p{Prepended_Concatenation_Mark}]"  # M, C, Z but the drawn marks (U+0600)
_NO_BASE_TEXT = regex.compile(r"(?V1)[" + _NO_BASE + _BLANK_CLASS[1:] + "*")
NO_BASE_CHARACTER = "blank: no visible base character"
"""The words of a text blank only because it has no base character (module docstring): marks, controls, separators."""
_SURROGATE = regex.compile(r"[\ud800-\udfff]")


@cache  # callers walk texts character by character: a lookup per character, not a regex match
def is_blank_character(char: str) -> bool:
    """True for a character that shows nothing (the module's rule)."""
    return _BLANK_CHARACTER.fullmatch(char) is not None


def is_blank(text: str | None) -> bool:
    """True when ``text`` is None, empty, made only of characters that show nothing, or has no base character (the
    module's rule)."""
    return not text or _NO_BASE_TEXT.fullmatch(text) is not None


def blank_words(text: str | None, blank: str) -> str | None:
    """Why ``text`` is blank in words, or None when it is not: ``blank`` (the caller's words for empty or invisible
    text) or :data:`NO_BASE_CHARACTER` for a text that is blank only for having no base character."""
    if not is_blank(text):
        return None
    return blank if not text or _BLANK_TEXT.fullmatch(text) is not None else NO_BASE_CHARACTER


def lone_surrogate(text: str) -> int | None:
    """Index of the first lone surrogate (U+D800..U+DFFF) in ``text``, or None when UTF-8 can encode it all.

    JSON's ``"\\ud800"`` escape and undecodable file names (``os.fsdecode``) put them in a Python ``str``; Arrow,
    Parquet and SQLite then refuse the text with ``UnicodeEncodeError``.
    """
    if text.isascii():
        return None
    found = _SURROGATE.search(text)
    return None if found is None else found.start()


def escape_surrogates(text: str) -> str:
    """``text`` with each lone surrogate written as its ``\\udXXX`` escape: storable, and shows what the input held."""
    return text if lone_surrogate(text) is None else text.encode("utf-8", "backslashreplace").decode("utf-8")


def lone_surrogate_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored when it holds a lone surrogate (the first one, named with its index), or None."""
    index = lone_surrogate(text)
    if index is None:
        return None
    return f"lone surrogate U+{ord(text[index]):04X} at character {index} (not Unicode text: no UTF-8 file can hold it)"


def text_problem(text: str) -> str | None:
    """Why ``text`` is not text to keep, or None: a lone surrogate (:func:`lone_surrogate_problem`; SQLite, Arrow and
    Parquet raise ``UnicodeEncodeError`` on it) or a NUL character (binary data: many tools cut a text short at it,
    and the review store refuses it in a person's edit). The rule for text that comes from a machine (LLM answers)."""
    problem = lone_surrogate_problem(text)
    nul = text.find("\x00")
    if problem is None and nul >= 0:
        problem = f"NUL character (U+0000) at character {nul} (binary data, not text)"
    return problem
