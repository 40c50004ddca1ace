"""Text folders: per-file decoding that keeps UTF-8 files UTF-8, skipped files counted, symlinks kept inside."""

import os
import socket
from pathlib import Path

import pytest

from curation.encoding import decode_bytes
from curation.quarantine import QuarantineReason
from curation.sources.model import SourceError
from curation.sources.text_folder import load_text_folder
from tests.conftest import SHARED_DATA

FRENCH = "L'été à Genève, le café était fermé; où est le thé ? " * 20


def test_one_bad_byte_keeps_a_utf8_file_utf8() -> None:
    data = FRENCH.encode("utf-8")
    data = data[:301] + b"\x92" + data[301:]
    decoded = decode_bytes(data)
    assert decoded.encoding == "utf-8" and decoded.replaced == 1
    assert "Ã" not in decoded.text and decoded.text.count("é") == FRENCH.count("é")
    assert decoded.text.count("\ufffd") == 1


def test_legacy_files_still_decode_as_cp1252_or_latin1() -> None:
    assert (decode_bytes("It’s – done…".encode("cp1252")).encoding, decode_bytes(b"caf\xe9 \x81").encoding) == (
        "cp1252",
        "latin-1",
    )
    assert decode_bytes("naïve café".encode("cp1252")).replaced == 0


def test_text_folder_counts_replaced_bytes(tmp_path: Path) -> None:
    data = FRENCH.encode("utf-8")
    (tmp_path / "a.txt").write_bytes(data[:301] + b"\xff\xfe" + data[301:])
    result = load_text_folder(tmp_path)
    [doc] = result.documents
    assert (doc.metadata["encoding"], doc.metadata["replaced_bytes"]) == ("utf-8", 2)
    assert result.stats["invalid_utf8_bytes_replaced"] == 2
    assert result.warnings == [f"{tmp_path / 'a.txt'}: 2 invalid UTF-8 bytes replaced by U+FFFD"]


def test_files_skipped_by_the_patterns_are_counted(tmp_path: Path) -> None:
    (tmp_path / "kept.txt").write_text("kept")
    (tmp_path / "SHOUT.TXT").write_text("other case")
    (tmp_path / "Notes.Md").write_text("other case")
    (tmp_path / "data.csv").write_text("a,b")  # not text the patterns ask for: not counted
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    (tmp_path / "sub" / "x.txt").write_text("in a subfolder")
    (tmp_path / "sub" / "deeper" / "y.md").write_text("deeper")
    result = load_text_folder(tmp_path)
    assert [doc.doc_id for doc in result.documents] == ["kept"]
    assert (result.stats["files_skipped_other_case"], result.stats["files_skipped_in_subfolders"]) == (2, 2)
    assert any("SHOUT.TXT" in w and "Notes.Md" in w for w in result.warnings)
    assert any("sub/x.txt" in w for w in result.warnings)


def test_symlink_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    folder, outside = tmp_path / "corpus", tmp_path / "secret.txt"
    folder.mkdir()
    outside.write_text("not part of the corpus")
    (folder / "inner.txt").write_text("inside")
    (folder / "alias.txt").symlink_to(folder / "inner.txt")  # a link inside the folder is fine
    os.symlink(outside, folder / "leak.txt")
    with pytest.raises(SourceError, match=r"leak.txt: symlink to .*secret.txt, outside the source folder"):
        load_text_folder(folder)
    (folder / "leak.txt").unlink()
    assert sorted(doc.doc_id for doc in load_text_folder(folder).documents) == ["alias", "inner"]


def test_every_real_sotu_file_decodes_right() -> None:
    folder = SHARED_DATA / "sotu"
    if not folder.is_dir():
        pytest.skip(f"real corpus not available: {folder} is missing (see shared/data/MANIFEST.md)")
    for path in sorted(folder.glob("*.txt")):
        data = path.read_bytes()
        decoded = decode_bytes(data)
        try:
            data.decode("utf-8")
            expected = "utf-8"
        except UnicodeDecodeError:
            expected = "cp1252"  # every non-UTF-8 file of this corpus is Windows-1252 (’ — – … as 0x92 0x97 0x96 0x85)
        assert (decoded.encoding, decoded.replaced) == (expected, 0), path.name
        assert not any("\x80" <= ch <= "\x9f" for ch in decoded.text), f"{path.name}: C1 control characters"
        assert "\ufffd" not in decoded.text and "\r" not in decoded.text, path.name
        if b"\x92" in data:
            assert "’" in decoded.text, path.name


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_symlink_to_a_device_is_refused_as_leading_out_of_the_folder(tmp_path: Path, device: str) -> None:
    (tmp_path / "speech.txt").write_text("A speech.")
    os.symlink(device, tmp_path / "endless.txt")
    pattern = rf"endless.txt: symlink to {device} \(a character device\), outside the source folder"
    with pytest.raises(SourceError, match=pattern):
        load_text_folder(tmp_path)


def test_fifo_socket_dangling_link_and_loop_are_quarantined_never_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "corpus"
    folder.mkdir()
    monkeypatch.chdir(folder)  # the socket is bound by a relative name: a socket's path is limited to ~100 bytes
    (folder / "speech.txt").write_text("A speech.")
    os.mkfifo(folder / "pipe.txt")  # opening it for reading would block until a writer comes
    os.symlink(folder / "pipe.txt", folder / "to-pipe.md")  # a link inside the folder is judged by its target
    os.symlink(folder / "gone.txt", folder / "dangling.txt")
    os.symlink("loop.txt", folder / "loop.txt")  # pathlib's resolve() raises RuntimeError on it
    with socket.socket(socket.AF_UNIX) as server:
        server.bind("sock.txt")
        result = load_text_folder(folder)
    assert [doc.doc_id for doc in result.documents] == ["speech"]
    assert [(r.reason, r.object_id, r.source, r.row, r.detail) for r in result.quarantine] == [
        (QuarantineReason.NOT_A_REGULAR_FILE, name, str(folder / name), "file", f"{kind}, not a regular file: not read")
        for name, kind in [
            ("dangling.txt", "a dangling symlink (its target does not exist)"),
            ("loop.txt", "a symlink loop"),
            ("pipe.txt", "a FIFO (named pipe)"),
            ("sock.txt", "a socket"),
            ("to-pipe.md", "a FIFO (named pipe)"),
        ]
    ]
    assert "files_skipped_other_case" not in result.stats and result.warnings == []
