"""`conteb review serve --port` listens where it says (issue 25): on today's main ``--port 99999`` announced 99999
and listened elsewhere, and ``--port 0`` announced port 0. A port outside 0-65535, or one in use, is one line and
exit status 2; the address announced is the one bound (``--port 0``: any free port, announced as bound)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from cli.main import main
from review.web_listen import ListenError, listening_socket
from tests.conftest import SAMPLE_DIR

CONTEB = str(Path(sys.executable).parent / "conteb")


@pytest.fixture
def registry(tmp_path: Path, isolated_env: Path) -> Path:
    path = tmp_path / "conteb.yaml"
    path.write_text(f"tasks:\n  - name: demo\n    source: {{kind: sample, path: {SAMPLE_DIR}}}\n")
    return path


@pytest.mark.parametrize("port", ["99999", "65536", "-1"])
def test_a_port_out_of_range_is_one_line_and_nothing_listens(
    registry: Path, monkeypatch: pytest.MonkeyPatch, port: str
) -> None:
    import review.web

    monkeypatch.setattr(review.web, "serve", lambda *args, **kwargs: pytest.fail(f"served on port {port}"))
    result = CliRunner().invoke(main, ["--config", str(registry), "review", "serve", "--port", port])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert result.output.splitlines() == [
        f"Error: --port: port {port} is out of range: use 1-65535, or 0 for any free port"
    ]


def test_a_port_in_use_is_one_line(registry: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(main, ["--config", str(registry), "review", "serve", "--port", str(port)])
        assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
        (line,) = result.output.splitlines()
        assert line.startswith(f"Error: cannot listen on 127.0.0.1:{port}: "), line
    with pytest.raises(ListenError, match=re.escape("cannot listen on 192.0.2.1:0: ")):
        listening_socket("192.0.2.1", 0)  # TEST-NET-1: not an address of this machine


def test_port_zero_listens_on_a_free_port_and_announces_the_one_bound(registry: Path) -> None:
    server = subprocess.Popen(
        [CONTEB, "--config", str(registry), "review", "serve", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ},
    )  # fmt: skip
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        announced = re.match(r"review queue: http://127\.0\.0\.1:(\d+)  \(store ", line)
        assert announced, line
        port = int(announced.group(1))
        assert port != 0
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None and time.monotonic() < deadline, "the server did not start"
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert response.status_code == 200
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
