"""Dagster resources: project settings and the Parquet IO manager of stage tables."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq

from assets.metadata import table_metadata
from conteb.storage import stage_table_path, write_parquet_atomic
from llm.cache import AnswerCache
from llm.client import LLMClient
from llm.settings import LLMSettings
from review.web_urls import queue_url

if TYPE_CHECKING:
    from review.store import ReviewStore


class ConTEBSettings(dg.ConfigurableResource):
    """Where the task registry and the data folder are (resolved when the code location loads)."""

    config_path: str
    data_dir: str

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir)

    @property
    def config_dir(self) -> Path:
        """Folder of the registry: relative paths in it, and in published rows, start here."""
        return Path(self.config_path).parent


class StageTableIOManager(dg.ConfigurableIOManager):
    """Stores each stage asset ``[task, name]`` as ``<data_dir>/stages/<task>/<name>.parquet``.

    Writes are atomic (temporary file, then rename). Output metadata: row count, column schema,
    a Markdown preview and the path.
    """

    data_dir: str

    def _path(self, key: dg.AssetKey) -> Path:
        task, *rest = key.path
        return stage_table_path(Path(self.data_dir), task, "__".join(rest))

    def handle_output(self, context: dg.OutputContext, obj: pa.Table) -> None:
        if not isinstance(obj, pa.Table):
            raise TypeError(f"{context.asset_key.to_user_string()}: expected a pyarrow.Table, got {type(obj).__name__}")
        path = write_parquet_atomic(obj, self._path(context.asset_key))
        context.add_output_metadata(table_metadata(obj, path))

    def load_input(self, context: dg.InputContext) -> pa.Table:
        path = self._path(context.asset_key)
        if not path.exists():
            raise FileNotFoundError(f"{path} missing: materialize {context.asset_key.to_user_string()} first")
        return pq.read_table(path)


class LLMResource(dg.ConfigurableResource):
    """The LLM client of the LLM stages (``llm:`` block of conteb.yaml + ``$OPENAI_API_KEY``).

    ``settings_json`` is the validated ``llm:`` block; ``api_key`` is an ``EnvVar`` (never shown in
    the UI, logs or metadata); answers and the cost ledger live in ``cache_path`` (SQLite).
    """

    settings_json: str
    api_key: str | None = None
    cache_path: str

    @property
    def settings(self) -> LLMSettings:
        return LLMSettings.model_validate_json(self.settings_json)

    def client(self, log: Callable[[str], None] | None = None) -> LLMClient:
        return LLMClient(self.settings, AnswerCache(Path(self.cache_path)), self.api_key or None, log)


class ReviewStoreResource(dg.ConfigurableResource):
    """The review store (SQLite file) and the address of the review UI that serves it."""

    path: str
    ui_url: str = "http://127.0.0.1:8765"

    def store(self) -> ReviewStore:
        from review.store import ReviewStore

        return ReviewStore(Path(self.path))

    def queue_url(self, task: str, kind: str) -> str:
        return self.ui_url.rstrip("/") + queue_url(task, kind)
