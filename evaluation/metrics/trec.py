"""TREC run and qrels files (the formats ``trec_eval`` and ``pytrec_eval`` read).

Run lines: ``qid Q0 chunk_id rank score system``; qrels lines: ``qid 0 chunk_id relevance``. Fields are
whitespace-separated, so an id containing whitespace cannot be written (:class:`ValueError` naming it).

Scores are written so that they read back *exactly* (``%.9g`` for float32 and narrower arrays, ``%.17g``
for float64): ties stay ties and distinct scores stay distinct. This matters because ``trec_eval``
ignores the rank column and re-sorts each query by score (ties broken by document id), so a lossy
format such as ``%.6f`` could merge nearly equal scores into ties and change the evaluated order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from conteb.storage import atomic_path

_WHITESPACE = re.compile(r"\s")


def check_trec_id(kind: str, value: str) -> str:
    """``value`` if it can be a TREC field: a non-empty string without whitespace; else ValueError."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{kind} {value!r} is empty or not a string; TREC ids must be non-empty strings")
    if _WHITESPACE.search(value):
        raise ValueError(f"{kind} {value!r} contains whitespace; TREC files are whitespace-separated")
    return value


def _score_format(scores: np.ndarray) -> str:
    """The shortest printf format that reads back every score of this dtype exactly."""
    if np.issubdtype(scores.dtype, np.floating) and scores.dtype.itemsize <= 4:
        return "%.9g"
    return "%.17g"


def write_run(
    path: Path,
    query_ids: Sequence[str],
    chunk_ids: Sequence[str],
    top_index: np.ndarray,
    top_score: np.ndarray,
    system: str,
) -> Path:
    """Write a TREC run atomically: ``qid Q0 chunk_id rank score system``, rank 1-based in column order.

    ``top_index`` [Q, k] holds rows of ``chunk_ids`` (negative entries = padding, skipped);
    ``top_score`` [Q, k] their scores (NaN rejected). Returns ``path``.
    """
    top_index = np.asarray(top_index)
    top_score = np.asarray(top_score)
    if top_index.ndim != 2 or top_index.shape != top_score.shape:
        raise ValueError(f"top_index {top_index.shape} and top_score {top_score.shape} must both be [Q, k]")
    if top_index.shape[0] != len(query_ids):
        raise ValueError(f"{len(query_ids)} query ids for {top_index.shape[0]} rows of results")
    if not np.issubdtype(top_index.dtype, np.integer):
        raise ValueError(f"top_index must hold integers, got {top_index.dtype}")
    check_trec_id("system", system)
    valid = top_index >= 0
    if np.any(top_index >= len(chunk_ids)):
        raise ValueError(f"top_index refers past the {len(chunk_ids)} chunk ids")
    if np.any(np.isnan(top_score[valid])):
        raise ValueError("top_score holds NaN for a ranked chunk")
    seen: set[str] = set()
    for qid in query_ids:
        check_trec_id("query id", qid)
        if qid in seen:
            raise ValueError(f"query id {qid!r} appears twice in the run")
        seen.add(qid)
    if top_index.shape[1] > 1:
        ordered = np.sort(top_index, axis=1)
        repeated = (ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)
        if repeated.any():
            row = int(np.argwhere(repeated)[0, 0])
            raise ValueError(f"query {query_ids[row]!r} ranks the same chunk twice")
    for row in np.unique(top_index[valid]):
        check_trec_id("chunk id", chunk_ids[int(row)])

    score_format = _score_format(top_score)
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8", newline="\n") as out:
        for qid, rows, scores in zip(query_ids, top_index.tolist(), top_score.tolist(), strict=True):
            rank = 0
            lines = []
            for row, score in zip(rows, scores, strict=True):
                if row < 0:
                    continue
                rank += 1
                lines.append(f"{qid} Q0 {chunk_ids[row]} {rank} {score_format % score} {system}\n")
            out.writelines(lines)
    return path


def write_qrels(path: Path, query_ids: Sequence[str], gold_chunk_ids: Sequence[str]) -> Path:
    """Write TREC qrels atomically: one ``qid 0 chunk_id 1`` line per (query, gold chunk) pair."""
    if len(query_ids) != len(gold_chunk_ids):
        raise ValueError(f"{len(query_ids)} query ids for {len(gold_chunk_ids)} gold chunk ids")
    lines = [
        f"{check_trec_id('query id', qid)} 0 {check_trec_id('chunk id', chunk)} 1\n"
        for qid, chunk in zip(query_ids, gold_chunk_ids, strict=True)
    ]
    with atomic_path(path) as tmp:
        tmp.write_text("".join(lines), encoding="utf-8", newline="\n")
    return path


def _records(path: Path, width: int, layout: str) -> Iterable[tuple[int, list[str]]]:
    with Path(path).open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != width:
                raise ValueError(
                    f"{path}:{number}: expected {width} fields ({layout}), got {len(fields)}: {line.strip()!r} "
                    "(ids must not contain whitespace)"
                )
            yield number, fields


def read_run(path: Path) -> dict[str, dict[str, float]]:
    """A TREC run as ``{qid: {chunk_id: score}}`` (the dict ``pytrec_eval`` evaluates)."""
    run: dict[str, dict[str, float]] = {}
    for number, (qid, _q0, chunk, _rank, score, _system) in _records(path, 6, "qid Q0 chunk_id rank score system"):
        ranked = run.setdefault(qid, {})
        if chunk in ranked:
            raise ValueError(f"{path}:{number}: chunk {chunk!r} ranked twice for query {qid!r}")
        try:
            ranked[chunk] = float(score)
        except ValueError:
            raise ValueError(f"{path}:{number}: score {score!r} is not a number") from None
    return run


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """TREC qrels as ``{qid: {chunk_id: relevance}}`` (the dict ``pytrec_eval`` takes)."""
    qrels: dict[str, dict[str, int]] = {}
    for number, (qid, _iteration, chunk, relevance) in _records(path, 4, "qid 0 chunk_id relevance"):
        judged = qrels.setdefault(qid, {})
        if chunk in judged:
            raise ValueError(f"{path}:{number}: chunk {chunk!r} judged twice for query {qid!r}")
        try:
            judged[chunk] = int(relevance)
        except ValueError:
            raise ValueError(f"{path}:{number}: relevance {relevance!r} is not an integer") from None
    return qrels
