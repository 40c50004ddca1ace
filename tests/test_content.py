"""The content rule of train/test overlap (conteb/content.py): what counts as the same text, chunk and passage."""

from __future__ import annotations

import unicodedata

from conteb.content import (
    MIN_WORDS,
    PASSAGE_WINDOW,
    PASSAGE_WORDS,
    document_prints,
    normalise,
    passage_prints,
    text_print,
)

TEXT = (
    "The harbour of Arlenmouth handles about 38 million tonnes of cargo a year, mostly containers and grain. "
    'Its "old town" sits on a low hill above the estuary - the newer districts spread along both banks, '
    "where the café quarter and the shipyards meet."
)


def variants(text: str) -> list[str]:
    """The same text re-encoded, re-wrapped and re-typed: none of these is a new text."""
    return [
        unicodedata.normalize("NFD", text),  # decomposed accents (é = e + U+0301)
        text.replace(" ", "\u00a0", 5),  # non-breaking spaces
        text.replace(". ", ".\r\n\r\n"),  # CRLF paragraph breaks
        text.replace(" ", "  \t "),  # runs of whitespace
        "\ufeff" + text.replace("harbour", "har\u00adbour").replace("grain", "gra\u200bin"),  # BOM, soft hyphen, ZWSP
        text.replace('"old town"', "\u201cold town\u201d").replace(" - ", " \u2013 "),  # smart quotes, en dash
        text.replace("38", "\uff13\uff18"),  # full-width digits
        text.upper(),
        "\n  " + text + "  \n",
    ]


def test_re_encoded_and_re_wrapped_text_is_the_same_text() -> None:
    expected = text_print(TEXT)
    assert expected is not None
    for variant in variants(TEXT):
        assert normalise(variant) == normalise(TEXT), variant
        assert text_print(variant) == expected


def test_a_real_edit_is_a_new_text() -> None:
    for edited in (
        TEXT.replace("38 million", "39 million"),
        TEXT.replace("containers", "container"),
        TEXT.replace("grain.", "grain;"),
        TEXT.replace("low hill", "hill"),
    ):
        assert text_print(edited) != text_print(TEXT), edited


def test_short_texts_get_no_print() -> None:
    assert text_print(" ".join(["word"] * (MIN_WORDS - 1))) is None
    assert text_print(" ".join(["word"] * MIN_WORDS)) is not None


def _words(prefix: str, count: int) -> str:
    return " ".join(f"{prefix}{i}" for i in range(count))


def test_a_shared_run_of_60_words_shares_a_passage_print_whatever_surrounds_it() -> None:
    shared = _words("shared", PASSAGE_WORDS + PASSAGE_WINDOW - 1)
    a = f"{_words('alpha', 300)} {shared} {_words('beta', 200)}"
    b = f"{_words('gamma', 40)}\n\n{shared.upper()}\n\n{_words('delta', 500)}"
    assert set(passage_prints(a)) & set(passage_prints(b))
    short = _words("shared", PASSAGE_WORDS - 1)  # under 50 words in common: never a passage
    c = f"{_words('alpha', 300)} {short} {_words('beta', 200)}"
    d = f"{_words('gamma', 40)} {short} {_words('delta', 500)}"
    assert not set(passage_prints(c)) & set(passage_prints(d))


def test_a_document_print_does_not_depend_on_its_chunking() -> None:
    text = f"{_words('first', 80)}\n\n{_words('second', 90)} {_words('third', 40)}"
    pieces = text.split("\n\n")
    whole = document_prints(["d_0"], [text], None, [0])
    starts = [0, len(pieces[0]) + 2]
    chunked = document_prints(["d_0", "d_1"], pieces, None, starts)
    by_order = document_prints(["x_0", "x_1"], pieces)  # no offsets: joined in order
    assert whole.text == chunked.text == by_order.text is not None
    assert whole.passages == chunked.passages
    reformulated = document_prints(["d_0", "d_1"], pieces, [pieces[0], "the subject " + pieces[1]], starts)
    assert reformulated.chunks["d_0"] == chunked.chunks["d_0"]  # unchanged: one print
    assert len(reformulated.chunks["d_1"]) == 2 and reformulated.chunks["d_1"][0] == chunked.chunks["d_1"][0]
