"""Settings of the LLM client (the ``llm:`` block of ``conteb.yaml``).

The API key is not a setting: it comes from ``$OPENAI_API_KEY`` (a Dagster ``EnvVar`` in the
resource) and is handed to the client alone, so it can never reach logs, metadata or files.
"""

from __future__ import annotations

import os
from typing import Literal
from urllib.parse import urlparse

from pydantic import Field

from conteb.config import StrictModel

OPENAI_BASE_URL = "https://api.openai.com/v1"


class Price(StrictModel):
    """US dollars per million tokens: ``prompt`` (input), ``completion`` (output) and ``cached_prompt``, the
    input tokens a provider served from its prompt cache. ``cached_prompt`` unset: cached tokens cost as
    much as the others (no discount is assumed for a model whose cached price was not given). Finite
    (:class:`conteb.config.StrictModel`)."""

    # dollars per million input tokens
    prompt: float = Field(ge=0)
    # dollars per million output tokens
    completion: float = Field(ge=0)
    # dollars per million input tokens served from the provider's prompt cache; null: as `prompt`
    cached_prompt: float | None = Field(None, ge=0)

    @property
    def cached_rate(self) -> float:
        """The price of a cached input token: ``cached_prompt``, else ``prompt``."""
        return self.prompt if self.cached_prompt is None else self.cached_prompt


# Public list prices (USD per 1M tokens: input, cached input, output) at the time of writing; override in
# conteb.yaml (llm.prices).
DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4o": Price(prompt=2.50, cached_prompt=1.25, completion=10.00),
    "gpt-4o-mini": Price(prompt=0.15, cached_prompt=0.075, completion=0.60),
    "gpt-4.1": Price(prompt=2.00, cached_prompt=0.50, completion=8.00),
    "gpt-4.1-mini": Price(prompt=0.40, cached_prompt=0.10, completion=1.60),
}


class LLMSettings(StrictModel):
    """How the client talks to an OpenAI-compatible endpoint (unknown keys refused, every number finite:
    :class:`conteb.config.StrictModel`)."""

    # the model every LLM stage asks (its name at the endpoint); its price comes from `prices`
    model: str = "gpt-4o"
    base_url: str | None = None  # None: $OPENAI_BASE_URL, else the OpenAI API
    # sampling temperature of every call (0: the most repeatable answers)
    temperature: float = Field(0.0, ge=0, le=2)
    # the longest answer a call may get, in tokens
    max_tokens: int = Field(1024, ge=1)
    timeout_s: float = Field(60.0, gt=0)  # per try, from sending the request to the answer's last byte
    # calls in flight at once
    max_concurrency: int = Field(16, ge=1)
    # a client-side budget of calls per minute; null: no limit but the server's 429s
    requests_per_minute: int | None = Field(None, ge=1)
    # a client-side budget of tokens per minute (prompt + answer); null: no limit
    tokens_per_minute: int | None = Field(None, ge=1)
    max_attempts: int = Field(5, ge=1)  # transport tries per call (429, 5xx, timeouts, connection errors)
    # the wait before the first retry of a transient failure (with jitter: half to all of it), doubled at each try
    backoff_initial_s: float = Field(1.0, ge=0)
    # the longest wait between two tries (before jitter); a Retry-After header overrides both
    backoff_max_s: float = Field(60.0, ge=0)
    max_retry_after_s: float = Field(60.0, ge=0)  # the longest wait a server's Retry-After header may impose
    # failed calls in a row (of one kind: HTML, connection refused, one HTTP status...) that stop an LLM stage; once
    # the endpoint has answered, only when a request among them also failed all its `max_attempts` tries (a server
    # that died mid-stage); rate limits are not counted; null: never stop (llm/breaker.py)
    breaker_failures: int | None = Field(10, ge=1)
    max_answer_bytes: int = Field(1024 * 1024, ge=1024)  # a larger HTTP answer is refused as a server fault
    structured_output: Literal["auto", "json_schema", "json_object", "json_instruction"] = "auto"  # llm/structured.py
    # with `structured_output: auto`, how old a lesser mode kept in the answer store may be before the server is asked
    # in json_schema again (a refusal may have been transient, or the server upgraded); 0: every run
    mode_reprobe_after_s: float = Field(24 * 3600.0, ge=0)
    # online: one request per call; batch: the OpenAI Batch API (cheaper, answers within `batch_timeout_s`)
    mode: Literal["online", "batch"] = "online"
    # how often a batch's status is asked, in seconds
    batch_poll_s: float = Field(30.0, gt=0)
    # how long a batch may take before its unanswered lines are asked online
    batch_timeout_s: float = Field(24 * 3600.0, gt=0)
    batch_discount: float = Field(0.5, ge=0, le=1)  # Batch API price multiplier
    # US dollars per million tokens, by model name, for the cost ledger (`conteb costs`)
    prices: dict[str, Price] = Field(default_factory=lambda: dict(DEFAULT_PRICES))

    def resolved_base_url(self) -> str:
        """``base_url``, else ``$OPENAI_BASE_URL``, else the OpenAI API (as the SDK resolves it)."""
        return self.base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL

    def endpoint_family(self) -> str:
        """Part of the cache key: ``openai`` for the OpenAI API, else the endpoint's host:port.

        Answers from one server family are reused across URL spellings but never mixed with
        another server's answers for the same model name.
        """
        url = urlparse(self.resolved_base_url())
        host = url.hostname or ""
        return "openai" if host.endswith("openai.com") else f"{host}:{url.port or ''}"

    def configured(self, api_key: str | None) -> bool:
        """True when an API key or an explicit endpoint is set (LLM stages can run)."""
        return bool(api_key) or bool(self.base_url or os.environ.get("OPENAI_BASE_URL"))

    def cost_usd(
        self, prompt_tokens: int, completion_tokens: int, batch: bool = False, cached_tokens: int = 0
    ) -> float:
        """Estimated dollars for a call; 0 for a model without a price.

        ``(prompt - cached) * prompt price + cached * cached price + completion * completion price``, per
        million tokens (``cached_tokens`` is part of ``prompt_tokens``, capped at it), times ``batch_discount``
        for a Batch API call.
        """
        price = self.prices.get(self.model)
        if price is None:
            return 0.0
        cached = min(max(cached_tokens, 0), prompt_tokens)
        cost = (
            (prompt_tokens - cached) * price.prompt + cached * price.cached_rate + completion_tokens * price.completion
        ) / 1_000_000
        return cost * (self.batch_discount if batch else 1.0)
