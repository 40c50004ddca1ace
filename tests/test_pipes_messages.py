"""Pipes messages read whole: a line written in two parts is parsed once, complete (pipelines/pipes_messages.py)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from pipelines.pipes_messages import complete_lines


def test_a_message_written_in_two_parts_is_read_once_whole(tmp_path: Path) -> None:
    """The reader has read the first half (its next read found nothing more) before the writer ends the line."""
    path = tmp_path / "messages"
    path.write_text("")
    message = json.dumps({"method": "report_asset_materialization", "params": {"plot": "x" * 100_000}})
    half_written, reader_waits, done = threading.Event(), threading.Event(), threading.Event()

    def write() -> None:
        with open(path, "a", encoding="utf-8") as stream:
            stream.write(message[:50_000])
            stream.flush()
            half_written.set()
            reader_waits.wait(30)
            stream.write(message[50_000:] + "\n")
        done.set()

    def should_stop() -> bool:  # asked only when a read found nothing new
        stop = done.is_set()
        reader_waits.set()
        return stop

    writer = threading.Thread(target=write)
    writer.start()
    assert half_written.wait(30)
    lines = list(complete_lines(str(path), should_stop, poll_s=0.001))
    writer.join(30)
    assert [json.loads(line) for line in lines] == [json.loads(message)]
