"""A system's chunk encoding apart from its queries: what one shard of ``[task]/evaluation`` computes, and how the
shards come back together.

* :class:`ChunkEncoding`: for the chunks ``chunk_ids`` (in any order), either single vectors (``vectors``: float32
  ``[C, D]``, L2-normalised; ``dense`` and ``contextual`` systems) or per-chunk token vectors (``tokens``: one float16
  ``[n_c, D]`` array per chunk; ``late_interaction``), with the seconds the encoder spent and its counters
  (:data:`COUNTERS`: windows and tokens forwarded, anchor tokens, truncated chunks).
* :func:`concat_encodings` joins shards: rows concatenated in shard order, seconds and counters summed (the seconds are
  compute time, not wall time, when shards ran side by side). :meth:`ChunkEncoding.aligned` puts the rows in a
  corpus's chunk order and refuses a set of chunks that differs from the corpus's.
* :class:`EncodingProblem`: why a shard has no encoding of a system (``not_run``: a requirement found missing while
  loading, e.g. a hub id without a local copy; ``failed``: the encoder raised). The evaluation records the system as
  not run / failed with that reason, as it does when it encodes the corpus itself.
* :class:`EncodingKey`: which encoding: a system on the task's corpus (``chunk_size`` None) or on the corpus
  re-chunked at ``chunk_size`` characters (a point of the chunk-size study).

No model, no torch, no Dagster: the Dagster graph passes these between its steps. :class:`EncodingJob` (a key and
its system) and :class:`EncodingShard` (a shard's documents) are what ``evaluation/sharding.py`` plans.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from evaluation.config import SystemConfig
from evaluation.corpus import EvalCorpus
from evaluation.rechunk import SpanSources

COUNTERS = ("windows", "tokens_forwarded", "anchor_tokens", "truncated_chunks")
"""The encoder counters an encoding carries (``embedding.encoder.LateChunkingEncoder``): summed over shards."""


@dataclass(frozen=True)
class EncodingKey:
    """``system`` on the task's corpus (``chunk_size`` None) or on its re-chunking at ``chunk_size`` characters."""

    system: str
    chunk_size: int | None = None

    def __str__(self) -> str:
        return self.system if self.chunk_size is None else f"{self.system}@{self.chunk_size}"


@dataclass(frozen=True)
class EncodingProblem:
    """No encoding: ``not_run`` (a missing requirement) or ``failed`` (the encoder raised), with the reason."""

    status: Literal["not_run", "failed"]
    reason: str


class EncodingMismatch(ValueError):
    """An encoding does not cover exactly the chunks of the corpus it is used on."""


@dataclass
class ChunkEncoding:
    """The chunk side of a model-based system (module doc): ``vectors`` or ``tokens``, one row per chunk id."""

    chunk_ids: list[str]
    vectors: np.ndarray | None = None  # float32 [C, D]
    tokens: list[np.ndarray] | None = None  # per chunk float16 [n_c, D]
    seconds: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    documents: int = 0
    shards: int = 1

    def __post_init__(self) -> None:
        if (self.vectors is None) == (self.tokens is None):
            raise ValueError("a chunk encoding holds vectors or tokens, exactly one of them")
        rows = len(self.vectors) if self.vectors is not None else len(self.tokens or [])
        if rows != len(self.chunk_ids):
            raise ValueError(f"{rows} encoded rows for {len(self.chunk_ids)} chunk ids")

    @property
    def n_chunks(self) -> int:
        return len(self.chunk_ids)

    def aligned(self, chunk_ids: Sequence[str]) -> ChunkEncoding:
        """This encoding with its rows in the order of ``chunk_ids`` (itself when already in that order).

        Raises :class:`EncodingMismatch` naming how many chunks are missing or extra (and the first of each) when the
        encoded chunks are not exactly ``chunk_ids``.
        """
        if list(chunk_ids) == self.chunk_ids:
            return self
        row_of = {cid: row for row, cid in enumerate(self.chunk_ids)}
        missing = [cid for cid in chunk_ids if cid not in row_of]
        extra = sorted(set(row_of) - set(chunk_ids))
        if missing or extra or len(row_of) != len(self.chunk_ids):
            raise EncodingMismatch(
                f"the encoded chunks are not the corpus's: {len(missing)} missing"
                + (f" (first {missing[0]!r})" if missing else "")
                + f", {len(extra)} extra"
                + (f" (first {extra[0]!r})" if extra else "")
                + (f", {len(self.chunk_ids) - len(row_of)} encoded twice" if len(row_of) != len(self.chunk_ids) else "")
            )
        order = np.fromiter((row_of[cid] for cid in chunk_ids), dtype=np.int64, count=len(chunk_ids))
        vectors = self.vectors[order] if self.vectors is not None else None
        tokens = [self.tokens[int(row)] for row in order] if self.tokens is not None else None
        return ChunkEncoding(
            list(chunk_ids), vectors, tokens, self.seconds, dict(self.counts), self.documents, self.shards
        )


