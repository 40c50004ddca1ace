"""The task registry: ``conteb.yaml`` (or the file named by ``$CONTEB_CONFIG``).

``load_config`` parses and validates the file; any problem raises :class:`ConfigError` with a
message naming the file, the task and the field, so a bad registry fails when Dagster loads the
code location rather than halfway through a run.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from conteb.reproduce import ReproduceConfig, reproduce_task_fields
from evaluation.config import EvaluationConfig
from llm.settings import LLMSettings

CONFIG_ENV = "CONTEB_CONFIG"
DEFAULT_CONFIG_NAME = "conteb.yaml"
TASK_NAME_PATTERN = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"
SPLIT_NAME_PATTERN = r"^[A-Za-z0-9_.-]+$"
SPLIT_SUM_TOLERANCE = 1e-6


class ConfigError(ValueError):
    """``conteb.yaml`` is unreadable or invalid; the message names file, task and field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


LLMConfig = LLMSettings
"""The ``llm:`` block: model, endpoint, concurrency, rate budget, retries, structured-output
mode, online/batch mode and prices (see :class:`llm.settings.LLMSettings`). The API key is not
here: it comes from ``$OPENAI_API_KEY``."""


class ExecutionConfig(_Strict):
    """How ``build_conteb`` runs its steps.

    ``auto`` runs in process (no per-step subprocess start-up, ~2 s a step here) unless the
    registry declares more than ``multiprocess_from_tasks`` tasks, then multiprocess.
    """

    executor: Literal["auto", "in_process", "multiprocess"] = "auto"
    max_concurrent: int | None = Field(None, ge=1)
    multiprocess_from_tasks: int = Field(4, ge=1)


class ChunkingConfig(_Strict):
    """Recursive character chunking (LangChain ``RecursiveCharacterTextSplitter``)."""

    chunk_size: int = Field(1000, ge=1)
    chunk_overlap: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _overlap_below_size(self) -> ChunkingConfig:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(
                f"chunk_overlap ({self.chunk_overlap}) must be smaller than chunk_size ({self.chunk_size})"
            )
        return self


class SquadJsonSource(_Strict):
    """SQuAD v1.1/v2.0-format JSON (plain or .gz); COVID-QA and XQuAD use the same schema."""

    kind: Literal["squad_json"]
    path: Path


class TextFolderSource(_Strict):
    """A folder of plain-text / markdown files, one document each (no queries)."""

    kind: Literal["text_folder"]
    path: Path
    patterns: tuple[str, ...] = ("*.txt", "*.md")


class HFColumns(_Strict):
    """Column mapping of an ``hf_dataset`` source. ``query``/``answers`` may be absent."""

    text: str = "context"
    title: str | None = "title"
    doc_key: str | None = None  # groups rows into documents; default: title, else text
    query_id: str | None = "id"
    query: str | None = "question"
    answers: str | None = "answers"  # SQuAD form: {"text": [...], "answer_start": [...]}


class HFDatasetSource(_Strict):
    """Any Hugging Face dataset (hub name or local path) loaded with ``datasets``."""

    kind: Literal["hf_dataset"]
    path: str
    name: str | None = None
    split: str = "validation"
    columns: HFColumns = HFColumns()


class SampleSource(_Strict):
    """The bundled sample corpus (``data/sample/``): title line + body files, queries.jsonl."""

    kind: Literal["sample"]
    path: Path = Path("data/sample")


SourceConfig = Annotated[
    SquadJsonSource | TextFolderSource | HFDatasetSource | SampleSource,
    Field(discriminator="kind"),
]


class ReviewConfig(_Strict):
    """Manual verification of LLM output before the benchmark uses it.

    ``on_reject``: what a rejected reformulation becomes in the benchmark: ``original`` (the
    chunk keeps its original text) or ``drop_queries`` (original text, and the queries paired
    with that chunk are left out). ``auto_accept_unchanged``: an unflagged proposal identical
    to the original text (nothing to verify) is accepted by reviewer ``auto``.
    """

    on_reject: Literal["original", "drop_queries"] = "original"
    auto_accept_unchanged: bool = True
    # Non-LLM methods whose proposals need no person (the deterministic, labelled offline mask of the
    # reproduce experiment): accepted by reviewer ``auto:<method>``, flagged or not, and counted.
    auto_accept_methods: tuple[Literal["mask"], ...] = ()


