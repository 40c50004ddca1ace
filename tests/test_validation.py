import pyarrow as pa

from conteb.schemas import CONTEB_DOCUMENTS, PAIRED_QUERIES, SOURCE_DOCUMENTS
from curation import validation

TEXT = "Alpha beta. Gamma delta."


def docs(rows: list[tuple]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {"chunk_id": c, "chunk": t, "og_chunk": t, "doc_id": d, "chunk_index": i, "char_start": s, "char_end": e}
            for c, d, i, s, e, t in rows
        ],
        schema=CONTEB_DOCUMENTS,
    )


GOOD = docs([("a_0", "a", 0, 0, 11, "Alpha beta."), ("a_1", "a", 1, 12, 24, "Gamma delta.")])
SOURCES = pa.Table.from_pylist([{"doc_id": "a", "text": TEXT, "source": "s"}], schema=SOURCE_DOCUMENTS)


def queries(rows: list[tuple]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "query_id": q,
                "query": "?",
                "chunk_id": c,
                "chunk_ids": cs,
                "doc_id": "a",
                "pairing": "span",
                "source": "s",
            }
            for q, c, cs in rows
        ],
        schema=PAIRED_QUERIES,
    )


def test_good_task_passes_every_check() -> None:
    assert validation.chunk_ids_unique_and_well_formed(GOOD).passed
    assert validation.query_chunk_ids_exist(queries([("q", "a_1", ["a_0", "a_1"])]), GOOD).passed
    assert validation.chunks_within_size(GOOD, 12).passed
    assert validation.chunks_match_source(GOOD, SOURCES).passed
    assert validation.no_empty_chunks(GOOD).passed


def test_each_check_catches_its_failure() -> None:
    bad_ids = docs(
        [("a_0", "a", 0, 0, 11, "Alpha beta."), ("a_0", "a", 0, 0, 11, "Alpha beta."), ("b_1", "a", 1, 12, 24, "x")]
    )
    outcome = validation.chunk_ids_unique_and_well_formed(bad_ids)
    assert not outcome.passed and outcome.failures == 2
    assert any("duplicate" in e for e in outcome.examples)

    outcome = validation.query_chunk_ids_exist(queries([("q", "a_9", ["a_9"]), ("r", "a_0", ["a_1"])]), GOOD)
    assert outcome.failures == 2 and "unknown chunk(s) ['a_9']" in outcome.examples[0]

    assert validation.chunks_within_size(GOOD, 11).failures == 1

    shifted = docs([("a_0", "a", 0, 1, 12, "Alpha beta.")])
    assert "differs from text[1:12]" in validation.chunks_match_source(shifted, SOURCES).examples[0]

    assert validation.no_empty_chunks(docs([("a_0", "a", 0, 0, 0, " ")])).failures == 1
