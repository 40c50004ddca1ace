"""MkDocs hook of the manual (``hooks:`` in mkdocs.yml): the generated reference pages and the staleness check.

``on_files`` adds, in memory, ``reference/registry.md`` (every key of ``conteb.yaml``, from the pydantic models:
:mod:`registry_keys`) and ``reference/cli.md`` (every ``conteb`` command, from the click parsers:
:mod:`cli_commands`); nothing generated is written to ``docs/``. ``on_page_markdown`` checks what each
hand-written page mentions (:mod:`mentions`: registry keys, ``conteb``/``make`` commands, repository paths), and
``on_post_build`` the repository's README.md the same way; each stale mention is a warning naming the page, the
line and the mention, so ``mkdocs build --strict`` (``make docs``) fails on it. ``on_config`` keeps remote scripts
out of the pages.

The hook runs inside the project's virtual environment (it imports ``project.config`` and ``cli.main``); it lives
outside the layered packages and is not imported by them.
"""

from __future__ import annotations

from pathlib import Path

from cli_commands import render_cli_page
from mentions import check_page
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import get_plugin_logger
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from registry_keys import render_registry_page

log = get_plugin_logger("conteb-reference")

REPOSITORY = Path(__file__).resolve().parents[2]
"""The repository root (this file is docs/hooks/reference.py): where module, file and Makefile mentions resolve."""
GENERATED = {
    "reference/registry.md": render_registry_page,
    "reference/cli.md": render_cli_page,
}
CHECKED_BESIDE = ("README.md",)
"""Repository files outside the manual whose mentions are checked too (the entrance must be as true as the manual)."""


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for uri, render in GENERATED.items():
        if files.get_file_from_path(uri) is not None:
            log.warning(f"docs/{uri} is generated at build time: remove the checked-in copy")
            files.remove(files.get_file_from_path(uri))
        files.append(File.generated(config, uri, content=render()))
    return files


def _report(where: str, markdown: str) -> None:
    for problem in check_page(markdown, REPOSITORY):
        log.warning(f"{where}:{problem.line}: stale mention: {problem.message}")


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if page.file.src_uri not in GENERATED:
        _report(f"docs/{page.file.src_uri}", markdown)
    return markdown


def on_post_build(config: MkDocsConfig) -> None:
    for name in CHECKED_BESIDE:
        path = REPOSITORY / name
        if path.is_file():
            _report(name, path.read_text(encoding="utf-8"))


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Drop the remote scripts Material's ``offline`` plugin adds (its iframe-worker shim from unpkg.com): a page of
    this manual loads nothing from the network, opened from files or served (mkdocs.yml, ``plugins``)."""
    config.extra["polyfills"] = [u for u in config.extra.get("polyfills", []) if "unpkg.com" not in u]
    return config
