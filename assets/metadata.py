"""Materialization metadata shared by the assets: counts, schema, a Markdown preview, paths."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import dagster as dg
import pyarrow as pa

PREVIEW_ROWS = 5
PREVIEW_CELL_CHARS = 80


def column_schema(schema: pa.Schema) -> dg.TableSchema:
    """Dagster's column schema of a pyarrow schema."""
    return dg.TableSchema(columns=[dg.TableColumn(field.name, str(field.type), description=None) for field in schema])


def markdown_preview(table: pa.Table, rows: int = PREVIEW_ROWS) -> str:
    """The first ``rows`` rows as a Markdown table, long cells shortened."""
    if table.num_rows == 0:
        return "_(no rows)_"

    def cell(value: object) -> str:
        text = str(value).replace("\n", " ").replace("|", "\\|")
        return text if len(text) <= PREVIEW_CELL_CHARS else text[: PREVIEW_CELL_CHARS - 1] + "…"

    records = table.slice(0, rows).to_pylist()
    header = "| " + " | ".join(table.column_names) + " |"
    rule = "|" + "---|" * len(table.column_names)
    lines = ["| " + " | ".join(cell(record[name]) for name in table.column_names) + " |" for record in records]
    return "\n".join([header, rule, *lines])


def table_metadata(table: pa.Table, path: Path | None = None) -> dict[str, object]:
    """Row count, column schema, preview and (when given) the file path of ``table``."""
    metadata: dict[str, object] = {
        "dagster/row_count": table.num_rows,
        "dagster/column_schema": column_schema(table.schema),
        "preview": dg.MetadataValue.md(markdown_preview(table)),
    }
    if path is not None:
        metadata["path"] = dg.MetadataValue.path(str(path))
    return metadata


def counts_in_words(counts: Mapping[str, int]) -> str:
    """``counts`` for a log line: ``"98 accepted, 0 edited, 0 rejected, 30 not reviewed"`` (each name's
    underscores as spaces, in the mapping's order); ``"none"`` when empty."""
    return ", ".join(f"{int(value)} {name.replace('_', ' ')}" for name, value in counts.items()) or "none"


def count_metadata(prefix: str, counts: dict[str, int]) -> dict[str, int]:
    """``{"<prefix>/<name>": count}`` entries (e.g. quarantine reasons, stage statistics)."""
    return {f"{prefix}/{name}": int(value) for name, value in counts.items()}
