"""A published dataset folder (``data/conteb/<task>/``): which files belong to it, and publishing it in one step.

**The card is the dataset.** The ``README.md`` dataset card's YAML ``configs:`` section (the Hugging Face hub
layout: ``configs -> data_files -> split -> path``) is the one list of the files that make up the dataset. Every
reader asks this module (:func:`config_shards`, :func:`config_splits`, :func:`read_config`), never a glob of the
folder; ``datasets.load_dataset(folder, config)`` reads the same list. The stages' quarantine tables
(``quarantine/<stage>-<hex>.parquet``, one per stage, empty when it refused nothing) are named by the card too, in
its front matter's :data:`QUARANTINE_KEY` list: no config (``datasets`` cannot load a table without rows). A folder
without a card ``configs:`` section (e.g. a hub download in its own ``data/<config>/`` layout) is read by its shard
names instead (:func:`conteb.storage.shard_split`), leaving out files named as we name published files: those belong
to a card.

**Publishing in one step** (:func:`publish_folder`): every data file is written under a name that changes with its
content, ``<config>/<split>-<16 hex of the sha256 of its bytes>.parquet`` (:func:`published_file`), atomically and
durably (temporary, fsync, rename, fsync of the folder); then the card, naming exactly those files, replaces the old
one by one rename: that rename is the commit point. A publish killed at any instant (SIGKILL, OOM, power) leaves
the old card naming the old files, all still there, or the new card naming the new files, all already there: every
reader sees the whole old dataset or the whole new one. Publishes of one folder are serialised by an ``flock`` on
the folder itself.

**A publish removes only its own files** (:func:`owned_by_conteb`), after the commit: those the replaced card named,
our temporaries, and files named as we name published files whose bytes have the fingerprint their name says (what
a killed publish left: :func:`unnamed_files`; ``conteb status`` names them). Any other file no card names (a user's
``documents/NOTES.txt``, a stray parquet) is left in place with a warning naming it (:func:`foreign_files`); no
reader reads it, since every reader reads the card's list. A folder, or a config folder in it, that is a symbolic
link is refused before anything is written (:class:`PublishRefused`): removing through it would remove files of the
folder it leads to.

**Why ``datasets``' cache cannot serve stale rows** (``datasets`` 4-5, ``load.LocalDatasetModuleFactory``): a
local folder's cache entry is ``<HF_HOME>/datasets/<folder name>/<config>/0.0.0/<hash>``, where ``<hash>`` hashes
the card's ``dataset_info`` and the builder configs, whose ``data_files`` are the card's *relative paths* (patterns,
not resolved files: neither the folder's location nor the files' modification times or bytes are in it). With
fixed file names, a republish and a second folder of the same task name both hit the first entry. Content-named
files put the content in the key: new rows, new key. The card writes no ``dataset_info`` split sizes; the sizes
that ``download_mode="force_redownload"`` checks against are those cached under the key, which now always
describe the same bytes (with fixed names the cached sizes were the previous build's:
``NonMatchingSplitsSizesError``).

``tests/test_publish_atomic.py`` kills a publish before each of its file operations and reads the folder after each
kill; the killing is the test's own (``tests/support/publish_child.py``), nothing here.
"""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import glob
import hashlib
import logging
import os
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from conteb.storage import PUBLISHED_FOLDERS, TEMPORARY_MARK, atomic_path, read_shards, shard_split
from conteb.yaml_text import load_yaml

CARD = "README.md"
"""The dataset card: YAML front matter (``configs:`` names the data files) and the human description."""

QUARANTINE_KEY = "quarantine_files"
"""The card's front-matter list of the stages' quarantine tables (``[{stage, path}]``): files of the dataset folder
that are no ``datasets`` config (a table without rows cannot be one), named by the card all the same."""

FINGERPRINT_HEX = 16
_PUBLISHED_NAME = re.compile(rf"^[\w.]+-(?P<fingerprint>[0-9a-f]{{{FINGERPRINT_HEX}}})\.parquet$")
_TEMPORARY_GLOB = f".*{TEMPORARY_MARK}*.tmp"
_log = logging.getLogger(__name__)

