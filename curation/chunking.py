"""Stage 1: recursive character chunking with exact character spans.

The splitter is LangChain's ``RecursiveCharacterTextSplitter`` (separators ``\\n\\n``, ``\\n``,
`` ``, ``""``; length in characters), as in the ConTEB paper. It returns chunk strings with
surrounding whitespace stripped; we recover each chunk's span by searching forward from where
the previous chunk could have ended, so ``text[char_start:char_end] == chunk`` always holds.
Chunk ids are ``{doc_id}_{chunk_index}``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from langchain_text_splitters import RecursiveCharacterTextSplitter

from conteb.config import ChunkingConfig
from conteb.ids import chunk_id
from conteb.names import Stage
from conteb.schemas import CHUNKS
from conteb.text import is_blank
from curation.quarantine import QuarantineReason, QuarantineRecord

STAGE = Stage.CHUNKING


@dataclass(frozen=True)
class ChunkSpan:
    chunk_index: int
    char_start: int
    char_end: int
    text: str


@dataclass
class ChunkingResult:
    chunks: pa.Table  # schema CHUNKS
    quarantine: list[QuarantineRecord]
    stats: dict[str, int]


def make_splitter(config: ChunkingConfig) -> RecursiveCharacterTextSplitter:
    """The splitter of the paper, sized by ``config`` (characters)."""
    return RecursiveCharacterTextSplitter(chunk_size=config.chunk_size, chunk_overlap=config.chunk_overlap)


def locate_chunks(text: str, pieces: list[str], chunk_overlap: int) -> list[ChunkSpan]:
    """Character spans of the splitter's ``pieces`` in ``text``, in order.

    Without overlap a chunk starts at or after the previous chunk's end; with overlap it starts
    after the previous chunk's start and no earlier than ``previous end - chunk_overlap``, or at the previous
    chunk's start when it is longer than the previous chunk (the splitter's merge can emit a piece, then the same
    piece extended: ``'aaaa'`` then ``'aaaa aaaa'`` of ``'  aaaa aaaa'`` at size 10, overlap 5).
    """
    spans: list[ChunkSpan] = []
    previous_start, previous_end = -1, 0
    for index, piece in enumerate(pieces):
        search_from = max(previous_start + 1, previous_end - chunk_overlap)
        start = text.find(piece, search_from)
        extends_previous = chunk_overlap > 0 and len(piece) > previous_end - previous_start >= 0
        if start < 0 and extends_previous and text.startswith(piece, previous_start):
            start = previous_start
        if start < 0:  # the splitter only returns substrings; this would be a splitter change
            raise RuntimeError(f"chunk {index} not found in its document after offset {search_from}")
        spans.append(ChunkSpan(index, start, start + len(piece), piece))
        previous_start, previous_end = start, start + len(piece)
    return spans


def chunk_text(text: str, splitter: RecursiveCharacterTextSplitter, chunk_overlap: int) -> list[ChunkSpan]:
    """Split ``text`` and locate each chunk; blank pieces (:func:`conteb.text.is_blank`) are left out."""
    return locate_chunks(text, [piece for piece in splitter.split_text(text) if not is_blank(piece)], chunk_overlap)


def chunk_documents(documents: pa.Table, config: ChunkingConfig) -> ChunkingResult:
    """Chunk every document of a ``SOURCE_DOCUMENTS`` table.

    Blank documents (:func:`conteb.text.is_blank`) are quarantined (``empty_document``), not chunked.
    """
    splitter = make_splitter(config)
    columns: dict[str, list] = {name: [] for name in CHUNKS.names}
    quarantine: list[QuarantineRecord] = []
    stats = {"documents": 0, "chunks": 0}
    for doc_id, title, text, source in zip(
        *(documents.column(name).to_pylist() for name in ("doc_id", "title", "text", "source")), strict=True
    ):
        stats["documents"] += 1
        if is_blank(text):
            quarantine.append(
                QuarantineRecord(
                    STAGE,
                    QuarantineReason.EMPTY_DOCUMENT,
                    "document",
                    doc_id,
                    doc_id,
                    source,
                    doc_id,
                    f"document text is blank ({len(text)} characters, none visible)",
                )
            )
            continue
        for span in chunk_text(text, splitter, config.chunk_overlap):
            columns["chunk_id"].append(chunk_id(doc_id, span.chunk_index))
            columns["doc_id"].append(doc_id)
            columns["chunk_index"].append(span.chunk_index)
            columns["char_start"].append(span.char_start)
            columns["char_end"].append(span.char_end)
            columns["og_chunk"].append(span.text)
            columns["title"].append(title)
        stats["chunks"] = len(columns["chunk_id"])
    stats["documents_chunked"] = stats["documents"] - len(quarantine)
    return ChunkingResult(pa.Table.from_pydict(columns, schema=CHUNKS), quarantine, stats)