class SplitsConfig(_Strict):
    """Document-level splits: ``splits: {train: 0.5, test: 0.5, seed: 0}`` in ``conteb.yaml``.

    Every key but ``seed`` is a split name (``SPLIT_NAME_PATTERN``) with its share of the
    documents, each in (0, 1], summing to 1 (within ``SPLIT_SUM_TOLERANCE``); declaration order is
    kept. Which split a document lands in depends only on ``(seed, doc_id)``
    (:func:`curation.splits.assign_splits`), so adding documents never moves an existing one.
    """

    fractions: dict[str, float]
    seed: int = 0

    @model_validator(mode="before")
    @classmethod
    def _flat_mapping(cls, data: Any) -> Any:
        """Accept the flat YAML form (split names next to ``seed``) as well as ``{fractions, seed}``."""
        if isinstance(data, dict) and "fractions" not in data:
            seed = data.get("seed", 0)
            return {"fractions": {k: v for k, v in data.items() if k != "seed"}, "seed": seed}
        return data

    @model_validator(mode="after")
    def _valid_fractions(self) -> SplitsConfig:
        if not self.fractions:
            raise ValueError("declare at least one split with its fraction, e.g. {train: 0.5, test: 0.5, seed: 0}")
        for name, fraction in self.fractions.items():
            if not re.fullmatch(SPLIT_NAME_PATTERN, name):
                raise ValueError(f"split name {name!r} must match {SPLIT_NAME_PATTERN}")
            if not 0.0 < fraction <= 1.0:
                raise ValueError(f"fraction of split {name!r} must be in (0, 1], got {fraction}")
        total = sum(self.fractions.values())
        if abs(total - 1.0) > SPLIT_SUM_TOLERANCE:
            raise ValueError(f"fractions must sum to 1, got {total:g} ({dict(self.fractions)})")
        return self

    @property
    def names(self) -> tuple[str, ...]:
        """Split names in declaration order."""
        return tuple(self.fractions)


class TaskConfig(_Strict):
    """One benchmark task: where its documents come from and how each stage treats them.

    ``split``: the name of the one published split (every document in it); ``splits``: several
    document-level splits instead (setting both is an error).
    """

    name: str = Field(pattern=TASK_NAME_PATTERN)
    source: SourceConfig
    split: str = Field("test", pattern=SPLIT_NAME_PATTERN)
    splits: SplitsConfig | None = None
    max_documents: int | None = Field(None, ge=1)  # keep the first N source documents (the rest counted)
    chunking: ChunkingConfig = ChunkingConfig()
    pairing: Literal["span", "llm", "both"] = "span"
    reformulation: bool = False  # rewrite all but each document's first chunk (LLM, else masking)
    synthetic_queries: int = Field(0, ge=0)  # LLM-written queries per chunk
    chunk_contexts: bool = False  # LLM-written context per chunk (contextual-retrieval baseline)
    answerability: bool | None = None  # LLM "answerable from its gold chunk alone?" label; None: if an LLM is set
    review: ReviewConfig = ReviewConfig()
    license: str | None = None
    description: str | None = None

    @model_validator(mode="after")
    def _split_or_splits(self) -> TaskConfig:
        if self.splits is not None and "split" in self.model_fields_set:
            raise ValueError(
                f"split: set either split ({self.split!r}: one published split) or splits "
                f"({', '.join(self.splits.names)}: document-level splits), not both"
            )
        return self

    @property
    def split_names(self) -> tuple[str, ...]:
        """The published splits, in declaration order (``(split,)`` without ``splits``)."""
        return self.splits.names if self.splits is not None else (self.split,)

    @property
    def train_split(self) -> str | None:
        """``"train"`` when ``splits`` declares it, else None (no split is reserved for training)."""
        return "train" if self.splits is not None and "train" in self.splits.fractions else None

    @property
    def evaluation_split(self) -> str:
        """The split evaluated by default: ``test`` when declared, else the last declared split, else ``split``."""
        if self.splits is None:
            return self.split
        return "test" if "test" in self.splits.fractions else self.splits.names[-1]

    @property
    def review_kinds(self) -> tuple[str, ...]:
        """The review queues this task has (one per kind of LLM output it produces)."""
        kinds = []
        if self.reformulation:
            kinds.append("reformulation")
        if self.uses_llm_pairing:
            kinds.append("pairing")
        if self.synthetic_queries:
            kinds.append("synthetic_query")
        return tuple(kinds)

    @property
    def uses_span_pairing(self) -> bool:
        return self.pairing in ("span", "both")

    @property
    def uses_llm_pairing(self) -> bool:
        return self.pairing in ("llm", "both")

    @property
    def dagster_name(self) -> str:
        """The task name as a Dagster group / op name (``-`` is not allowed there)."""
        return self.name.replace("-", "_")


class TrainingBlock(_Strict):
    """The ``training:`` block: which tasks feed InSeNT training, and how it is launched.

    ``settings`` are the training hyperparameters (see ``training/config.py``: base_model, mode,
    lambda_seq, lr, epochs, max_steps, batch_docs, ...); they are validated by the training
    package when the asset runs. ``launcher``: ``subprocess`` runs ``python -m
    pipelines.pipes_train`` locally through Dagster Pipes (the README shows the Kubernetes swap).
    ``control``: also train the paper's "+Training" control (same data, no context).
    """

    tasks: tuple[str, ...] = ()
    launcher: Literal["subprocess"] = "subprocess"
    control: bool = True
    settings: dict[str, Any] = Field(default_factory=dict)


