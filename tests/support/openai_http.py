"""HTTP plumbing of the local OpenAI-compatible test server (``tests/support/openai_server.py``).

``Server`` serves real HTTP/1.1 (keep-alive, exact ``Content-Length``) on ``127.0.0.1:<free port>``, one
``Handler`` thread per connection; the handler reads the whole body (plain or chunked), records the request
and hands it to its ``Owner`` (the server object) to route. ``HTTPError`` and any other exception raised by
the route become OpenAI-style error answers. Also: the recorded request, the error bodies and the multipart
parser. Standard library only; nothing logged to stderr.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from email.message import Message
from email.parser import BytesHeaderParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

CONNECTION_ERRORS = (OSError,)  # BrokenPipe, ConnectionReset, timeouts: the client has gone


@dataclass
class RecordedRequest:
    """One HTTP request as received; ``headers`` keys are lower-case, ``path`` includes any query."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON (raises ``ValueError`` when it is not JSON)."""
        return json.loads(self.body)


class HTTPError(Exception):
    """An error answered as ``status`` with an OpenAI-style body."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


def _error_type(status: int) -> tuple[str, str | None]:
    """OpenAI's ``(type, code)`` for an HTTP status."""
    if status == 429:
        return "requests", "rate_limit_exceeded"
    if status == 401:
        return "authentication_error", "invalid_api_key"
    if status == 404:
        return "invalid_request_error", "not_found"
    if status >= 500:
        return "server_error", None
    return "invalid_request_error", None


