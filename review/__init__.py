"""Human review of LLM proposals: the review store (SQLite) that the web UI, the CLI and the assets share.

Pure library (no Dagster import). Modules, each depending only on those listed before it:
:mod:`review.model` (vocabulary, value types, reviewer names), :mod:`review.history` (replaying
an item's audit log), :mod:`review.agreement` (Cohen's kappa), :mod:`review.schema` (the SQLite
layout), :mod:`review.exchange` (JSONL/CSV export and import files), :mod:`review.connection`,
:mod:`review.queries` and :mod:`review.store` (the repository: connection, reads, changes),
:mod:`review.gate` (automatic acceptances, when a task's review is complete), then the web UI
(:mod:`review.diff`, :mod:`review.web_urls`, :mod:`review.web_security`, :mod:`review.web_forms`,
:mod:`review.web`) and the command line (:mod:`cli.review`).
"""
