"""The registry keys of ``conteb.yaml``, read from the pydantic models that validate them (for the manual).

:func:`registry_sections` walks :class:`project.config.ProjectConfig` field by field, into every nested model,
union member (one section per ``kind``), list item (``tasks[]``) and mapping value (``llm.prices.<model>``); the
free-form training mappings (``training.settings``, ``reproduce.profiles.<name>.training``) are walked as
:class:`training.config.TrainingConfig`, which validates them when the training runs. A key's description is its
``Field(description=...)`` when set, else the comments written beside or just above its line in the model's source
(read with :mod:`tokenize`), so the reference says what the code says. :func:`key_tree` gives the same walk as a
tree that :func:`check_key` resolves a dotted path in (the staleness check of :mod:`mentions`).
"""

from __future__ import annotations

import ast
import enum
import inspect
import io
import re
import textwrap
import tokenize
import types
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from conteb.config import closest_name  # the one "did you mean" of the registry and the command line

ROOT_MODEL = "project.config:ProjectConfig"
TASK_MODEL = "conteb.config:TaskConfig"
TRAINING_MODEL = "training.config:TrainingConfig"
FREE_FORM_AS_TRAINING = {"training.settings", "reproduce.profiles.<name>.training"}
FLAT_MAPPINGS = {"conteb.config:SplitsConfig"}
"""Models that also read a flat mapping (``splits: {train: 0.5, test: 0.5, seed: 0}``: any name is a split)."""
"""Mappings typed ``dict[str, Any]`` whose keys are :class:`training.config.TrainingConfig` fields."""
INTERNAL_FIELDS = {"config_path"}
"""Fields set by the loader, never written in ``conteb.yaml``."""


def _load(pointer: str) -> type[BaseModel]:
    module, name = pointer.split(":")
    return getattr(__import__(module, fromlist=[name]), name)


@dataclass
class Key:
    """One registry key: ``path`` as written in the manual (``tasks[].chunking.chunk_size``)."""

    path: str
    type: str
    default: str
    description: str


@dataclass
class Section:
    """The keys of one model at one place of the registry (``variant``: ``kind: squad_json`` of a union)."""

    path: str
    model: type[BaseModel]
    variant: str | None
    doc: str
    keys: list[Key] = field(default_factory=list)
    same_as: Section | None = None  # where the same model first appears (its description is there)

    @property
    def anchor(self) -> str:
        return section_anchor(self.path, self.variant)


def section_anchor(path: str, variant: str | None = None) -> str:
    """The heading id of a section: ``tasks-source-sample`` for ``tasks[].source`` of kind ``sample``."""
    text = path + (f"-{variant}" if variant else "")
    return re.sub(r"[^a-z0-9_]+", "-", text.lower()).strip("-") or "top-level"


# ---------------------------------------------------------------- comments beside fields in the source


def field_comments(model: type[BaseModel]) -> dict[str, str]:
    """``{field: comment}`` from the class bodies of ``model`` and its bases (the nearest class that comments a field
    wins): the comment at the end of the field's line(s), after the comment lines just above it."""
    out: dict[str, str] = {}
    models = [k for k in model.__mro__ if isinstance(k, type) and issubclass(k, BaseModel) and k is not BaseModel]
    for klass in reversed(models):
        out.update(_own_field_comments(klass))
    return out


@cache
def _own_field_comments(model: type[BaseModel]) -> dict[str, str]:
    """``{field: comment}`` from ``model``'s own class body (:func:`field_comments`)."""
    try:
        source = textwrap.dedent(inspect.getsource(model))
    except (OSError, TypeError):
        return {}
    comments: dict[int, str] = {}
    code_lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string.lstrip("#").strip()
        elif token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            code_lines.update(range(token.start[0], token.end[0] + 1))
    klass = ast.parse(source).body[0]
    out: dict[str, str] = {}
    for node in getattr(klass, "body", []):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above = []
        line = node.lineno - 1
        while line in comments and line not in code_lines:
            above.insert(0, comments[line])
            line -= 1
        beside = [comments[n] for n in range(node.lineno, (node.end_lineno or node.lineno) + 1) if n in comments]
        text = " ".join(above + beside).strip()
        if text:
            out[node.target.id] = text
    return out


