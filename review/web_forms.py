"""What the review pages read from a request: CSRF-checked POST forms and whole-number query parameters.

Contracts: a form is ``application/x-www-form-urlencoded`` (else 415), at most
:data:`MAX_FORM_BYTES` (else 413), UTF-8 with at most 50 fields (else 400; a repeated field keeps
its first value), and its :data:`CSRF_FIELD` must equal the CSRF cookie
(:data:`review.web_security.CSRF_COOKIE`, compared with :func:`hmac.compare_digest`), else 403.
Every refusal is a :class:`starlette.exceptions.HTTPException` and happens before anything changes.
"""

from __future__ import annotations

import hmac
import sys
from urllib.parse import parse_qs

from starlette.exceptions import HTTPException
from starlette.requests import Request

from review.web_security import CSRF_COOKIE, cookie_value

CSRF_FIELD = "csrf_token"
MAX_FORM_BYTES = 1 << 20


async def read_form(request: Request) -> dict[str, str]:
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
    cookie = cookie_value(request, CSRF_COOKIE)
    field = form.get(CSRF_FIELD)
    if not cookie or not field or not hmac.compare_digest(cookie.encode("utf-8"), field.encode("utf-8")):
        raise HTTPException(403, "Missing or wrong CSRF token: reload the page and try again.")
    return form


def query_count(request: Request, name: str, default: int) -> int:
    """A whole-number query parameter (``default`` when absent or empty); HTTPException 400 for anything else.

    A number too long to matter (over 18 digits) reads as :data:`sys.maxsize`, for the caller to clamp.
    """
    raw = request.query_params.get(name, "")
    if raw == "":
        return default
    if not (raw.isascii() and raw.isdigit()):
        raise HTTPException(400, f"The {name!r} parameter must be a whole number >= 0, not {raw[:40]!r}.")
    return sys.maxsize if len(raw) > 18 else int(raw)