def error_body(status: int, message: str, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error body for ``status`` (``code`` defaults to the status's usual code)."""
    kind, default_code = _error_type(status)
    return {"error": {"message": message, "type": kind, "param": None, "code": code or default_code}}


def format_seconds(value: float | str) -> str:
    """A ``Retry-After`` value: text verbatim, a number in its shortest form."""
    return value if isinstance(value, str) else f"{value:g}"


class Owner(Protocol):
    """What the handler needs from the server object that owns it."""

    _stopping: threading.Event

    def _next_id(self) -> int: ...

    def _record(self, request: RecordedRequest) -> None: ...

    def _track(self, conn: socket.socket, add: bool) -> None: ...

    def _route(self, handler: Handler, method: str, path: str, body: bytes) -> None: ...


class Handler(BaseHTTPRequestHandler):
    """One connection: reads each request, records it, lets the owner route it, writes the answer."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # TCP_NODELAY: answers leave at once
    server: Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet by default
        return

    def setup(self) -> None:
        super().setup()
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        except CONNECTION_ERRORS:
            pass
        finally:
            self.server.owner._track(self.connection, add=False)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    # -- plumbing ---------------------------------------------------------------------------------

    def _read_exactly(self, size: int) -> bytes:
        data = self.rfile.read(size)
        if len(data) < size:  # the client went away mid-request (e.g. killed): not a request
            raise ConnectionAbortedError(f"request body cut short ({len(data)} of {size} bytes)")
        return data

    def _read_body(self) -> bytes:
        """The whole request body; raises ``OSError`` when the client closed before sending it all."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                line = self.rfile.readline()
                if not line:
                    raise ConnectionAbortedError("chunked request body cut short")
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self._read_exactly(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self._read_exactly(length) if length else b""

    def send(
        self,
        status: int,
        payload: bytes,
        content_type: str = "application/json",
        extra: dict[str, str] | None = None,
        truncate: bool = False,
        trickle_s: float = 0.0,
    ) -> None:
        """Write one response; ``truncate`` announces the full length, writes half of ``payload`` and closes
        the connection (no ``Connection: close`` warning, as when a proxy or server dies mid-answer);
        ``trickle_s`` > 0 writes the body one byte at a time, that many seconds apart."""
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("x-request-id", f"req_{self.server.owner._next_id()}")
            for key, value in (extra or {}).items():
                self.send_header(key, value)
            # headers and body in one write: two small writes would meet Nagle + delayed ACK (40 ms)
            self._headers_buffer.append(b"\r\n")
            if trickle_s > 0:
                self.flush_headers()
                self._trickle(payload, trickle_s)
                return
            self._headers_buffer.append(payload[: len(payload) // 2] if truncate else payload)
            self.flush_headers()
        except CONNECTION_ERRORS:
            self.close_connection = True
            return
        if truncate:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)

    def _trickle(self, payload: bytes, seconds_per_byte: float) -> None:
        """Write ``payload`` one byte at a time; stops when the client has gone or the server stops."""
        stopping = self.server.owner._stopping
        for index in range(len(payload)):
            self.wfile.write(payload[index : index + 1])
            if stopping.wait(seconds_per_byte):
                self.close_connection = True
                return

    def send_stream(
        self, status: int, chunks: Iterable[bytes], content_type: str = "application/json", seconds_between: float = 0.0
    ) -> int:
        """Write ``chunks`` with chunked transfer encoding, ``seconds_between`` apart, until they end, the client
        leaves or the server stops; the bytes of the body written (the connection is closed afterwards)."""
        stopping = self.server.owner._stopping
        self.close_connection = True
        sent = 0
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in chunks:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
                if stopping.wait(seconds_between) if seconds_between > 0 else stopping.is_set():
                    return sent
            self.wfile.write(b"0\r\n\r\n")
        except CONNECTION_ERRORS:
            pass
        return sent

    def send_stalled(self, status: int, announced: int) -> None:
        """Write the headers of a body of ``announced`` bytes, then nothing until the server stops."""
        self.close_connection = True
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(announced))
            self.end_headers()
        except CONNECTION_ERRORS:
            return
        self.server.owner._stopping.wait()

    def send_json(
        self, status: int, obj: Any, extra: dict[str, str] | None = None, truncate: bool = False, trickle_s: float = 0.0
    ) -> None:
        """:meth:`send` of ``obj`` encoded as JSON."""
        self.send(status, json.dumps(obj).encode(), extra=extra, truncate=truncate, trickle_s=trickle_s)

    def _dispatch(self, method: str) -> None:
        owner = self.server.owner
        try:
            body = self._read_body()
        except (ValueError, *CONNECTION_ERRORS):  # incomplete request: dropped, not recorded
            self.close_connection = True
            return
        headers = {key.lower(): value for key, value in self.headers.items()}
        owner._record(RecordedRequest(method, self.path, headers, body))
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            owner._route(self, method, path, body)
        except HTTPError as err:
            self.send_json(err.status, error_body(err.status, err.message, err.code))
        except Exception as err:  # a bug in a responder or a matcher: answer 500, keep serving
            self.send_json(500, error_body(500, f"test server error: {type(err).__name__}: {err}"))


class Server(ThreadingHTTPServer):
    """The listening socket on ``127.0.0.1:<free port>``; a daemon thread per connection."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 1024  # the default (5) drops SYNs when 64 clients connect at once
    allow_reuse_address = True

    def __init__(self, owner: Owner) -> None:
        self.owner = owner
        super().__init__(("127.0.0.1", 0), Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:  # quiet: clients vanish on purpose
        return


def parse_multipart(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """``{field name: (filename, bytes)}`` of a ``multipart/form-data`` body (bytes kept exact)."""
    header = Message()
    header["Content-Type"] = content_type
    boundary = header.get_param("boundary")
    if header.get_content_type() != "multipart/form-data" or not isinstance(boundary, str):
        raise HTTPError(400, "Expected a multipart/form-data body with a boundary.")
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in (b"\r\n" + body).split(b"\r\n--" + boundary.encode())[1:]:
        if part.startswith(b"--"):
            break
        head, _, data = part.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        part_headers = BytesHeaderParser().parsebytes(head + b"\r\n\r\n")
        name = part_headers.get_param("name", header="content-disposition")
        if isinstance(name, str):
            fields[name] = (part_headers.get_filename(), data)
    return fields
