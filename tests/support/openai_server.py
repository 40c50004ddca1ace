"""A local OpenAI-compatible HTTP server for tests and benchmarks (standard library only).

Test code, not shipped in the installed packages; one module of ~780 lines because the chat, files and
batch endpoints share the server's state (fault queue, stored files, batches) and its HTTP plumbing.

``OpenAICompatibleServer`` serves real HTTP/1.1 (keep-alive, exact ``Content-Length``) on
``127.0.0.1`` from a daemon thread, one handler thread per connection, so the official ``openai``
SDK can be pointed at ``server.url`` and faults can be injected at the byte level:

- ``POST /v1/chat/completions``: sleeps ``latency_s`` in the handler thread, then consumes the next
  queued ``Fault`` whose ``match`` accepts the request body, else asks the ``Responder``;
- ``POST /v1/files`` (multipart), ``GET /v1/files``, ``GET /v1/files/{id}``,
  ``GET /v1/files/{id}/content``, ``DELETE /v1/files/{id}``;
- ``POST /v1/batches``, ``GET /v1/batches``, ``GET /v1/batches/{id}`` (each poll advances the
  status; the batch completes on poll ``batch_polls_to_complete``, answering every line through the
  responder and the fault queue; as with OpenAI, ``output_file_id`` is ``None`` when no line
  succeeded and ``error_file_id`` is ``None`` when none failed), ``POST /v1/batches/{id}/cancel``;
- ``GET /v1/models``; anything else is a 404 with an OpenAI-style error body.

Every answer's ``usage`` counts tokens and reports automatic prompt caching the way the OpenAI API does
(``prompt_tokens_details.cached_tokens``: the longest already-answered prompt prefix, in 128-token steps from
1024 tokens, per model), in chat answers and batch output lines alike; the tokenizer and the rule are in
``tests/support/prompt_cache.py`` (``server.prompt_cache``; ``clear()`` forgets every prompt).

Every complete request is recorded in ``server.requests`` (header names lower-case); a request
whose client vanished before sending its whole body is dropped unrecorded. Responder exceptions
become 500s. Nothing is logged to stderr. No Dagster import.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.message import Message
from email.parser import BytesHeaderParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from tests.support.prompt_cache import PromptCache, count_tokens, prompt_text

__all__ = ["Fault", "OpenAICompatibleServer", "RecordedRequest", "Responder"]

Responder = Callable[[dict[str, Any]], dict[str, Any] | str]
"""Given the parsed chat-completions request body, return the answer: a dict is JSON-encoded into
the assistant message content; a str is used as the content verbatim."""

FaultKind = Literal["status", "hang", "malformed_json", "truncated", "content", "trickle", "body"]
MALFORMED_CONTENT = "Sure! Here is the answer: {chunk: 3"
_CONNECTION_ERRORS = (OSError,)  # BrokenPipe, ConnectionReset, timeouts: the client has gone


@dataclass(frozen=True)
class Fault:
    """One injected failure, consumed by one chat request (or one Batch API line).

    - ``status``: HTTP ``status`` with an OpenAI-style error body (+ ``Retry-After: retry_after``, a number of
      seconds or any text, sent verbatim);
    - ``hang``: sleep ``seconds`` before answering normally (the client's timeout should fire first);
    - ``malformed_json``: a 200 whose assistant content is not JSON;
    - ``truncated``: a 200 announcing the full ``Content-Length`` but only half the body, then the
      connection is closed;
    - ``content``: a normal 200 whose assistant content is ``content`` verbatim;
    - ``trickle``: a normal 200 whose body is sent one byte at a time, ``seconds`` apart (each byte
      arrives well within a read timeout, the whole answer does not);
    - ``body``: a 200 whose whole HTTP body is ``content`` with ``Content-Type: content_type`` (an HTML
      error page from a proxy, JSON of the wrong shape, an oversized answer).

    In a batch, ``hang`` and ``trickle`` answer normally without sleeping; ``truncated`` and ``body``
    become a line with ``"response": null`` and ``"error": {"code": "server_error", ...}``.
    """

    kind: FaultKind
    status: int = 500
    retry_after: float | str | None = None
    seconds: float = 0.0
    content: str = ""
    content_type: str = "application/json"

    @classmethod
    def rate_limited(cls, retry_after: float | str | None = None) -> Fault:
        """HTTP 429, with ``Retry-After`` when ``retry_after`` is given (a number, or text sent verbatim)."""
        return cls("status", status=429, retry_after=retry_after)

    @classmethod
    def server_error(cls, status: int = 500) -> Fault:
        """HTTP 5xx (500 unless told)."""
        return cls("status", status=status)

    @classmethod
    def hang(cls, seconds: float) -> Fault:
        """Sleep ``seconds`` before answering."""
        return cls("hang", seconds=seconds)

    @classmethod
    def malformed_json(cls) -> Fault:
        """A 200 whose content is not JSON."""
        return cls("malformed_json")

    @classmethod
    def truncated(cls) -> Fault:
        """A 200 whose body stops half-way, then the connection closes."""
        return cls("truncated")

    @classmethod
    def raw(cls, content: str) -> Fault:
        """A 200 whose assistant content is ``content`` verbatim."""
        return cls("content", content=content)

    @classmethod
    def trickle(cls, seconds_per_byte: float) -> Fault:
        """A normal 200 whose body is written one byte every ``seconds_per_byte``."""
        return cls("trickle", seconds=seconds_per_byte)

    @classmethod
    def http_body(cls, body: str, content_type: str = "text/html; charset=utf-8") -> Fault:
        """A 200 whose HTTP body is ``body`` verbatim (UTF-8; a lone surrogate as its 3 bytes, as a broken server
        would send it), sent as ``content_type`` (not a chat completion)."""
        return cls("body", content=body, content_type=content_type)


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


@dataclass
class _StoredFile:
    meta: dict[str, Any]
    data: bytes


@dataclass
class _Batch:
    obj: dict[str, Any]
    polls: int = 0


class _HTTPError(Exception):
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


def _error_body(status: int, message: str, code: str | None = None) -> dict[str, Any]:
    kind, default_code = _error_type(status)
    return {"error": {"message": message, "type": kind, "param": None, "code": code or default_code}}


def _format_seconds(value: float | str) -> str:
    return value if isinstance(value, str) else f"{value:g}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # TCP_NODELAY: answers leave at once
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet by default
        return

    def setup(self) -> None:
        super().setup()
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        except _CONNECTION_ERRORS:
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

    def _send(
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
        except _CONNECTION_ERRORS:
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

    def _send_json(
        self, status: int, obj: Any, extra: dict[str, str] | None = None, truncate: bool = False, trickle_s: float = 0.0
    ) -> None:
        self._send(status, json.dumps(obj).encode(), extra=extra, truncate=truncate, trickle_s=trickle_s)

    def _dispatch(self, method: str) -> None:
        owner = self.server.owner
        try:
            body = self._read_body()
        except (ValueError, *_CONNECTION_ERRORS):  # incomplete request: dropped, not recorded
            self.close_connection = True
            return
        headers = {key.lower(): value for key, value in self.headers.items()}
        owner._record(RecordedRequest(method, self.path, headers, body))
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            owner._route(self, method, path, body)
        except _HTTPError as err:
            self._send_json(err.status, _error_body(err.status, err.message, err.code))
        except Exception as err:  # a bug in a responder or a matcher: answer 500, keep serving
            self._send_json(500, _error_body(500, f"test server error: {type(err).__name__}: {err}"))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 1024  # the default (5) drops SYNs when 64 clients connect at once
    allow_reuse_address = True

    def __init__(self, owner: OpenAICompatibleServer) -> None:
        self.owner = owner
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:  # quiet: clients vanish on purpose
        return


class OpenAICompatibleServer:
    """OpenAI-compatible endpoints on ``127.0.0.1:<free port>`` for tests and benchmarks.

    ``responder`` answers chat requests (see ``Responder``); ``latency_s`` is slept in the handler
    thread before each chat answer; a batch completes on its ``batch_polls_to_complete``-th
    ``GET /v1/batches/{id}`` (0: already completed when created). Use as a context manager or call
    ``start()``/``stop()``.
    """

    def __init__(self, responder: Responder, latency_s: float = 0.0, batch_polls_to_complete: int = 2) -> None:
        self._responder = responder
        self.latency_s = latency_s
        self.batch_polls_to_complete = batch_polls_to_complete
        self.requests: list[RecordedRequest] = []
        self.prompt_cache = PromptCache()
        self._lock = threading.RLock()  # re-entrant: a ``match`` may call back into the server
        self._batch_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._faults: list[tuple[Fault, Callable[[dict[str, Any]], bool] | None]] = []
        self._files: dict[str, _StoredFile] = {}
        self._batches: dict[str, _Batch] = {}
        self._connections: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> OpenAICompatibleServer:
        """Bind ``127.0.0.1`` on a free port and serve from a daemon thread; returns ``self``."""
        if self._httpd is not None:
            return self
        self._stopping.clear()
        self._httpd = _Server(self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="openai-testserver", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, close open connections and wake hanging handlers (idempotent)."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> OpenAICompatibleServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>/v1``: the SDK's ``base_url`` (the server must be started)."""
        if self._httpd is None:
            raise RuntimeError("server not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    # -- test controls ----------------------------------------------------------------------------

    def chat_requests(self) -> list[RecordedRequest]:
        """The ``POST /v1/chat/completions`` requests received so far, in arrival order."""
        with self._lock:
            return [r for r in self.requests if r.method == "POST" and r.path.split("?")[0] == "/v1/chat/completions"]

    def inject(self, *faults: Fault, match: Callable[[dict[str, Any]], bool] | None = None) -> None:
        """Queue ``faults``: each later chat request (or batch line) whose body satisfies ``match``
        (every one when ``None``) consumes the next of them, in order; unmatched requests pass."""
        with self._lock:
            self._faults.extend((fault, match) for fault in faults)

    def set_responder(self, responder: Responder) -> None:
        """Replace the responder for the following requests."""
        self._responder = responder

    @property
    def pending_faults(self) -> int:
        """How many injected faults have not been consumed yet."""
        with self._lock:
            return len(self._faults)

    # -- internals --------------------------------------------------------------------------------

    def _next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _take_fault(self, body: dict[str, Any]) -> Fault | None:
        """Remove and return the first queued fault whose ``match`` accepts ``body`` (or ``None``)."""
        with self._lock:
            for index, (fault, match) in enumerate(self._faults):
                if match is None or match(body):
                    del self._faults[index]
                    return fault
        return None

    @staticmethod
    def _model(body: dict[str, Any]) -> str:
        return str(body.get("model") or "test-model")

    def _answer(
        self, body: dict[str, Any], content: str | None = None, usage: tuple[int, int] | None = None
    ) -> dict[str, Any]:
        """A chat completion for ``body``; asks the responder unless ``content`` is given. ``usage``: the
        ``(prompt_tokens, cached_tokens)`` looked up when the request arrived (now when ``None``); the prompt is
        remembered by the prompt cache."""
        if content is None:
            answer = self._responder(body)
            if isinstance(answer, dict):
                content = json.dumps(answer, ensure_ascii=False)
            elif isinstance(answer, str):
                content = answer
            else:
                raise TypeError(f"responder returned {type(answer).__name__}, expected dict or str")
        model, text = self._model(body), prompt_text(body)
        prompt_tokens, cached_tokens = usage if usage is not None else self.prompt_cache.lookup(model, text)
        self.prompt_cache.remember(model, text)
        completion_tokens = count_tokens(content)
        return {
            "id": f"chatcmpl-{self._next_id()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": cached_tokens, "audio_tokens": 0},
            },
        }

    def _route(self, handler: _Handler, method: str, path: str, body: bytes) -> None:
        parts = path.split("/")[1:]  # "/v1/files/x/content" -> ["v1", "files", "x", "content"]
        if parts[:1] != ["v1"] or len(parts) < 2:
            raise _HTTPError(404, f"Invalid URL ({method} {path})", "unknown_url")
        resource, rest = parts[1], parts[2:]
        if resource == "chat" and rest == ["completions"] and method == "POST":
            self._chat(handler, body)
        elif resource == "files":
            self._files_route(handler, method, rest, body)
        elif resource == "batches":
            self._batches_route(handler, method, rest, body)
        elif resource == "models" and not rest and method == "GET":
            handler._send_json(200, {"object": "list", "data": [{"id": "test-model", "object": "model"}]})
        else:
            raise _HTTPError(404, f"Invalid URL ({method} {path})", "unknown_url")

    # -- chat -------------------------------------------------------------------------------------

    def _chat(self, handler: _Handler, raw: bytes) -> None:
        try:
            body = json.loads(raw)
        except ValueError as err:
            raise _HTTPError(400, f"We could not parse the JSON body of your request: {err}") from None
        if not isinstance(body, dict):
            raise _HTTPError(400, "The request body must be a JSON object.")
        arrived = self.prompt_cache.lookup(self._model(body), prompt_text(body))  # cache hits are decided on arrival
        if self.latency_s > 0:
            time.sleep(self.latency_s)
        fault = self._take_fault(body)
        if fault is None:
            handler._send_json(200, self._answer(body, usage=arrived))
        elif fault.kind == "status":
            extra = {"Retry-After": _format_seconds(fault.retry_after)} if fault.retry_after is not None else None
            message = "Rate limit reached (injected)" if fault.status == 429 else f"Injected error {fault.status}"
            handler._send_json(fault.status, _error_body(fault.status, message), extra=extra)
        elif fault.kind == "hang":
            self._stopping.wait(fault.seconds)
            handler._send_json(200, self._answer(body, usage=arrived))
        elif fault.kind == "malformed_json":
            handler._send_json(200, self._answer(body, MALFORMED_CONTENT, usage=arrived))
        elif fault.kind == "truncated":
            handler._send_json(200, self._answer(body, usage=arrived), truncate=True)
        elif fault.kind == "content":
            handler._send_json(200, self._answer(body, fault.content, usage=arrived))
        elif fault.kind == "trickle":
            handler._send_json(200, self._answer(body, usage=arrived), trickle_s=fault.seconds)
        elif fault.kind == "body":
            handler._send(200, fault.content.encode("utf-8", "surrogatepass"), content_type=fault.content_type)
        else:  # pragma: no cover - Literal exhausts the kinds
            raise ValueError(f"unknown fault kind {fault.kind!r}")

    # -- files ------------------------------------------------------------------------------------

    def _add_file(self, filename: str, purpose: str, data: bytes) -> dict[str, Any]:
        file_id = f"file-{self._next_id()}"
        meta = {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }
        with self._lock:
            self._files[file_id] = _StoredFile(meta, data)
        return meta

    def _get_file(self, file_id: str) -> _StoredFile:
        with self._lock:
            stored = self._files.get(file_id)
        if stored is None:
            raise _HTTPError(404, f"No such File object: {file_id}")
        return stored

    def _files_route(self, handler: _Handler, method: str, rest: list[str], body: bytes) -> None:
        if method == "POST" and not rest:
            fields = _parse_multipart(handler.headers.get("Content-Type", ""), body)
            if "file" not in fields or "purpose" not in fields:
                raise _HTTPError(400, "Missing required parameter: 'file' and 'purpose' are required.")
            filename, data = fields["file"]
            purpose = fields["purpose"][1].decode()
            handler._send_json(200, self._add_file(filename or "upload", purpose, data))
        elif method == "GET" and not rest:
            with self._lock:
                data = [f.meta for f in self._files.values()]
            handler._send_json(200, {"object": "list", "data": data, "has_more": False})
        elif method == "GET" and len(rest) == 1:
            handler._send_json(200, self._get_file(rest[0]).meta)
        elif method == "GET" and len(rest) == 2 and rest[1] == "content":
            handler._send(200, self._get_file(rest[0]).data, content_type="application/octet-stream")
        elif method == "DELETE" and len(rest) == 1:
            self._get_file(rest[0])
            with self._lock:
                del self._files[rest[0]]
            handler._send_json(200, {"id": rest[0], "object": "file", "deleted": True})
        else:
            raise _HTTPError(404, f"Invalid URL ({method} /v1/files/{'/'.join(rest)})", "unknown_url")

    # -- batches ----------------------------------------------------------------------------------

    def _batches_route(self, handler: _Handler, method: str, rest: list[str], body: bytes) -> None:
        if method == "POST" and not rest:
            handler._send_json(200, self._create_batch(body))
        elif method == "GET" and not rest:
            with self._batch_lock:
                data = [dict(b.obj) for b in self._batches.values()]
            handler._send_json(200, {"object": "list", "data": data, "has_more": False})
        elif method == "GET" and len(rest) == 1:
            handler._send_json(200, self._poll_batch(rest[0]))
        elif method == "POST" and len(rest) == 2 and rest[1] == "cancel":
            handler._send_json(200, self._cancel_batch(rest[0]))
        else:
            raise _HTTPError(404, f"Invalid URL ({method} /v1/batches/{'/'.join(rest)})", "unknown_url")

    def _create_batch(self, raw: bytes) -> dict[str, Any]:
        try:
            request = json.loads(raw)
        except ValueError:
            raise _HTTPError(400, "We could not parse the JSON body of your request.") from None
        input_file_id = request.get("input_file_id")
        if request.get("endpoint") != "/v1/chat/completions":
            raise _HTTPError(400, f"Unsupported endpoint {request.get('endpoint')!r} (test server)")
        stored = self._get_file(str(input_file_id))
        lines = [line for line in stored.data.splitlines() if line.strip()]
        batch_id = f"batch-{self._next_id()}"
        obj: dict[str, Any] = {
            "id": batch_id,
            "object": "batch",
            "endpoint": request["endpoint"],
            "errors": None,
            "input_file_id": input_file_id,
            "completion_window": request.get("completion_window", "24h"),
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": int(time.time()),
            "in_progress_at": None,
            "expires_at": int(time.time()) + 86400,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            "metadata": request.get("metadata"),
        }
        batch = _Batch(obj)
        with self._batch_lock:
            self._batches[batch_id] = batch
            if self.batch_polls_to_complete <= 0:
                self._complete_batch(batch)
            return dict(obj)

    def _poll_batch(self, batch_id: str) -> dict[str, Any]:
        with self._batch_lock:
            batch = self._batches.get(batch_id)
            if batch is None:
                raise _HTTPError(404, f"No such Batch object: {batch_id}")
            obj = batch.obj
            if obj["status"] in ("validating", "in_progress", "finalizing"):
                batch.polls += 1
                now = int(time.time())
                if batch.polls >= self.batch_polls_to_complete:
                    self._complete_batch(batch)
                elif batch.polls == self.batch_polls_to_complete - 1 and batch.polls > 1:
                    obj["status"], obj["finalizing_at"] = "finalizing", now
                else:
                    obj["status"] = "in_progress"
                    obj["in_progress_at"] = obj["in_progress_at"] or now
            return dict(obj)

    def _cancel_batch(self, batch_id: str) -> dict[str, Any]:
        with self._batch_lock:
            batch = self._batches.get(batch_id)
            if batch is None:
                raise _HTTPError(404, f"No such Batch object: {batch_id}")
            if batch.obj["status"] in ("validating", "in_progress", "finalizing", "cancelling"):
                now = int(time.time())
                batch.obj.update(status="cancelled", cancelling_at=now, cancelled_at=now)
            return dict(batch.obj)

    def _complete_batch(self, batch: _Batch) -> None:
        """Answer every input line (faults apply per line); write the output/error files.

        The output file exists when at least one line succeeded, the error file when one failed
        (as with OpenAI, either id may stay ``None``). Called with ``_batch_lock`` held.
        """
        obj = batch.obj
        stored = self._get_file(obj["input_file_id"])
        outputs: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        model: str | None = None
        for raw_line in stored.data.splitlines():
            if not raw_line.strip():
                continue
            line_id = f"batch_req_{self._next_id()}"
            custom_id = None
            try:
                line = json.loads(raw_line)
                custom_id = line.get("custom_id")
                body = line.get("body")
                if line.get("url") != "/v1/chat/completions" or not isinstance(body, dict):
                    raise ValueError("each line needs url /v1/chat/completions and an object body")
            except (ValueError, AttributeError) as err:
                errors.append(_batch_error_line(line_id, custom_id, "invalid_request", str(err)))
                continue
            model = model or body.get("model")
            request_id = f"req_{self._next_id()}"
            try:
                fault = self._take_fault(body)
                if fault is not None and fault.kind == "status":
                    errors.append(
                        {
                            "id": line_id,
                            "custom_id": custom_id,
                            "response": {
                                "status_code": fault.status,
                                "request_id": request_id,
                                "body": _error_body(fault.status, f"Injected error {fault.status}"),
                            },
                            "error": None,
                        }
                    )
                    continue
                if fault is not None and fault.kind in ("truncated", "body"):
                    message = f"Injected {'truncated' if fault.kind == 'truncated' else 'non-completion'} answer"
                    errors.append(_batch_error_line(line_id, custom_id, "server_error", message))
                    continue
                content = None
                if fault is not None and fault.kind == "malformed_json":
                    content = MALFORMED_CONTENT
                elif fault is not None and fault.kind == "content":
                    content = fault.content
                completion = self._answer(body, content)
            except Exception as err:
                errors.append(
                    {
                        "id": line_id,
                        "custom_id": custom_id,
                        "response": {
                            "status_code": 500,
                            "request_id": request_id,
                            "body": _error_body(500, f"test server error: {type(err).__name__}: {err}"),
                        },
                        "error": None,
                    }
                )
                continue
            outputs.append(
                {
                    "id": line_id,
                    "custom_id": custom_id,
                    "response": {"status_code": 200, "request_id": request_id, "body": completion},
                    "error": None,
                }
            )
        name = obj["id"]
        if outputs:
            obj["output_file_id"] = self._add_file(f"{name}_output.jsonl", "batch_output", _jsonl(outputs))["id"]
        if errors:
            obj["error_file_id"] = self._add_file(f"{name}_error.jsonl", "batch_output", _jsonl(errors))["id"]
        now = int(time.time())
        obj.update(
            status="completed",
            model=model,
            in_progress_at=obj["in_progress_at"] or now,
            finalizing_at=obj["finalizing_at"] or now,
            completed_at=now,
            request_counts={"total": len(outputs) + len(errors), "completed": len(outputs), "failed": len(errors)},
        )


def _batch_error_line(line_id: str, custom_id: str | None, code: str, message: str) -> dict[str, Any]:
    return {"id": line_id, "custom_id": custom_id, "response": None, "error": {"code": code, "message": message}}


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(row, ensure_ascii=False).encode() + b"\n" for row in rows)


def _parse_multipart(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """``{field name: (filename, bytes)}`` of a ``multipart/form-data`` body (bytes kept exact)."""
    header = Message()
    header["Content-Type"] = content_type
    boundary = header.get_param("boundary")
    if header.get_content_type() != "multipart/form-data" or not isinstance(boundary, str):
        raise _HTTPError(400, "Expected a multipart/form-data body with a boundary.")
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
