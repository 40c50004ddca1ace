"""What the ``conteb review`` and ``conteb llm`` command groups share about their store files.

* :class:`StoreGroup`: a click group where a :class:`conteb.sqlite_kinds.StoreFileError` raised by any of its
  commands, on open or later (damage met in a statement), is one message and exit status 1, never a traceback.
* :func:`add_check_command`: ``conteb review check`` and ``conteb llm check``: the full check of
  :func:`conteb.sqlite_files.check_store` (``--quick``: ``quick_check``) of the registry's store file, one
  paragraph, exit status 1 when the file is damaged or refused.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from cli.registry import load_registry
from conteb.sqlite_files import check_store, check_store_file
from conteb.sqlite_kinds import StoreFileError, StoreKind
from conteb.storage import resolve_data_dir


class StoreGroup(click.Group):
    """A command group whose store refusals and damage reports end the command cleanly (module doc)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except StoreFileError as error:
            raise click.ClickException(str(error)) from None


def add_check_command(group: click.Group, kind: StoreKind, store_path: Callable[[Path], Path]) -> None:
    """Add ``check [--quick]`` to ``group``: the full check of the ``kind`` of store at ``store_path(data_dir)``."""

    @group.command("check", help=f"Read every page of the {kind.name} and say whether it is sound (exit status 1 "
                   "when damaged).")  # fmt: skip
    @click.option("--quick", is_flag=True, help="quick_check: skip the check of the indexes' contents (faster).")
    @click.pass_context
    def check(ctx: click.Context, quick: bool) -> None:
        config = load_registry(ctx)
        check_file(store_path(resolve_data_dir(config.config_dir)), kind, quick)


def check_file(path: Path, kind: StoreKind, quick: bool) -> None:
    """Check the store file at ``path`` in full and say what was found (exit status 1 unless sound)."""
    if not os.path.lexists(path):  # a dangling symbolic link is refused by the check, in one line
        click.echo(f"{path} does not exist yet: no {kind.name} to check")
        return
    check_store_file(path, kind)  # a file refused on open is said before the long check starts
    click.echo(f"checking {path} ({'quick_check' if quick else 'integrity_check'}: every page is read) ...")
    result = check_store(path, kind, quick=quick)
    if not result.ok:
        click.echo(result.message(kind), err=True)
        sys.exit(1)
    click.echo(result.message(kind))