Files = dict[str, dict[str, list[Path]]]  # config -> split -> files


class CardError(ValueError):
    """The dataset card is unreadable, or names files that are not there; the message names the card and why."""


class PublishRefused(ValueError):
    """A folder a publish will not write into (a symbolic link); the message (one line) names it and what to do."""


def published_file(config: str, split: str, fingerprint: str) -> str:
    """Relative path of a published data file: ``<config>/<split>-<fingerprint>.parquet``."""
    return f"{config}/{split}-{fingerprint}.parquet"


def card_front(folder: Path) -> dict[str, Any]:
    """The YAML front matter of ``folder``'s card; ``{}`` without a card or front matter."""
    path = Path(folder) / CARD
    if not path.is_file():
        return {}
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        return {}
    head = text[4:].partition("\n---\n")[0]
    try:
        loaded = load_yaml(head)
    except yaml.YAMLError as error:
        raise CardError(f"{path}: the card's YAML front matter does not parse: {error}") from error
    return loaded if isinstance(loaded, dict) else {}


def _entries(card: Path, data_files: Any) -> Iterator[tuple[str, str]]:
    """``(split, path or glob)`` of one config's ``data_files`` (a string, a list of strings: split ``train``;
    or a list of ``{split, path}`` whose path is a string or a list)."""
    if isinstance(data_files, str):
        data_files = [data_files]
    if not isinstance(data_files, list):
        raise CardError(f"{card}: data_files is {type(data_files).__name__}, not a list")
    for entry in data_files:
        if isinstance(entry, str):
            yield "train", entry
            continue
        if not isinstance(entry, dict) or "path" not in entry:
            raise CardError(f"{card}: data_files entry {entry!r} has no path")
        paths = entry["path"] if isinstance(entry["path"], list) else [entry["path"]]
        for path in paths:
            yield str(entry.get("split", "train")), str(path)


def _resolve(folder: Path, card: Path, pattern: str) -> list[Path]:
    """The files ``pattern`` names inside ``folder`` (a glob when it has one); a path leaving it is an error."""
    if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
        raise CardError(f"{card}: data file {pattern!r} is outside the dataset folder")
    if glob.has_magic(pattern):
        return sorted(folder.glob(pattern))
    return [folder / pattern]


def card_files(folder: Path) -> Files | None:
    """``{config: {split: [files]}}`` as ``folder``'s card lists them; None when it has no ``configs:`` section."""
    folder = Path(folder)
    configs = card_front(folder).get("configs")
    if not configs:
        return None
    card = folder / CARD
    if not isinstance(configs, list):
        raise CardError(f"{card}: configs is {type(configs).__name__}, not a list")
    files: Files = {}
    for config in configs:
        if not isinstance(config, dict):
            raise CardError(f"{card}: configs entry {config!r} is not a mapping")
        by_split = files.setdefault(str(config.get("config_name", "default")), {})
        for split, pattern in _entries(card, config.get("data_files", [])):
            by_split.setdefault(split, []).extend(_resolve(folder, card, pattern))
    return files


def card_quarantine(folder: Path) -> dict[str, Path]:
    """``{stage: quarantine table}`` as ``folder``'s card lists them (:data:`QUARANTINE_KEY`); ``{}`` without."""
    folder = Path(folder)
    card = folder / CARD
    entries = card_front(folder).get(QUARANTINE_KEY) or []
    if not isinstance(entries, list) or not all(isinstance(e, dict) and "stage" in e and "path" in e for e in entries):
        raise CardError(f"{card}: {QUARANTINE_KEY} is not a list of {{stage, path}}")
    return {str(entry["stage"]): _resolve(folder, card, str(entry["path"]))[0] for entry in entries}


