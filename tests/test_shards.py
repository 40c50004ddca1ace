"""Document shards (curation/shards.py): the cut, the slices, and the merge back into the driving order."""

import pyarrow as pa
import pytest

from conteb.schemas import CHUNKS
from curation.shards import (
    concat_in_order,
    items_in_order,
    plan_shards,
    positions,
    restore_order,
    rows_in,
    shard_key,
    sum_counts,
)
from tests.builders import chunks_from_texts


def test_documents_are_cut_in_order_of_first_appearance() -> None:
    doc_ids = ["a", "a", "b", "c", "b", "d", "e", "e"]
    assert plan_shards(doc_ids, 2) == [("a", "b"), ("c", "d"), ("e",)]
    assert plan_shards(doc_ids, 5) == [("a", "b", "c", "d", "e")]
    assert plan_shards(doc_ids, 1000) == [("a", "b", "c", "d", "e")]  # larger than the corpus: one shard
    assert plan_shards(doc_ids, 1) == [("a",), ("b",), ("c",), ("d",), ("e",)]
    assert plan_shards(["z", "y", "x"], 2) == [("z", "y"), ("x",)]  # the table's order, not sorted


def test_no_documents_give_one_empty_shard_and_a_bad_size_is_refused() -> None:
    assert plan_shards([], 100) == [()]
    with pytest.raises(ValueError, match="at least 1 document, got 0"):
        plan_shards(["a"], 0)


def test_shard_keys_are_stable_mapping_keys() -> None:
    assert [shard_key(i) for i in (0, 1, 42, 9999, 10000)] == ["s0000", "s0001", "s0042", "s9999", "s10000"]
    with pytest.raises(ValueError):
        shard_key(-1)


def chunks() -> pa.Table:
    """Chunks of three documents, the second's interleaved with the third's (``b_0, c_0, b_1``)."""
    a = chunks_from_texts("a", ["a0", "a1"]).to_pylist()
    b = chunks_from_texts("b", ["b0", "b1"]).to_pylist()
    c = chunks_from_texts("c", ["c0"]).to_pylist()
    return pa.Table.from_pylist([*a, b[0], c[0], b[1]], schema=CHUNKS)


def test_a_slice_keeps_the_rows_of_its_documents_in_table_order() -> None:
    table = chunks()
    assert rows_in(table, "doc_id", ("b", "c")).column("chunk_id").to_pylist() == ["b_0", "c_0", "b_1"]
    assert rows_in(table, "doc_id", ()).num_rows == 0 and rows_in(table, "doc_id", ()).schema == CHUNKS
    assert rows_in(table, "chunk_id", {"a_1"}).column("chunk_id").to_pylist() == ["a_1"]
    assert rows_in(CHUNKS.empty_table(), "doc_id", ("a",)).num_rows == 0
    with pytest.raises(KeyError, match="no column 'document'"):
        rows_in(table, "document", ("a",))


def test_shards_concatenated_come_back_in_the_driving_order() -> None:
    table = chunks()
    order = positions(table.column("chunk_id").to_pylist())
    shards = [rows_in(table, "doc_id", doc_ids) for doc_ids in plan_shards(table.column("doc_id").to_pylist(), 1)]
    assert [s.column("chunk_id").to_pylist() for s in shards] == [["a_0", "a_1"], ["b_0", "b_1"], ["c_0"]]
    merged = concat_in_order(shards, CHUNKS, "chunk_id", order)
    assert merged.equals(table) and all(column.num_chunks == 1 for column in merged.columns)
    assert concat_in_order([], CHUNKS, "chunk_id", order).equals(CHUNKS.empty_table())
    assert concat_in_order([CHUNKS.empty_table()], CHUNKS, "chunk_id", {}).num_rows == 0


def test_rows_outside_the_driving_order_follow_in_their_order() -> None:
    table = chunks()
    order = positions(["c_0", "a_1", "a_0"])
    assert restore_order(table, "chunk_id", order).column("chunk_id").to_pylist() == [
        "c_0", "a_1", "a_0", "b_0", "b_1"
    ]  # fmt: skip
    assert positions(["x", "y", "x"]) == {"x": 0, "y": 1}


def test_records_are_ordered_like_tables_and_counts_add_up() -> None:
    records = [{"object_id": oid} for oid in ("q3", "q1", "zz", "q2")]
    ordered = items_in_order(records, lambda r: r["object_id"], positions(["q1", "q2", "q3"]))
    assert [r["object_id"] for r in ordered] == ["q1", "q2", "q3", "zz"]
    assert items_in_order([], lambda r: r, {}) == []
    assert sum_counts([{"queries": 3, "paired": 2}, {"queries": 4, "paired": 4, "multi_chunk": 1}, {}]) == {
        "queries": 7, "paired": 6, "multi_chunk": 1
    }  # fmt: skip
    assert list(sum_counts([{"b": 1}, {"a": 1, "b": 1}])) == ["b", "a"]
    assert sum_counts([]) == {}
