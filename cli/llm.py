"""``conteb llm``: the LLM answer store from the command line.

``conteb llm retry-failed --task T [--stage S]`` forgets the remembered failures (answers refused by
validation) of a task or one of its stages, so that the next run asks for them again.
``conteb llm check [--quick]`` reads every page of the answer store (``PRAGMA integrity_check``, or
``quick_check``): the full check that opening the store leaves out (see :mod:`conteb.sqlite_files`).
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import click

from cli.registry import load_registry
from cli.stores import StoreGroup, add_check_command
from conteb.names import LLM_STAGES
from conteb.sqlite_kinds import StoreFileError
from conteb.storage import llm_cache_path, resolve_data_dir
from llm.cache import ANSWER_STORE


@click.group("llm", cls=StoreGroup)
def llm() -> None:
    """The LLM answer store: remembered failures, the full check."""


add_check_command(llm, ANSWER_STORE, llm_cache_path)


@llm.command("retry-failed")
@click.option("--task", required=True, help="Task whose remembered failures to forget.")
@click.option(
    "--stage",
    default=None,
    type=click.Choice([str(stage) for stage in LLM_STAGES]),
    help="Only this stage; default: every stage.",
)
@click.pass_context
def retry_failed(ctx: click.Context, task: str, stage: str | None) -> None:
    """Forget the remembered LLM failures of a task (or one stage): the next run asks for them again."""
    from llm.cache import AnswerCache

    config = load_registry(ctx)
    names = [t.name for t in config.tasks]
    if task not in names:
        _fail(f"unknown task {task!r}; the tasks of {config.config_path} are: {', '.join(names)}")
    path = llm_cache_path(resolve_data_dir(config.config_dir))
    scope = f"{task}/{stage}" if stage else task
    if not os.path.lexists(path):  # a dangling symbolic link is refused below, in one line
        click.echo(f"forgot 0 remembered failures of {scope} ({path} does not exist yet)")
        return
    try:
        cache = AnswerCache(path)
    except StoreFileError as error:
        _fail(str(error))
    forgotten = cache.forget_failures(task, stage)
    left = cache.failure_counts(task)
    cache.close()
    click.echo(
        f"forgot {forgotten} remembered failure{'s' * (forgotten != 1)} of {scope}"
        + ("; the next run asks for them again" if forgotten else "")
    )
    if left:
        click.echo("still remembered: " + ", ".join(f"{where} {count}" for where, count in left.items()))


def _fail(message: str) -> NoReturn:
    click.echo(message, err=True)
    sys.exit(1)