class ProjectConfig(_Strict):
    """The whole registry. ``config_path`` is where it was read from (paths resolve against it)."""

    llm: LLMConfig = LLMConfig()
    execution: ExecutionConfig = ExecutionConfig()
    training: TrainingBlock = TrainingBlock()
    evaluation: EvaluationConfig = EvaluationConfig()
    reproduce: ReproduceConfig = ReproduceConfig()
    tasks: tuple[TaskConfig, ...] = ()
    config_path: Path | None = None

    @model_validator(mode="after")
    def _unique_task_names(self) -> ProjectConfig:
        seen: dict[str, int] = {}
        for index, task in enumerate(self.tasks):
            if task.name in seen:
                raise ValueError(
                    f"task '{task.name}' (tasks[{index}]): name: duplicate task name, "
                    f"already declared at tasks[{seen[task.name]}]"
                )
            seen[task.name] = index
        unknown = [name for name in self.training.tasks if name not in seen]
        if unknown:
            raise ValueError(f"training.tasks: unknown task(s) {unknown}; declared: {sorted(seen)}")
        unknown = [name for name in self.evaluation.tasks or () if name not in seen]
        if unknown:
            raise ValueError(f"evaluation.tasks: unknown task(s) {unknown}; declared: {sorted(seen)}")
        clash = [t.name for t in self.evaluation.external if t.name in seen]
        if clash:
            raise ValueError(f"evaluation.external: name(s) {clash} already used by tasks")
        return self

    @property
    def evaluated_tasks(self) -> tuple[TaskConfig, ...]:
        """The registry's tasks that ``evaluate_conteb`` evaluates (``evaluation.tasks``, default all)."""
        names = self.evaluation.tasks
        return tuple(t for t in self.tasks if names is None or t.name in names)

    @property
    def config_dir(self) -> Path:
        return self.config_path.parent if self.config_path else Path.cwd()

    def reproduce_task(self, llm_available: bool) -> TaskConfig:
        """The task of the paper's controlled experiment (``reproduce:`` block; see conteb/reproduce.py)."""
        fields = reproduce_task_fields(self.reproduce, self.config_dir, llm_available)
        try:
            return TaskConfig.model_validate(fields)
        except ValidationError as error:
            raise ConfigError(f"{self.config_path}: reproduce: {error}") from None

    def task(self, name: str) -> TaskConfig:
        for task in self.tasks:
            if task.name == name:
                return task
        raise KeyError(f"no task named {name!r} in {self.config_path}")


def find_config_path(start: Path | None = None) -> Path:
    """``$CONTEB_CONFIG`` if set, else ``conteb.yaml`` in ``start`` (default: cwd) or the project."""
    override = os.environ.get(CONFIG_ENV)
    if override:
        return Path(override).expanduser().resolve()
    candidates = [
        (start or Path.cwd()) / DEFAULT_CONFIG_NAME,
        Path(__file__).resolve().parents[1] / DEFAULT_CONFIG_NAME,
    ]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    return candidates[0].resolve()


def load_config(path: Path | str | None = None) -> ProjectConfig:
    """Read, validate and resolve the registry at ``path`` (default: :func:`find_config_path`).

    Source paths are made absolute relative to the config file and must exist (hub dataset names
    of ``hf_dataset`` sources are the exception).
    """
    config_path = Path(path).resolve() if path else find_config_path()
    try:
        raw = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{config_path}: no such file (set {CONFIG_ENV} or create it)") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{config_path}: not valid YAML: {error}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{config_path}: the top level must be a mapping with a 'tasks' list")
    try:
        config = ProjectConfig.model_validate({**raw, "config_path": config_path})
    except ValidationError as error:
        raise ConfigError(_describe_validation_error(config_path, raw, error)) from None
    return _resolve_paths(config)


def display_path(path: Path) -> Path:
    """``path`` relative to the working folder when it lies inside it (shorter messages), else as given."""
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


