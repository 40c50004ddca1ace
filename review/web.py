"""The review queue in a browser: Starlette + Jinja2 pages, served by uvicorn.

Pages: ``/`` (queues and their progress), ``/queue/{task}/{kind}`` (items, filtered by status,
flagged first, a page at a time), ``/queue/{task}/{kind}/accept-unflagged`` (confirm, then accept
every unflagged pending item under the reviewer's name), ``/item/{item_id}`` (one item: word diff,
context, flags, its position in the queue, decision buttons and keyboard shortcuts) and
``/healthz``. Decisions are ``POST`` forms; after one the page moves to the next item of the
queue under the same status filter. A decision without a reviewer name asks for the name, and
saving it comes back to the item.

Security, because the pages show untrusted documents and change the store:

* every page is autoescaped, and the diff escapes each piece of text (:mod:`review.diff`);
* clients are trusted without a token only from a loopback address *and* with a loopback
  ``Host`` header (or the host of ``review_base_url``), which defeats DNS rebinding; with
  ``token`` set, other clients must present it (``?token=`` once, then an HttpOnly
  ``SameSite=Strict`` cookie, or ``Authorization: Bearer``), else 401; without a token they get 403;
* every ``POST`` carries a per-session CSRF token (cookie + hidden field, compared with
  :func:`hmac.compare_digest`) and, when the browser sends ``Origin`` or ``Referer``, it must be
  this site's origin; otherwise 403 and nothing changes;
* responses carry a nonce-based ``Content-Security-Policy``, ``X-Content-Type-Options``,
  ``Referrer-Policy``, ``X-Frame-Options`` and ``Cache-Control: no-store`` (pages only);
* :func:`serve` refuses a non-loopback bind without a token (:class:`UnsafeBindError`) and
  redacts ``?token=`` from uvicorn's logs (:class:`RedactTokenFilter`).
"""

from __future__ import annotations

import contextlib
import copy
import hmac
import ipaddress
import json
import logging
import re
import secrets
import sys
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

import jinja2
import uvicorn
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from review.diff import inline_diff, word_diff
from review.store import (
    ConflictError,
    InvalidDecisionError,
    QueueStats,
    ReviewItem,
    ReviewStore,
    UnknownItemError,
    clean_reviewer,
)

HERE = Path(__file__).resolve().parent
TOKEN_COOKIE = "conteb_review_token"
CSRF_COOKIE = "conteb_review_csrf"
REVIEWER_COOKIE = "conteb_review_reviewer"
CSRF_FIELD = "csrf_token"
STATUS_FILTERS = ("pending", "accepted", "rejected", "edited", "all")
ACTIONS = ("accept", "reject", "edit")
PAGE_SIZES = (25, 50, 100)
"""Items per queue page a reader may choose (``?size=``); the first is the default."""
MAX_FORM_BYTES = 1 << 20
BULK_NOTE = "accept all unflagged (web UI)"
TOKEN_IN_QUERY = re.compile(r"([?&]token=)[^&#\s\"]*")
CONTEXT_KEYS = ("theme", "chunk_index", "previous_chunk", "next_chunk", "query", "answer")
NOTICES = {
    "undone": "Your last decision was undone; the item is back to what it was before it.",
    "finished": "No more items under this filter: this queue is done for now.",
    "name": "Reviewer name saved.",
    "accepted_unflagged": "Every unflagged pending item was accepted under your name (one audit entry each).",
}
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
UNAUTHENTICATED_PATHS = frozenset({"/healthz"})


# --------------------------------------------------------------------------------------------
# helpers


def _is_loopback_address(host: str | None) -> bool:
    """True when ``host`` is a loopback IP address (127.0.0.0/8, ::1, or an IPv4-mapped one)."""
    if not host:
        return False
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def _is_loopback_name(host: str) -> bool:
    """True for ``localhost``, ``*.localhost`` and loopback IP literals (what a bind host may be)."""
    name = host.lower().rstrip(".")
    return name == "localhost" or name.endswith(".localhost") or _is_loopback_address(name)


