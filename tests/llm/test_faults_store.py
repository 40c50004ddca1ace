"""A 0-byte or damaged answer store is refused, never silently started fresh (issue 11)."""

from pathlib import Path

import pytest

from conteb.sqlite_kinds import StoreFileError
from llm.cache import AnswerCache
from tests.llm.conftest import make_request


@pytest.mark.parametrize(
    "content, problem",
    [
        (b"", "is empty (0 bytes)"),
        (b"these are not the answers you paid for\n" * 20, "is not a SQLite database"),
    ],
)
def test_an_unusable_answer_store_is_refused_and_left_alone(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "llm" / "answers.sqlite"
    path.parent.mkdir()
    path.write_bytes(content)
    with pytest.raises(StoreFileError) as info:
        AnswerCache(path)
    assert str(path) in str(info.value) and problem in str(info.value) and "paid LLM answers" in str(info.value)
    assert path.read_bytes() == content  # nothing was created over it


def test_a_store_with_a_damaged_body_is_refused(tmp_path: Path, make_client) -> None:
    path = tmp_path / "answers.sqlite"
    client = make_client(cache_path=path)
    client.run([make_request(n) for n in range(50)])
    client.cache.close()
    data = bytearray(path.read_bytes())
    data[100 : len(data)] = b"\xff" * (len(data) - 100)  # keep the header, wreck every page
    path.write_bytes(bytes(data))
    with pytest.raises(StoreFileError, match=r"is damaged|is not a SQLite database"):
        AnswerCache(path)


def test_a_missing_store_is_created_with_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "new" / "answers.sqlite"
    AnswerCache(path).close()
    assert path.is_file() and path.read_bytes().startswith(b"SQLite format 3\x00")
