"""The review queue in a browser: Starlette + Jinja2 pages over the review store, served by uvicorn.

Pages: ``/`` (queues and their progress), ``/queue/{task}/{kind}`` (items, filtered by status,
flagged first, a page at a time), ``/queue/{task}/{kind}/accept-unflagged`` (confirm, then accept
every unflagged pending item under the reviewer's name), ``/item/{item_id}`` (one item: word diff,
context, flags, its position in the queue, decision buttons and keyboard shortcuts) and
``/healthz``. Decisions are ``POST`` forms; after one the page moves to the next item of the
queue under the same status filter. A decision without a reviewer name asks for the name, and
saving it comes back to the item.

Every page is autoescaped, and the diff escapes each piece of text (:mod:`review.diff`). Who may
use the app and what its responses carry is :mod:`review.web_security`'s; reading forms
(CSRF-checked) is :mod:`review.web_forms`'s; addresses and paging are :mod:`review.web_urls`'s.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
import uvicorn
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from review.diff import changed_words, inline_diff, word_diff
from review.flags import LOST_ANSWERS, item_flag_notes
from review.model import (
    ACTIONS,
    ConflictError,
    InvalidDecisionError,
    QueueStats,
    ReviewItem,
    UnknownItemError,
    clean_person_reviewer,
    reviewer_or_none,
)
from review.store import ReviewStore
from review.web_forms import query_count, read_form
from review.web_listen import bound_url, listening_socket
from review.web_security import (
    REVIEWER_COOKIE,
    SecurityMiddleware,
    check_bind,
    cookie_header,
    cookie_value,
    log_config,
    origin_of,
)
from review.web_urls import (
    PAGE_SIZES,
    STATUS_FILTERS,
    accept_unflagged_url,
    item_url,
    page_links,
    queue_url,
    safe_next,
    status_filter,
    store_status,
    this_page,
)

HERE = Path(__file__).resolve().parent
BULK_NOTE = "accept all unflagged (web UI)"
CONTEXT_KEYS = ("theme", "chunk_index", "previous_chunk", "next_chunk", "query", "answer", LOST_ANSWERS)
NOTICES = {
    "undone": "Your last decision was undone; the item is back to what it was before it.",
    "finished": "No more items under this filter: this queue is done for now.",
    "name": "Reviewer name saved.",
    "accepted_unflagged": "Every unflagged pending item was accepted under your name (one audit entry each).",
}


def _when(timestamp: float | None) -> str:
    """A store timestamp (seconds since the epoch) as ``YYYY-MM-DD HH:MM:SS UTC``."""
    if timestamp is None:
        return ""
    return datetime.fromtimestamp(timestamp, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _item_changes(item: ReviewItem) -> Markup:
    """The words the item's proposal (or its final text) changes, for the queue list."""
    return changed_words(item.original, item.final_text or item.proposed)


def _context_value(value: Any) -> str:
    """A context value as text (JSON for anything that is not a string)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


# --------------------------------------------------------------------------------------------
# the app


class _ReviewApp:
    """Route handlers over one :class:`ReviewStore` (its connection is shared safely across threads)."""

    def __init__(self, store_path: Path) -> None:
        self.store = ReviewStore(Path(store_path))
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
            flag_notes=item_flag_notes,
            changes=_item_changes,
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
            "here": this_page(request),
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
        """The reviewer's name from the cookie (None when not set or not a person's name: a cookie naming the
        automatic reviewer names nobody, :func:`review.model.clean_person_reviewer`)."""
        return reviewer_or_none(cookie_value(request, REVIEWER_COOKIE))

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
        status = status_filter(request.query_params.get("status"), "pending")
        stats = self.queue_stats(task, kind)
        size = query_count(request, "size", PAGE_SIZES[0])
        if size not in PAGE_SIZES:
            raise HTTPException(400, f"The 'size' parameter must be one of {', '.join(map(str, PAGE_SIZES))}.")
        shown = store_status(status)
        total = self.store.count(task=task, kind=kind, status=shown)
        last_page = max(0, total - 1) // size * size
        offset = min(query_count(request, "offset", 0) // size * size, last_page)
        items = self.store.items(task=task, kind=kind, status=shown, limit=size, offset=offset, flagged_first=True)
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
            pages=page_links(total, offset, size),
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
        form = await read_form(request)
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
        previous_id, next_id = self.store.neighbours(item.item_id, status=store_status(status))
        position, queue_size = self.store.position(item.item_id, status=store_status(status))
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
        return self.item_page(request, item, status_filter(request.query_params.get("status"), "all"))

    def next_url(self, item: ReviewItem, status: str) -> str:
        """Where to go after deciding ``item``: the next item under the filter, wrapping to the first."""
        _, next_id = self.store.neighbours(item.item_id, status=store_status(status))
        if next_id is None:
            first = self.store.items(task=item.task, kind=item.kind, status=store_status(status), limit=2)
            next_id = next((other.item_id for other in first if other.item_id != item.item_id), None)
            if status == "all" or next_id is None:
                return queue_url(item.task, item.kind, status, notice="finished")
        return item_url(next_id, status)

    async def _posted_decision(self, request: Request) -> tuple[dict[str, str], ReviewItem, str, str, int] | Response:
        """The form, item, status filter, reviewer and version of a decision POST, or the 400 page."""
        form = await read_form(request)
        item = self.get_item(request.path_params["item_id"])
        status = status_filter(form.get("status"), "all")
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
        form = await read_form(request)
        target = safe_next(form.get("next"))
        try:
            name = clean_person_reviewer(form.get("name"))
        except InvalidDecisionError as error:
            message = f"Reviewer name refused: {error}."
            return self.render_error(request, 400, "Reviewer name refused", message)
        response = RedirectResponse(target, status_code=303)
        secure = request.url.scheme == "https"
        cookie = cookie_header(REVIEWER_COOKIE, name, secure=secure, max_age=365 * 24 * 3600)
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
    views = _ReviewApp(store_path)
    allowed_origins = frozenset(o for o in (origin_of(review_base_url),) if o) if review_base_url else frozenset()
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
    return app


def serve(
    store_path: Path,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Serve the review app with uvicorn (logs through :func:`log_config`, so no token shows in them).

    A non-loopback ``host`` needs a ``token`` (:class:`UnsafeBindError`, a ValueError), and a token must pass
    :func:`review.web_security.check_token` (:class:`UnsafeTokenError`, a ValueError). The socket is bound first
    (:func:`review.web_listen.listening_socket`; ``port`` 0: any free port; ``ListenError`` when it cannot be),
    then ``announce`` (default: print on stdout) gets the app's address with the port really bound. With a token,
    the link to open (token included, once) is printed on stderr.
    """
    check_bind(host, token)
    app = create_app(Path(store_path), token=token)
    sock = listening_socket(host, port)
    url = bound_url(host, sock)
    (announce or print)(url)
    if token:
        shown = bound_url("127.0.0.1" if host in ("0.0.0.0", "::", "") else host, sock)
        print(f"review queue: open {shown}/?token={quote(token, safe='')}", file=sys.stderr)
    config = uvicorn.Config(app, host=host, port=sock.getsockname()[1], log_level="info", log_config=log_config(token))
    uvicorn.Server(config).run(sockets=[sock])