def _host_name(host_header: str) -> str:
    """The host part of a ``Host`` header value, lower-cased, without port or IPv6 brackets."""
    value = host_header.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value[1:]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _origin(url: str) -> str | None:
    """``scheme://host[:port]`` of ``url`` (default ports dropped), or None when it has none."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    suffix = "" if port is None or port == default else f":{port}"
    return f"{parts.scheme.lower()}://{host}{suffix}"


def _cookie(name: str, value: str, *, secure: bool, max_age: int | None = None, http_only: bool = True) -> str:
    """A ``Set-Cookie`` value: path /, SameSite=Strict, HttpOnly, Secure over HTTPS."""
    parts = [f"{name}={quote(value, safe='')}", "Path=/", "SameSite=Strict"]
    if max_age is not None:
        parts.append(f"Max-Age={max_age}")
    if http_only:
        parts.append("HttpOnly")
    if secure:
        parts.append("Secure")
    return "; ".join(parts)


def _cookie_value(request: Request, name: str) -> str | None:
    """The decoded value of cookie ``name``, or None."""
    raw = request.cookies.get(name)
    return None if raw is None else unquote(raw)


def _clean_reviewer(name: str | None) -> str | None:
    """The reviewer name fit to record (:func:`review.store.clean_reviewer`), or None."""
    try:
        return clean_reviewer(name)
    except InvalidDecisionError:
        return None


def _status_filter(value: str | None, default: str) -> str:
    """A known status filter (``pending``..``all``), ``default`` for anything else."""
    return value if value in STATUS_FILTERS else default


def _store_status(status_filter: str) -> str | None:
    """The store's ``status`` argument for a page filter (None for ``all``)."""
    return None if status_filter == "all" else status_filter


def item_url(item_id: str, status: str | None = None, **params: object) -> str:
    """Path of an item's page, keeping the status filter."""
    query = {"status": status, **params} if status else params
    path = f"/item/{quote(item_id, safe=':@')}"
    return f"{path}?{urlencode(query)}" if query else path


def queue_url(task: str, kind: str, status: str | None = None, **params: object) -> str:
    """Path of a queue's page, keeping the status filter."""
    query = {"status": status, **params} if status else params
    path = f"/queue/{quote(task, safe='')}/{quote(kind, safe='')}"
    return f"{path}?{urlencode(query)}" if query else path


def accept_unflagged_url(task: str, kind: str) -> str:
    """Path of a queue's "accept all unflagged" confirmation page (GET) and action (POST)."""
    return f"{queue_url(task, kind)}/accept-unflagged"


def _query_count(request: Request, name: str, default: int) -> int:
    """A whole-number query parameter (``default`` when absent or empty); HTTPException 400 for anything else.

    A number too long to matter (over 18 digits) reads as :data:`sys.maxsize`, for the caller to clamp.
    """
    raw = request.query_params.get(name, "")
    if raw == "":
        return default
    if not (raw.isascii() and raw.isdigit()):
        raise HTTPException(400, f"The {name!r} parameter must be a whole number >= 0, not {raw[:40]!r}.")
    return sys.maxsize if len(raw) > 18 else int(raw)


