"""Review queues as files: the JSONL/CSV export, and reading an edited export back as decisions.

Contracts:

* An export holds every :data:`EXPORT_COLUMNS` field of each item, one JSON object per line
  (``jsonl``: context an object, flags a list) or one CSV row under a header (``csv``: context and
  flags as JSON text, flagged ``true``/``false``, null as empty). It is written atomically (a
  temporary file next to the target, renamed over it), never onto a store or any other SQLite file
  (however the path reaches it: symbolic or hard links), never onto anything but a regular file (a
  symbolic link, a FIFO, a device, a socket: refused, ``--force`` or not), and onto an existing file only when
  asked (:func:`check_export_target`).
* A CSV export escapes every text cell a spreadsheet would run as a formula (OWASP: a leading
  ``'`` before ``= + - @``, tab, CR, or a leading ``'``: :data:`CSV_FORMULA_PREFIXES`); a CSV
  import removes one leading ``'`` and reads an empty cell as null.
* An import file is ``.jsonl``/``.ndjson`` or ``.csv`` (ValueError otherwise); rows are numbered
  by the file's physical lines (a CSV header is line 1; a row spanning lines gets its first).
* :func:`parse_import_row` checks what a row says on its own (item id, version, reviewer name,
  no NUL in its text and note) and raises :class:`ImportRejected` with the reason; the store
  checks the rest against the item.
"""

from __future__ import annotations

import csv
import json
import os
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conteb.sqlite_kinds import SIDECAR_SUFFIXES, sqlite_file
from conteb.storage import atomic_path
from review.model import InvalidDecisionError, ReviewItem, check_no_nul, clean_reviewer, has_text
from review.schema import ITEM_COLUMNS

EXPORT_FORMATS = ("jsonl", "csv")

EXPORT_COLUMNS = ITEM_COLUMNS
"""The columns of an export file, in order (every :class:`review.model.ReviewItem` field)."""

CSV_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r", "'")
"""A CSV text cell starting with one of these gets a leading ``'`` (OWASP CSV injection; ``'`` keeps it reversible)."""


class ExportRefused(ValueError):
    """An export target refused: the message (one line) names the file, why, and what to do."""


class ImportRejected(Exception):
    """An imported row refused, with the reason."""


@dataclass(frozen=True)
class ImportedDecision:
    """What one import row asks for; ``proposed_sha256`` and ``status`` are as read, checked by the store."""

    item_id: str
    version: int
    proposed_sha256: Any
    status: Any
    edited_text: str | None
    reviewer: str | None
    note: str | None


def csv_escape(value: Any) -> Any:
    """A text cell as written to CSV: prefixed with ``'`` when it starts with :data:`CSV_FORMULA_PREFIXES`."""
    return f"'{value}" if isinstance(value, str) and value.startswith(CSV_FORMULA_PREFIXES) else value


def csv_unescape(value: str | None) -> str | None:
    """A CSV cell as read back: one leading ``'`` removed (undoing :func:`csv_escape`); empty or missing: None."""
    if value is not None and value.startswith("'"):
        value = value[1:]
    return value or None


def export_value(name: str, value: Any, fmt: str) -> Any:
    """One item field as written to an export file."""
    if fmt == "jsonl":
        return value
    if name in ("context", "flags"):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    if name == "flagged":
        return "true" if value else "false"
    return "" if value is None else csv_escape(value)


def _same_file(first: Path, second: Path) -> bool:
    """Whether both names lead to one file (a hard link, a symbolic link); ``os.stat`` only, no descriptor."""
    try:
        return os.path.samefile(first, second)
    except OSError:
        return False


def _node_kind(target: Path) -> str | None:
    """What ``target`` is when it exists and is neither a regular file nor a folder (``lstat``: a symbolic link is
    one, wherever it leads); None otherwise. Nothing is opened: opening a FIFO would wait for a writer."""
    try:
        mode = os.lstat(target).st_mode
    except OSError:
        return None
    kinds = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))  # fmt: skip
    return next((name for test, name in kinds if test(mode)), None)