EncodingOutcome = ChunkEncoding | EncodingProblem


@dataclass(frozen=True)
class EncodingJob:
    """One encoding the evaluation will use: ``system`` on the corpus (or at ``key.chunk_size``)."""

    key: EncodingKey
    system: SystemConfig


@dataclass(frozen=True)
class EncodingShard:
    """Shard ``index``: its documents, their chunks (no queries) and their rows of the span sources (or None)."""

    index: int
    doc_ids: tuple[str, ...]
    corpus: EvalCorpus
    sources: SpanSources | None = None


def given_or_encoded(
    encoded: ChunkEncoding | None, encode: Callable[[], ChunkEncoding], chunk_ids: Sequence[str], mode: str, device: str
) -> tuple[ChunkEncoding, str]:
    """``encoded`` (the shards' work) aligned to ``chunk_ids``, else ``encode()`` here; with the log's ``(mode,
    where)``: the device, or the shard count (their encode time is summed, not wall time)."""
    if encoded is None:
        return encode(), f"({mode}, {device})"
    return encoded.aligned(chunk_ids), f"({mode}, {encoded.shards} shard(s), encode time summed)"


def concat_encodings(parts: Sequence[ChunkEncoding]) -> ChunkEncoding:
    """The shards ``parts`` as one encoding (module doc). Raises ``ValueError`` for no parts or mixed kinds."""
    if not parts:
        raise ValueError("no encodings to concatenate")
    if len(parts) == 1:
        return parts[0]
    single = [part.vectors is not None for part in parts]
    if any(single) and not all(single):
        raise ValueError("cannot concatenate single-vector and token encodings")
    chunk_ids = [cid for part in parts for cid in part.chunk_ids]
    vectors = tokens = None
    if all(single):
        vectors = np.concatenate([part.vectors for part in parts if part.vectors is not None])
    else:
        tokens = [array for part in parts for array in part.tokens or []]
    counts = {name: sum(part.counts.get(name, 0) for part in parts) for name in COUNTERS}
    return ChunkEncoding(
        chunk_ids,
        vectors,
        tokens,
        seconds=sum(part.seconds for part in parts),
        counts=counts,
        documents=sum(part.documents for part in parts),
        shards=sum(part.shards for part in parts),
    )


def merge_outcomes(shards: Sequence[Mapping[EncodingKey, EncodingOutcome]]) -> dict[EncodingKey, EncodingOutcome]:
    """Per key, the shards' encodings joined (:func:`concat_encodings`, shard order), or the first problem a shard
    met (``failed`` before ``not_run``): one shard's failure is the system's. A key some shards lack is left out (the
    evaluation then encodes that system itself)."""
    keys = list(dict.fromkeys(key for shard in shards for key in shard))  # first shard's order
    merged: dict[EncodingKey, EncodingOutcome] = {}
    for key in keys:
        if not all(key in shard for shard in shards):
            continue
        outcomes = [shard[key] for shard in shards]
        problems = [outcome for outcome in outcomes if isinstance(outcome, EncodingProblem)]
        if problems:
            merged[key] = next((p for p in problems if p.status == "failed"), problems[0])
        else:
            merged[key] = concat_encodings([o for o in outcomes if isinstance(o, ChunkEncoding)])
    return merged
