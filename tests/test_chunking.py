from itertools import pairwise

import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conteb.config import ChunkingConfig
from conteb.schemas import SOURCE_DOCUMENTS
from curation.chunking import chunk_documents, chunk_text, locate_chunks, make_splitter
from curation.lookups import chunk_texts
from curation.quarantine import QuarantineReason


def documents(*texts: str) -> pa.Table:
    rows = [{"doc_id": f"d{i}", "title": f"T{i}", "text": t, "source": "mem"} for i, t in enumerate(texts)]
    return pa.Table.from_pylist(rows, schema=SOURCE_DOCUMENTS)


def test_spans_are_exact_and_ids_follow_the_format() -> None:
    text = ("Paragraph one is here.  " * 30 + "\n\n") * 5
    result = chunk_documents(documents(text), ChunkingConfig(chunk_size=200))
    rows = result.chunks.to_pylist()
    assert len(rows) > 5
    for index, row in enumerate(rows):
        assert row["chunk_id"] == f"d0_{index}" and row["chunk_index"] == index
        assert text[row["char_start"] : row["char_end"]] == row["og_chunk"]
        assert 0 < len(row["og_chunk"]) <= 200
        assert row["og_chunk"] == row["og_chunk"].strip()
    starts = [row["char_start"] for row in rows]
    assert starts == sorted(starts)


def test_default_is_the_papers_1000_characters() -> None:
    text = "word " * 2000
    chunks = chunk_text(text, make_splitter(ChunkingConfig()), 0)
    assert max(len(c.text) for c in chunks) <= 1000
    assert max(len(c.text) for c in chunks) > 900


def test_overlapping_chunks_are_located_after_their_predecessor() -> None:
    # Repetitive text: a naive find() from 0 would return the first occurrence every time.
    text = "abc abc abc abc abc abc abc abc abc abc abc abc"
    config = ChunkingConfig(chunk_size=11, chunk_overlap=4)
    spans = chunk_text(text, make_splitter(config), config.chunk_overlap)
    assert len(spans) > 3
    for previous, current in pairwise(spans):
        assert current.char_start > previous.char_start
    assert all(text[s.char_start : s.char_end] == s.text for s in spans)
    assert spans[-1].char_end == len(text)


def test_empty_and_whitespace_documents_are_quarantined() -> None:
    result = chunk_documents(documents("real text", "", " \n\t "), ChunkingConfig())
    assert result.chunks.column("doc_id").to_pylist() == ["d0"]
    assert [(r.object_id, r.reason) for r in result.quarantine] == [
        ("d1", QuarantineReason.EMPTY_DOCUMENT),
        ("d2", QuarantineReason.EMPTY_DOCUMENT),
    ]
    assert result.stats == {"documents": 3, "chunks": 1, "documents_chunked": 1}


def test_a_piece_not_in_the_text_is_reported() -> None:
    with pytest.raises(RuntimeError, match="chunk 1 not found"):
        locate_chunks("abc def", ["abc", "xyz"], 0)


def test_a_piece_that_extends_the_previous_one_from_its_start_is_located() -> None:
    """The splitter's merge emitted 'aaaa' then 'aaaa aaaa', both from offset 2 (found by the property below)."""
    spans = chunk_text("  aaaa aaaa", make_splitter(ChunkingConfig(chunk_size=10, chunk_overlap=5)), 5)
    assert all("  aaaa aaaa"[s.char_start : s.char_end] == s.text for s in spans)
    assert locate_chunks("  aaaa aaaa", ["aaaa", "aaaa aaaa"], 5)[1].char_start == 2
    with pytest.raises(RuntimeError, match="chunk 1 not found"):  # the same piece again is no extension
        locate_chunks("  aaaa", ["aaaa", "aaaa"], 5)


@settings(max_examples=60, deadline=None)
@example(text="  aaaa aaaa", size=10, overlap_ratio=0.5)
@given(
    text=st.text(alphabet=st.sampled_from("ab \n\t.é"), min_size=0, max_size=600),
    size=st.integers(min_value=5, max_value=120),
    overlap_ratio=st.sampled_from([0.0, 0.2, 0.5]),
)
def test_every_chunk_is_its_span(text: str, size: int, overlap_ratio: float) -> None:
    overlap = int(size * overlap_ratio)
    spans = chunk_text(text, make_splitter(ChunkingConfig(chunk_size=size, chunk_overlap=overlap)), overlap)
    for span in spans:
        assert text[span.char_start : span.char_end] == span.text
        assert 0 < len(span.text) <= size
    covered = "".join(text[s.char_start : s.char_end] for s in spans) if overlap == 0 else None
    if covered is not None:  # without overlap nothing but whitespace is lost
        assert "".join(covered.split()) == "".join(text.split())


def test_chunk_texts_maps_each_chunk_id_to_its_original_text() -> None:
    chunks = chunk_documents(documents("alpha beta gamma " * 100, "delta"), ChunkingConfig(chunk_size=200)).chunks
    texts = chunk_texts(chunks)
    assert list(texts) == chunks.column("chunk_id").to_pylist()
    assert list(texts.values()) == chunks.column("og_chunk").to_pylist()
    assert texts["d1_0"] == "delta"
