"""Who may use the review web app, and what its responses carry: access control, CSRF and Origin checks,
security headers, cookies, the bind check and token redaction in logs.

Contracts (the pages show untrusted documents and change the store):

* clients are trusted without a token only from a loopback address *and* with a loopback
  ``Host`` header (or the host of ``review_base_url``), which defeats DNS rebinding; with
  ``token`` set, other clients must present it (``?token=`` once, then an HttpOnly
  ``SameSite=Strict`` cookie, or ``Authorization: Bearer``), else 401; without a token they get
  403; ``/healthz`` answers everyone;
* every ``POST`` carries a per-session CSRF token (the :data:`CSRF_COOKIE` cookie, set on the
  first page, and a hidden field checked by :func:`review.web_forms.read_form`); when the browser
  sends ``Origin`` or ``Referer`` on an unsafe method, it must be this site's origin (or
  ``review_base_url``'s); otherwise 403 and nothing changes;
* responses carry a nonce-based ``Content-Security-Policy``, ``X-Content-Type-Options``,
  ``Referrer-Policy``, ``X-Frame-Options`` and ``Cache-Control: no-store`` (pages only);
* cookies are ``Path=/; SameSite=Strict``, HttpOnly, and Secure over HTTPS;
* a token is at least :data:`MIN_TOKEN_CHARS` characters with no whitespace, control or format character
  (:func:`check_token`, :class:`UnsafeTokenError`): a blank or short one would be guessed, and one with spaces
  cannot be pasted into a link or a header intact;
* the query parameter that carries the token is the one whose *decoded* name is ``token`` in any case
  (:func:`is_token_parameter`): ``?tok%65n=`` and ``?TOKEN=`` are read like ``?token=``, and its value is
  compared decoded (``%2D``, ``+`` as a space);
* :func:`check_bind` refuses a non-loopback bind without a token (:class:`UnsafeBindError`) and
  :func:`log_config` redacts uvicorn's log lines (:class:`RedactTokenFilter`): the value of every token query
  parameter (decoded names, as above), and the server's token itself wherever it appears (a path, a header
  value), literally or percent-encoded.
"""

from __future__ import annotations

import copy
import hmac
import ipaddress
import logging
import re
import secrets
import unicodedata
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, unquote, unquote_plus, urlsplit

import uvicorn
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from conteb.text import is_blank

TOKEN_COOKIE = "conteb_review_token"
CSRF_COOKIE = "conteb_review_csrf"
REVIEWER_COOKIE = "conteb_review_reviewer"
TOKEN_PARAMETER = "token"
MIN_TOKEN_CHARS = 16
QUERY_PARAMETER = re.compile(r"(?P<lead>[?&;])(?P<name>[^=&#;\s\"?]*)=(?P<value>[^&#;\s\"]*)")
"""One ``name=value`` pair of a query string as it appears in a log line (raw, percent-encoded)."""
REDACTED = "REDACTED"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
UNAUTHENTICATED_PATHS = frozenset({"/healthz"})


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


def is_loopback_name(host: str) -> bool:
    """True for ``localhost``, ``*.localhost`` and loopback IP literals (what a bind host may be)."""
    name = host.lower().rstrip(".")
    return name == "localhost" or name.endswith(".localhost") or _is_loopback_address(name)


def _host_name(host_header: str) -> str:
    """The host part of a ``Host`` header value, lower-cased, without port or IPv6 brackets."""
    value = host_header.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value[1:]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def origin_of(url: str) -> str | None:
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


def cookie_header(name: str, value: str, *, secure: bool, max_age: int | None = None, http_only: bool = True) -> str:
    """A ``Set-Cookie`` value: path /, SameSite=Strict, HttpOnly, Secure over HTTPS."""
    parts = [f"{name}={quote(value, safe='')}", "Path=/", "SameSite=Strict"]
    if max_age is not None:
        parts.append(f"Max-Age={max_age}")
    if http_only:
        parts.append("HttpOnly")
    if secure:
        parts.append("Secure")
    return "; ".join(parts)


def cookie_value(request: Request, name: str) -> str | None:
    """The decoded value of cookie ``name``, or None."""
    raw = request.cookies.get(name)
    return None if raw is None else unquote(raw)


def is_token_parameter(name: str) -> bool:
    """True when the query parameter named ``name`` (as decoded: ``tok%65n`` is ``token``) carries the token."""
    return name.lower() == TOKEN_PARAMETER


def _percent_encodable(char: str) -> str:
    """A regex matching ``char`` in a URL or log line: itself, or its UTF-8 bytes as ``%XX`` (hex in either
    case); a space also as ``+``."""
    encoded = "".join(f"%(?i:{byte:02x})" for byte in char.encode("utf-8"))
    plus = r"|\+" if char == " " else ""
    return f"(?:{re.escape(char)}|{encoded}{plus})"


