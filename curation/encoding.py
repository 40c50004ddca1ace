"""Decoding text files of unknown encoding.

Rule: UTF-8 (a BOM is removed); else Windows-1252, the usual encoding of "Latin-1" files written
on Windows (0x80–0x9F are punctuation such as … – ’ there); else ISO-8859-1, which decodes any
byte. Anything but UTF-8 is reported back so that the caller can log a warning naming the file.
Line terminators (CRLF, CR, NEL U+0085, LS U+2028, PS U+2029) are normalised to ``\\n``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINE_BREAKS = re.compile("\r\n|[\r\u0085\u2028\u2029]")


@dataclass(frozen=True)
class DecodedText:
    text: str
    encoding: str  # utf-8 | cp1252 | latin-1

    @property
    def is_fallback(self) -> bool:
        return self.encoding != "utf-8"


def decode_bytes(data: bytes) -> DecodedText:
    """Decode ``data`` with the rule above and normalise its line terminators."""
    for encoding in ("utf-8-sig", "cp1252", "latin-1"):
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        name = "utf-8" if encoding == "utf-8-sig" else encoding
        return DecodedText(normalize_newlines(text), name)
    raise AssertionError("latin-1 decodes every byte string")  # pragma: no cover


def normalize_newlines(text: str) -> str:
    """Replace every line terminator by ``\\n``."""
    return _LINE_BREAKS.sub("\n", text)


def looks_binary(data: bytes) -> bool:
    """True when ``data`` holds a NUL byte in its first 8 KiB (not a text file)."""
    return b"\x00" in data[:8192]
