"""Decoding text files of unknown encoding.

Rule, per file:

1. Valid UTF-8 (a BOM is removed): UTF-8.
2. UTF-8 with a few invalid bytes: decoding it as UTF-8 loses one character per invalid byte
   (replaced by U+FFFD and counted), decoding it as Windows-1252 garbles every valid multi-byte
   character (``é`` becomes ``Ã©``). The smaller loss wins: UTF-8 when the valid multi-byte
   characters outnumber the invalid bytes, else step 3 (a legacy file has next to no valid
   multi-byte sequences, so this never misreads one).
3. Windows-1252, the usual encoding of "Latin-1" files written on Windows (0x80–0x9F are
   punctuation such as … – ’ there); else ISO-8859-1, which decodes any byte.

A statistical detector is not used: on short English texts with a few smart quotes,
``charset-normalizer`` guesses Big5, cp775 or Mac Icelandic (``shared/data/sotu``), and it offers
no UTF-8 reading at all for a UTF-8 file with one bad byte. Anything but clean UTF-8 is reported
back so that the caller can log a warning naming the file. Line terminators (CRLF, CR, NEL U+0085,
LS U+2028, PS U+2029) are normalised to ``\\n``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINE_BREAKS = re.compile("\r\n|[\r\u0085\u2028\u2029]")
_ESCAPED_BYTES = re.compile("[\udc80-\udcff]")  # undecodable bytes under errors="surrogateescape"


@dataclass(frozen=True)
class DecodedText:
    text: str
    encoding: str  # utf-8 | cp1252 | latin-1
    replaced: int = 0  # invalid bytes of a UTF-8 file, each replaced by U+FFFD (step 2 of the rule)

    @property
    def is_fallback(self) -> bool:
        return self.encoding != "utf-8"


def decode_bytes(data: bytes) -> DecodedText:
    """Decode ``data`` with the rule above and normalise its line terminators."""
    try:
        return DecodedText(normalize_newlines(data.decode("utf-8-sig")), "utf-8")
    except UnicodeDecodeError:
        pass
    lenient = data.decode("utf-8-sig", errors="surrogateescape")
    text, invalid = _ESCAPED_BYTES.subn("\ufffd", lenient)
    multibyte = len(lenient) - len(lenient.encode("ascii", errors="ignore")) - invalid
    if multibyte > invalid:
        return DecodedText(normalize_newlines(text), "utf-8", invalid)
    try:
        return DecodedText(normalize_newlines(data.decode("cp1252")), "cp1252")
    except UnicodeDecodeError:
        return DecodedText(normalize_newlines(data.decode("latin-1")), "latin-1")


def normalize_newlines(text: str) -> str:
    """Replace every line terminator by ``\\n``."""
    return _LINE_BREAKS.sub("\n", text)


def looks_binary(data: bytes) -> bool:
    """True when ``data`` holds a NUL byte in its first 8 KiB (not a text file)."""
    return b"\x00" in data[:8192]
