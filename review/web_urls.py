"""Addresses of the review pages and how a queue is paged: URL builders, status filters, page links.

Contracts: an item's page is ``/item/<item_id>`` (``:`` and ``@`` kept, the rest percent-encoded), a
queue's ``/queue/<task>/<kind>`` (both percent-encoded), its "accept all unflagged" page
``/queue/<task>/<kind>/accept-unflagged``; a status filter (``?status=``, one of
:data:`STATUS_FILTERS`, ``all`` meaning no filter) is kept across pages. A queue is shown
:data:`PAGE_SIZES` items at a time; :func:`page_links` lists the first, the last and the pages
around the current one. :func:`safe_next` only ever returns a path of this site.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

from starlette.requests import Request

from review.model import STATUSES
from review.web_security import is_token_parameter

STATUS_FILTERS = (*STATUSES, "all")
"""The status filters of the pages: every item status, or ``all``."""

PAGE_SIZES = (25, 50, 100)
"""Items per queue page a reader may choose (``?size=``); the first is the default."""


def status_filter(value: str | None, default: str) -> str:
    """A known status filter (``pending``..``all``), ``default`` for anything else."""
    return value if value in STATUS_FILTERS else default


def store_status(shown: str) -> str | None:
    """The store's ``status`` argument for the page filter ``shown`` (None for ``all``)."""
    return None if shown == "all" else shown


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


def page_links(total: int, offset: int, size: int, around: int = 2) -> list[dict[str, int | bool] | None]:
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


def safe_next(target: str | None) -> str:
    """A same-site path to go back to (``/`` for anything that could leave the site)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def this_page(request: Request) -> str:
    """This page's path and query as the browser sent them (percent-encoded), without ``notice`` or the token
    (:func:`review.web_security.is_token_parameter`)."""
    raw_path = request.scope.get("raw_path")
    path = raw_path.decode("latin-1") if raw_path else quote(request.url.path)
    query = [
        (key, value)
        for key, value in request.query_params.multi_items()
        if key != "notice" and not is_token_parameter(key)
    ]
    return f"{path}?{urlencode(query)}" if query else path
