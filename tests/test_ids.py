import pytest

from conteb.ids import chunk_id, doc_id_from, is_valid_doc_id, parse_chunk_id, slugify, split_chunk_id


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Super_Bowl_50", "super-bowl-50"),
        ("Rhône–Saône", "rhone-saone"),
        ("  Hello,  World!! ", "hello-world"),
        ("1934-Roosvelt", "1934-roosvelt"),
    ],
)
def test_slugify(name: str, expected: str) -> None:
    assert slugify(name) == expected


def test_doc_id_has_no_underscore_and_is_stable() -> None:
    for name in ["Super_Bowl_50", "a_b_c", "École normale", "??", "中文标题"]:
        doc_id = doc_id_from(name)
        assert "_" not in doc_id
        assert is_valid_doc_id(doc_id)
        assert doc_id == doc_id_from(name)  # deterministic
    assert doc_id_from("??") != doc_id_from("!!")  # symbol-only names still differ


def test_chunk_id_round_trip() -> None:
    assert chunk_id("super-bowl-50", 3) == "super-bowl-50_3"
    assert parse_chunk_id("super-bowl-50_3") == ("super-bowl-50", 3)
    for bad in ["a_b_1", "doc", "doc_01", "Doc_1", "doc_-1"]:
        with pytest.raises(ValueError, match="malformed chunk id"):
            parse_chunk_id(bad)


def test_public_chunk_ids_split_at_the_last_underscore() -> None:
    assert split_chunk_id("super-bowl-50_3") == ("super-bowl-50", 3)
    assert split_chunk_id("Doc_Title_12") == ("Doc_Title", 12)  # not our slug, still a public ConTEB id
    assert split_chunk_id("doc_01") == ("doc", 1)
    for bad in ["doc", "doc_", "_", "doc_x", "doc_3\n", "doc_-1", "doc_²"]:
        with pytest.raises(ValueError, match="malformed chunk id"):
            split_chunk_id(bad)