def token_pattern(token: str) -> re.Pattern[str]:
    """A regex matching ``token`` written in any mix of plain and percent-encoded characters."""
    return re.compile("".join(_percent_encodable(char) for char in token))


def _redact_token(text: str, secret: re.Pattern[str] | None = None) -> str:
    """``text`` with the value of every token query parameter (:func:`is_token_parameter` on its decoded name)
    replaced by ``REDACTED``, and with every occurrence of ``secret`` (a :func:`token_pattern`) too."""

    def parameter(match: re.Match[str]) -> str:
        if not is_token_parameter(unquote_plus(match["name"])):
            return match[0]
        return f"{match['lead']}{match['name']}={REDACTED}"

    text = QUERY_PARAMETER.sub(parameter, text)
    return secret.sub(REDACTED, text) if secret is not None else text


class RedactTokenFilter(logging.Filter):
    """Hides the token in log records (uvicorn's access log prints each request's path and query):
    token query parameters, and ``token`` (the server's own) wherever it appears."""

    def __init__(self, name: str = "", token: str | None = None) -> None:
        super().__init__(name)
        self.secret = token_pattern(token) if token else None

    def _redact(self, value: Any) -> Any:
        return _redact_token(value, self.secret) if isinstance(value, str) else value

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record's message and string arguments in place; never drops a record."""
        record.msg = self._redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(self._redact(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: self._redact(arg) for key, arg in record.args.items()}
        return True


def log_config(token: str | None = None) -> dict[str, Any]:
    """uvicorn's default logging configuration with :class:`RedactTokenFilter` (hiding ``token`` too) on each of
    its loggers."""
    config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    config.setdefault("filters", {})["redact_token"] = {"()": RedactTokenFilter, "token": token}
    for logger in config["loggers"].values():
        logger["filters"] = [*logger.get("filters", []), "redact_token"]
    return config


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
        found = [value for name, value in request.query_params.multi_items() if is_token_parameter(name)]
        from_query = bool(found)
        authorization = request.headers.get("authorization", "")
        if authorization[:7].lower() == "bearer ":
            found.append(authorization[7:].strip())
        if (cookie := cookie_value(request, TOKEN_COOKIE)) is not None:
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
        return is_loopback_name(name) or name in self.allowed_hosts

    def _origin_ok(self, request: Request) -> bool:
        """Origin (else Referer), when sent, must be this site's origin or ``review_base_url``'s."""
        own = {o for o in (origin_of(str(request.base_url)),) if o}
        allowed = own | self.allowed_origins
        origin = request.headers.get("origin")
        if origin is not None:
            return origin_of(origin) in allowed
        referer = request.headers.get("referer")
        if referer is not None:
            return origin_of(referer) in allowed
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
        csrf = cookie_value(request, CSRF_COOKIE)
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
                    headers.append("Set-Cookie", cookie_header(TOKEN_COOKIE, self.token, secure=secure))
                if new_csrf and is_page:
                    headers.append("Set-Cookie", cookie_header(CSRF_COOKIE, state["csrf_token"], secure=secure))
            await send(message)

        if error is not None:
            await error(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)


class UnsafeTokenError(ValueError):
    """A token that would not protect the queue (blank, short) or could not be sent intact (spaces, control
    characters)."""


def check_token(token: str | None) -> None:
    """Raise :class:`UnsafeTokenError` (one line: what and how to fix) unless ``token`` is None or at least
    :data:`MIN_TOKEN_CHARS` characters with no whitespace, control or format character."""
    if token is None:
        return
    how = 'e.g. python -c "import secrets; print(secrets.token_urlsafe(24))"'
    if is_blank(token):
        raise UnsafeTokenError(f"the review token is blank; pass a random one of {MIN_TOKEN_CHARS}+ characters ({how})")
    bad = next((c for c in token if c.isspace() or unicodedata.category(c)[0] in "CZ"), None)
    if bad is not None:
        raise UnsafeTokenError(
            f"the review token contains a space, control or format character (U+{ord(bad):04X}); "
            f"pass one without ({how})"
        )
    if len(token) < MIN_TOKEN_CHARS:
        raise UnsafeTokenError(
            f"the review token has {len(token)} characters; pass a random one of at least {MIN_TOKEN_CHARS} ({how})"
        )


class UnsafeBindError(ValueError):
    """A non-loopback bind without a token: anyone who can reach the port could change decisions."""


def check_bind(host: str, token: str | None) -> None:
    """Raise :class:`UnsafeTokenError` for a token :func:`check_token` refuses (an empty one included: it is
    not "no token"), and :class:`UnsafeBindError` (one line: what and how to fix) for a non-loopback ``host``
    without token."""
    check_token(token)
    if not is_loopback_name(host) and not token:
        raise UnsafeBindError(
            f"refusing to serve the review queue on {host!r} without a token: anyone who can reach it could "
            "change review decisions. Bind 127.0.0.1 (the default) or pass a token (--token or CONTEB_REVIEW_TOKEN)."
        )
