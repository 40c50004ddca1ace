"""The LLM client shared by every LLM stage: official ``openai`` SDK against any
OpenAI-compatible endpoint, with a persistent answer cache, a cost ledger, retries, rate limits,
structured (JSON-schema) output and the Batch API. No Dagster import: ``assets.resources``
wraps it in a ``ConfigurableResource``.
"""
