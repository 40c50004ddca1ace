"""The Batch API of the local OpenAI-compatible test server (``tests/support/openai_server.py``).

``Batches`` serves ``POST /v1/batches``, ``GET /v1/batches``, ``GET /v1/batches/{id}`` and
``POST /v1/batches/{id}/cancel``. Each poll advances the status; the batch completes on poll
``server.batch_polls_to_complete`` (0: completed when created), answering every input line through the
server's responder and fault queue. As with OpenAI, ``output_file_id`` is ``None`` when no line succeeded and
``error_file_id`` is ``None`` when none failed. Standard library only.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tests.support.openai_faults import MALFORMED_CONTENT
from tests.support.openai_http import Handler, HTTPError, error_body

if TYPE_CHECKING:
    from tests.support.openai_server import OpenAICompatibleServer

_RUNNING = ("validating", "in_progress", "finalizing")


@dataclass
class _Batch:
    obj: dict[str, Any]
    polls: int = 0


class Batches:
    """The batches of ``server`` by id, guarded by their own lock (completion answers lines under it)."""

    def __init__(self, server: OpenAICompatibleServer) -> None:
        self._server = server
        self._lock = threading.Lock()
        self._batches: dict[str, _Batch] = {}

    def route(self, handler: Handler, method: str, rest: list[str], body: bytes) -> None:
        """Answer ``method /v1/batches/<rest...>``."""
        if method == "POST" and not rest:
            handler.send_json(200, self._create(body))
        elif method == "GET" and not rest:
            with self._lock:
                data = [dict(b.obj) for b in self._batches.values()]
            handler.send_json(200, {"object": "list", "data": data, "has_more": False})
        elif method == "GET" and len(rest) == 1:
            handler.send_json(200, self._poll(rest[0]))
        elif method == "POST" and len(rest) == 2 and rest[1] == "cancel":
            handler.send_json(200, self._cancel(rest[0]))
        else:
            raise HTTPError(404, f"Invalid URL ({method} /v1/batches/{'/'.join(rest)})", "unknown_url")

    def _create(self, raw: bytes) -> dict[str, Any]:
        try:
            request = json.loads(raw)
        except ValueError:
            raise HTTPError(400, "We could not parse the JSON body of your request.") from None
        input_file_id = request.get("input_file_id")
        if request.get("endpoint") != "/v1/chat/completions":
            raise HTTPError(400, f"Unsupported endpoint {request.get('endpoint')!r} (test server)")
        stored = self._server._files.get(str(input_file_id))
        lines = [line for line in stored.data.splitlines() if line.strip()]
        batch_id = f"batch-{self._server._next_id()}"
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
        with self._lock:
            self._batches[batch_id] = batch
            if self._server.batch_polls_to_complete <= 0:
                self._complete(batch)
            return dict(obj)

    def _get(self, batch_id: str) -> _Batch:
        """The batch ``batch_id`` (call with the lock held); an HTTP 404 when there is none."""
        batch = self._batches.get(batch_id)
        if batch is None:
            raise HTTPError(404, f"No such Batch object: {batch_id}")
        return batch

    def _poll(self, batch_id: str) -> dict[str, Any]:
        with self._lock:
            batch = self._get(batch_id)
            obj = batch.obj
            if obj["status"] in _RUNNING:
                batch.polls += 1
                now = int(time.time())
                polls_to_complete = self._server.batch_polls_to_complete
                if batch.polls >= polls_to_complete:
                    self._complete(batch)
                elif batch.polls == polls_to_complete - 1 and batch.polls > 1:
                    obj["status"], obj["finalizing_at"] = "finalizing", now
                else:
                    obj["status"] = "in_progress"
                    obj["in_progress_at"] = obj["in_progress_at"] or now
            return dict(obj)

    def _cancel(self, batch_id: str) -> dict[str, Any]:
        with self._lock:
            batch = self._get(batch_id)
            if batch.obj["status"] in (*_RUNNING, "cancelling"):
                now = int(time.time())
                batch.obj.update(status="cancelled", cancelling_at=now, cancelled_at=now)
            return dict(batch.obj)

    def _complete(self, batch: _Batch) -> None:
        """Answer every input line (faults apply per line); write the output/error files.

        The output file exists when at least one line succeeded, the error file when one failed
        (as with OpenAI, either id may stay ``None``). Called with the batches' lock held.
        """
        obj = batch.obj
        files = self._server._files
        stored = files.get(obj["input_file_id"])
        outputs: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        model: str | None = None
        for raw_line in stored.data.splitlines():
            if not raw_line.strip():
                continue
            line_id = f"batch_req_{self._server._next_id()}"
            custom_id = None
            try:
                line = json.loads(raw_line)
                custom_id = line.get("custom_id")
                body = line.get("body")
                if line.get("url") != "/v1/chat/completions" or not isinstance(body, dict):
                    raise ValueError("each line needs url /v1/chat/completions and an object body")
            except (ValueError, AttributeError) as err:
                errors.append(_error_line(line_id, custom_id, "invalid_request", str(err)))
                continue
            model = model or body.get("model")
            answered, ok = self._answer_line(line_id, custom_id, body)
            (outputs if ok else errors).append(answered)
        name = obj["id"]
        if outputs:
            obj["output_file_id"] = files.add(f"{name}_output.jsonl", "batch_output", _jsonl(outputs))["id"]
        if errors:
            obj["error_file_id"] = files.add(f"{name}_error.jsonl", "batch_output", _jsonl(errors))["id"]
        now = int(time.time())
        obj.update(
            status="completed",
            model=model,
            in_progress_at=obj["in_progress_at"] or now,
            finalizing_at=obj["finalizing_at"] or now,
            completed_at=now,
            request_counts={"total": len(outputs) + len(errors), "completed": len(outputs), "failed": len(errors)},
        )

    def _answer_line(self, line_id: str, custom_id: str | None, body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """(the output or error line answering one valid input line, whether it succeeded): the next matching
        fault applies, else the responder answers; a responder exception is a 500 line."""
        request_id = f"req_{self._server._next_id()}"
        try:
            fault = self._server._take_fault(body)
            if fault is not None and fault.kind == "status":
                failure = error_body(fault.status, fault.content or f"Injected error {fault.status}")
                return _response_line(line_id, custom_id, fault.status, request_id, failure), False
            if fault is not None and fault.kind in ("truncated", "body"):
                message = f"Injected {'truncated' if fault.kind == 'truncated' else 'non-completion'} answer"
                return _error_line(line_id, custom_id, "server_error", message), False
            content = None
            if fault is not None and fault.kind == "malformed_json":
                content = MALFORMED_CONTENT
            elif fault is not None and fault.kind == "content":
                content = fault.content
            finish_reason = fault.finish_reason if fault is not None else "stop"
            completion = self._server._answer(body, content, finish_reason=finish_reason)
        except Exception as err:
            message = f"test server error: {type(err).__name__}: {err}"
            return _response_line(line_id, custom_id, 500, request_id, error_body(500, message)), False
        return _response_line(line_id, custom_id, 200, request_id, completion), True


def _response_line(
    line_id: str, custom_id: str | None, status: int, request_id: str, body: dict[str, Any]
) -> dict[str, Any]:
    return {
        "id": line_id,
        "custom_id": custom_id,
        "response": {"status_code": status, "request_id": request_id, "body": body},
        "error": None,
    }


def _error_line(line_id: str, custom_id: str | None, code: str, message: str) -> dict[str, Any]:
    return {"id": line_id, "custom_id": custom_id, "response": None, "error": {"code": code, "message": message}}


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(row, ensure_ascii=False).encode() + b"\n" for row in rows)