def named_files(folder: Path) -> set[Path]:
    """Every data file ``folder``'s card names: the configs' and the quarantine tables."""
    files = card_files(folder) or {}
    named = {path for by_split in files.values() for paths in by_split.values() for path in paths}
    return named | set(card_quarantine(folder).values())


def _glob_shards(folder: Path, config: str) -> list[Path]:
    """Without a card: ``config``'s shards in ``<config>/``, else ``data/<config>/`` (the hub's layout), sorted;
    files named as we publish them are left out (they belong to a card: a first publish that did not commit)."""
    for base in (folder / config, folder / "data" / config):
        files = sorted(path for path in base.glob("*.parquet") if not _PUBLISHED_NAME.match(path.name))
        if files:
            return files
    return []


def config_shards(folder: Path, config: str, split: str | None) -> list[Path]:
    """The data files of ``config`` of ``split`` (None: every split) in dataset ``folder``; ``[]`` when none.

    From the card when it has ``configs:`` (in its order); a named file that is missing raises :class:`CardError`.
    Without one, the shards found by name (module docstring).
    """
    folder = Path(folder)
    files = card_files(folder)
    if files is None:
        return [path for path in _glob_shards(folder, config) if split is None or shard_split(path) == split]
    paths = [path for name, found in files.get(config, {}).items() if split in (None, name) for path in found]
    missing = [path for path in paths if not path.is_file()]
    if missing:
        raise CardError(
            f"{folder / CARD}: names {missing[0].relative_to(folder)} ({len(missing)} missing file(s)): "
            "the folder is damaged; publish the task again"
        )
    return paths


def config_splits(folder: Path, config: str = "documents") -> tuple[str, ...]:
    """The splits of ``config`` in dataset ``folder`` (the card's, else the shards' names), sorted."""
    files = card_files(Path(folder))
    if files is not None:
        return tuple(sorted(files.get(config, {})))
    return tuple(sorted({shard_split(path) for path in _glob_shards(Path(folder), config)}))


def read_config(folder: Path, config: str, split: str | None) -> tuple[pa.Table, list[Path]] | None:
    """``config``'s rows of ``split`` in ``folder`` and the files read; None when it has none.

    A publish that commits while this reads may remove the files just listed: the card is then read again, once.
    """
    for attempt in range(2):
        try:
            files = config_shards(folder, config, split)
            if not files:
                return None
            return read_shards(files), files
        except (FileNotFoundError, CardError):
            if attempt:
                raise
    raise AssertionError("unreachable")


def _candidates(folder: Path) -> list[Path]:
    """The files a publish may have written: every file of the config and quarantine folders (every one of
    :data:`conteb.storage.PUBLISHED_FOLDERS`) and the temporaries of ours in the folder itself."""
    candidates = [path for name in PUBLISHED_FOLDERS for path in (folder / name).glob("*") if path.is_file()]
    candidates += [path for path in folder.glob(_TEMPORARY_GLOB) if path.is_file()]
    return sorted(candidates)


def owned_by_conteb(path: Path, replaced: set[Path] | frozenset[Path] = frozenset()) -> bool:
    """Whether a publish may remove ``path``, a file no card names: it is one of ``replaced`` (the files the card
    being replaced named), one of our temporaries, or named as we name published files (:func:`published_file`) and
    its bytes have the fingerprint its name says (a publish killed before its card)."""
    if path in replaced or fnmatch.fnmatchcase(path.name, _TEMPORARY_GLOB):
        return True
    match = _PUBLISHED_NAME.match(path.name)
    try:
        return match is not None and _fingerprint(path.read_bytes()) == match["fingerprint"]
    except OSError:
        return False


def unnamed_files(
    folder: Path, named: set[Path] | None = None, replaced: set[Path] | frozenset[Path] = frozenset()
) -> list[Path]:
    """Files of ours in the published folder that no card names (:func:`owned_by_conteb`, with ``replaced``):
    leftovers of a publish that did not finish, which the next publish removes.

    ``named``: the files to keep (default: those ``folder``'s card names). Files that are not ours (notes, a
    ``.gitattributes``, a stray parquet: :func:`foreign_files`) are never listed.
    """
    folder = Path(folder)
    if named is None:
        named = named_files(folder)
    return [path for path in _candidates(folder) if path not in named and owned_by_conteb(path, replaced)]


