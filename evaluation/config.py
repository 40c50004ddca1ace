"""The ``evaluation:`` block of ``conteb.yaml``: which tasks, which systems, which statistics.

Systems (``kind``):

* ``bm25``: ``bm25s`` over words (``tokenizer: words``, stemming and stop words configurable) or over
  the subword token ids of an embedding model's tokenizer (``tokenizer: model``, the public ConTEB code).
* ``dense``: one vector per chunk from a sentence-transformers model; ``context: independent`` (chunks
  alone), ``late`` (late chunking; ``window_policy: anchored`` starts every later window with the document's
  head, see :mod:`embedding.encoder`) or ``title`` (the cheapest contextual chunk header: ``title_template``
  filled with the document's title and the chunk, embedded alone; a chunk without a title is embedded alone).
  ``model`` names a model (``offline-minilm``, a hub id, a folder); ``trained`` names a training asset
  (:class:`conteb.names.TrainedModel`) whose folder is ``<data>/models/<name>``; such a system is evaluated with the
  ``window_policy`` and ``header`` its model was trained with unless it sets them (a difference is noted).
  ``header: title`` (``context: late`` only) puts the same header inside the late-chunking sequence: each chunk's
  text there is its ``title_template`` text, so the header's tokens are pooled with the chunk's (plain or anchored
  windows).
* ``bm25`` with ``context: title``: BM25 over the same header-prefixed text the dense ``context: title`` system embeds
  (contextual BM25; the formatting is :mod:`evaluation.systems.headers`'s).
* ``contextual``: Anthropic's contextual retrieval: the LLM-written context of each chunk (the task's
  ``chunk_contexts`` stage) prepended to the chunk, embedded independently.
* ``late_interaction``: MaxSim over per-token vectors of each chunk (``context: late`` or ``independent``).
* ``fusion``: weighted fusion of declared systems, by normalised scores (``method: score``, ``normalise: minmax`` or
  ``zscore``) or weighted reciprocal ranks (``method: rrf``), with given convex ``weights`` or weights fitted on the
  task's validation split (``fit: validation``, the default without weights), never both; see
  :mod:`evaluation.systems.fusion`.
* ``hybrid``: reciprocal rank fusion of declared systems (``systems``, by name; Cormack, Clarke and Büttcher, SIGIR
  2009): ``score(c) = sum_s 1 / (k + rank_s(c))``, ``rank_s`` 1-based over the whole corpus in trec order,
  ``k`` default 60 (the paper's); see :mod:`evaluation.systems.hybrid`.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from conteb.config import StrictModel
from conteb.names import SystemName, TrainedModel, trained_model_name
from embedding.windows import DEFAULT_WINDOW_OVERLAP_CHUNKS
from evaluation.results import HEADLINE

SYSTEM_NAME_PATTERN = r"^[a-z0-9]+(?:[-_.][a-z0-9]+)*$"

Role = Literal["baseline", "tested"]
"""A system's part in the comparisons (:mod:`evaluation.comparisons`): a cheap baseline, or a system under test. Every
system may set ``role``; null (the default) lets the rule of :func:`evaluation.comparisons.system_role` decide."""


def template_fields(template: str) -> set[str]:
    """The field names of a ``str.format`` template (``""`` for a positional ``{}``); ValueError when the template
    is not a format string."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


class ModelOptions(StrictModel):
    """Fields shared by systems that embed with a model.

    Prefixes: ``null`` takes the model's own (its sentence-transformers ``prompts`` ``query`` /
    ``document``, else a known default for its name, else none); ``""`` forces none.
    """

    model: str | None = None  # default: offline-minilm unless ``trained`` is set
    role: Role | None = None  # null: by the rule (a model given by name or folder counts as untrained)
    # a training asset (conteb.names.TrainedModel); its training YAML gives window_policy and header where the system
    # sets neither (evaluation.systems.embedders.as_trained)
    trained: Annotated[str, AfterValidator(trained_model_name)] | None = None
    # text put before every query; null: the model's own (evaluation/systems/embedders.py)
    query_prefix: str | None = None
    # text put before every document or chunk sequence; null: the model's own
    document_prefix: str | None = None
    max_length: int | None = Field(None, ge=8)  # tokens per window (default: the model's max_seq_length)
    window_overlap_chunks: int = Field(DEFAULT_WINDOW_OVERLAP_CHUNKS, ge=0)  # embedding/windows.py: measured
    # plain windows, or anchored: every window after the first starts with the document's head (title + first
    # chunk, at most floor(anchor_share * max_length) tokens); late chunking only
    window_policy: Literal["plain", "anchored"] = "plain"
    # anchored windows: the head takes at most this share of a window's tokens
    anchor_share: float = Field(0.4, gt=0.0, lt=1.0)
    token_budget: int = Field(16384, ge=512)  # padded tokens per forward batch
    device: str | None = None  # default: CUDA when present, else CPU

    @model_validator(mode="before")
    @classmethod
    def _default_model(cls, data):
        if isinstance(data, dict) and data.get("model") is None and data.get("trained") is None:
            data = {**data, "model": "offline-minilm"}
        return data

    @model_validator(mode="after")
    def _one_model(self):
        if self.trained is not None and self.model is not None:
            raise ValueError("set either model (a name, hub id or folder) or trained (a training asset), not both")
        return self


