"""Which embedding model a system uses, loaded once per process, and which prefixes it gets.

* **Model** (``ModelOptions``): ``model`` is ``offline-minilm`` (the bundled all-MiniLM-L6-v2, via
  :func:`embedding.models.load_model`), an existing folder, or a hub id; a name that looks like a path (absolute,
  ``./``, ``../``, ``~``, or two or more ``/``) but does not exist is refused. ``trained`` names a training asset
  whose folder is ``<models_dir>/<trained>``; it must hold a saved model (``modules.json`` or ``config.json``).
* **Cache**: loaded models are kept per process, keyed by (folder or hub id, mtime of the folder's weights,
  device), so the systems of one evaluation share one load; a retrained folder has new weights, hence a new key.
  At most :data:`MAX_CACHED_MODELS` stay loaded (least recently used first out). Query vectors are cached the
  same way (:func:`encode_queries_cached`): systems that share a model and a query prefix (independent, title
  prefix, late chunking on one base model; every point of the chunk-size study) encode the queries once.
* **Prefixes**, for queries and documents separately, first found wins: the config value (``""`` = none); the
  model's sentence-transformers ``prompts["query"]`` / ``prompts["document"]`` (empty strings count as absent:
  sentence-transformers 5 saves ``{"query": "", "document": ""}`` by default); for a trained model, the prefix it
  was trained with (``<models_dir>/<trained>.train.yaml``); :data:`KNOWN_PREFIXES` by model name (the hub id, or
  a folder's ``base_model`` from its model card); else none.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
import yaml
from sentence_transformers import SentenceTransformer

from conteb.names import Job
from conteb.yaml_text import load_yaml
from embedding.encoder import LateChunkingEncoder
from embedding.models import OFFLINE_MINILM, load_model, offline_minilm_path, pick_device
from evaluation.config import ModelOptions
from evaluation.encoded import COUNTERS
from evaluation.indexed import NotRunnable

logger = logging.getLogger(__name__)
T = TypeVar("T")
M = TypeVar("M", bound=ModelOptions)

KNOWN_PREFIXES: dict[str, tuple[str, str]] = {
    "lightonai/modernbert-embed-large": ("search_query: ", "search_document: "),
    "nomic-ai/modernbert-embed-base": ("search_query: ", "search_document: "),
    "nomic-ai/nomic-embed-text-v1.5": ("search_query: ", "search_document: "),
}
"""Model name -> (query prefix, document prefix), for models whose prompts are documented but not saved."""

MAX_CACHED_MODELS = 3
MAX_CACHED_QUERY_SETS = 16
_WEIGHT_PATTERNS = ("model*.safetensors", "pytorch_model*.bin", "*/model*.safetensors", "*/pytorch_model*.bin")


def looks_like_path(name: str) -> bool:
    """True for names meant as folders: absolute, ``./``, ``../``, ``~``, or with two or more ``/``."""
    return name.startswith(("/", "./", "../", "~", ".\\")) or name.count("/") >= 2 or "\\" in name


def resolve_location(name: str) -> str:
    """Folder (as a string) for ``offline-minilm`` and existing paths; the name itself for a hub id."""
    if name == OFFLINE_MINILM:
        return str(offline_minilm_path())
    path = Path(name).expanduser()
    return str(path.resolve()) if path.exists() else name


def _folder_problem(folder: Path) -> str | None:
    if not folder.is_dir():
        return f"model folder {folder} does not exist"
    if not any((folder / marker).is_file() for marker in ("modules.json", "config.json")):
        return f"{folder} holds no saved model (no modules.json or config.json)"
    return None


def model_location_problem(name: str) -> str | None:
    """Why ``name`` (``offline-minilm``, a folder or a hub id) cannot be loaded, when that is cheap to tell."""
    if name == OFFLINE_MINILM:
        return None
    path = Path(name).expanduser()
    if path.exists() or looks_like_path(name):
        return _folder_problem(path)
    return None


def trained_folder(models_dir: Path, trained: str) -> Path:
    """Where training asset ``trained`` saves its model."""
    return Path(models_dir) / trained


def model_problem(options: ModelOptions, models_dir: Path) -> str | None:
    """Why the model of ``options`` cannot be loaded (missing trained folder, missing path), or None."""
    if options.trained is not None:
        folder = trained_folder(models_dir, options.trained)
        if not folder.exists():
            return f"not trained yet: {folder} does not exist; materialize {options.trained} (job {Job.TRAIN})"
        problem = _folder_problem(folder)
        if problem:
            return f"not trained yet: {problem}; materialize {options.trained} (job {Job.TRAIN})"
        return None
    return model_location_problem(options.model or OFFLINE_MINILM)


@dataclass(frozen=True)
class ModelSpec:
    """A resolved model: ``label`` (shown in reports), ``location`` (folder or hub id), ``folder`` (None: hub)."""

    label: str
    location: str
    folder: Path | None
    base_name: str | None  # name looked up in KNOWN_PREFIXES
    training_config: Path | None = None  # <models_dir>/<trained>.train.yaml for trained models


def _card_base_model(folder: Path) -> str | None:
    from embedding.model_folder import read_front_matter

    base = read_front_matter(folder / "README.md").get("base_model")
    return base if isinstance(base, str) else None


def folder_spec(folder: Path) -> ModelSpec:
    """The :class:`ModelSpec` of the saved model ``folder`` (call :func:`model_location_problem` first), read as a
    trained model is: label its name, base model from its card, its training YAML ``<folder>.train.yaml`` (where the
    training assets write it) when there is one."""
    folder = folder.expanduser().resolve()
    config = folder.parent / f"{folder.name}.train.yaml"
    return ModelSpec(folder.name, str(folder), folder, _card_base_model(folder), config if config.is_file() else None)


def model_spec(options: ModelOptions, models_dir: Path) -> ModelSpec:
    """Resolve ``options.model`` / ``options.trained`` (call :func:`model_problem` first)."""
    if options.trained is not None:
        folder = trained_folder(models_dir, options.trained).resolve()
        config = Path(models_dir) / f"{options.trained}.train.yaml"
        return ModelSpec(options.trained, str(folder), folder, _card_base_model(folder), config)
    name = options.model or OFFLINE_MINILM
    location = resolve_location(name)
    if name == OFFLINE_MINILM:
        return ModelSpec(name, location, Path(location), "sentence-transformers/all-MiniLM-L6-v2")
    if Path(location).is_dir():
        folder = Path(location)
        return ModelSpec(name, location, folder, _card_base_model(folder))
    return ModelSpec(name, name, None, name)


def _weights_stamp(folder: Path | None) -> int:
    """Latest mtime (ns) of the weight files of ``folder`` (the folder's own mtime when none is found)."""
    if folder is None:
        return 0
    stamps = [path.stat().st_mtime_ns for pattern in _WEIGHT_PATTERNS for path in folder.glob(pattern)]
    return max(stamps) if stamps else folder.stat().st_mtime_ns


_CACHE: OrderedDict[tuple[str, int, str], SentenceTransformer] = OrderedDict()


_QUERY_CACHE: OrderedDict[tuple[str, int, str, str, int | None, str], np.ndarray] = OrderedDict()


def clear_model_cache() -> None:
    """Forget every cached model and query vector set (frees their memory once no encoder holds them)."""
    _CACHE.clear()
    _QUERY_CACHE.clear()


def load_cached(spec: ModelSpec, device: torch.device) -> tuple[SentenceTransformer, float]:
    """The model of ``spec`` on ``device`` and the seconds spent loading it (0.0 when it came from the cache).

    A hub id that cannot be loaded (no network, unknown id) raises :class:`NotRunnable`.
    """
    key = (spec.location, _weights_stamp(spec.folder), str(device))
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key], 0.0
    started = time.perf_counter()
    name = OFFLINE_MINILM if spec.label == OFFLINE_MINILM and spec.folder is not None else spec.location
    try:
        model = load_model(name, device=str(device))
    except OSError as error:
        if spec.folder is not None:
            raise
        raise NotRunnable(f"cannot load model {spec.location!r} (hub id; no local copy?): {error}") from error
    _CACHE[key] = model
    while len(_CACHE) > MAX_CACHED_MODELS:
        _CACHE.popitem(last=False)
    return model, time.perf_counter() - started


