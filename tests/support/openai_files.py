"""The Files API of the local OpenAI-compatible test server (``tests/support/openai_server.py``).

``FileStore`` keeps uploaded files (and the Batch API's output and error files) in memory and serves
``POST /v1/files`` (multipart), ``GET /v1/files``, ``GET /v1/files/{id}``, ``GET /v1/files/{id}/content`` and
``DELETE /v1/files/{id}``. Standard library only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.support.openai_http import Handler, HTTPError, parse_multipart


@dataclass
class StoredFile:
    """One file: its OpenAI file object and its bytes."""

    meta: dict[str, Any]
    data: bytes


class FileStore:
    """Files by id, guarded by the server's ``lock``; ``next_id`` numbers them (shared with the server's ids)."""

    def __init__(self, lock: threading.RLock, next_id: Callable[[], int]) -> None:
        self._lock = lock
        self._next_id = next_id
        self._files: dict[str, StoredFile] = {}

    def add(self, filename: str, purpose: str, data: bytes) -> dict[str, Any]:
        """Store ``data`` as a new processed file; its file object."""
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
            self._files[file_id] = StoredFile(meta, data)
        return meta

    def get(self, file_id: str) -> StoredFile:
        """The file ``file_id``; an HTTP 404 when there is none."""
        with self._lock:
            stored = self._files.get(file_id)
        if stored is None:
            raise HTTPError(404, f"No such File object: {file_id}")
        return stored

    def route(self, handler: Handler, method: str, rest: list[str], body: bytes) -> None:
        """Answer ``method /v1/files/<rest...>``."""
        if method == "POST" and not rest:
            fields = parse_multipart(handler.headers.get("Content-Type", ""), body)
            if "file" not in fields or "purpose" not in fields:
                raise HTTPError(400, "Missing required parameter: 'file' and 'purpose' are required.")
            filename, data = fields["file"]
            purpose = fields["purpose"][1].decode()
            handler.send_json(200, self.add(filename or "upload", purpose, data))
        elif method == "GET" and not rest:
            with self._lock:
                data = [f.meta for f in self._files.values()]
            handler.send_json(200, {"object": "list", "data": data, "has_more": False})
        elif method == "GET" and len(rest) == 1:
            handler.send_json(200, self.get(rest[0]).meta)
        elif method == "GET" and len(rest) == 2 and rest[1] == "content":
            handler.send(200, self.get(rest[0]).data, content_type="application/octet-stream")
        elif method == "DELETE" and len(rest) == 1:
            self.get(rest[0])
            with self._lock:
                del self._files[rest[0]]
            handler.send_json(200, {"id": rest[0], "object": "file", "deleted": True})
        else:
            raise HTTPError(404, f"Invalid URL ({method} /v1/files/{'/'.join(rest)})", "unknown_url")
