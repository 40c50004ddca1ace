"""``text_folder``: one document per plain-text or markdown file, no queries.

Only the files of the folder itself whose names match ``patterns`` are loaded. Files that look
meant but are left out are counted and named in a warning: a name matching a pattern only in
another case (``NOTES.TXT`` for ``*.txt``: ``files_skipped_other_case``) and matching files in
subfolders (``files_skipped_in_subfolders``). A matched entry that is a symlink leading outside
the folder (to a file, or to a device such as ``/dev/zero``) is refused (:class:`SourceError`): the
corpus is what the folder holds. A matched entry inside it that is no regular file (a FIFO, a
character or block device, a socket, a dangling symlink or a loop) is never opened: it becomes a quarantine
row (``not_a_regular_file``, the detail saying what it is).

The encoding is detected per file (:mod:`curation.encoding`); a non-UTF-8 file, or a UTF-8 file
with invalid bytes replaced (counted: ``invalid_utf8_bytes_replaced``), is loaded and reported in
``SourceResult.warnings`` so the asset logs a warning naming it.
"""

from __future__ import annotations

import errno
import os
import stat
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
    not_regular: list[tuple[Path, str]] = field(default_factory=list)  # (entry, what it is): never opened


_SPECIAL_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def entry_kind(path: Path) -> str | None:
    """What ``path`` is when it is no regular file (following a symlink; nothing is opened), else None.

    A folder is None too: the files in it are counted as ``in_subfolders``.
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "a dangling symlink (its target does not exist)"
    except OSError as error:
        return "a symlink loop" if error.errno == errno.ELOOP else f"unreadable ({error.strerror})"
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return next((kind for test, kind in _SPECIAL_KINDS if test(mode)), "not a regular file")


def scan_text_folder(folder: Path, patterns: tuple[str, ...]) -> FolderScan:
    """Files of ``folder`` matching any of ``patterns`` (sorted by name), the entries that match but are no regular
    file (FIFO, device, socket, dangling link: ``not_regular``, never opened), and the near misses.

    A matched entry that resolves outside ``folder`` (a symlink, e.g. to ``/dev/zero``, or a pattern with ``..``) is
    a :class:`SourceError` naming it and what it leads to.
    """
    matched = {path for pattern in patterns for path in folder.glob(pattern)}
    root = folder.resolve()
    for path in sorted(matched):
        target = Path(os.path.realpath(path))  # never raises, on a symlink loop either (Path.resolve does)
        if not target.is_relative_to(root):
            how = "symlink to" if path.is_symlink() else "leads to"
            kind = entry_kind(path)
            raise SourceError(
                f"{path}: {how} {target}{f' ({kind})' if kind else ''}, outside the source folder {folder}; "
                "copy the file into the folder or remove the link"
            )
    kinds = {path: entry_kind(path) for path in matched}
    files = [path for path, kind in kinds.items() if kind is None and not path.is_dir()]
    names = [pattern.rsplit("/", 1)[-1].lower() for pattern in patterns]
    scan = FolderScan(sorted(files, key=lambda path: path.name))
    scan.not_regular = sorted(((path, kind) for path, kind in kinds.items() if kind), key=lambda item: item[0].name)
    for directory, _, entries in os.walk(folder):
        for name in sorted(entries):
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
    for path, kind in scan.not_regular:
        detail = f"{kind}, not a regular file: not read"
        record = QuarantineRecord(
            STAGE, QuarantineReason.NOT_A_REGULAR_FILE, "document", path.name, None, str(path), "file", detail
        )
        result.quarantine.append(record)
    files = scan.files
    doc_ids = assign_doc_ids([path.stem for path in files], [path.name for path in files], str(folder))
    for path, doc_id in zip(files, doc_ids, strict=True):
        try:
            data = path.read_bytes()
        except OSError as error:  # e.g. no permission to read it
            raise SourceError(f"{path}: cannot read: {error.strerror}") from None
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
