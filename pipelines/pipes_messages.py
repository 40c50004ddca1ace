"""Dagster Pipes messages read one whole line at a time.

Dagster's file message reader (``dagster._core.pipes.utils.PipesFileMessageReader``, through ``tail_file``) parses
whatever ``readline`` returns while the training process is still writing; the writer (``dagster_pipes``'
``PipesFileMessageWriterChannel``) writes a message of more than one buffer (a materialization with its inline
loss-curve PNG) in several writes, so the reader can meet half a line: ``JSONDecodeError`` in its thread, the
materialization lost. :func:`complete_lines` holds a line back until its newline has arrived;
:class:`WholeLineTempFileMessageReader` is Dagster's temporary-file reader with it.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import dagster as dg
from dagster._core.pipes.utils import PipesFileMessageReader


def complete_lines(path: str, should_stop: Callable[[], bool], poll_s: float = 0.01) -> Iterator[str]:
    """The lines appended to ``path`` as they complete (with their newline), until ``should_stop()`` and nothing more
    to read; a last line without its newline is given at the end (the writer is done: the parser says what it is)."""
    pending = ""
    with open(path, encoding="utf-8") as stream:
        while True:
            piece = stream.readline()
            if piece:
                pending += piece
                if pending.endswith("\n"):
                    yield pending
                    pending = ""
            elif should_stop():
                if pending:
                    yield pending
                return
            else:
                time.sleep(poll_s)


class _WholeLineFileMessageReader(PipesFileMessageReader):
    """:class:`PipesFileMessageReader` whose thread parses whole lines only (:func:`complete_lines`)."""

    def _reader_thread(self, handler: Any, is_resource_complete: Any) -> None:
        try:
            for line in complete_lines(self._path, is_resource_complete.is_set):
                handler.handle_message(json.loads(line))
        except:  # as Dagster's own thread: the exception is reported to the run, then raised
            handler.report_pipes_framework_exception(f"{self.__class__.__name__} reader thread", sys.exc_info())
            raise


class WholeLineTempFileMessageReader(dg.PipesTempFileMessageReader):
    """``dg.PipesTempFileMessageReader`` that never parses half a message (module docstring)."""

    @contextmanager
    def read_messages(self, handler: Any) -> Iterator[Any]:
        with tempfile.TemporaryDirectory() as folder:
            reader = _WholeLineFileMessageReader(
                os.path.join(folder, "messages"), include_stdio_in_messages=self._include_stdio_in_messages
            )
            with reader.read_messages(handler) as params:
                yield params