DEFAULT_TITLE_TEMPLATE = "{title}\n\n{chunk}"
TITLE_TEMPLATE_FIELDS = frozenset({"title", "chunk"})
MAX_FORMAT_WIDTH = 1000
"""The largest width or precision a template's format spec may give a field (``{title:>40}``): its expansion stays
bounded by the texts it is filled with, plus this."""


def expansion_problem(template: str, fields: frozenset[str]) -> str | None:
    """Why filling ``template`` (a format string over the plain ``fields``) could expand without bound or fail, in
    one line; None when it cannot: a nested field in a format spec, a width or precision above
    :data:`MAX_FORMAT_WIDTH`, or a spec the fields' text refuses (``{title:d}``). Field names themselves (attribute
    or index access, unknown names) are the caller's check."""
    for _, name, spec, _ in string.Formatter().parse(template):
        if name is None or not spec:
            continue
        if "{" in spec or "}" in spec:
            return f"template {template!r}: field {{{name}:{spec}}} nests a field in its format spec"
        widths = [int(number) for number in re.findall(r"\d+", spec)]
        if widths and max(widths) > MAX_FORMAT_WIDTH:
            return (
                f"template {template!r}: field {{{name}:{spec}}} has width or precision {max(widths):,}, above "
                f"{MAX_FORMAT_WIDTH:,} (the expansion must stay bounded)"
            )
    try:
        template.format(**dict.fromkeys(fields, "text"))
    except (ValueError, KeyError, IndexError, AttributeError) as error:
        return f"template {template!r} cannot be filled: {type(error).__name__}: {error}"
    return None


def check_title_template(template: str) -> str:
    """``template`` when it is a format string with ``{chunk}``, no field but ``title`` and ``chunk`` and a bounded
    expansion (:func:`expansion_problem`); else ValueError saying why (the validation of every ``title_template``)."""
    try:
        fields = template_fields(template)
    except ValueError as error:
        raise ValueError(f"title_template {template!r} is not a format string: {error}") from None
    unknown = sorted(fields - TITLE_TEMPLATE_FIELDS)
    if unknown or "chunk" not in fields:
        raise ValueError(
            f"title_template {template!r} must contain {{chunk}} and may use only {sorted(TITLE_TEMPLATE_FIELDS)}"
            f"{f'; unknown: {unknown}' if unknown else ''}"
        )
    problem = expansion_problem(template, TITLE_TEMPLATE_FIELDS)
    if problem:
        raise ValueError(f"title_{problem}")
    return template


TitleTemplate = Annotated[str, AfterValidator(check_title_template)]
"""The text of a chunk under a title header (fields ``title``, ``chunk``): dense ``context: title`` and ``header:
title``, ``bm25`` ``context: title``."""


class BM25System(StrictModel):
    # bm25: lexical retrieval with bm25s
    kind: Literal["bm25"]
    # the system's name in reports and comparisons
    name: str = Field(pattern=SYSTEM_NAME_PATTERN)
    role: Role | None = None  # null: a cheap baseline (evaluation/comparisons.py)
    # title: each chunk indexed as title_template filled with its document's title (contextual BM25); a chunk without
    # a title is indexed alone
    context: Literal["independent", "title"] = "independent"
    # with context: title, how the title and the chunk make the indexed text ({title}, {chunk})
    title_template: TitleTemplate = DEFAULT_TITLE_TEMPLATE
    # words: words, stop words and stemming; model: the subword ids of `model`'s tokenizer
    tokenizer: Literal["words", "model"] = "words"
    model: str = "offline-minilm"  # tokenizer: model: whose tokenizer gives the subword ids
    stemmer: str | None = "english"  # PyStemmer language; null: no stemming
    stopwords: str | None = "en"  # bm25s stop-word list; null: keep every word
    # BM25 term-frequency saturation
    k1: float = 1.5
    # BM25 length normalisation (0: none, 1: full)
    b: float = 0.75
    # the BM25 variant (bm25s' names)
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"


