"""``python -m training`` with a record of what each process writes, for the tests of rank 0's writes.

Test code. ``torchrun ... -m tests.support.audited_training <python -m training arguments>`` runs
:func:`training.__main__.main` after installing a Python audit hook (:func:`sys.addaudithook`, PEP 578) that records
every write under ``$WRITE_AUDIT_ROOT`` — a file opened for writing, a folder made, a file or folder renamed or
removed — as one line ``<event> <path>`` in ``$WRITE_AUDIT_DIR/rank-<RANK>.log``. Files that native code writes
without Python's ``open`` (safetensors' weights) are not seen, but their folder's ``os.mkdir`` and the JSON files
written beside them are.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_EVENTS = {"os.mkdir", "os.rename", "os.remove", "os.rmdir", "shutil.rmtree"}


def _writes(event: str, args: tuple[Any, ...]) -> str | None:
    """The path ``event`` writes, or None."""
    if event == "open":
        path, mode, flags = args
        writing = any(c in mode for c in "wax+") if isinstance(mode, str) else bool((flags or 0) & _WRITE_FLAGS)
        return str(path) if writing and isinstance(path, str | os.PathLike) else None
    if event in _EVENTS and args and isinstance(args[0], str | os.PathLike):
        return str(args[1] if event == "os.rename" else args[0])  # os.rename(src, dst, src_fd, dst_fd): dst
    return None


def install(root: Path, log: Path) -> None:
    """Record the writes under ``root`` to ``log`` (module docstring)."""
    prefix = str(root.resolve())
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        path = _writes(event, args)
        if path is not None and os.path.abspath(path).startswith(prefix):
            os.write(fd, f"{event} {os.path.abspath(path)}\n".encode())

    sys.addaudithook(hook)


def main() -> int:
    install(
        Path(os.environ["WRITE_AUDIT_ROOT"]), Path(os.environ["WRITE_AUDIT_DIR"]) / f"rank-{os.environ['RANK']}.log"
    )
    from training.__main__ import main as train_main

    return train_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