def rst_to_markdown(text: str) -> str:
    """Docstring markup as Markdown: ``:class:`x.Y``` -> ```x.Y```, ````x```` -> ```x```."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)
    return re.sub(r"``([^`]+)``", r"`\1`", text)


def model_doc(model: type[BaseModel]) -> str:
    """The model's own docstring (not an inherited one), as Markdown paragraphs."""
    doc = model.__dict__.get("__doc__")
    return rst_to_markdown(inspect.cleandoc(doc)) if doc else ""


def docstring_entry(model: type[BaseModel], name: str) -> str:
    """What the model's docstring says of ``name`` as ````name````: text: that sentence (after the colon)."""
    for klass in model.__mro__:
        doc = " ".join((klass.__dict__.get("__doc__") or "").split())
        found = re.search(rf"``{re.escape(name)}``: (.+?\.)(?=\s|$)", doc)
        if found:
            return rst_to_markdown(found.group(1))
    return ""


def block_summary(annotation: Any) -> str:
    """A key that holds a block (a model, a list or mapping of one): the first sentence of that model's docstring."""
    container = _container(annotation)
    models = models_in(container[1] if container else annotation)
    if len(models) != 1:
        return ""
    doc = model_doc(models[0])
    return re.split(r"(?<=\.)\s", " ".join(doc.split()), maxsplit=1)[0] if doc else ""


# ---------------------------------------------------------------- types and defaults


def _strip_annotated(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation may hold directly or in a union (not inside lists or mappings)."""
    annotation = _strip_annotated(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if _is_union(annotation):
        return [model for arg in get_args(annotation) for model in models_in(arg)]
    return []


def _container(annotation: Any) -> tuple[str, Any] | None:
    """``("list", item)`` or ``("mapping", value)`` for a list/tuple/dict annotation (through Optional)."""
    annotation = _strip_annotated(annotation)
    if _is_union(annotation):
        found = [c for arg in get_args(annotation) if (c := _container(arg))]
        return found[0] if found else None
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin in (list, tuple) and args:
        return "list", args[0]
    if origin is dict and len(args) == 2:
        return "mapping", args[1]
    return None


def type_text(annotation: Any) -> str:
    """A reader's name for a field type: ``int``, ``"a" | "b"``, ``list of str``, ``mapping of name to Price``."""
    annotation = _strip_annotated(annotation)
    if annotation is type(None):
        return "null"
    if annotation is Any:
        return "any"
    if _is_union(annotation):
        return " | ".join(type_text(arg) for arg in get_args(annotation))
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return " | ".join(f'"{a}"' if isinstance(a, str) else str(a).lower() for a in args)
    if origin in (list, tuple):
        if origin is tuple and args and args[-1] is not Ellipsis:
            return "[" + ", ".join(type_text(arg) for arg in args) + "]"
        return f"list of {type_text(args[0])}" if args else "list"
    if origin is dict:
        return f"mapping of {type_text(args[0])} to {type_text(args[1])}" if args else "mapping"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return "mapping"
        if issubclass(annotation, Path):
            return "path"
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def constraints_text(info: FieldInfo) -> str:
    """``≥ 1``, ``< 1.0``, ``at least 2 items``, ``matches ^[a-z]+$`` from the field's metadata."""
    parts = []
    symbols = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}
    for item in info.metadata:
        for attribute, symbol in symbols.items():
            value = getattr(item, attribute, None)
            if value is not None:
                parts.append(f"{symbol} {value}")
        if getattr(item, "min_length", None) is not None:
            parts.append(f"at least {item.min_length} item(s)")
        pattern = getattr(item, "pattern", None)
        if pattern:
            parts.append(f"matches `{pattern}`")
    return ", ".join(parts)