@dataclass(frozen=True)
class Prefixes:
    """The prefixes used and where each came from (``config``, ``model prompts``, ``training config``, ...)."""

    query: str
    document: str
    query_source: str
    document_source: str

    def describe(self) -> str:
        if not self.query and not self.document:
            return "prefixes: none"
        return f"prefixes: query {self.query!r}, document {self.document!r}"


def training_settings(path: Path | None) -> dict[str, Any]:
    """The training YAML of a trained model (``<models_dir>/<trained>.train.yaml``); {} when absent or unreadable."""
    if path is None or not path.is_file():
        return {}
    try:
        data = load_yaml(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError:
        return {}
    return data if isinstance(data, dict) else {}


def _training_prefixes(path: Path | None) -> dict[str, str]:
    data = training_settings(path)
    return {k: v for k, v in data.items() if k in ("query_prefix", "document_prefix") and isinstance(v, str)}


def trained_header(data: dict[str, Any]) -> str | None:
    """The header a model was trained with, from its training YAML (``header``; None when absent)."""
    header = data.get("header")
    return header if isinstance(header, str) else None


def window_layout_note(
    path: Path | None, window_policy: str, window_overlap_chunks: int, header: str | None = None
) -> str | None:
    """How a system evaluates its model differently from how the model was trained (its training YAML at ``path``),
    or None: the same, or no training YAML. Late-trained models: the ``window_policy`` and ``window_overlap_chunks``
    of the windows; every trained model: the ``header`` its chunks were read under (``header``: the system's, title
    for ``context: title`` too). Evaluation keeps the system's own settings; the report says so."""
    data = training_settings(path)
    if not data:
        return None
    differences = []
    if data.get("context", "late") == "late":
        trained = (str(data.get("window_policy", "plain")), data.get("window_overlap_chunks"))
        if trained[0] != window_policy:
            differences.append(f"trained with {trained[0]} windows, evaluated with {window_policy}")
        if isinstance(trained[1], int) and trained[1] != window_overlap_chunks:
            differences.append(f"trained with a {trained[1]}-chunk overlap, evaluated with {window_overlap_chunks}")
    was = trained_header(data)
    if was != header:
        differences.append(
            f"trained {f'with the {was} header' if was else 'without a header'}, "
            f"evaluated {f'with the {header} header' if header else 'without one'}"
        )
    return "; ".join(differences) or None


def as_trained(options: M, models_dir: Path) -> M:
    """``options`` (a model system) with the window layout and header its trained model was trained with, where it
    does not set them itself (``model_fields_set``), read from ``<models_dir>/<trained>.train.yaml``: ``window_policy``
    (late-trained models) and, for a ``dense`` system, ``header: title`` (``context: late``) or ``context: title``
    (``context: independent``: the header prefixed to each chunk alone, as the control was trained), with the
    ``title_template`` trained with. ``options`` itself for a system without ``trained`` or a model without a training
    YAML. A setting the system gives explicitly is kept (:func:`window_layout_note` says how it differs)."""
    if options.trained is None:
        return options
    return with_training_layout(options, training_settings(Path(models_dir) / f"{options.trained}.train.yaml"))


def with_training_layout(options: M, data: dict[str, Any]) -> M:
    """:func:`as_trained` given the training YAML's contents ``data`` ({}: ``options`` itself)."""
    given = options.model_fields_set
    update: dict[str, Any] = {}
    policy = data.get("window_policy")
    if data.get("context", "late") == "late" and policy in ("plain", "anchored") and "window_policy" not in given:
        update["window_policy"] = policy
    header, context = trained_header(data), getattr(options, "context", None)
    if header == "title" and hasattr(options, "header") and not {"header", "title_template"} & given:
        if context == "late":
            update["header"] = header
        elif context == "independent":
            update["context"] = "title"
        if update.keys() & {"header", "context"} and isinstance(data.get("title_template"), str):
            update["title_template"] = data["title_template"]
    return options.model_copy(update=update) if update else options


def resolve_prefixes(options: ModelOptions, model: SentenceTransformer, spec: ModelSpec) -> Prefixes:
    """Prefixes by the rule of the module docstring."""
    prompts = getattr(model, "prompts", None) or {}
    trained = _training_prefixes(spec.training_config)
    known = KNOWN_PREFIXES.get(spec.base_name or "")
    resolved: list[tuple[str, str]] = []
    for position, (kind, configured) in enumerate(
        (("query", options.query_prefix), ("document", options.document_prefix))
    ):
        if configured is not None:
            resolved.append((configured, "config"))
        elif prompts.get(kind):
            resolved.append((prompts[kind], "model prompts"))
        elif trained.get(f"{kind}_prefix"):
            resolved.append((trained[f"{kind}_prefix"], f"training config {spec.training_config}"))
        elif known is not None and known[position]:
            resolved.append((known[position], f"known default for {spec.base_name}"))
        else:
            resolved.append(("", "none"))
    (query, query_source), (document, document_source) = resolved
    return Prefixes(query, document, query_source, document_source)


@dataclass
class EncoderSetup:
    """A ready encoder and what the report says about it."""

    encoder: LateChunkingEncoder
    spec: ModelSpec
    prefixes: Prefixes
    device: torch.device
    load_seconds: float
    details: dict = field(default_factory=dict)


def encode_queries_cached(
    setup: EncoderSetup, queries: list[str], show_progress: bool = False, progress_label: str = ""
) -> tuple[np.ndarray, bool]:
    """Float32 ``[n, D]`` query vectors of ``setup``'s encoder and whether they came from the cache.
    ``progress_label``: the system whose encode the progress bar names (a cache hit draws none).

    Key: the model (location, weights stamp, device), the query prefix, the model's ``max_seq_length`` and a
    sha256 of the query texts; queries never depend on the document side (windows, anchoring, titles), so every
    system of the same model and prefix gets the same vectors. At most :data:`MAX_CACHED_QUERY_SETS` are kept.
    """
    digest = hashlib.sha256("\x1f".join(queries).encode("utf-8")).hexdigest()
    model = setup.encoder.model
    key = (
        setup.spec.location,
        _weights_stamp(setup.spec.folder),
        str(setup.device),
        setup.prefixes.query,
        model.max_seq_length,
        digest,
    )
    if key in _QUERY_CACHE:
        _QUERY_CACHE.move_to_end(key)
        return _QUERY_CACHE[key], True
    vectors = setup.encoder.encode_queries(queries, show_progress=show_progress, progress_label=progress_label)
    vectors.setflags(write=False)  # shared between systems: nobody may change it in place
    _QUERY_CACHE[key] = vectors
    while len(_QUERY_CACHE) > MAX_CACHED_QUERY_SETS:
        _QUERY_CACHE.popitem(last=False)
    return vectors, False


def encoder_counts(encoder: LateChunkingEncoder) -> dict[str, int]:
    """The encoder's counters so far, by the names of :data:`evaluation.encoded.COUNTERS`."""
    values = (encoder.forwarded_windows, encoder.forwarded_tokens, encoder.anchor_tokens, encoder.truncated_chunks)
    return dict(zip(COUNTERS, values, strict=True))


def measured(encoder: LateChunkingEncoder, work: Callable[[], T]) -> tuple[T, float, dict[str, int]]:
    """``work()``'s result, the seconds it took and how much each of ``encoder``'s counters grew meanwhile."""
    before = encoder_counts(encoder)
    started = time.perf_counter()
    result = work()
    seconds = time.perf_counter() - started
    return result, seconds, {name: value - before[name] for name, value in encoder_counts(encoder).items()}


def setup_encoder(options: ModelOptions, models_dir: Path, spec: ModelSpec | None = None) -> EncoderSetup:
    """Load (or reuse) the model of ``options`` (or of ``spec``, resolved by the caller) and wrap it in a
    :class:`LateChunkingEncoder` with its prefixes.

    Raises :class:`NotRunnable` when :func:`model_problem` has a reason.
    """
    if spec is None:
        problem = model_problem(options, models_dir)
        if problem:
            raise NotRunnable(problem)
        spec = model_spec(options, models_dir)
    device = pick_device(options.device)
    model, load_seconds = load_cached(spec, device)
    prefixes = resolve_prefixes(options, model, spec)
    encoder = LateChunkingEncoder(
        model,
        max_length=options.max_length,
        window_overlap_chunks=options.window_overlap_chunks,
        query_prefix=prefixes.query,
        document_prefix=prefixes.document,
        token_budget=options.token_budget,
        window_policy=options.window_policy,
        anchor_share=options.anchor_share,
    )
    details = {
        "model": spec.label,
        "model_path": spec.location,
        "base_model": spec.base_name,
        "device": str(device),
        "model_load_seconds": round(load_seconds, 3),
        "query_prefix": prefixes.query,
        "document_prefix": prefixes.document,
        "query_prefix_source": prefixes.query_source,
        "document_prefix_source": prefixes.document_source,
        "max_length": encoder.max_length,
        "window_overlap_chunks": encoder.window_overlap_chunks,
        "window_policy": encoder.window_policy,
        "anchor_share": encoder.anchor_share,
        "token_budget": encoder.token_budget,
    }
    titled = "title" in (getattr(options, "header", None), getattr(options, "context", None))
    header = "title" if titled else None  # the title header inside the windows, or before each chunk alone
    note = window_layout_note(spec.training_config, encoder.window_policy, encoder.window_overlap_chunks, header)
    if note is not None:
        details["window_layout_note"] = note
    return EncoderSetup(encoder, spec, prefixes, device, load_seconds, details)
