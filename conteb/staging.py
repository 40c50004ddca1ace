"""Files that land together or not at all: a stage folder whose contents replace their originals in one commit.

An evaluation writes many files (run files, per-query metrics, ``evaluation.json``, reports, plots). Each one is
atomic (:func:`conteb.storage.atomic_path`), the set is not: a run stopped half-way would leave new run files beside
an old ``evaluation.json``. :func:`staged_tree` gives the writer a stage folder instead of the real one:

* the stage is ``<root>/.staging/<host>-<pid>-<token>/``, on the same file system as ``root``;
* the ``seed`` sub-paths of ``root`` (files or folders) are hard-linked into the stage first, so code that reads
  earlier results (merging with the systems not re-run) finds them there. Safe because every write under ``root``
  replaces a file by renaming a new one onto it (``atomic_path``), never writes into an existing inode, so an
  original is never changed through its link; a writer that wrote in place would change the original too;
* when the block ends normally, every file of the stage is renamed onto its place under ``root`` (parents created),
  with Ctrl-C and SIGTERM held back meanwhile (:func:`conteb.signals.deferred_interrupts`), then the stage is
  removed; when the block raises (an interrupt included), the stage is removed and ``root`` is untouched.

A process killed with SIGKILL leaves its stage behind; the next :func:`staged_tree` on the same root removes the
stages of processes of this host that no longer exist. Files are only added or replaced, never deleted, by a commit.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from conteb.signals import deferred_interrupts

STAGING_FOLDER = ".staging"


@dataclass(frozen=True)
class StagedTree:
    """The final folder ``root`` and the ``stage`` that stands in for it until the commit."""

    root: Path
    stage: Path

    def final(self, path: Path) -> Path:
        """Where ``path`` (under the stage) lands under ``root``."""
        return self.root / Path(path).relative_to(self.stage)


def _host() -> str:
    return socket.gethostname().replace("-", "_") or "host"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_abandoned_stages(root: Path) -> list[Path]:
    """Remove the stages under ``root`` left by processes of this host that no longer run; returns them."""
    removed = []
    host = _host()
    for stage in sorted((Path(root) / STAGING_FOLDER).glob(f"{host}-*-*")):
        pid = stage.name.split("-")[1]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(stage, ignore_errors=True)
            removed.append(stage)
    return removed


def _link_tree(source: Path, target: Path) -> None:
    """Hard-link ``source`` (a file, or a folder's files recursively) to ``target``."""
    if source.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(source, target)
        return
    for path in sorted(source.rglob("*")):
        if path.is_file() and not path.is_symlink():
            _link_tree(path, target / path.relative_to(source))


def _commit(stage: Path, root: Path) -> None:
    with deferred_interrupts():
        for path in sorted(stage.rglob("*")):
            if path.is_file():
                destination = root / path.relative_to(stage)
                destination.parent.mkdir(parents=True, exist_ok=True)
                os.replace(path, destination)


@contextmanager
def staged_tree(root: Path, seed: Iterable[str] = ()) -> Iterator[StagedTree]:
    """A stage standing in for ``root`` whose files replace their originals when the block succeeds (module doc).

    ``seed``: paths relative to ``root`` (missing ones are skipped) hard-linked into the stage before the block.
    """
    root = Path(root)
    remove_abandoned_stages(root)
    stage = root / STAGING_FOLDER / f"{_host()}-{os.getpid()}-{secrets.token_hex(4)}"
    stage.mkdir(parents=True)
    try:
        for relative in seed:
            source = root / relative
            if source.exists():
                _link_tree(source, stage / relative)
        yield StagedTree(root, stage)
        _commit(stage, root)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        with contextlib.suppress(OSError):  # other stages may be in use
            (root / STAGING_FOLDER).rmdir()
