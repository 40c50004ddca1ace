"""Document shards of a stage: which documents go together, a table's slice to a shard, and the merge back.

A sharded stage (``assets/sharded.py``) answers its LLM requests shard by shard. The rules, shared by every stage:

* **Shards.** :func:`plan_shards`: the distinct doc ids of the stage's driving table (its chunks, or its queries)
  in order of first appearance, cut into consecutive shards of ``size`` documents; the last one may be smaller.
  There is always at least one shard: a table without documents gives one empty shard, so the stage still runs its
  (empty) step and its outputs are written. Shard ``i`` is named :func:`shard_key` ``(i)``: ``s0000``, ``s0001``…
* **Slices.** :func:`rows_in`: the rows of a table whose key column is among a shard's values, in table order.
  Every LLM request carries one document (a query with its document's chunks, a chunk with its document window,
  a document's opening, a query with its gold chunk), so a shard's slices hold everything its requests need.
* **Merge.** :func:`concat_in_order` concatenates the shards' tables and stably sorts the rows by the position
  of their key in the driving table (:func:`positions`: first position of each key), so the merged table is the
  one an unsharded run builds, row for row, even when the driving table does not keep a document's rows
  together (e.g. the published queries of ``pairing: both``: span rows, then LLM rows). Rows whose key is not in
  the driving table keep their shard order after the others. (With a key repeated in the driving table, its
  rows sort at its first position, in shard order.) :func:`sum_counts` adds the shards' statistics.

Pure logic on pyarrow tables; no Dagster.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc

T = TypeVar("T")


def shard_key(index: int) -> str:
    """``s0000`` for shard 0, ``s0001``… (four digits at least; a valid Dagster mapping key)."""
    if index < 0:
        raise ValueError(f"a shard index is not negative, got {index}")
    return f"s{index:04d}"


def plan_shards(doc_ids: Iterable[str], size: int) -> list[tuple[str, ...]]:
    """The distinct ``doc_ids`` in order of first appearance, cut into consecutive shards of ``size``.

    At least one shard: ``[()]`` when there are no documents. ``size`` larger than the corpus gives one shard.
    Raises ``ValueError`` when ``size < 1``.
    """
    if size < 1:
        raise ValueError(f"shard size must be at least 1 document, got {size}")
    ordered = list(dict.fromkeys(doc_ids))
    return [tuple(ordered[start : start + size]) for start in range(0, len(ordered), size)] or [()]


def rows_in(table: pa.Table, column: str, values: Collection[str]) -> pa.Table:
    """The rows of ``table`` whose ``column`` is in ``values``, in table order (nulls never match).

    Raises ``KeyError`` naming the column and the table's columns when ``column`` is missing.
    """
    if column not in table.column_names:
        raise KeyError(f"no column {column!r} to slice a shard by; columns: {table.column_names}")
    value_set = pa.array(list(values), type=table.schema.field(column).type)
    return table.filter(pc.is_in(table.column(column), value_set=value_set))


def positions(keys: Iterable[str]) -> dict[str, int]:
    """``{key: position of its first occurrence}`` in ``keys``."""
    first: dict[str, int] = {}
    for position, key in enumerate(keys):
        first.setdefault(key, position)
    return first


def order_indices(keys: Sequence[str], order: Mapping[str, int]) -> list[int]:
    """Row indices of ``keys`` stably sorted by ``order[key]``; keys absent from ``order`` go last, in their order."""
    missing = len(order)
    return sorted(range(len(keys)), key=lambda i: (order.get(keys[i], missing), i))


def restore_order(table: pa.Table, column: str, order: Mapping[str, int]) -> pa.Table:
    """``table``'s rows stably sorted by the position (``order``) of their ``column`` value (see the module doc)."""
    indices = order_indices(table.column(column).to_pylist(), order)
    if indices == list(range(table.num_rows)):
        return table
    return table.take(pa.array(indices, type=pa.int64()))


def concat_in_order(tables: Sequence[pa.Table], schema: pa.Schema, column: str, order: Mapping[str, int]) -> pa.Table:
    """The shards' ``tables`` (each of ``schema``) as one table in driving order (see the module doc).

    One contiguous chunk per column, as an unsharded stage builds it (so the Parquet file is the same); an empty
    table of ``schema`` when there is nothing to concatenate.
    """
    if not tables:
        return schema.empty_table()
    merged = pa.concat_tables([table.cast(schema) for table in tables]).combine_chunks()
    return restore_order(merged, column, order).combine_chunks()


def items_in_order(items: Iterable[T], key: Callable[[T], str], order: Mapping[str, int]) -> list[T]:
    """``items`` (e.g. quarantine records, concatenated shard by shard) stably sorted by ``order[key(item)]``."""
    listed = list(items)
    return [listed[i] for i in order_indices([key(item) for item in listed], order)]


def sum_counts(counts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """The sum of each name over ``counts``; names in order of first appearance."""
    total: dict[str, int] = {}
    for one in counts:
        for name, value in one.items():
            total[name] = total.get(name, 0) + int(value)
    return total