class DenseSystem(ModelOptions):
    # dense: one vector per chunk from a sentence-transformers model
    kind: Literal["dense"]
    # the system's name in reports and comparisons
    name: str = Field(pattern=SYSTEM_NAME_PATTERN)
    # independent: each chunk alone; late: late chunking in its document; title: the title before each chunk
    context: Literal["independent", "late", "title"] = "independent"
    # context: title, or header: title: the text of each chunk (fields: title, chunk)
    title_template: TitleTemplate = DEFAULT_TITLE_TEMPLATE
    # context: late only: each chunk's text inside the late-chunking sequence is its title_template text, so the
    # header's tokens are pooled with the chunk's own (plain or anchored windows)
    header: Literal["title"] | None = None

    @model_validator(mode="after")
    def _header_needs_late(self):
        if self.header is not None and self.context != "late":
            raise ValueError(
                f"header: {self.header} applies to context: late only (context: title already embeds the header "
                "with each chunk alone)"
            )
        return self


class ContextualSystem(ModelOptions):
    # contextual: an LLM-written context before each chunk (Anthropic's contextual retrieval)
    kind: Literal["contextual"]
    # the system's name in reports and comparisons
    name: str = Field(pattern=SYSTEM_NAME_PATTERN)
    template: str = "{context}\n\n{chunk}"  # what is embedded; Anthropic prepends the context


class LateInteractionSystem(ModelOptions):
    # late_interaction: per-token vectors scored by MaxSim (ColBERT-style)
    kind: Literal["late_interaction"]
    # the system's name in reports and comparisons
    name: str = Field(pattern=SYSTEM_NAME_PATTERN)
    # independent: each chunk alone; late: chunk tokens encoded in their document
    context: Literal["independent", "late"] = "late"


def distinct_systems(systems: tuple[str, ...]) -> tuple[str, ...]:
    """``systems`` when no name repeats; else ValueError naming the repeated ones (a fusion's components)."""
    repeated = sorted({name for name in systems if systems.count(name) > 1})
    if repeated:
        raise ValueError(f"systems: {repeated} named more than once")
    return systems


class HybridSystem(StrictModel):
    """Reciprocal rank fusion of the declared systems ``systems`` (their names; none a hybrid): see
    :mod:`evaluation.systems.hybrid`. ``k`` >= 0 (Cormack, Clarke and Büttcher, SIGIR 2009, use 60)."""

    # hybrid: reciprocal rank fusion of other systems
    kind: Literal["hybrid"]
    # the system's name in reports and comparisons
    name: str = Field(pattern=SYSTEM_NAME_PATTERN)
    # the names of the fused systems (declared in this block, none a hybrid)
    systems: tuple[str, ...] = Field(min_length=2)
    # the RRF constant: a rank r counts 1 / (k + r)
    k: float = Field(60.0, ge=0.0)
    role: Role | None = None  # null: a baseline when every component is one (evaluation/comparisons.py)

    @field_validator("systems")
    @classmethod
    def _distinct(cls, systems: tuple[str, ...]) -> tuple[str, ...]:
        return distinct_systems(systems)


FIT_VALIDATION = "validation"
"""``fit: validation``: a fusion's weights fitted on the task's validation split (:mod:`evaluation.select`)."""
WEIGHT_SUM_TOLERANCE = 1e-6