def foreign_files(folder: Path, named: set[Path] | None = None) -> list[Path]:
    """Files of the config and quarantine folders that no card names and that are not conteb's
    (:func:`owned_by_conteb`, without a replaced card): a publish leaves them in place, with a warning."""
    folder = Path(folder)
    if named is None:
        named = named_files(folder)
    return [path for path in _candidates(folder) if path not in named and not owned_by_conteb(path)]


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_durable(data: bytes, target: Path) -> Path:
    """``data`` to ``target``: a temporary (synced to disk), renamed onto ``target``, the folder synced."""
    with atomic_path(target) as tmp, open(tmp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    _fsync_folder(target.parent)
    return target


def _fingerprint(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:FINGERPRINT_HEX]


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue().to_pybytes()


@contextlib.contextmanager
def _publish_lock(folder: Path) -> Iterator[None]:
    """An exclusive ``flock`` on the folder itself: one publish of a folder at a time (no lock file to leave)."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _refuse_links(folder: Path) -> None:
    """:class:`PublishRefused` when ``folder`` or one of its config and quarantine folders is a symbolic link."""
    for path in (folder, *(folder / name for name in PUBLISHED_FOLDERS)):
        if path.is_symlink():
            raise PublishRefused(
                f"{path}: is a symbolic link (to {os.readlink(path)}); a publish writes and removes files only in a "
                "folder of its own: replace the link with a folder"
            )


def publish_folder(
    folder: Path,
    tables: Mapping[str, Mapping[str, pa.Table]],
    render_card: Callable[[dict[str, dict[str, str]]], str],
    warn: Callable[[str], None] | None = None,
) -> dict[str, dict[str, Path]]:
    """Publish ``tables`` (``{config: {split: table}}``; the quarantine tables as ``{"quarantine": {stage: table}}``)
    into ``folder`` in one step (module docstring).

    ``render_card`` gets ``{config: {split: relative path}}`` and returns the card naming exactly those files.
    Returns ``{config: {split: path}}`` plus ``{"card": {"": README.md}}``. Only conteb's files are removed; ``warn``
    (default: this module's logger) gets one line for each other file no card names, ``left in place: <path> (not
    written by conteb)``. :class:`PublishRefused` for a folder or config folder that is a symbolic link.
    """
    folder = Path(folder)
    _refuse_links(folder)
    written: dict[str, dict[str, Path]] = {}
    with _publish_lock(folder):
        try:
            replaced = named_files(folder)
        except CardError:  # an unreadable card names nothing we can prove ours; our own names still prove theirs
            replaced = set()
        for config, by_split in tables.items():
            for split, table in by_split.items():
                data = _parquet_bytes(table)
                fingerprint = _fingerprint(data)
                target = folder / published_file(config, split, fingerprint)
                if not target.is_file() or _fingerprint(target.read_bytes()) != fingerprint:
                    _write_durable(data, target)  # else the file holds these very bytes: kept as it is
                written.setdefault(config, {})[split] = target
        paths = {config: {split: str(p.relative_to(folder)) for split, p in s.items()} for config, s in written.items()}
        card = _write_durable(render_card(paths).encode("utf-8"), folder / CARD)  # the commit point
        keep = {path for by_split in written.values() for path in by_split.values()}
        for leftover in unnamed_files(folder, keep, replaced - keep):
            leftover.unlink(missing_ok=True)
        for other in foreign_files(folder, keep):
            (warn or _log.warning)(f"left in place: {other.relative_to(folder)} (not written by conteb)")
        for name in PUBLISHED_FOLDERS:
            with contextlib.suppress(OSError):  # absent, or not empty (someone's own file): left alone
                (folder / name).rmdir()
    written["card"] = {"": card}
    return written
