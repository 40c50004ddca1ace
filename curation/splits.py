"""Document-level splits of a task (``splits:`` in ``conteb.yaml``), as a pure function.

Rule: document ``d`` gets the point ``u(d) = int(sha256(f"{seed}:{d}")[:8 bytes], big-endian) / 2**64``
in [0, 1); with fractions ``f_1..f_k`` in declaration order it goes to the first split ``i`` with
``u(d) < f_1 + ... + f_i`` (the last split takes whatever rounding leaves). A document's split thus
depends only on ``(seed, doc_id)``: the same inputs give the same assignment on any machine, and
adding documents never moves an existing one. The price: the shares are only expected values, so a
small corpus may deviate from the fractions (the dataset card states the actual counts), and a
split can come out empty, which :func:`assign_task_splits` refuses (``datasets`` cannot load an
empty split).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

HASH_RULE = (
    "document → split by sha256(f'{seed}:{doc_id}'): the first 8 bytes (big-endian) / 2^64 give a point "
    "in [0, 1), compared with the cumulative fractions in declaration order"
)


class SplitError(ValueError):
    """The splits cannot be published (a split without documents); the message names task and split."""


def split_point(doc_id: str, seed: int) -> float:
    """``u(doc_id)`` in [0, 1): the document's position for the cumulative-fraction comparison."""
    digest = hashlib.sha256(f"{seed}:{doc_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def assign_splits(doc_ids: Iterable[str], fractions: Mapping[str, float], seed: int) -> dict[str, str]:
    """``{doc_id: split}`` for every distinct id of ``doc_ids`` (rule in the module docstring).

    ``fractions``: split name -> share, in declaration order (validated by ``conteb.config.SplitsConfig``:
    each in (0, 1], summing to 1).
    """
    if not fractions:
        raise ValueError("assign_splits: no split declared")
    names = list(fractions)
    bounds = []
    total = 0.0
    for name in names:
        total += fractions[name]
        bounds.append(total)
    assignment: dict[str, str] = {}
    for doc_id in doc_ids:
        if doc_id in assignment:
            continue
        point = split_point(doc_id, seed)
        assignment[doc_id] = next((n for n, bound in zip(names, bounds, strict=True) if point < bound), names[-1])
    return assignment


def split_counts(assignment: Mapping[str, str], names: Iterable[str]) -> dict[str, int]:
    """Documents per split, for every name of ``names`` (0 where none), in that order."""
    counts = dict.fromkeys(names, 0)
    for split in assignment.values():
        counts[split] = counts.get(split, 0) + 1
    return counts


def assign_task_splits(task: str, doc_ids: Iterable[str], fractions: Mapping[str, float], seed: int) -> dict[str, str]:
    """:func:`assign_splits`, refusing an assignment that leaves a declared split without documents.

    Raises :class:`SplitError` naming ``task``, the empty split(s) and the document count.
    """
    assignment = assign_splits(doc_ids, fractions, seed)
    counts = split_counts(assignment, fractions)
    empty = [name for name, n in counts.items() if n == 0]
    if empty:
        shares = ", ".join(f"{name}: {n}" for name, n in counts.items())
        raise SplitError(
            f"task '{task}': split(s) {empty} get no document of the {len(assignment)} "
            f"(documents per split: {shares}; seed {seed}); an empty split cannot be published: "
            "add documents, change the fractions or the seed"
        )
    return assignment
