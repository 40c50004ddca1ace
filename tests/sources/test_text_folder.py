from pathlib import Path

import pytest

from curation.quarantine import QuarantineReason
from curation.sources.model import SourceError
from curation.sources.text_folder import load_text_folder


def test_mixed_encodings_empty_and_binary_files(tmp_path: Path) -> None:
    (tmp_path / "2014-Obama.txt").write_bytes(b"Thank you \x85 it\x92s time.\r\nNext line")
    (tmp_path / "notes.md").write_text("# Title\n\nCafé ünïcode", encoding="utf-8")
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "image.txt").write_bytes(b"\x89PNG\x00\x00")
    (tmp_path / "ignored.csv").write_text("a,b")
    result = load_text_folder(tmp_path)
    docs = {doc.doc_id: doc for doc in result.documents}
    assert set(docs) == {"2014-obama", "notes", "empty"}
    obama = docs["2014-obama"]
    assert obama.text == "Thank you … it’s time.\nNext line"
    assert obama.metadata["encoding"] == "cp1252"
    assert result.warnings == [f"{tmp_path / '2014-Obama.txt'}: not valid UTF-8, decoded as cp1252"]
    assert docs["notes"].text.endswith("Café ünïcode")
    assert docs["empty"].text == ""  # kept: the chunking stage quarantines it with a reason
    [binary] = result.quarantine
    assert (binary.reason, binary.object_id) == (QuarantineReason.BINARY_FILE, "image")
    assert result.stats == {"encoding_cp1252": 1, "encoding_utf-8": 2, "files": 4}


def test_same_stem_twice_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x")
    (tmp_path / "a.md").write_text("y")
    with pytest.raises(SourceError, match=r"a.txt: duplicate document 'a', already defined at a.md"):
        load_text_folder(tmp_path)


def test_real_state_of_the_union(shared_data: Path) -> None:
    result = load_text_folder(shared_data / "sotu")
    assert len(result.documents) == 86
    assert result.stats.get("encoding_cp1252", 0) + result.stats.get("encoding_latin-1", 0) >= 20
    assert all("\r" not in doc.text and "\x85" not in doc.text for doc in result.documents)
    obama = next(doc for doc in result.documents if doc.doc_id == "2014-obama")
    assert "’" in obama.text  # cp1252 smart quotes decoded, not mojibake