def _plain(value: Any) -> Any:
    """``value`` as YAML-able data (models dumped, enums by value, paths as strings)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def default_text(info: FieldInfo) -> str:
    """The default as it would be written in ``conteb.yaml`` (flow YAML); ``required`` when there is none."""
    if info.is_required():
        return "required"
    value = info.get_default(call_default_factory=True, validated_data={})
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        return "see below"
    if isinstance(value, tuple | list) and value and all(isinstance(item, BaseModel) for item in value):
        names = [getattr(item, "name", None) for item in value]
        return "the systems " + ", ".join(f"`{n}`" for n in names) if all(names) else f"{len(value)} entries"
    if isinstance(value, dict) and value and all(isinstance(item, BaseModel) for item in value.values()):
        return "entries " + ", ".join(f"`{k}`" for k in value)
    text = yaml.safe_dump(_plain(value), default_flow_style=True, allow_unicode=True, width=10_000).strip()
    text = text.removesuffix("\n...").removesuffix("...").strip()
    return f"`{text}`" if text else "`''`"


# ---------------------------------------------------------------- the walk


@dataclass
class Node:
    """A place in the registry: its named children, ``any_name`` for mapping keys, ``open`` below free-form data."""

    children: dict[str, Node] = field(default_factory=dict)
    any_name: Node | None = None
    open: bool = False

    def child(self, name: str) -> Node:
        return self.children.setdefault(name, Node())


def _kind(model: type[BaseModel]) -> str | None:
    kind = model.model_fields.get("kind")
    if kind is None:
        return None
    tags = get_args(_strip_annotated(kind.annotation))
    return str(tags[0]) if tags else None


class _Walker:
    def __init__(self) -> None:
        self.sections: list[Section] = []
        self.root = Node()

    def model(self, model: type[BaseModel], path: str, node: Node, variant: str | None = None) -> None:
        first = next((s for s in self.sections if s.model is model and s.same_as is None), None)
        section = Section(path=path, model=model, variant=variant, doc=model_doc(model), same_as=first)
        self.sections.append(section)
        if f"{model.__module__}:{model.__qualname__}" in FLAT_MAPPINGS:
            node.any_name = Node(open=True)
        comments = field_comments(model)
        later: list[tuple[type[BaseModel], str, Node, str | None]] = []
        for name, info in model.model_fields.items():
            if name in INTERNAL_FIELDS:
                continue
            key_path = f"{path}.{name}" if path else name
            child = node.child(name)
            extra = constraints_text(info)
            description = rst_to_markdown(info.description or comments.get(name, "")) or docstring_entry(model, name)
            description = description or block_summary(info.annotation)
            section.keys.append(
                Key(
                    path=key_path,
                    type=type_text(info.annotation) + (f" ({extra})" if extra else ""),
                    default=default_text(info),
                    description=description,
                )
            )
            later.extend(self._below(info.annotation, key_path, child))
        for args in later:
            self.model(*args)

    def _below(self, annotation: Any, path: str, node: Node) -> list[tuple[type[BaseModel], str, Node, str | None]]:
        """The nested sections of a field: its models, its list items' and its mapping values' models."""
        abstract = re.sub(r"\[\]", "", path)
        if abstract in FREE_FORM_AS_TRAINING:
            return [(_load(TRAINING_MODEL), path, node, None)]
        models = models_in(annotation)
        if models:
            union = len(models) > 1
            return [(model, path, node, f"kind: {_kind(model)}" if union else None) for model in models]
        container = _container(annotation)
        if container is None:
            if _strip_annotated(annotation) is Any:
                node.open = True
            return []
        shape, item = container
        if shape == "list":
            return self._below(item, f"{path}[]", node)
        node.any_name = node.any_name or Node()
        below = self._below(item, f"{path}.<name>", node.any_name)
        if not below and _strip_annotated(item) is Any:
            node.open = True
        return below


@cache
def _walked() -> _Walker:
    walker = _Walker()
    walker.model(_load(ROOT_MODEL), "", walker.root)
    return walker


def registry_sections() -> list[Section]:
    """Every section of the registry, the top level first, each model where it first appears."""
    return _walked().sections


def key_tree() -> Node:
    """The registry as a tree of key names (``tasks`` holds the task keys; list items add no level)."""
    return _walked().root


def task_keys() -> set[str]:
    """The keys of one task (``chunking``, ``review``, ...): a path starting with one is read below ``tasks``."""
    return set(key_tree().children["tasks"].children)


def top_keys() -> set[str]:
    """The top-level blocks of ``conteb.yaml``."""
    return set(key_tree().children)


def check_key(path: str) -> str | None:
    """Why the dotted registry path ``path`` (``evaluation.chunk_sizes.sizes``, ``review.on_reject``: a task's key,
    ``execution.celery.{broker,backend}``, list items as ``[]`` or ``[0]``) names no key, or None when it does."""
    segments = [s for s in re.split(r"\.(?![^{]*\})", re.sub(r"\[\d*\]", "", path)) if s]
    if segments and segments[0] not in top_keys() and segments[0] in task_keys():
        segments.insert(0, "tasks")
    return _resolve(key_tree(), segments, [])


def _resolve(node: Node, segments: list[str], done: list[str]) -> str | None:
    if not segments or node.open:
        return None
    head, rest = segments[0], segments[1:]
    if head.startswith("{") and head.endswith("}"):
        for name in (part.strip() for part in head[1:-1].split(",")):
            problem = _resolve(node, [name, *rest], done)
            if problem:
                return problem
        return None
    if head in node.children:
        return _resolve(node.children[head], rest, [*done, head])
    if node.any_name is not None:
        return _resolve(node.any_name, rest, [*done, head])
    where = ".".join(done) or "the top level"
    known = sorted(node.children)
    if not known:
        return f"'{head}': {where} has no keys below it"
    close = closest_name(head, known)
    hint = f"did you mean '{close}'?" if close else "known: " + ", ".join(known)
    return f"no key '{head}' in {where} ({hint})"


# ---------------------------------------------------------------- the page


def _cell(text: str) -> str:
    """Table-cell text: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _title(section: Section) -> str:
    if not section.path:
        return "Top level"
    return f"`{section.path}`" + (f" ({section.variant})" if section.variant else "")