class FusionSystem(StrictModel):
    """Weighted fusion of the declared systems ``systems`` (none a fusion or a hybrid): see
    :mod:`evaluation.systems.fusion`. ``method: score`` sums each system's per-query normalised scores
    (``normalise: minmax`` or ``zscore`` over its retrieved list, the first ``depth`` chunks; default the evaluation's
    ``top_k``); ``method: rrf`` sums ``w_s / (k + rank_s)``. Either ``weights`` fixes the weights (convex: each >= 0,
    summing to 1, one per system in ``systems`` order) or ``fit: validation`` (the default without ``weights``) has
    them fitted on the task's validation split by a small grid (:mod:`evaluation.select`); a system that sets both is
    refused. The runner gives the fitted weights to a copy of the system, which then has both."""

    # fusion: a weighted fusion of other systems' scores or ranks
    kind: Literal["fusion"]
    # the system's name in reports and comparisons
    name: str = Field(pattern=SYSTEM_NAME_PATTERN)
    # the names of the fused systems (2 to 4, declared in this block, none a fusion or hybrid)
    systems: tuple[str, ...] = Field(min_length=2, max_length=4)
    # score: weighted sum of normalised scores; rrf: weighted reciprocal rank fusion
    method: Literal["score", "rrf"] = "score"
    # how each system's scores are normalised per query before the sum (method: score)
    normalise: Literal["minmax", "zscore"] = "minmax"
    # the RRF constant (method: rrf)
    k: float = Field(60.0, ge=0.0)
    # how many retrieved chunks per system enter the fusion; null: the evaluation's top_k
    depth: int | None = Field(None, ge=1)
    # fixed weights, one per system in `systems` order, each >= 0, summing to 1; null: fitted (fit)
    weights: tuple[float, ...] | None = None
    # validation: fit the weights on the task's validation split (the default without `weights`; refused with them)
    fit: Literal["validation"] | None = None
    role: Role | None = None  # null: a baseline when every component is one (evaluation/comparisons.py)

    @field_validator("systems")
    @classmethod
    def _distinct(cls, systems: tuple[str, ...]) -> tuple[str, ...]:
        return distinct_systems(systems)

    @model_validator(mode="before")
    @classmethod
    def _fit_by_default(cls, data):
        if isinstance(data, dict) and data.get("weights") is None and data.get("fit") is None:
            data = {**data, "fit": FIT_VALIDATION}
        return data

    @model_validator(mode="after")
    def _weights_or_fit(self):
        if self.weights is not None and self.fit is not None:
            raise ValueError("set either weights (fixed) or fit: validation (fitted), not both")
        if self.weights is None:
            return self
        if len(self.weights) != len(self.systems):
            raise ValueError(f"weights: {len(self.weights)} given for {len(self.systems)} systems")
        if any(w < 0 for w in self.weights) or abs(sum(self.weights) - 1.0) > WEIGHT_SUM_TOLERANCE:
            raise ValueError(f"weights {list(self.weights)} must be >= 0 and sum to 1")
        return self

    @property
    def fitted(self) -> bool:
        """The weights are fitted on validation (none given; the runner fills the fitted ones in a copy)."""
        return self.fit is not None


FUSING = (HybridSystem, FusionSystem)
"""The system kinds that fuse other declared systems (their encodings are reused)."""

SystemConfig = Annotated[
    BM25System | DenseSystem | ContextualSystem | LateInteractionSystem | HybridSystem | FusionSystem,
    Field(discriminator="kind"),
]


