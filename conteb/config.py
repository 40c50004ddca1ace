"""The task blocks of the registry (``tasks:`` in ``conteb.yaml``) and the rules every registry block shares.

A task says where its documents come from (:data:`SourceConfig`) and how each curation stage treats them. The
whole registry, with each part's own block (``llm:``, ``evaluation:``, ``training:``, ...), is assembled above the
domain packages, in :mod:`project.config`; this module only holds what the core and every package agree on:
:class:`StrictModel`, :class:`ConfigError`, the task types, and the one-line description of a validation error.
"""

from __future__ import annotations

import difflib
import re
import string
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from conteb.names import ReviewKind

TASK_NAME_PATTERN = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"
SPLIT_NAME_PATTERN = r"^\w+(\.\w+)*$"
"""The split names the ``datasets`` library loads: its own rule, ``datasets.naming._split_re`` (a test keeps the two
equal), matched whole: letters, digits and ``_``, in parts joined by ``.`` (``my-test`` or ``..`` would be written,
then refused by ``load_dataset``)."""
RESERVED_SPLIT_NAMES = ("all",)
"""Split names ``datasets`` gives a meaning of its own (``split="all"`` loads every split together)."""
SPLIT_SUM_TOLERANCE = 1e-6


def split_name_problem(name: object) -> str | None:
    """Why ``name`` cannot be the name of a published split (:data:`SPLIT_NAME_PATTERN`,
    :data:`RESERVED_SPLIT_NAMES`), or None when it can: the one rule for split names."""
    if not isinstance(name, str) or not re.fullmatch(SPLIT_NAME_PATTERN, name):
        return (
            f"split name {name!r} must match {SPLIT_NAME_PATTERN} (letters, digits and _, parts joined by '.'), "
            "the names the datasets library can load"
        )
    if name in RESERVED_SPLIT_NAMES:
        return f"split name {name!r} is reserved by the datasets library (split={name!r} loads every split)"
    return None


def valid_split_name(name: str) -> str:
    """``name`` when :func:`split_name_problem` finds nothing, else ValueError with the problem (for validators)."""
    problem = split_name_problem(name)
    if problem is not None:
        raise ValueError(problem)
    return name


class ConfigError(ValueError):
    """``conteb.yaml`` is unreadable or invalid; the message names file, task and field."""