def _describe_validation_error(config_path: Path, raw: dict[str, Any], error: ValidationError) -> str:
    """One self-contained line per problem: ``<file>: task 'x' (tasks[i]): <field>: <reason>``; an unknown key
    is named with the closest allowed key (``difflib``) instead of pydantic's "Extra inputs are not permitted"."""
    shown = display_path(config_path)
    tasks = raw.get("tasks") if isinstance(raw.get("tasks"), list) else []
    lines = []
    for item in error.errors():
        loc = list(item["loc"])
        unknown_key = item["type"] == "extra_forbidden"
        field, models = _walk(loc[:-1] if unknown_key else loc)
        where = ""
        if len(loc) >= 2 and loc[0] == "tasks" and isinstance(loc[1], int):
            index = loc[1]
            entry = tasks[index] if index < len(tasks) else None
            name = entry.get("name", "?") if isinstance(entry, dict) else "?"
            where = f"task '{name}' (tasks[{index}]): "
            field = field.removeprefix(f"tasks[{index}]").removeprefix(".")
        if unknown_key:
            allowed = sorted({name for model in models for name in model.model_fields if name != "config_path"})
            message = unknown_key_message(str(loc[-1]), allowed)
            lines.append(f"{shown}: {where}{field + ': ' if field else ''}{message}")
            continue
        message = item["msg"].removeprefix("Value error, ")
        if where and not field:  # a task-level rule: its message starts with the field it names
            lines.append(f"{shown}: {where}{message}")
        else:
            lines.append(f"{shown}: {where}{field or '(top level)'}: {message}")
    return "\n".join(lines)


def unknown_key_message(key: str, allowed: list[str]) -> str:
    """``unknown key 'chunkng' (did you mean 'chunking'?)``; the allowed keys listed when none is close."""
    close = difflib.get_close_matches(key, allowed, n=1)
    if close:
        return f"unknown key '{key}' (did you mean '{close[0]}'?)"
    return f"unknown key '{key}' (allowed: {', '.join(allowed)})" if allowed else f"unknown key '{key}'"


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation may hold (through Optional, unions, tuples, ``Annotated``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in get_args(annotation) for model in _models_in(arg)]


def _union_tags(model: type[BaseModel]) -> set[str]:
    """Names pydantic uses for ``model`` as a union member: its ``kind`` literal(s), else its class name."""
    kind = model.model_fields.get("kind")
    return {str(tag) for tag in get_args(kind.annotation)} if kind is not None else {model.__name__}


def _walk(loc: list[Any]) -> tuple[str, list[type[BaseModel]]]:
    """The registry path of a pydantic location (``evaluation.systems[0]``, union tags dropped) and the models
    that can sit there (empty below a free-form mapping)."""
    text, models = "", [ProjectConfig]
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
            continue
        fields = [model.model_fields[part] for model in models if part in model.model_fields]
        tagged = [model for model in models if part in _union_tags(model)]
        if not fields and tagged:
            models = tagged
            continue
        text += f".{part}" if text else str(part)
        models = [model for field in fields for model in _models_in(field.annotation)]
    return text, models


def _as_written(written: str | Path, base: Path, resolved: Path) -> str:
    """``'corpora/x.gz' (relative to /reg, the registry's folder: /reg/corpora/x.gz)``; absolute paths as written."""
    if Path(written).expanduser().is_absolute():
        return repr(str(written))
    return f"{str(written)!r} (relative to {base}, the registry's folder: {resolved})"


def _resolve_paths(config: ProjectConfig) -> ProjectConfig:
    base = config.config_dir
    shown = display_path(config.config_path) if config.config_path else DEFAULT_CONFIG_NAME
    tasks = []
    for index, task in enumerate(config.tasks):
        source = task.source
        where = f"{shown}: task '{task.name}' (tasks[{index}]): source.path"
        if isinstance(source, HFDatasetSource):
            local = (base / source.path).resolve()
            looks_local = source.path.startswith((".", "/", "~"))
            if local.exists():
                source = source.model_copy(update={"path": str(local)})
            elif looks_local:
                raise ConfigError(f"{where}: no such dataset folder: {_as_written(source.path, base, local)}")
        else:
            resolved = (base / source.path.expanduser()).resolve()
            if not resolved.exists():
                raise ConfigError(f"{where}: no such file or folder: {_as_written(source.path, base, resolved)}")
            must_be_dir = isinstance(source, TextFolderSource | SampleSource)
            if must_be_dir != resolved.is_dir():
                kind = "a folder" if must_be_dir else "a file"
                raise ConfigError(f"{where}: {resolved} is not {kind}")
            source = source.model_copy(update={"path": resolved})
        tasks.append(task.model_copy(update={"source": source}))
    external = []
    for index, target in enumerate(config.evaluation.external):
        local = (base / target.path).expanduser()
        if local.exists():
            target = target.model_copy(update={"path": str(local.resolve())})
        elif target.path.startswith((".", "/", "~")):
            raise ConfigError(
                f"{shown}: evaluation.external[{index}] ({target.name}): path: no such folder: "
                f"{_as_written(target.path, base, local.resolve())}"
            )
        external.append(target)
    evaluation = config.evaluation.model_copy(update={"external": tuple(external)})
    return config.model_copy(update={"tasks": tuple(tasks), "evaluation": evaluation})
