"""``text_folder``: one document per plain-text or markdown file, no queries.

Only the files of the folder itself whose names match ``patterns`` are loaded. Files that look
meant but are left out are counted and named in a warning: a name matching a pattern only in
another case (``NOTES.TXT`` for ``*.txt``: ``files_skipped_other_case``) and matching files in
subfolders (``files_skipped_in_subfolders``). A matched file that is a symlink leading outside
the folder is refused (:class:`SourceError`): the corpus is what the folder holds.

The encoding is detected per file (:mod:`curation.encoding`); a non-UTF-8 file, or a UTF-8 file
with invalid bytes replaced (counted: ``invalid_utf8_bytes_replaced``), is loaded and reported in
``SourceResult.warnings`` so the asset logs a warning naming it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from curation.encoding import decode_bytes, looks_binary
from curation.quarantine import QuarantineReason, QuarantineRecord
from curation.sources.articles import assign_doc_ids
from curation.sources.model import STAGE, SourceDocument, SourceError, SourceResult

MAX_NAMED = 10  # skipped files named in a warning


@dataclass
class FolderScan:
    """What ``patterns`` select in a folder, and what they leave out that looks meant (relative paths)."""

    files: list[Path]
    other_case: list[str] = field(default_factory=list)
    in_subfolders: list[str] = field(default_factory=list)


def scan_text_folder(folder: Path, patterns: tuple[str, ...]) -> FolderScan:
    """Files of ``folder`` matching any of ``patterns`` (sorted by name), and the near misses.

    A matched file that resolves outside ``folder`` (a symlink, or a pattern with ``..``) is a :class:`SourceError`.
    """
    matched = {path for pattern in patterns for path in folder.glob(pattern) if path.is_file()}
    root = folder.resolve()
    for path in matched:
        target = path.resolve()
        if not target.is_relative_to(root):
            how = "symlink to" if path.is_symlink() else "leads to"
            raise SourceError(
                f"{path}: {how} {target}, outside the source folder {folder}; "
                "copy the file into the folder or remove the link"
            )
    names = [pattern.rsplit("/", 1)[-1].lower() for pattern in patterns]
    scan = FolderScan(sorted(matched, key=lambda path: path.name))
    for directory, _, files in os.walk(folder):
        for name in sorted(files):
            path = Path(directory) / name
            if path in matched or not any(fnmatchcase(name.lower(), pattern) for pattern in names):
                continue
            relative = path.relative_to(folder).as_posix()
            (scan.in_subfolders if "/" in relative else scan.other_case).append(relative)
    return scan


def load_text_folder(folder: Path, patterns: tuple[str, ...] = ("*.txt", "*.md")) -> SourceResult:
    """Load every matching file of ``folder`` as a document titled by its file stem."""
    result = SourceResult()
    scan = scan_text_folder(folder, patterns)
    _report_skipped(result, folder, scan)
    files = scan.files
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
        metadata = {"file": path.name, "encoding": decoded.encoding, "bytes": len(data)}
        if decoded.is_fallback:
            result.warnings.append(f"{path}: not valid UTF-8, decoded as {decoded.encoding}")
        if decoded.replaced:
            result.count("invalid_utf8_bytes_replaced", decoded.replaced)
            metadata["replaced_bytes"] = decoded.replaced
            result.warnings.append(f"{path}: {decoded.replaced} invalid UTF-8 bytes replaced by U+FFFD")
        result.documents.append(
            SourceDocument(doc_id=doc_id, title=path.stem, text=decoded.text, source=str(path), metadata=metadata)
        )
    result.stats["files"] = len(files)
    return result


def _report_skipped(result: SourceResult, folder: Path, scan: FolderScan) -> None:
    """Count and name (in a warning) the files the patterns leave out that look meant."""
    for key, paths, why in (
        ("files_skipped_other_case", scan.other_case, "match source.patterns only in another case"),
        ("files_skipped_in_subfolders", scan.in_subfolders, "are in subfolders (the folder is not read recursively)"),
    ):
        if paths:
            result.count(key, len(paths))
            more = len(paths) - MAX_NAMED
            shown = ", ".join(paths[:MAX_NAMED]) + (f" and {more} more" if more > 0 else "")
            result.warnings.append(f"{folder}: {len(paths)} files not loaded: they {why}: {shown}")
