"""Atomic writes: files get the permissions of a normal open, and a killed write's temporary is cleaned up."""

import os
import stat
import time
from pathlib import Path

import pyarrow as pa
import pytest

from conteb.storage import STALE_TEMPORARY_SECONDS, atomic_path, write_parquet_atomic, write_text_atomic


@pytest.fixture
def umask():
    """Set the process umask for one test, then restore it."""
    previous = os.umask(0o022)
    os.umask(previous)
    yield os.umask
    os.umask(previous)


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077])
def test_atomic_writes_respect_the_umask(tmp_path: Path, umask, mask: int) -> None:
    umask(mask)
    text = write_text_atomic("hello", tmp_path / "card.md")
    table = write_parquet_atomic(pa.table({"x": [1]}), tmp_path / "t.parquet")
    for path in (text, table):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask, path.name


def test_stale_temporaries_of_a_killed_write_are_removed_on_the_next_write(tmp_path: Path) -> None:
    folder = tmp_path / "stages"
    with pytest.raises(KeyboardInterrupt), atomic_path(folder / "a.parquet") as tmp:
        killed = tmp
        raise KeyboardInterrupt
    killed.write_bytes(b"half")  # what a SIGKILL leaves behind (the cleanup above never runs then)
    old = time.time() - STALE_TEMPORARY_SECONDS - 60
    os.utime(killed, (old, old))
    fresh = folder / f".b.parquet.conteb-{'0' * 16}.tmp"  # another writer's, still in progress
    fresh.write_bytes(b"busy")
    foreign = folder / ".somebody-elses.tmp"
    foreign.write_bytes(b"not ours")
    os.utime(foreign, (old, old))
    write_text_atomic("x", folder / "c.md")
    assert sorted(p.name for p in folder.iterdir()) == sorted(["c.md", fresh.name, foreign.name])