def check_export_target(target: Path, stores: Mapping[str, Path], replace: bool) -> None:
    """:class:`ExportRefused` (one line: the file, why, what to do) unless an export may be written at ``target``.

    Never onto a store: a path of ``stores`` (``what it is -> path``) or its ``-wal``/``-shm``/``-journal`` file,
    reached by the same path after symbolic links or as the same file (a hard link), nor onto any SQLite file
    (:func:`conteb.sqlite_kinds.sqlite_file`, read by SQLite itself); never onto a symbolic link, a FIFO, a device or
    a socket (the rename would replace the node itself), with ``replace`` or not; never onto a folder; onto another
    existing file only with ``replace``.
    """
    resolved = os.path.realpath(target)
    for what, store in stores.items():
        for suffix in ("", *SIDECAR_SUFFIXES):
            candidate = Path(f"{store}{suffix}")
            if resolved == os.path.realpath(candidate) or _same_file(target, candidate):
                shown = what if not suffix else f"the {suffix} file of {what}"
                raise ExportRefused(
                    f"{target}: is {shown} ({candidate}): an export never replaces a store; choose another file "
                    "(-o FILE)"
                )
    kind = _node_kind(Path(target))
    if kind is not None:
        raise ExportRefused(
            f"{target}: is {kind}, not a regular file; export writes only regular files: choose another file (-o FILE)"
        )
    found = sqlite_file(Path(target))
    if found is not None:
        raise ExportRefused(
            f"{target}: is {found}: an export never replaces a SQLite file; choose another file (-o FILE)"
        )
    if os.path.isdir(target):
        raise ExportRefused(f"{target}: is a folder; name a file to write (-o FILE)")
    if os.path.lexists(target) and not replace:
        raise ExportRefused(f"{target}: already exists; pass --force to replace it, or choose another file (-o FILE)")


def write_export(
    target: Path,
    items: Iterable[ReviewItem],
    fmt: str,
    *,
    replace: bool = False,
    stores: Mapping[str, Path] | None = None,
) -> int:
    """Write ``items`` to ``target`` as ``fmt`` (ValueError for an unknown one), atomically; returns rows written.

    The target is checked first (:func:`check_export_target`, with ``stores`` and ``replace``): nothing is written
    when it is refused.
    """
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r} (expected one of {', '.join(EXPORT_FORMATS)})")
    check_export_target(Path(target), stores or {}, replace)
    rows = [{name: export_value(name, getattr(item, name), fmt) for name in EXPORT_COLUMNS} for item in items]
    with atomic_path(Path(target)) as tmp, tmp.open("w", encoding="utf-8", newline="") as handle:
        if fmt == "jsonl":
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        else:
            writer = csv.DictWriter(handle, fieldnames=EXPORT_COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
        handle.flush()
        os.fsync(handle.fileno())
    return len(rows)


def read_import_rows(source: Path) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """``(line number, row dict)`` for each row of ``source``, or ``(line, reason)`` for an unreadable one."""
    suffix = source.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        with source.open(encoding="utf-8-sig") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    yield number, f"invalid JSON: {exc.msg}"
                    continue
                yield (number, row) if isinstance(row, dict) else (number, "invalid row: not a JSON object")
    elif suffix == ".csv":
        with source.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            start = 2  # line 1 is the header
            for row in reader:
                yield start, {key: csv_unescape(value) for key, value in row.items() if key is not None}
                start = reader.line_num + 1
    else:
        raise ValueError(f"cannot import {source}: expected a .jsonl or .csv file")


def parse_import_row(row: Mapping[str, Any], override: str | None) -> ImportedDecision:
    """The decision one import row asks for; ``override`` (a clean reviewer name) replaces the row's reviewer.

    :class:`ImportRejected` for a missing item_id, a version that is not a whole number, a reviewer
    name :func:`review.model.clean_reviewer` refuses, or a NUL in the edited text or note. A blank
    edited text reads as none, a blank reviewer as missing.
    """
    item_id = row.get("item_id")
    if not isinstance(item_id, str) or not item_id:
        raise ImportRejected("missing item_id")
    raw_version: Any = row.get("version")  # any JSON or CSV value (None when absent); int() refuses the wrong ones
    try:
        version = int(raw_version)
    except (TypeError, ValueError):
        raise ImportRejected(f"invalid version {raw_version!r}") from None
    text = row.get("edited_text")
    text = text if has_text(text) else None
    row_reviewer = row.get("reviewer")
    name = override or (row_reviewer if isinstance(row_reviewer, str) and row_reviewer.strip() else None)
    note = row.get("note") if isinstance(row.get("note"), str) else None
    try:
        name = None if name is None else clean_reviewer(name)
        check_no_nul("edited text", text)
        check_no_nul("note", note)
    except InvalidDecisionError as exc:
        raise ImportRejected(str(exc)) from None
    return ImportedDecision(
        item_id=item_id,
        version=version,
        proposed_sha256=row.get("proposed_sha256"),
        status=row.get("status"),
        edited_text=text,
        reviewer=name,
        note=note,
    )
