"""A local OpenAI-compatible HTTP server for tests and benchmarks (standard library only).

Test code, not shipped in the installed packages. ``OpenAICompatibleServer`` serves real HTTP/1.1
(keep-alive, exact ``Content-Length``) on ``127.0.0.1`` from a daemon thread, one handler thread per
connection, so the official ``openai`` SDK can be pointed at ``server.url`` and faults can be injected at
the byte level. This module holds the server's lifecycle, its test controls, the routing and the chat
completions; the other jobs have their own modules (imported from here, as the tests do):

- ``tests/support/openai_http.py``: the HTTP plumbing (handler, listening server, recorded requests,
  OpenAI-style error bodies, multipart parsing);
- ``tests/support/openai_faults.py``: the scripted faults (``Fault``) and their queue;
- ``tests/support/openai_files.py``: the Files API; ``tests/support/openai_batches.py``: the Batch API.

Endpoints:

- ``POST /v1/chat/completions``: sleeps ``latency_s`` in the handler thread, then consumes the next
  queued ``Fault`` whose ``match`` accepts the request body, else asks the ``Responder``;
- ``POST /v1/files`` (multipart), ``GET /v1/files``, ``GET /v1/files/{id}``,
  ``GET /v1/files/{id}/content``, ``DELETE /v1/files/{id}``;
- ``POST /v1/batches``, ``GET /v1/batches``, ``GET /v1/batches/{id}`` (each poll advances the
  status; the batch completes on poll ``batch_polls_to_complete``, answering every line through the
  responder and the fault queue; as with OpenAI, ``output_file_id`` is ``None`` when no line
  succeeded and ``error_file_id`` is ``None`` when none failed), ``POST /v1/batches/{id}/cancel``;
- ``GET /v1/models`` (as the chosen behaviour answers it, or as ``server.models_fault`` says: an HTML page, an
  endless, stalled or huge answer); anything else is a 404 with an OpenAI-style error body.

A ``behaviour`` (``tests/support/openai_behaviours.py``) makes the server refuse the ``response_format`` types and
answer the ``usage`` fields and ``/v1/models`` as llama-cpp-python's, vLLM's or Ollama's servers do, or lie as some
of them do (accept a ``response_format`` and not enforce it, answer in ``reasoning_content``).

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
from collections.abc import Callable, Iterator
from typing import Any

from tests.support import openai_behaviours as behaviours
from tests.support.openai_batches import Batches
from tests.support.openai_behaviours import Behaviour
from tests.support.openai_faults import MALFORMED_CONTENT, Fault, FaultQueue
from tests.support.openai_files import FileStore
from tests.support.openai_http import Handler, HTTPError, RecordedRequest, Server, error_body, format_seconds
from tests.support.prompt_cache import PromptCache, count_tokens, prompt_text

__all__ = ["Fault", "OpenAICompatibleServer", "RecordedRequest", "Responder"]

Responder = Callable[[dict[str, Any]], dict[str, Any] | str]
"""Given the parsed chat-completions request body, return the answer: a dict is JSON-encoded into
the assistant message content; a str is used as the content verbatim."""


class OpenAICompatibleServer:
    """OpenAI-compatible endpoints on ``127.0.0.1:<free port>`` for tests and benchmarks.

    ``responder`` answers chat requests (see ``Responder``); ``latency_s`` is slept in the handler
    thread before each chat answer; a batch completes on its ``batch_polls_to_complete``-th
    ``GET /v1/batches/{id}`` (0: already completed when created). Use as a context manager or call
    ``start()``/``stop()``. ``behaviour`` imitates a server users run (``tests/support/openai_behaviours.py``:
    its ``response_format`` support, ``usage`` fields and ``/v1/models``); ``served_model`` is the model it lists.
    """

    def __init__(
        self,
        responder: Responder,
        latency_s: float = 0.0,
        batch_polls_to_complete: int = 2,
        behaviour: Behaviour = "openai",
        served_model: str = "test-model",
    ) -> None:
        self._responder = responder
        self.behaviour = behaviour
        self.served_model = served_model
        self.latency_s = latency_s
        self.batch_polls_to_complete = batch_polls_to_complete
        self.requests: list[RecordedRequest] = []
        self.in_flight = 0  # chat requests being answered now
        self.most_in_flight = 0  # the most chat requests answered at once so far
        self.prompt_cache = PromptCache()
        self.models_fault: Fault | None = None  # how GET /v1/models answers instead (a body, endless, stall or huge)
        self._lock = threading.RLock()  # re-entrant: a ``match`` may call back into the server
        self._ids = itertools.count(1)
        self._faults = FaultQueue(self._lock)
        self._files = FileStore(self._lock, self._next_id)
        self._batches = Batches(self)
        self._connections: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._httpd: Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> OpenAICompatibleServer:
        """Bind ``127.0.0.1`` on a free port and serve from a daemon thread; returns ``self``."""
        if self._httpd is not None:
            return self
        self._stopping.clear()
        self._httpd = Server(self)
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
        self._faults.add(faults, match)

    def set_responder(self, responder: Responder) -> None:
        """Replace the responder for the following requests."""
        self._responder = responder

    @property
    def pending_faults(self) -> int:
        """How many injected faults have not been consumed yet."""
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
        return self._faults.take(body)

    @staticmethod
    def _model(body: dict[str, Any]) -> str:
        return str(body.get("model") or "test-model")

    def _answer(
        self,
        body: dict[str, Any],
        content: str | None = None,
        usage: tuple[int, int] | None = None,
        finish_reason: str = "stop",
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
        content, reasoning = behaviours.lie(self.behaviour, body, content)
        model, text = self._model(body), prompt_text(body)
        prompt_tokens, cached_tokens = usage if usage is not None else self.prompt_cache.lookup(model, text)
        self.prompt_cache.remember(model, text)
        completion_tokens = sum(count_tokens(text) for text in (content, reasoning) if text is not None)
        message = {"role": "assistant", "content": content, "refusal": None}
        if reasoning is not None:
            message["reasoning_content"] = reasoning
        counts = behaviours.usage(self.behaviour, prompt_tokens, completion_tokens, cached_tokens)
        return {
            "id": f"chatcmpl-{self._next_id()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            ],
        } | ({"usage": counts} if counts is not None else {})

    def _route(self, handler: Handler, method: str, path: str, body: bytes) -> None:
        parts = path.split("/")[1:]  # "/v1/files/x/content" -> ["v1", "files", "x", "content"]
        if parts[:1] != ["v1"] or len(parts) < 2:
            raise HTTPError(404, f"Invalid URL ({method} {path})", "unknown_url")
        resource, rest = parts[1], parts[2:]
        if resource == "chat" and rest == ["completions"] and method == "POST":
            self._chat(handler, body)
        elif resource == "files":
            self._files.route(handler, method, rest, body)
        elif resource == "batches":
            self._batches.route(handler, method, rest, body)
        elif resource == "models" and not rest and method == "GET" and self.models_fault is not None:
            self._stream_fault(handler, self.models_fault)
        elif resource == "models" and not rest and method == "GET":
            handler.send_json(200, behaviours.models(self.behaviour, self.served_model))
        else:
            raise HTTPError(404, f"Invalid URL ({method} {path})", "unknown_url")

    def _stream_fault(self, handler: Handler, fault: Fault) -> None:
        """Answer as a ``body``, ``endless``, ``stall`` or ``huge`` fault says (a chat request or ``/v1/models``)."""
        if fault.kind == "body":
            handler.send(200, fault.content.encode("utf-8", "surrogatepass"), content_type=fault.content_type)
        elif fault.kind == "stall":
            handler.send_stalled(200, 1000)
        elif fault.kind == "endless":
            start = b'{"id": "chatcmpl-endless", "object": "chat.completion", "choices": ['
            handler.send_stream(200, itertools.chain([start], itertools.repeat(b" ")), seconds_between=fault.seconds)
        elif fault.kind == "huge":
            handler.send_stream(200, _model_list(fault.size))
        else:
            raise ValueError(f"fault kind {fault.kind!r} is not a streamed answer")

    # -- chat -------------------------------------------------------------------------------------

    def _chat(self, handler: Handler, raw: bytes) -> None:
        try:
            body = json.loads(raw)
        except ValueError as err:
            raise HTTPError(400, f"We could not parse the JSON body of your request: {err}") from None
        if not isinstance(body, dict):
            raise HTTPError(400, "The request body must be a JSON object.")
        arrived = self.prompt_cache.lookup(self._model(body), prompt_text(body))  # cache hits are decided on arrival
        with self._lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            self._answer_chat(handler, body, arrived)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _answer_chat(self, handler: Handler, body: dict[str, Any], arrived: tuple[int, int] | None) -> None:
        """Wait ``latency_s``, then answer as the behaviour, the next fault or the responder says."""
        if self.latency_s > 0:
            time.sleep(self.latency_s)
        refused = behaviours.refusal(self.behaviour, body)
        if refused is not None:
            handler.send_json(refused.status, refused.body)
            return
        fault = self._take_fault(body)
        if fault is None:
            handler.send_json(200, self._answer(body, usage=arrived))
        elif fault.kind == "status":
            extra = {"Retry-After": format_seconds(fault.retry_after)} if fault.retry_after is not None else None
            message = "Rate limit reached (injected)" if fault.status == 429 else f"Injected error {fault.status}"
            message = fault.content or message
            handler.send_json(fault.status, error_body(fault.status, message), extra=extra)
        elif fault.kind == "hang":
            self._stopping.wait(fault.seconds)
            handler.send_json(200, self._answer(body, usage=arrived))
        elif fault.kind == "malformed_json":
            handler.send_json(200, self._answer(body, MALFORMED_CONTENT, usage=arrived))
        elif fault.kind == "truncated":
            handler.send_json(200, self._answer(body, usage=arrived), truncate=True)
        elif fault.kind == "content":
            handler.send_json(200, self._answer(body, fault.content, usage=arrived, finish_reason=fault.finish_reason))
        elif fault.kind == "trickle":
            handler.send_json(200, self._answer(body, usage=arrived), trickle_s=fault.seconds)
        elif fault.kind in ("body", "endless", "stall", "huge"):
            self._stream_fault(handler, fault)
        else:  # pragma: no cover - Literal exhausts the kinds
            raise ValueError(f"unknown fault kind {fault.kind!r}")


def _model_list(size: int, piece: int = 64 * 1024) -> Iterator[bytes]:
    """A ``GET /v1/models`` body of about ``size`` bytes, in pieces of ``piece`` bytes."""
    entries = (b'{"id": "model-%08d", "object": "model"}, ' % n for n in itertools.count())
    yield b'{"object": "list", "data": ['
    sent, buffer = 0, bytearray()
    for entry in entries:
        buffer += entry
        if len(buffer) >= piece:
            yield bytes(buffer)
            sent += len(buffer)
            buffer.clear()
            if sent >= size:
                break
    yield b'{"id": "last", "object": "model"}]}'