class StrictModel(BaseModel):
    """Base of every registry block: unknown keys are errors (with a suggestion), values are frozen, and every
    number is finite: ``.inf``, ``-.inf`` and ``.nan`` are refused for every float field ("Input should be a
    finite number"), since no timeout, wait, price, share or weight of the registry means anything infinite."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ChunkingConfig(StrictModel):
    """Recursive character chunking (LangChain ``RecursiveCharacterTextSplitter``)."""

    # the largest chunk, in characters (the paper's 1000)
    chunk_size: int = Field(1000, ge=1)
    # characters two neighbouring chunks share
    chunk_overlap: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _overlap_below_size(self) -> ChunkingConfig:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(
                f"chunk_overlap ({self.chunk_overlap}) must be smaller than chunk_size ({self.chunk_size})"
            )
        return self


class SquadJsonSource(StrictModel):
    """SQuAD v1.1/v2.0-format JSON (plain or .gz); COVID-QA and XQuAD use the same schema."""

    # squad_json: SQuAD-format JSON
    kind: Literal["squad_json"]
    # the JSON file (.json or .json.gz), relative to conteb.yaml
    path: Path


class TextFolderSource(StrictModel):
    """A folder of plain-text / markdown files, one document each (no queries)."""

    # text_folder: one document per file
    kind: Literal["text_folder"]
    # the folder, relative to conteb.yaml
    path: Path
    # glob patterns of the files read (in the folder itself)
    patterns: tuple[str, ...] = ("*.txt", "*.md")


class HFColumns(StrictModel):
    """Column mapping of an ``hf_dataset`` source. ``query``/``answers`` may be absent."""

    # the column holding the document text
    text: str = "context"
    # the column holding the document title; null: none
    title: str | None = "title"
    doc_key: str | None = None  # groups rows into documents; default: title, else text
    # the column holding the question id; null: row-<index>
    query_id: str | None = "id"
    # the column holding the question; null: documents only
    query: str | None = "question"
    answers: str | None = "answers"  # SQuAD form: {"text": [...], "answer_start": [...]}


class HFDatasetSource(StrictModel):
    """Any Hugging Face dataset (hub name or local path) loaded with ``datasets``."""

    # hf_dataset: a dataset loaded with `datasets`
    kind: Literal["hf_dataset"]
    # a hub name or a local folder, as `datasets.load_dataset` takes it
    path: str
    # the dataset's configuration name; null: its default
    name: str | None = None
    # the split read
    split: str = "validation"
    columns: HFColumns = HFColumns()


class SampleSource(StrictModel):
    """The bundled sample corpus (``data/sample/``): title line + body files, queries.jsonl."""

    # sample: the bundled sample corpus
    kind: Literal["sample"]
    # its folder, relative to conteb.yaml
    path: Path = Path("data/sample")


MAX_CONTROLLED_DOCUMENTS = 100
"""The most documents a ``controlled`` source generates per template (every template's value pools hold more)."""


class ControlledSource(StrictModel):
    """Generated same-template documents about invented entities (:mod:`curation.sources.controlled`).

    ``templates`` or ``domains`` (not both; neither: every template) select the templates; their names are checked
    against the catalogue when the registry is loaded (:func:`project.config.load_config`). ``titles``:
    ``informative`` (the entity's name) or ``uninformative`` (``"City profile 7"``: the template's noun and a
    number). The same settings give the same documents; another ``seed`` other entities and facts.
    """

    # controlled: generated same-template documents
    kind: Literal["controlled"]
    # the template names to generate from (not with `domains`)
    templates: tuple[str, ...] | None = Field(None, min_length=1)
    # the domains whose templates are used (not with `templates`)
    domains: tuple[str, ...] | None = Field(None, min_length=1)
    # documents generated per template
    documents_per_template: int = Field(20, ge=1, le=MAX_CONTROLLED_DOCUMENTS)
    # the generation seed: the same seed, the same documents
    seed: int = Field(0, ge=0)
    titles: Literal["informative", "uninformative"] = "informative"

    @model_validator(mode="after")
    def _templates_or_domains(self) -> ControlledSource:
        if self.templates is not None and self.domains is not None:
            raise ValueError("set either templates or domains, not both")
        for field, names in (("templates", self.templates), ("domains", self.domains)):
            if names is not None and len(set(names)) != len(names):
                twice = sorted({name for name in names if names.count(name) > 1})
                raise ValueError(f"{field}: named twice: {', '.join(twice)}")
        return self

    @property
    def label(self) -> str:
        """What the dataset card and the logs call this source (it has no path)."""
        selection = (
            f"templates {', '.join(self.templates)}"
            if self.templates
            else f"domains {', '.join(self.domains)}"
            if self.domains
            else "every template"
        )
        return (
            f"controlled ({selection}; {self.documents_per_template} documents per template; seed {self.seed}; "
            f"{self.titles} titles)"
        )


SourceConfig = Annotated[
    SquadJsonSource | TextFolderSource | HFDatasetSource | SampleSource | ControlledSource,
    Field(discriminator="kind"),
]


class ReviewConfig(StrictModel):
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


class SplitsConfig(StrictModel):
    """Document-level splits: ``splits: {train: 0.5, test: 0.5, seed: 0}`` in ``conteb.yaml``.

    Every key but ``seed`` is a split name (:func:`split_name_problem`) with its share of the
    documents, each in (0, 1], summing to 1 (within ``SPLIT_SUM_TOLERANCE``); declaration order is
    kept. Which split a document lands in depends only on ``(seed, doc_id)``
    (:func:`curation.splits.assign_splits`), so adding documents never moves an existing one.
    """

    # split name -> share of the documents (written flat: `splits: {train: 0.5, test: 0.5}`)
    fractions: dict[str, float]
    # the assignment seed: a document's split depends only on (seed, doc_id)
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
            valid_split_name(name)
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


PSEUDO_SUBJECT_FIELDS = ("title", "theme")
"""The placeholders of ``pseudo_queries.subject`` every document has (plus the named groups of ``title_pattern``)."""
PSEUDO_TEMPLATE_FIELDS = ("subject", "sentence")
"""The placeholders of ``pseudo_queries.template``, both required."""


def format_fields(template: str, where: str) -> set[str]:
    """The ``{name}`` placeholders of a ``str.format`` template; ValueError naming ``where`` when it is malformed
    or uses a positional (``{}``), indexed or formatted (``{x:>3}``) placeholder."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as error:
        raise ValueError(f"{where}: {error} in {template!r} (write a literal brace as '{{{{' or '}}}}')") from None
    names = set()
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            raise ValueError(
                f"{where}: placeholder {{{name}{'!' + conversion if conversion else ''}"
                f"{':' + spec if spec else ''}}} in {template!r}: use plain named placeholders"
            )
        names.add(name)
    return names


class PseudoQueriesConfig(StrictModel):
    """Offline pseudo-queries (inverse cloze, ``curation/pseudo_queries.py``) for the documents of one split:
    ``pseudo_queries: {per_document: 20, seed: 0}`` in ``conteb.yaml``.

    ``split``: the split whose documents get them (default ``train``); never the evaluated one. A query is
    ``template`` with ``{subject}`` (the document named by ``subject``: ``{title}``, ``{theme}`` (the title rule of
    ``curation/themes/naming.py``) and the named groups of ``title_pattern``, a regex the whole title must match) and
    ``{sentence}``. Sentences of ``min_words`` to ``max_words`` words; at most ``per_chunk`` per chunk and
    ``per_document`` per document, picked by a shuffle seeded by ``(seed, doc_id)``.
    """

    # pseudo-queries per document at most
    per_document: int = Field(20, ge=1)
    # pseudo-queries per chunk at most
    per_chunk: int = Field(2, ge=1)
    # the sentence-sampling seed
    seed: int = 0
    split: Annotated[str, AfterValidator(valid_split_name)] = "train"
    # the shortest sentence used, in words
    min_words: int = Field(8, ge=1)
    # the longest sentence used, in words
    max_words: int = Field(40, ge=1)
    # a regex the whole title must match; its named groups fill `subject`
    title_pattern: str | None = None
    # how the document is named in the query ({title}, {theme}, the pattern's groups)
    subject: str = "{theme}"
    # the query text: {subject} and {sentence}
    template: str = "{subject}: {sentence}"

    @model_validator(mode="after")
    def _valid_rules(self) -> PseudoQueriesConfig:
        if self.min_words > self.max_words:
            raise ValueError(f"min_words ({self.min_words}) must not exceed max_words ({self.max_words})")
        groups: set[str] = set()
        if self.title_pattern is not None:
            try:
                groups = set(re.compile(self.title_pattern).groupindex)
            except re.error as error:
                raise ValueError(f"title_pattern: not a regular expression ({error}): {self.title_pattern!r}") from None
            taken = sorted(groups & set(PSEUDO_SUBJECT_FIELDS))
            if taken:
                raise ValueError(f"title_pattern: group name(s) {taken} are taken by the subject's own placeholders")
        allowed = {*PSEUDO_SUBJECT_FIELDS, *groups}
        unknown = format_fields(self.subject, "subject") - allowed
        if unknown:
            raise ValueError(
                f"subject: unknown placeholder(s) {sorted(unknown)}; allowed: {sorted(allowed)} "
                "(title_pattern's named groups, e.g. (?P<year>\\d{4}), add their own)"
            )
        fields = format_fields(self.template, "template")
        if fields != set(PSEUDO_TEMPLATE_FIELDS):
            raise ValueError(
                f"template: needs exactly the placeholders {{subject}} and {{sentence}}, has {sorted(fields) or 'none'}"
            )
        return self


class TaskConfig(StrictModel):
    """One benchmark task: where its documents come from and how each stage treats them.

    ``split``: the name of the one published split (every document in it); ``splits``: several
    document-level splits instead (setting both is an error).
    """

    # the task's name: its folder data/conteb/<name>/ and its Dagster group
    name: str = Field(pattern=TASK_NAME_PATTERN)
    # where the documents (and questions) come from: one of the source kinds below
    source: SourceConfig
    split: Annotated[str, AfterValidator(valid_split_name)] = "test"
    splits: SplitsConfig | None = None
    max_documents: int | None = Field(None, ge=1)  # keep the first N source documents (the rest counted)
    chunking: ChunkingConfig = ChunkingConfig()
    # how questions get their gold chunk: span (annotated answer spans), llm, or both
    pairing: Literal["span", "llm", "both"] = "span"
    reformulation: bool = False  # rewrite all but each document's first chunk (LLM, else masking)
    synthetic_queries: int = Field(0, ge=0)  # LLM-written queries per chunk
    chunk_contexts: bool = False  # LLM-written context per chunk (contextual-retrieval baseline)
    answerability: bool | None = None  # LLM "answerable from its gold chunk alone?" label; None: if an LLM is set
    pseudo_queries: PseudoQueriesConfig | None = None  # offline inverse-cloze queries for one (training) split
    review: ReviewConfig = ReviewConfig()
    # the license written in the dataset card
    license: str | None = None
    # the dataset card's description of the task
    description: str | None = None

    @model_validator(mode="after")
    def _split_or_splits(self) -> TaskConfig:
        if self.splits is not None and "split" in self.model_fields_set:
            raise ValueError(
                f"split: set either split ({self.split!r}: one published split) or splits "
                f"({', '.join(self.splits.names)}: document-level splits), not both"
            )
        return self

    @model_validator(mode="after")
    def _pseudo_queries_for_training(self) -> TaskConfig:
        if self.pseudo_queries is None:
            return self
        split = self.pseudo_queries.split
        if self.splits is None or split not in self.splits.fractions:
            declared = f"splits {list(self.splits.names)}" if self.splits else f"the one split {self.split!r}"
            raise ValueError(
                f"pseudo_queries: split {split!r} is not declared ({declared}); pseudo-queries are training data "
                f"and never go into an evaluated split: declare document-level splits, e.g. "
                f"splits: {{{split}: 0.5, test: 0.5, seed: 0}}"
            )
        if split == self.evaluation_split:
            raise ValueError(
                f"pseudo_queries: split {split!r} is the split the evaluation reads; name a training split"
            )
        if self.reformulation:
            raise ValueError(
                "pseudo_queries: not together with reformulation: true (both rewrite the published chunk: the "
                "sentence removed from the original text may not be found in the rewrite)"
            )
        if self.uses_llm_pairing:
            raise ValueError(
                f"pseudo_queries: not together with pairing: {self.pairing} (LLM-paired queries carry no answer "
                "span, so a removed sentence could hold their answer); use pairing: span"
            )
        return self

    @property
    def pseudo_split(self) -> str | None:
        """The split whose documents get pseudo-queries (``pseudo_queries.split``), or None without them."""
        return self.pseudo_queries.split if self.pseudo_queries is not None else None

    @property
    def split_names(self) -> tuple[str, ...]:
        """The published splits, in declaration order (``(split,)`` without ``splits``)."""
        return self.splits.names if self.splits is not None else (self.split,)

    @property
    def train_split(self) -> str | None:
        """``"train"`` when ``splits`` declares it, else None (no split is reserved for training)."""
        return "train" if self.splits is not None and "train" in self.splits.fractions else None

    @property
    def validation_split(self) -> str | None:
        """``"validation"`` when ``splits`` declares it (the split the evaluation chooses and fits on), else None."""
        return "validation" if self.splits is not None and "validation" in self.splits.fractions else None

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
            kinds.append(ReviewKind.REFORMULATION)
        if self.uses_llm_pairing:
            kinds.append(ReviewKind.PAIRING)
        if self.synthetic_queries:
            kinds.append(ReviewKind.SYNTHETIC_QUERY)
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


def display_path(path: Path) -> Path:
    """``path`` relative to the working folder when it lies inside it (shorter messages), else as given."""
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


def describe_validation_error(
    config_path: Path, raw: dict[str, Any], error: ValidationError, root: type[BaseModel]
) -> str:
    """One self-contained line per problem: ``<file>: task 'x' (tasks[i]): <field>: <reason>``; an unknown key
    is named with the closest allowed key (``difflib``) instead of pydantic's "Extra inputs are not permitted"."""
    shown = display_path(config_path)
    raw_tasks = raw.get("tasks")
    tasks: list[Any] = raw_tasks if isinstance(raw_tasks, list) else []
    lines = []
    for item in error.errors():
        loc = list(item["loc"])
        unknown_key = item["type"] == "extra_forbidden"
        field, models = _walk(loc[:-1] if unknown_key else loc, root)
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
        message = item["msg"].removeprefix("Value error, ") + _value_suggestion(item)
        if where and not field:  # a task-level rule: its message starts with the field it names
            lines.append(f"{shown}: {where}{message}")
        else:
            lines.append(f"{shown}: {where}{field or '(top level)'}: {message}")
    return "\n".join(lines)


def _value_suggestion(item: Any) -> str:
    """`` (did you mean 'dense'?)`` for a misspelt choice: a value outside a ``Literal`` (pydantic's
    ``literal_error``) or a ``kind`` no union member has (``union_tag_invalid``); ``""`` otherwise."""
    context = item.get("ctx") or {}
    if item["type"] == "literal_error":
        written, expected = item.get("input"), str(context.get("expected", ""))
    elif item["type"] == "union_tag_invalid":
        written, expected = context.get("tag"), str(context.get("expected_tags", ""))
    else:
        return ""
    close = closest_name(written, re.findall(r"'([^']*)'", expected)) if isinstance(written, str) else None
    return f" (did you mean {close!r}?)" if close else ""


def closest_name(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name`` (``difflib``), or None when none is close: what every "did you mean"
    of the registry's and the command line's messages suggests."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return close[0] if close else None


def unknown_key_message(key: str, allowed: list[str]) -> str:
    """``unknown key 'chunkng' (did you mean 'chunking'?)``; the allowed keys listed when none is close."""
    close = closest_name(key, allowed)
    if close:
        return f"unknown key '{key}' (did you mean '{close}'?)"
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


def _walk(loc: list[Any], root: type[BaseModel]) -> tuple[str, list[type[BaseModel]]]:
    """The registry path of a pydantic location (``evaluation.systems[0]``, union tags dropped) and the models
    that can sit there (empty below a free-form mapping)."""
    text, models = "", [root]
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
