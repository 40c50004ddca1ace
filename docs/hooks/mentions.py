"""What a hand-written page mentions, checked against the code: the staleness check of the manual.

Recognised mentions (see the manual's "Writing these pages" section, docs/contributing.md):

* a registry key: inline code holding a dotted path whose first name is a top-level block of ``conteb.yaml``
  (``evaluation.chunk_sizes.sizes``) or a task's key (``review.auto_accept_methods``, read as
  ``tasks[].review.auto_accept_methods``), optionally followed by ``: value``; ``[]``, ``<name>`` and
  ``{a,b}`` are allowed. A path naming a module or a name of one (``evaluation.comparisons``,
  ``training.config.TrainingConfig``) or a file (``evaluation.json``) is code, not a key.
* a command: inline code, or a line of a shell code block, starting with ``conteb`` or ``.venv/bin/conteb``; its
  subcommands and options must exist. ``make <target>`` the same way: the target must be in the Makefile.
* a repository path: inline code such as ``curation/chunking.py``, ``bench/BENCHMARKS.md`` or ``llm/prompts/``
  (a file name with its extension, or a folder ending in ``/``) whose first folder is one of the project's tracked
  folders must exist.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from cli_commands import check_command
from registry_keys import check_key, task_keys, top_keys

FILE_SUFFIXES = {
    "json", "jsonl", "yaml", "yml", "md", "py", "html", "png", "parquet", "sqlite", "trec", "txt", "csv", "toml",
    "sh", "gz", "log", "service", "cfg", "ini",
}  # fmt: skip
"""A dotted mention ending so is a file name (``evaluation.json``), not a key."""
TRACKED_FOLDERS = {
    "cli", "pipelines", "assets", "project", "conteb", "curation", "llm", "review", "training", "evaluation",
    "embedding", "bench", "scripts", "deploy", "tests", "docs", ".ci", "data/sample",
}  # fmt: skip
"""First folders of repository paths that are checked (``data/`` outputs are not in the repository)."""
SEGMENT = r"(?:[A-Za-z0-9_*-]+|<[^>`]+>|\{[A-Za-z0-9_, ]+\})(?:\[\d*\])?"
KEY_PATTERN = re.compile(rf"(?P<path>[a-z_][a-z0-9_]*(?:\[\d*\])?(?:\.{SEGMENT})+)(?:\s*:.*)?", re.S)
PATH_PATTERN = re.compile(r"\.?[A-Za-z0-9_-]+(?:/[A-Za-z0-9_.@-]+)+/?")
COMMAND_START = re.compile(r"^(?:\S*/)?(conteb|make)(?:\s|$)")
FENCE = re.compile(r"^\s*(```+|~~~+)\s*([A-Za-z0-9_-]*)")
SHELL_FENCES = {"bash", "sh", "shell", "console", ""}


@dataclass
class Problem:
    line: int
    message: str


def _repo_file(root: Path, parts: list[str]) -> Path | None:
    """The module file of dotted ``parts`` under ``root`` (``a/b.py`` or ``a/b/__init__.py``), or None."""
    base = root.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def _module_names(path: Path) -> frozenset[str]:
    """The names a module defines at its top level (functions, classes, assignments, imports)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return frozenset(names)


def is_code_reference(path: str, root: Path) -> bool:
    """Whether the dotted ``path`` names a module of the repository or a name defined in one."""
    parts = path.split(".")
    for length in range(len(parts), 1, -1):
        module = _repo_file(root, parts[:length])
        if module is None:
            continue
        rest = parts[length:]
        return not rest or rest[0] in _module_names(module)
    return False


@cache
def make_targets(root: Path) -> frozenset[str]:
    """The targets of the repository's Makefile (``name:`` at the start of a line)."""
    makefile = root / "Makefile"
    if not makefile.is_file():
        return frozenset()
    text = makefile.read_text(encoding="utf-8")
    return frozenset(re.findall(r"^([A-Za-z0-9_-][A-Za-z0-9_.-]*)\s*:(?!=)", text, re.M)) - {".PHONY"}


def _check_make(line: str, root: Path) -> str | None:
    try:
        words = shlex.split(line, comments=True)[1:]
    except ValueError:
        words = line.split()[1:]
    targets = make_targets(root)
    for word in words:
        if word.startswith(("-", "<", "$")) or "=" in word or word in ("...", "…"):
            continue
        if word not in targets:
            return f"no make target '{word}' in the Makefile (targets: {', '.join(sorted(targets))})"
    return None


def check_command_line(line: str, root: Path) -> str | None:
    """A ``conteb ...`` or ``make ...`` line checked (None when it is not one, or when it is right)."""
    line = line.strip().removeprefix("$ ")
    match = COMMAND_START.match(line)
    if not match:
        return None
    if match.group(1) == "make":
        return _check_make(line, root)
    return check_command(line)


def _inline_code(text: str) -> Iterator[tuple[int, str]]:
    """``(offset, content)`` of every inline code span of ``text`` (fenced blocks already blanked out)."""
    for match in re.finditer(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", text, re.S):
        yield match.start(2), " ".join(match.group(2).split())


def _split_fences(markdown: str) -> tuple[str, list[tuple[int, str, str]]]:
    """The page with fenced blocks blanked out (line numbers kept), and each block's lines: ``(line, lang, text)``."""
    lines = markdown.splitlines()
    prose, blocks = [], []
    fence: str | None = None
    lang = ""
    for number, line in enumerate(lines, start=1):
        match = FENCE.match(line)
        if fence is None and match:
            fence, lang = match.group(1), match.group(2)
            prose.append("")
        elif fence is not None and line.strip().startswith(fence):
            fence = None
            prose.append("")
        elif fence is not None:
            blocks.append((number, lang, line))
            prose.append("")
        else:
            prose.append(line)
    return "\n".join(prose), blocks


def _key_problem(content: str, root: Path) -> str | None:
    match = KEY_PATTERN.fullmatch(content)
    if not match:
        return None
    path = match.group("path")
    first = re.sub(r"\[\d*\]", "", path.split(".")[0])
    if first not in top_keys() and first not in task_keys():
        return None
    if path.rsplit(".", 1)[-1].lower() in FILE_SUFFIXES or is_code_reference(path, root):
        return None
    problem = check_key(path)
    return f"registry key '{path}': {problem}" if problem else None


def _path_problem(content: str, root: Path) -> str | None:
    if not PATH_PATTERN.fullmatch(content) or any(c in content for c in "<>*{}"):
        return None
    if not any(content == f or content.startswith(f"{f}/") for f in TRACKED_FOLDERS):
        return None
    last = content.rstrip("/").rsplit("/", 1)[-1]
    if not content.endswith("/") and "." not in last:
        return None  # a metadata key such as `llm/cost_usd`, not a file
    if (root / content).exists():
        return None
    return f"file '{content}' does not exist in the repository"


def check_page(markdown: str, root: Path) -> list[Problem]:
    """Every stale mention of ``markdown`` (a hand-written page), with its line number."""
    prose, blocks = _split_fences(markdown)
    problems = []
    for offset, content in _inline_code(prose):
        line = prose.count("\n", 0, offset) + 1
        for check in (_key_problem, _path_problem, check_command_line):
            message = check(content, root)
            if message:
                problems.append(Problem(line, message))
                break
    for line, lang, text in blocks:
        if lang not in SHELL_FENCES:
            continue
        for part in re.split(r"&&|\|\||;|\|", text):
            message = check_command_line(part, root)
            if message:
                problems.append(Problem(line, message))
    return problems
