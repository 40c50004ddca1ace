"""Which failed calls are tried again, and how long a server asks us to wait before the next try.

A call refused for the request itself (:func:`request_rejected`) is not tried again. Shared by the online path
(``llm/client.py``: backoff between tries) and the Batch API mode (``llm/batch.py``: failed lines the request
itself did not cause go through the online path). No I/O.
"""

from __future__ import annotations

import datetime
import email.utils
import re

RETRYABLE_STATUS = frozenset({408, 409, 429})
"""HTTP statuses below 500 that are transient (timeout, conflict, rate limit)."""

_VALIDATION = re.compile(
    r"validation error|Input should be|literal_error|type must be one of|Field required|extra_forbidden|"
    r"RequestValidationError|unprocessable",
    re.IGNORECASE,
)
"""What a 5xx's message says when the server refused the request itself (a request-validation error)."""
_DELAY_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")  # RFC 9110 delay-seconds is 1*DIGIT; decimals tolerated


def request_rejected(status: int, message: str) -> bool:
    """True when an answer with HTTP ``status`` and error ``message`` refuses the request itself, so that asking
    again cannot help: 400, 401, 403, 404, 422 (any 4xx but the ``RETRYABLE_STATUS``), and a 5xx whose message is a
    request-validation error (llama-cpp-python answers a ``response_format`` it does not know with HTTP 500 and a
    pydantic validation error; old llama-server builds with 500 "response_format type must be one of ...")."""
    if status in RETRYABLE_STATUS:
        return False
    return 400 <= status < 500 or (status >= 500 and bool(_VALIDATION.search(message)))


def parse_retry_after(value: str, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (RFC 9110, section 10.2.3) received at ``now``.

    Accepts delay-seconds (decimals too) and an HTTP-date (IMF-fixdate, or the obsolete RFC 850 and
    asctime forms, which are GMT); a date in the past means 0. Anything else is ``None`` (ignore it).
    """
    text = value.strip()
    if _DELAY_SECONDS.fullmatch(text):
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return max(0.0, when.timestamp() - now)


def retry_after_header(error: Exception) -> tuple[str, str | None]:
    """``(header name, value)`` of the wait a failed response asks for: ``retry-after-ms`` (OpenAI's) when it
    holds a number, else ``Retry-After``; the value is ``None`` when neither is there."""
    headers = getattr(getattr(error, "response", None), "headers", None) or {}
    milliseconds = headers.get("retry-after-ms")
    if milliseconds and _DELAY_SECONDS.fullmatch(milliseconds.strip()):
        return "retry-after-ms", milliseconds
    return "Retry-After", headers.get("retry-after") or None