def _page_links(total: int, offset: int, size: int, around: int = 2) -> list[dict[str, int | bool] | None]:
    """Links to the pages of ``total`` items, ``size`` a page: the first, the last and ``around`` pages either
    side of the one at ``offset`` (``number``, ``offset``, ``current``), None where pages are left out."""
    count = max(1, -(-total // size))
    current = offset // size
    shown = sorted({0, count - 1, *range(max(0, current - around), min(count, current + around + 1))})
    links: list[dict[str, int | bool] | None] = []
    for index, page in enumerate(shown):
        if index and page != shown[index - 1] + 1:
            links.append(None)
        links.append({"number": page + 1, "offset": page * size, "current": page == current})
    return links


def _safe_next(target: str | None) -> str:
    """A same-site path to go back to (``/`` for anything that could leave the site)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def _when(timestamp: float | None) -> str:
    """A store timestamp (seconds since the epoch) as ``YYYY-MM-DD HH:MM:SS UTC``."""
    if timestamp is None:
        return ""
    return datetime.fromtimestamp(timestamp, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _here(request: Request) -> str:
    """This page's path and query as the browser sent them (percent-encoded), without ``notice``."""
    raw_path = request.scope.get("raw_path")
    path = raw_path.decode("latin-1") if raw_path else quote(request.url.path)
    query = [(key, value) for key, value in request.query_params.multi_items() if key not in ("notice", "token")]
    return f"{path}?{urlencode(query)}" if query else path


def _context_value(value: Any) -> str:
    """A context value as text (JSON for anything that is not a string)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _redact_token(text: str) -> str:
    """``text`` with the value of every ``token`` query parameter replaced by ``REDACTED``."""
    return TOKEN_IN_QUERY.sub(r"\1REDACTED", text)


class RedactTokenFilter(logging.Filter):
    """Hides ``?token=`` values in log records (uvicorn's access log prints each request's path and query)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record's message and string arguments in place; never drops a record."""
        if isinstance(record.msg, str):
            record.msg = _redact_token(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_redact_token(arg) if isinstance(arg, str) else arg for arg in record.args)
        return True


def log_config() -> dict[str, Any]:
    """uvicorn's default logging configuration with :class:`RedactTokenFilter` on each of its loggers."""
    config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    config.setdefault("filters", {})["redact_token"] = {"()": RedactTokenFilter}
    for logger in config["loggers"].values():
        logger["filters"] = [*logger.get("filters", []), "redact_token"]
    return config


# --------------------------------------------------------------------------------------------
# security middleware


class SecurityMiddleware:
    """Token/loopback access control, Origin/Referer check on unsafe methods, CSRF cookie, headers."""

    def __init__(
        self,
        app: ASGIApp,
        token: str | None,
        allowed_origins: frozenset[str],
        render_error: Callable[[Request, int, str, str], Response],
    ) -> None:
        self.app = app
        self.token = token
        self.allowed_origins = allowed_origins
        self.allowed_hosts = frozenset(h for h in (urlsplit(o).hostname for o in allowed_origins) if h)
        self.render_error = render_error

    def _presented_tokens(self, request: Request) -> tuple[list[str], bool]:
        """Tokens the request carries, and whether one came in the query string."""
        found: list[str] = []
        from_query = False
        if (query := request.query_params.get("token")) is not None:
            found.append(query)
            from_query = True
        authorization = request.headers.get("authorization", "")
        if authorization[:7].lower() == "bearer ":
            found.append(authorization[7:].strip())
        if (cookie := _cookie_value(request, TOKEN_COOKIE)) is not None:
            found.append(cookie)
        return found, from_query

    def _token_ok(self, presented: list[str]) -> bool:
        if self.token is None:
            return False
        expected = self.token.encode("utf-8")
        return any(hmac.compare_digest(value.encode("utf-8"), expected) for value in presented)

    def _host_ok(self, request: Request) -> bool:
        host = request.headers.get("host")
        if host is None:
            return True
        name = _host_name(host)
        return _is_loopback_name(name) or name in self.allowed_hosts

    def _origin_ok(self, request: Request) -> bool:
        """Origin (else Referer), when sent, must be this site's origin or ``review_base_url``'s."""
        own = {o for o in (_origin(str(request.base_url)),) if o}
        allowed = own | self.allowed_origins
        origin = request.headers.get("origin")
        if origin is not None:
            return _origin(origin) in allowed
        referer = request.headers.get("referer")
        if referer is not None:
            return _origin(referer) in allowed
        return True

    def _check(self, request: Request) -> tuple[Response | None, bool]:
        """An error response to send instead of the app's (or None), and whether to set the token cookie."""
        set_token = False
        if request.url.path not in UNAUTHENTICATED_PATHS:
            presented, from_query = self._presented_tokens(request)
            client = request.client.host if request.client else None
            if self._token_ok(presented):
                set_token = from_query
            elif _is_loopback_address(client):
                if not self._host_ok(request):
                    message = (
                        f"Host {request.headers.get('host')!r} is not a loopback name; open the review queue "
                        "at http://127.0.0.1:<port>/ (or pass review_base_url when it is behind a proxy)."
                    )
                    return self.render_error(request, 403, "Forbidden host", message), False
            elif self.token is not None:
                response = self.render_error(
                    request, 401, "Token required", "Open the link with ?token=... or send Authorization: Bearer."
                )
                response.headers["WWW-Authenticate"] = 'Bearer realm="conteb-review"'
                return response, False
            else:
                message = "This review queue only answers loopback clients (it was started without a token)."
                return self.render_error(request, 403, "Forbidden", message), False
        if request.method not in SAFE_METHODS and not self._origin_ok(request):
            message = "Cross-site request refused (Origin/Referer is not this site)."
            return self.render_error(request, 403, "Forbidden", message), False
        return None, set_token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        state["csp_nonce"] = secrets.token_urlsafe(18)
        request = Request(scope)
        csrf = _cookie_value(request, CSRF_COOKIE)
        new_csrf = csrf is None or len(csrf) < 32
        state["csrf_token"] = secrets.token_urlsafe(32) if new_csrf else csrf
        secure = scope.get("scheme") == "https"
        error, set_token = self._check(request)
        is_page = not scope["path"].startswith("/static/")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                nonce = state["csp_nonce"]
                headers["Content-Security-Policy"] = (
                    f"default-src 'self'; script-src 'nonce-{nonce}'; style-src 'self' 'unsafe-inline'; "
                    "img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
                    "object-src 'none'"
                )
                headers["X-Content-Type-Options"] = "nosniff"
                headers["Referrer-Policy"] = "same-origin"
                headers["X-Frame-Options"] = "DENY"
                if is_page:
                    headers["Cache-Control"] = "no-store"
                if set_token and self.token is not None:
                    headers.append("Set-Cookie", _cookie(TOKEN_COOKIE, self.token, secure=secure))
                if new_csrf and is_page:
                    headers.append("Set-Cookie", _cookie(CSRF_COOKIE, state["csrf_token"], secure=secure))
            await send(message)

        if error is not None:
            await error(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)


# --------------------------------------------------------------------------------------------
# the app


class _ReviewApp:
    """Route handlers over one :class:`ReviewStore` (its connection is shared safely across threads)."""

    def __init__(self, store_path: Path, review_base_url: str | None):
        self.store = ReviewStore(Path(store_path))
        self.review_base_url = review_base_url
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.globals.update(
            item_url=item_url,
            queue_url=queue_url,
            accept_unflagged_url=accept_unflagged_url,
            status_filters=STATUS_FILTERS,
            page_sizes=PAGE_SIZES,
        )
        self.env.filters["when"] = _when

    # -- plumbing ---------------------------------------------------------------------------

    def render(self, request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        """A page with the common context: reviewer, CSRF token, CSP nonce, notices and errors."""
        notice = NOTICES.get(request.query_params.get("notice", ""))
        common = {
            "request": request,
            "reviewer": self.reviewer(request),
            "csrf_token": request.state.csrf_token,
            "csp_nonce": request.state.csp_nonce,
            "here": _here(request),
            "notice": notice,
            "error": None,
            "title": "Review queue",
        }
        common.update(context)
        return HTMLResponse(self.env.get_template(template).render(**common), status_code=status_code)

    def render_error(self, request: Request, status_code: int, title: str, message: str) -> HTMLResponse:
        """The error page (used by the middleware too, before the app runs)."""
        state = request.scope.setdefault("state", {})
        context = {
            "request": request,
            "reviewer": self.reviewer(request),
            "csrf_token": state.get("csrf_token", ""),
            "csp_nonce": state.get("csp_nonce", ""),
            "here": "/",
            "notice": None,
            "error": message,
            "title": title,
            "status_code": status_code,
        }
        return HTMLResponse(self.env.get_template("error.html").render(**context), status_code=status_code)

    @staticmethod
    def reviewer(request: Request) -> str | None:
        """The reviewer's name from the cookie (None when not set or not acceptable)."""
        return _clean_reviewer(_cookie_value(request, REVIEWER_COOKIE))

    @staticmethod
    async def form(request: Request) -> dict[str, str]:
        """The URL-encoded body of a POST, after checking its CSRF token (403 when it fails)."""
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/x-www-form-urlencoded":
            raise HTTPException(415, "Forms must be application/x-www-form-urlencoded.")
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM_BYTES:
                raise HTTPException(413, "Form too large.")
        try:
            parsed = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=50)
        except (UnicodeDecodeError, ValueError) as error:
            raise HTTPException(400, "Malformed form.") from error
        form = {key: values[0] for key, values in parsed.items()}
        cookie = _cookie_value(request, CSRF_COOKIE)
        field = form.get(CSRF_FIELD)
        if not cookie or not field or not hmac.compare_digest(cookie.encode("utf-8"), field.encode("utf-8")):
            raise HTTPException(403, "Missing or wrong CSRF token: reload the page and try again.")
        return form

    def signed_number(self, request: Request, form: dict[str, str], field: str, then: str) -> tuple[str, int] | str:
        """The reviewer's name and the whole number in ``form[field]`` (a version or revision the page showed),
        or the message for the 400 page: no reviewer name yet (followed by ``then``), or no such number."""
        reviewer = self.reviewer(request)
        if reviewer is None:
            return f"Set your reviewer name (top of the page) first; {then}."
        try:
            return reviewer, int(form.get(field, ""))
        except ValueError:
            return f"The form lacks the {field} the page showed; reload."

    def get_item(self, item_id: str) -> ReviewItem:
        try:
            return self.store.get(item_id)
        except UnknownItemError:
            raise HTTPException(404, f"No review item {item_id!r}.") from None

    def queue_stats(self, task: str, kind: str) -> QueueStats:
        """The queue's counts; HTTPException 404 for a queue never pushed."""
        stats = self.store.stats(task=task, kind=kind)
        if not stats:
            raise HTTPException(404, f"No review queue {task}/{kind}.")
        return stats[0]

    # -- pages ------------------------------------------------------------------------------

    async def healthz(self, request: Request) -> Response:
        """``ok`` (for tests and process supervisors)."""
        return PlainTextResponse("ok")

    async def index(self, request: Request) -> Response:
        """Every queue (task, kind) with its progress."""
        queues = []
        for stats in self.store.stats():
            total = stats.total or 1
            queues.append(
                {
                    "stats": stats,
                    "decided": stats.total - stats.pending,
                    "percent": {
                        name: round(100 * getattr(stats, name) / total, 2)
                        for name in ("accepted", "edited", "rejected", "pending")
                    },
                }
            )
        return self.render(request, "index.html", queues=queues)

    async def queue(self, request: Request) -> Response:
        """A queue's items under a status filter (pending by default), flagged first, a page at a time.

        ``?size=`` is one of :data:`PAGE_SIZES`; ``?offset=`` a whole number, moved down to the start of its
        page and clamped to the last page; anything else is a 400.
        """
        task, kind = request.path_params["task"], request.path_params["kind"]
        status = _status_filter(request.query_params.get("status"), "pending")
        stats = self.queue_stats(task, kind)
        size = _query_count(request, "size", PAGE_SIZES[0])
        if size not in PAGE_SIZES:
            raise HTTPException(400, f"The 'size' parameter must be one of {', '.join(map(str, PAGE_SIZES))}.")
        store_status = _store_status(status)
        total = self.store.count(task=task, kind=kind, status=store_status)
        last_page = max(0, total - 1) // size * size
        offset = min(_query_count(request, "offset", 0) // size * size, last_page)
        items = self.store.items(
            task=task, kind=kind, status=store_status, limit=size, offset=offset, flagged_first=True
        )
        first_pending = self.store.items(task=task, kind=kind, status="pending", limit=1)
        return self.render(
            request,
            "queue.html",
            title=f"{task} / {kind}",
            task=task,
            kind=kind,
            stats=stats,
            status=status,
            items=items,
            total=total,
            offset=offset,
            page_size=size,
            pages=_page_links(total, offset, size),
            unflagged_pending=self.store.count(task=task, kind=kind, status="pending", flagged=False),
            first_pending=first_pending[0] if first_pending else None,
        )

    def accept_unflagged_page(
        self, request: Request, task: str, kind: str, status_code: int = 200, error: str | None = None
    ) -> HTMLResponse:
        """The confirmation page of "accept all unflagged" (also the answer to a refused confirmation)."""
        stats = self.queue_stats(task, kind)
        selected = self.store.count(task=task, kind=kind, status="pending", flagged=False)
        preview = self.store.items(task=task, kind=kind, status="pending", flagged=False, limit=20)
        return self.render(
            request,
            "accept_unflagged.html",
            status_code=status_code,
            title=f"Accept unflagged · {task} / {kind}",
            task=task,
            kind=kind,
            stats=stats,
            selected=selected,
            preview=preview,
            error=error,
            here=accept_unflagged_url(task, kind),
        )

    async def accept_unflagged_form(self, request: Request) -> Response:
        """GET: what "accept all unflagged" would do, with the button that does it (changes nothing)."""
        return self.accept_unflagged_page(request, request.path_params["task"], request.path_params["kind"])

    async def accept_unflagged(self, request: Request) -> Response:
        """POST (CSRF-checked): accept every unflagged pending item of the queue under the reviewer's name.

        The form names the queue revision the reviewer confirmed; a queue changed since is a 409 and
        nothing is accepted. Each item gets its own audit entry (reviewer, note :data:`BULK_NOTE`).
        """
        form = await self.form(request)
        task, kind = request.path_params["task"], request.path_params["kind"]
        stats = self.queue_stats(task, kind)
        signed = self.signed_number(request, form, "revision", then="then confirm again")
        if isinstance(signed, str):
            return self.accept_unflagged_page(request, task, kind, 400, signed)
        reviewer, revision = signed
        if revision != stats.revision:
            message = (
                f"The queue changed since this page was shown (revision {revision}, now {stats.revision}): "
                "nothing was accepted. Check the items below and confirm again."
            )
            return self.accept_unflagged_page(request, task, kind, 409, message)
        try:
            self.store.bulk_decide("accept", reviewer, task, kind, unflagged_only=True, note=BULK_NOTE)
        except InvalidDecisionError as error:
            return self.accept_unflagged_page(request, task, kind, 400, str(error))
        return RedirectResponse(queue_url(task, kind, "pending", notice="accepted_unflagged"), status_code=303)

    def item_page(
        self, request: Request, item: ReviewItem, status: str, status_code: int = 200, error: str | None = None
    ) -> HTMLResponse:
        """The page of one item (also used to answer a refused decision with the fresh item).

        Its reviewer-name form always comes back to this item's page, whatever URL answered.
        """
        reviewer = self.reviewer(request)
        previous_id, next_id = self.store.neighbours(item.item_id, status=_store_status(status))
        position, queue_size = self.store.position(item.item_id, status=_store_status(status))
        last = self.store.last_decision(reviewer, task=item.task, kind=item.kind) if reviewer else None
        last_item = None
        if last is not None:
            try:
                last_item = self.store.get(last.item_id)
            except UnknownItemError:
                last = None
        if last_item is not None and (last_item.reviewer != reviewer or last_item.status == "pending"):
            last, last_item = None, None  # someone decided it after this reviewer: undo would pop theirs
        context = dict(item.context or {})
        extra_context = {key: _context_value(value) for key, value in context.items() if key not in CONTEXT_KEYS}
        diff = word_diff(item.original, item.proposed)
        edited_diff = inline_diff(item.proposed, item.edited_text) if item.edited_text is not None else None
        queue_stats = self.store.stats(task=item.task, kind=item.kind)
        return self.render(
            request,
            "item.html",
            status_code=status_code,
            title=item.item_id,
            here=item_url(item.item_id, status),
            item=item,
            status=status,
            position=position,
            queue_size=queue_size,
            previous_id=previous_id,
            next_id=next_id,
            last=last,
            last_item=last_item,
            context=context,
            extra_context=extra_context,
            diff=diff,
            edited_diff=edited_diff,
            edit_text=item.edited_text if item.edited_text is not None else item.proposed,
            queue_stats=queue_stats[0] if queue_stats else None,
            error=error,
        )

    async def item(self, request: Request) -> Response:
        """One item, with the status filter it was reached under (``all`` by default)."""
        item = self.get_item(request.path_params["item_id"])
        return self.item_page(request, item, _status_filter(request.query_params.get("status"), "all"))

    def next_url(self, item: ReviewItem, status: str) -> str:
        """Where to go after deciding ``item``: the next item under the filter, wrapping to the first."""
        _, next_id = self.store.neighbours(item.item_id, status=_store_status(status))
        if next_id is None:
            first = self.store.items(task=item.task, kind=item.kind, status=_store_status(status), limit=2)
            next_id = next((other.item_id for other in first if other.item_id != item.item_id), None)
            if status == "all" or next_id is None:
                return queue_url(item.task, item.kind, status, notice="finished")
        return item_url(next_id, status)

    async def _posted_decision(self, request: Request) -> tuple[dict[str, str], ReviewItem, str, str, int] | Response:
        """The form, item, status filter, reviewer and version of a decision POST, or the 400 page."""
        form = await self.form(request)
        item = self.get_item(request.path_params["item_id"])
        status = _status_filter(form.get("status"), "all")
        signed = self.signed_number(request, form, "version", then="saving it brings you back to this item")
        if isinstance(signed, str):
            return self.item_page(request, item, status, 400, signed)
        return form, item, status, *signed

    def _apply(
        self, request: Request, item: ReviewItem, status: str, change: Callable[[], ReviewItem]
    ) -> Response | ReviewItem:
        """Run a store change; a conflict or refused decision becomes the item page (409 / 400)."""
        try:
            return change()
        except ConflictError as conflict:
            return self.conflict(request, conflict, status)
        except InvalidDecisionError as error:
            return self.item_page(request, self.get_item(item.item_id), status, 400, str(error))

    async def decide(self, request: Request) -> Response:
        """Accept, reject or edit an item (POST), then go to the next one."""
        posted = await self._posted_decision(request)
        if isinstance(posted, Response):
            return posted
        form, item, status, reviewer, version = posted
        action = form.get("action")
        if action not in ACTIONS:
            return self.item_page(request, item, status, 400, f"Unknown action {action!r}.")
        edited_text = form.get("edited_text", "").replace("\r\n", "\n") if action == "edit" else None
        note = form.get("note", "").strip() or None
        decided = self._apply(
            request,
            item,
            status,
            lambda: self.store.decide(item.item_id, action, reviewer, expected_version=version,
                                      edited_text=edited_text, note=note),
        )  # fmt: skip
        if isinstance(decided, Response):
            return decided
        return RedirectResponse(self.next_url(decided, status), status_code=303)

    async def undo(self, request: Request) -> Response:
        """Undo the reviewer's last decision on this item (POST), then show the item."""
        posted = await self._posted_decision(request)
        if isinstance(posted, Response):
            return posted
        _, item, status, reviewer, version = posted
        undone = self._apply(
            request, item, status, lambda: self.store.undo(item.item_id, reviewer, expected_version=version)
        )
        if isinstance(undone, Response):
            return undone
        return RedirectResponse(item_url(item.item_id, status, notice="undone"), status_code=303)

    def conflict(self, request: Request, conflict: ConflictError, status: str) -> HTMLResponse:
        """409 with the fresh item: someone else changed it since the page was loaded."""
        fresh = self.get_item(conflict.item_id)
        who = conflict.changed_by or "the pipeline"
        when = _when(conflict.changed_at) if conflict.changed_at is not None else "an unknown time"
        how = f" ({conflict.action})" if conflict.action else ""
        message = (
            f"This item was changed by {who}{how} at {when}; reloaded (now version {fresh.version}, "
            f"{fresh.status}). Your decision was not saved: look again and decide."
        )
        return self.item_page(request, fresh, status, 409, message)

    async def set_reviewer(self, request: Request) -> Response:
        """Remember the reviewer's name in a cookie (POST), then go back."""
        form = await self.form(request)
        target = _safe_next(form.get("next"))
        try:
            name = clean_reviewer(form.get("name"))
        except InvalidDecisionError as error:
            message = f"Reviewer name refused: {error}."
            return self.render_error(request, 400, "Reviewer name refused", message)
        response = RedirectResponse(target, status_code=303)
        secure = request.url.scheme == "https"
        cookie = _cookie(REVIEWER_COOKIE, name, secure=secure, max_age=365 * 24 * 3600)
        response.headers.append("Set-Cookie", cookie)
        return response

    async def http_error(self, request: Request, exc: Exception) -> Response:
        """HTTP errors as pages."""
        assert isinstance(exc, HTTPException)
        titles = {400: "Bad request", 403: "Forbidden", 404: "Not found", 405: "Method not allowed"}
        response = self.render_error(request, exc.status_code, titles.get(exc.status_code, "Error"), exc.detail)
        if exc.headers:
            response.headers.update(exc.headers)
        return response


def create_app(store_path: Path, token: str | None = None, review_base_url: str | None = None) -> Starlette:
    """The review web app over the SQLite store at ``store_path``.

    ``token``: required from non-loopback clients (None: only loopback clients are served).
    ``review_base_url``: the public URL when the app sits behind a proxy; its origin is accepted
    in ``Origin``/``Referer`` and its host in ``Host``.
    """
    views = _ReviewApp(store_path, review_base_url)
    allowed_origins = frozenset(o for o in (_origin(review_base_url),) if o) if review_base_url else frozenset()
    routes = [
        Route("/", views.index, methods=["GET", "HEAD"]),
        Route("/healthz", views.healthz, methods=["GET", "HEAD"]),
        Route("/reviewer", views.set_reviewer, methods=["POST"]),
        Route("/queue/{task}/{kind}", views.queue, methods=["GET", "HEAD"]),
        Route("/queue/{task}/{kind}/accept-unflagged", views.accept_unflagged_form, methods=["GET", "HEAD"]),
        Route("/queue/{task}/{kind}/accept-unflagged", views.accept_unflagged, methods=["POST"]),
        Route("/item/{item_id:path}/decide", views.decide, methods=["POST"]),
        Route("/item/{item_id:path}/undo", views.undo, methods=["POST"]),
        Route("/item/{item_id:path}", views.item, methods=["GET", "HEAD"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        views.store.close()

    app = Starlette(routes=routes, exception_handlers={HTTPException: views.http_error}, lifespan=lifespan)
    app.add_middleware(
        SecurityMiddleware, token=token, allowed_origins=allowed_origins, render_error=views.render_error
    )
    app.state.views = views
    return app


class UnsafeBindError(ValueError):
    """A non-loopback bind without a token: anyone who can reach the port could change decisions."""


def check_bind(host: str, token: str | None) -> None:
    """Raise :class:`UnsafeBindError` (one line: what and how to fix) for a non-loopback ``host`` without token."""
    if not _is_loopback_name(host) and not token:
        raise UnsafeBindError(
            f"refusing to serve the review queue on {host!r} without a token: anyone who can reach it could "
            "change review decisions. Bind 127.0.0.1 (the default) or pass a token (--token or CONTEB_REVIEW_TOKEN)."
        )


def serve(store_path: Path, host: str = "127.0.0.1", port: int = 8765, token: str | None = None) -> None:
    """Serve the review app with uvicorn (logs through :func:`log_config`, so no token shows in them).

    A non-loopback ``host`` needs a ``token`` (:class:`UnsafeBindError`, a ValueError). With a token, the
    link to open (token included, once) is printed on stderr.
    """
    check_bind(host, token)
    if token:
        shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        print(f"review queue: open http://{shown}:{port}/?token={quote(token, safe='')}", file=sys.stderr)
    app = create_app(Path(store_path), token=token)
    uvicorn.run(app, host=host, port=port, log_level="info", log_config=log_config())


__all__ = [
    "RedactTokenFilter",
    "UnsafeBindError",
    "accept_unflagged_url",
    "check_bind",
    "create_app",
    "item_url",
    "log_config",
    "queue_url",
    "serve",
]
