from curation.pairing import DocumentChunks, check_answer, pair_by_span
from curation.quarantine import QuarantineReason
from tests.builders import chunks_of, documents, queries

TEXT = "0123456789" * 3  # 30 characters; chunks [0,10) [10,20) [20,30)


def tables(specs: list[dict], text: str = TEXT, chunk_bounds=((0, 10), (10, 20), (20, 30))):
    docs = documents([("d", "D", text), ("e", "E", "")])
    return queries(specs), docs, chunks_of("d", text, chunk_bounds)


def test_answer_inside_one_chunk() -> None:
    result = pair_by_span(*tables([{"id": "q", "answers": [("345", 13)]}]))
    [row] = result.rows
    assert (row["chunk_id"], row["chunk_ids"], row["answer_start"], row["answer_end"]) == ("d_1", ["d_1"], 13, 16)
    assert result.stats == {"queries": 1, "paired": 1}


def test_straddling_answer_goes_to_the_chunk_with_most_of_it() -> None:
    # "789012" at [7, 13): 3 characters in d_0, 3 in d_1 -> tie -> earliest; "8901234" -> d_1
    result = pair_by_span(
        *tables([{"id": "tie", "answers": [("789012", 7)]}, {"id": "most", "answers": [("8901234", 8)]}])
    )
    tie, most = result.rows
    assert (tie["chunk_id"], tie["chunk_ids"]) == ("d_0", ["d_0", "d_1"])
    assert (most["chunk_id"], most["chunk_ids"]) == ("d_1", ["d_0", "d_1"])
    assert result.stats["straddling"] == 2


def test_invalid_spans_are_quarantined_with_reasons() -> None:
    result = pair_by_span(
        *tables(
            [
                {"id": "mismatch", "answers": [("999", 0)]},
                {"id": "outside", "answers": [("0123", 28)]},
                {"id": "empty", "answers": [(" ", 3)]},
                {"id": "nodoc", "doc": "zzz", "answers": [("0", 0)]},
                {"id": "emptydoc", "doc": "e", "answers": [("0", 0)]},
            ]
        )
    )
    assert result.rows == []
    reasons = {r.object_id: (r.reason, r.object_kind, r.row) for r in result.quarantine}
    assert reasons == {
        "mismatch": (QuarantineReason.SPAN_TEXT_MISMATCH, "query", "rmismatch"),
        "outside": (QuarantineReason.SPAN_OUT_OF_BOUNDS, "query", "routside"),
        "empty": (QuarantineReason.EMPTY_ANSWER, "query", "rempty"),
        "nodoc": (QuarantineReason.UNKNOWN_DOCUMENT, "query", "rnodoc"),
        "emptydoc": (QuarantineReason.DOCUMENT_QUARANTINED, "query", "remptydoc"),
    }
    assert "document has '012' at [0, 3), answer is '999'" in result.quarantine[0].detail


def test_a_bad_extra_answer_is_quarantined_but_the_query_is_paired() -> None:
    result = pair_by_span(*tables([{"id": "q", "answers": [("xx", 0), ("567", 25)]}]))
    [row] = result.rows
    assert (row["answer"], row["chunk_id"]) == ("567", "d_2")
    [record] = result.quarantine
    assert (record.object_kind, record.object_id, record.reason) == (
        "answer",
        "q#answer0",
        QuarantineReason.SPAN_TEXT_MISMATCH,
    )


def test_answer_in_a_whitespace_gap_between_chunks() -> None:
    text = "aaaa    bbbb"
    result = pair_by_span(
        *tables([{"id": "q", "answers": [("  ", 5)]}, {"id": "r", "answers": [("a  ", 3)]}], text, ((0, 4), (8, 12)))
    )
    assert [r.reason for r in result.quarantine] == [QuarantineReason.EMPTY_ANSWER]
    [row] = result.rows
    assert row["chunk_ids"] == ["d_0"]


def test_touched_with_overlapping_chunks() -> None:
    chunks = DocumentChunks(["a", "b", "c"], [0, 8, 16], [10, 18, 26])
    assert chunks.touched(9, 10) == [(0, 1), (1, 1)]
    assert chunks.touched(0, 26) == [(0, 10), (1, 10), (2, 10)]
    assert chunks.touched(26, 27) == []


def test_check_answer_accepts_exact_span() -> None:
    assert check_answer("hello world", "world", 6) is None
