"""Source loaders (stage 0): one per ``source.kind`` of ``conteb.yaml``.

Each returns a :class:`SourceResult` whose tables follow ``SOURCE_DOCUMENTS`` /
``SOURCE_QUERIES`` / ``QUARANTINE``. Add a kind by writing a loader and registering it in
:func:`load_source` (and its config model in :mod:`conteb.config`).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from conteb.config import ControlledSource, HFDatasetSource, SampleSource, SquadJsonSource, TextFolderSource
from curation.sources.controlled.load import load_controlled
from curation.sources.hf_dataset import load_hf_dataset
from curation.sources.model import SourceDocument, SourceError, SourceQuery, SourceResult
from curation.sources.sample import load_sample
from curation.sources.squad import load_squad_json
from curation.sources.storable import quarantine_unstorable
from curation.sources.text_folder import load_text_folder

__all__ = ["SourceError", "SourceResult", "load_source", "source_label"]

SourceConfigs = SquadJsonSource | TextFolderSource | HFDatasetSource | SampleSource | ControlledSource


def load_source(source: SourceConfigs, base_dir: Path | None = None) -> SourceResult:
    """Dispatch on ``source.kind``; paths are already resolved by :func:`conteb.config.load_config`.

    With ``base_dir`` (the config file's folder), ``source`` columns hold file paths relative to
    it, so published rows carry no machine-specific absolute paths. Rows no Arrow table can hold (a lone surrogate,
    an offset beyond 64 bits) are quarantined (:mod:`curation.sources.storable`).
    """
    match source:
        case SquadJsonSource():
            result = load_squad_json(source.path)
        case TextFolderSource():
            result = load_text_folder(source.path, source.patterns)
        case HFDatasetSource():
            result = load_hf_dataset(source.path, source.name, source.split, source.columns)
        case SampleSource():
            result = load_sample(source.path)
        case ControlledSource():
            result = load_controlled(source)
        case _:  # pragma: no cover
            raise TypeError(f"unknown source config {source!r}")
    return quarantine_unstorable(relabel_sources(result, base_dir) if base_dir else result)


def source_label(source: SourceConfigs, base_dir: Path) -> str:
    """What the dataset card and the logs call ``source``: its path relative to ``base_dir`` (the registry's folder)
    when it is a local path, a hub dataset's name as given, a generated source's settings."""
    if isinstance(source, ControlledSource):
        return source.label
    path = str(source.path)
    return os.path.relpath(path, base_dir) if os.path.isabs(path) else path


def relabel_sources(result: SourceResult, base_dir: Path) -> SourceResult:
    """Rewrite absolute file paths in ``source`` fields as paths relative to ``base_dir``."""
    cache: dict[str, str] = {}

    def relative(label: str) -> str:
        if label not in cache:
            cache[label] = os.path.relpath(label, base_dir) if os.path.isabs(label) and os.path.exists(label) else label
        return cache[label]

    items: list[SourceDocument | SourceQuery] = [*result.documents, *result.queries]
    for item in items:
        item.source = relative(item.source)
    result.quarantine = [dataclasses.replace(r, source=relative(r.source)) for r in result.quarantine]
    return result