def render_registry_page() -> str:
    """The Markdown of the generated registry reference: one section per block, a table of its keys."""
    sections = registry_sections()
    lines = [
        "# Registry keys (`conteb.yaml`)",
        "",
        "Generated from the pydantic models that validate `conteb.yaml` (`project/config.py` and the blocks it",
        "assembles: `conteb/config.py`, `llm/settings.py`, `evaluation/config.py`, `conteb/reproduce.py`,",
        "`training/config.py`) each time the manual is built: every key with its type, its default and the",
        "description written beside it in the code. Do not edit; change the models instead. Unknown keys are",
        "errors, with a suggestion (`unknown key 'chunkng' (did you mean 'chunking'?)`). A key path `tasks[].x`",
        "is the key `x` of one entry of the `tasks:` list; `<name>` is a name you choose (a mapping's key).",
        "",
        "Blocks: " + ", ".join(f"[{_title(s)}](#{s.anchor})" for s in sections if s.path.count(".") == 0 and s.path),
        "",
    ]
    for section in sections:
        lines += [f"## {_title(section)} {{#{section.anchor}}}", ""]
        if section.same_as is not None:
            lines += [
                f"The same keys as [{_title(section.same_as)}](#{section.same_as.anchor}), here below "
                f"`{section.path}`.",
                "",
            ]
        elif section.doc:
            lines += [section.doc, ""]
        lines += ["| key | type | default | description |", "|---|---|---|---|"]
        for key in section.keys:
            lines.append(f"| `{key.path}` | {_cell(key.type)} | {_cell(key.default)} | {_cell(key.description)} |")
        lines.append("")
    return "\n".join(lines)