class ExternalTask(StrictModel):
    """A ConTEB-layout dataset not built by this pipeline: a local folder or a hub dataset id."""

    # the task's name in reports
    name: str = Field(pattern=r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
    path: str  # folder with documents/ and queries/ (or a hub id such as illuin-conteb/squad)
    # the split evaluated
    split: str = "test"


class BootstrapConfig(StrictModel):
    """Bootstrap confidence intervals of every reported metric (resampling whole documents, each with all its queries:
    :mod:`evaluation.metrics.stats`)."""

    # bootstrap resamples of the documents for each confidence interval
    resamples: int = Field(2000, ge=100)
    # the intervals' confidence level
    confidence: float = Field(0.95, gt=0.5, lt=1.0)
    # the resampling seed (the same seed, the same intervals)
    seed: int = 0


class SignificanceConfig(StrictModel):
    """Paired tests between systems on the same queries (``a`` vs ``b``, two-sided): these configured pairs, after
    the comparisons every report makes of each tested system with the best cheap baseline
    (:mod:`evaluation.comparisons`).

    The default names are :class:`~conteb.names.SystemName` members, validated (``validate_default``) so that the
    model holds plain strings, as for names read from ``conteb.yaml``.
    """

    # randomization: paired sign-flip test over whole documents; bootstrap: shifted bootstrap test over documents
    method: Literal["randomization", "bootstrap"] = "randomization"
    # random sign vectors or resamples of each test (randomization over few documents: every sign vector, exactly)
    resamples: int = Field(10000, ge=100)
    # the per-query metric compared (default nDCG@10)
    metric: str = HEADLINE
    # pairs [a, b] of system names tested, beside the comparisons with the best cheap baseline
    comparisons: tuple[tuple[str, str], ...] = Field(
        (
            (SystemName.LATE_CHUNKING, SystemName.INDEPENDENT),
            (SystemName.INSENT, SystemName.LATE_CHUNKING),
            (SystemName.INSENT, SystemName.FINETUNE_CONTROL),
            (SystemName.CONTEXTUAL, SystemName.INDEPENDENT),
            (SystemName.LATE_CHUNKING_ANCHORED, SystemName.LATE_CHUNKING),
            (SystemName.LATE_CHUNKING_ANCHORED, SystemName.INDEPENDENT),
            (SystemName.LATE_CHUNKING_TITLE, SystemName.LATE_CHUNKING),
            (SystemName.LATE_CHUNKING_ANCHORED_TITLE, SystemName.LATE_CHUNKING_ANCHORED),
            (SystemName.BM25_TITLE, SystemName.BM25),
        ),
        validate_default=True,
    )


class ScalingConfig(StrictModel):
    """Corpus-size scaling: nDCG@10 on ``repeats`` random subsets of n documents, n from 1 to all."""

    points: int = Field(8, ge=2)  # distinct n values (geometric from 1 to all documents)
    # random subsets drawn at each corpus size
    repeats: int = Field(5, ge=1)
    # the subsets' seed
    seed: int = 0


class ChunkSizeConfig(StrictModel):
    """Chunk-size robustness: re-chunk span-annotated tasks at each size and evaluate ``systems``.

    Without an explicit ``systems``, the default names that the ``evaluation:`` block declares are studied (a
    custom systems list need not declare every default); an explicit name that is not declared is an error.
    The default names are validated (``validate_default``): plain strings, as for names read from ``conteb.yaml``.
    """

    # run the chunk-size study in `make evaluate`
    enabled: bool = True
    # the chunk sizes (characters) the span-annotated tasks are re-chunked at
    sizes: tuple[int, ...] = (8000, 1000, 500, 300, 200, 100)
    # the systems studied at every size (default: the default systems the block declares)
    systems: tuple[str, ...] = Field(
        (
            SystemName.BM25,
            SystemName.BM25_TITLE,
            SystemName.INDEPENDENT,
            SystemName.LATE_CHUNKING,
            SystemName.TITLE_PREFIX,
            SystemName.LATE_CHUNKING_ANCHORED,
            SystemName.LATE_CHUNKING_TITLE,
            SystemName.LATE_CHUNKING_ANCHORED_TITLE,
            SystemName.HYBRID,
            SystemName.HYBRID_TITLE,
        ),
        validate_default=True,
    )


def default_systems() -> tuple[SystemConfig, ...]:
    """Every baseline of the paper with the offline model, and the cheap baselines a user tries first (a title
    header for BM25 too, hybrids of BM25 and dense); late interaction needs a multi-vector model.

    Names are :class:`~conteb.names.SystemName` members; validation stores them as plain strings."""
    return (
        BM25System(kind="bm25", name=SystemName.BM25),
        BM25System(kind="bm25", name=SystemName.BM25_SUBWORD, tokenizer="model", stemmer=None, stopwords=None),
        BM25System(kind="bm25", name=SystemName.BM25_TITLE, context="title"),
        DenseSystem(kind="dense", name=SystemName.INDEPENDENT, context="independent"),
        DenseSystem(kind="dense", name=SystemName.LATE_CHUNKING, context="late"),
        DenseSystem(kind="dense", name=SystemName.LATE_CHUNKING_ANCHORED, context="late", window_policy="anchored"),
        DenseSystem(kind="dense", name=SystemName.TITLE_PREFIX, context="title"),
        DenseSystem(kind="dense", name=SystemName.LATE_CHUNKING_TITLE, context="late", header="title"),
        DenseSystem(
            kind="dense",
            name=SystemName.LATE_CHUNKING_ANCHORED_TITLE,
            context="late",
            window_policy="anchored",
            header="title",
        ),
        HybridSystem(kind="hybrid", name=SystemName.HYBRID, systems=(SystemName.BM25, SystemName.INDEPENDENT)),
        HybridSystem(
            kind="hybrid", name=SystemName.HYBRID_TITLE, systems=(SystemName.BM25_TITLE, SystemName.TITLE_PREFIX)
        ),
        DenseSystem(kind="dense", name=SystemName.INSENT, trained=TrainedModel.INSENT, context="late"),
        DenseSystem(
            kind="dense", name=SystemName.FINETUNE_CONTROL, trained=TrainedModel.FINETUNE_CONTROL, context="independent"
        ),
        ContextualSystem(kind="contextual", name=SystemName.CONTEXTUAL),
    )


class EvaluationConfig(StrictModel):
    """The whole ``evaluation:`` block (every key optional)."""

    tasks: tuple[str, ...] | None = None  # default: every task of the registry
    external: tuple[ExternalTask, ...] = ()
    # the retrieval systems evaluated on every task (a list; the default is the documented set)
    systems: tuple[SystemConfig, ...] = Field(default_factory=default_systems)
    # the k of every @k metric in the results (nDCG@k, recall@k, ...)
    cutoffs: tuple[int, ...] = (1, 5, 10, 50, 100)
    top_k: int = Field(100, ge=1)  # ranks written per query to the TREC run files
    query_block: int = Field(1024, ge=1)  # queries scored per matrix product (bounds memory: block x chunks)
    bootstrap: BootstrapConfig = BootstrapConfig()
    significance: SignificanceConfig = SignificanceConfig()
    scaling: ScalingConfig = ScalingConfig()
    chunk_sizes: ChunkSizeConfig = ChunkSizeConfig()
    # refuse (not run, with the reason) every model whose training_data.json does not record content fingerprints:
    # hub and packaged models (offline-minilm too), folders copied without it, older ids-only files
    require_provenance: bool = False
    # the candidates the product chooses from on the validation split (evaluation/select.py): declared systems,
    # single or fused; the choice is reported on test only. Empty: no choice made
    select: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _default_chunk_size_systems(cls, data):
        if not isinstance(data, dict) or "systems" not in data:
            return data
        chunk_sizes = data.get("chunk_sizes")
        if chunk_sizes is None:
            chunk_sizes = {}
        if (
            not isinstance(chunk_sizes, dict)
            or "systems" in chunk_sizes
            or not isinstance(data["systems"], list | tuple)
        ):
            return data
        declared = {s.get("name") if isinstance(s, dict) else getattr(s, "name", None) for s in data["systems"]}
        default = ChunkSizeConfig.model_fields["systems"].default
        return {**data, "chunk_sizes": {**chunk_sizes, "systems": tuple(n for n in default if n in declared)}}

    @model_validator(mode="after")
    def _check_names(self):
        names = [s.name for s in self.systems]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"systems: duplicate system name(s) {duplicates}")
        for a, b in self.significance.comparisons:
            if a == b:
                raise ValueError(f"significance.comparisons: {a} compared with itself")
        hybrids = {s.name for s in self.systems if isinstance(s, FUSING)}
        for system in self.systems:
            if not isinstance(system, FUSING):
                continue
            undeclared = [n for n in system.systems if n not in names]
            if undeclared:
                raise ValueError(f"systems: {system.kind} {system.name} fuses undeclared system(s) {undeclared}")
            nested = [n for n in system.systems if n in hybrids]
            if nested:
                raise ValueError(
                    f"systems: {system.kind} {system.name} fuses hybrid(s) or fusion(s) {nested}; fuse their systems "
                    "instead"
                )
        unselectable = [n for n in self.select if n not in names]
        if unselectable:
            raise ValueError(f"select: undeclared system(s) {unselectable}; declared: {names}")
        unknown = [n for n in self.chunk_sizes.systems if n not in names]
        if unknown:
            raise ValueError(f"chunk_sizes.systems: unknown system(s) {unknown}; declared: {names}")
        external = [t.name for t in self.external]
        if len(set(external)) != len(external):
            raise ValueError("external: duplicate task names")
        return self

    def system(self, name: str) -> SystemConfig:
        for system in self.systems:
            if system.name == name:
                return system
        raise KeyError(f"no evaluation system named {name!r}; declared: {[s.name for s in self.systems]}")

    def components(self, system: SystemConfig) -> tuple[SystemConfig, ...]:
        """The systems a hybrid or a fusion fuses (in its order); ``()`` for any other system."""
        if not isinstance(system, FUSING):
            return ()
        return tuple(self.system(name) for name in system.systems)

    def with_components(self, systems: Sequence[SystemConfig]) -> list[SystemConfig]:
        """``systems``, then the components of their hybrids that ``systems`` lacks (what an evaluation of
        ``systems`` must prepare: a hybrid reuses its components' encodings)."""
        names = {s.name for s in systems}
        extra = [c for s in systems for c in self.components(s) if c.name not in names]
        return [*systems, *{c.name: c for c in extra}.values()]
