"""``text_folder``: one document per plain-text or markdown file, no queries.

The encoding is detected per file (:mod:`curation.encoding`); a non-UTF-8 file is loaded and
reported in ``SourceResult.warnings`` so the asset logs a warning naming it.
"""

from __future__ import annotations

from pathlib import Path

from curation.encoding import decode_bytes, looks_binary
from curation.quarantine import QuarantineReason, QuarantineRecord
from curation.sources.articles import assign_doc_ids
from curation.sources.model import STAGE, SourceDocument, SourceResult


def list_text_files(folder: Path, patterns: tuple[str, ...]) -> list[Path]:
    """Files of ``folder`` (not recursive) matching any of ``patterns``, sorted by name."""
    files = {path for pattern in patterns for path in folder.glob(pattern) if path.is_file()}
    return sorted(files, key=lambda path: path.name)


def load_text_folder(folder: Path, patterns: tuple[str, ...] = ("*.txt", "*.md")) -> SourceResult:
    """Load every matching file of ``folder`` as a document titled by its file stem."""
    result = SourceResult()
    files = list_text_files(folder, patterns)
    doc_ids = assign_doc_ids([path.stem for path in files], [path.name for path in files], str(folder))
    for path, doc_id in zip(files, doc_ids, strict=True):
        data = path.read_bytes()
        if looks_binary(data):
            result.quarantine.append(
                QuarantineRecord(
                    STAGE,
                    QuarantineReason.BINARY_FILE,
                    "document",
                    doc_id,
                    doc_id,
                    str(path),
                    "file",
                    "holds NUL bytes: not a text file",
                )
            )
            continue
        decoded = decode_bytes(data)
        result.count(f"encoding_{decoded.encoding}")
        if decoded.is_fallback:
            result.warnings.append(f"{path}: not valid UTF-8, decoded as {decoded.encoding}")
        result.documents.append(
            SourceDocument(
                doc_id=doc_id,
                title=path.stem,
                text=decoded.text,
                source=str(path),
                metadata={"file": path.name, "encoding": decoded.encoding, "bytes": len(data)},
            )
        )
    result.stats["files"] = len(files)
    return result
