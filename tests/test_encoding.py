from curation.encoding import decode_bytes, looks_binary, normalize_newlines


def test_utf8_with_bom() -> None:
    decoded = decode_bytes("\ufeffCafé".encode())
    assert (decoded.text, decoded.encoding, decoded.is_fallback) == ("Café", "utf-8", False)


def test_cp1252_punctuation() -> None:
    decoded = decode_bytes("It’s – done…".encode("cp1252"))
    assert decoded.encoding == "cp1252"
    assert decoded.text == "It’s – done…"
    assert decoded.is_fallback


def test_latin1_when_cp1252_cannot_decode() -> None:
    # 0x81 is undefined in cp1252, valid (a C1 control) in ISO-8859-1
    decoded = decode_bytes(b"caf\xe9 \x81")
    assert decoded.encoding == "latin-1"
    assert decoded.text.startswith("café")


def test_newlines_normalised() -> None:
    assert normalize_newlines("a\r\nb\rc\u0085d\u2028e") == "a\nb\nc\nd\ne"


def test_binary_detection() -> None:
    assert looks_binary(b"abc\x00def")
    assert not looks_binary(b"plain text")
