"""``conteb llm``: the LLM answer store from the command line.

``conteb llm retry-failed --task T [--stage S]`` forgets the remembered failures (answers refused by
validation) of a task or one of its stages, so that the next run asks for them again.
``conteb llm check [--quick] [--base-url URL] [--model M] [--store-only | --endpoint-only]`` checks both halves of
the LLM set-up: it reads every page of the answer store (``PRAGMA integrity_check``, or ``quick_check``: the full
check that opening the store leaves out, see :mod:`conteb.sqlite_files`), then looks at the endpoint the stages
would use (:mod:`llm.check`: its models, the structured-output modes it accepts, its speed) and prints the ``llm:``
block to paste into ``conteb.yaml``. No endpoint configured: only the store is checked. Exit status 1 when the store
is damaged, the endpoint cannot be reached or its check does not end within its deadline (one line).
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import click

from cli.registry import load_registry
from cli.stores import StoreGroup, check_file
from conteb.names import LLM_STAGES
from conteb.sqlite_kinds import StoreFileError
from conteb.storage import llm_cache_path, resolve_data_dir
from llm.cache import ANSWER_STORE


@click.group("llm", cls=StoreGroup)
def llm() -> None:
    """The LLM answer store: remembered failures, the full check."""


@llm.command("check")
@click.option("--quick", is_flag=True, help="quick_check of the answer store: skip the check of the indexes' contents.")
@click.option("--base-url", default=None, help="The endpoint to look at (default: llm.base_url, $OPENAI_BASE_URL).")
@click.option("--model", default=None, help="The model to ask (default: llm.model, else the first model served).")
@click.option("--store-only", is_flag=True, help="Check the answer store only.")
@click.option("--endpoint-only", is_flag=True, help="Look at the endpoint only.")
@click.pass_context
def check(
    ctx: click.Context, quick: bool, base_url: str | None, model: str | None, store_only: bool, endpoint_only: bool
) -> None:
    """Check the answer store, then the LLM endpoint: its models, the structured-output modes it accepts, its
    speed, and the llm: block to put in conteb.yaml (exit status 1 when the store is damaged, the endpoint
    cannot be reached or does not finish its answers within the check's deadline)."""
    from llm.check import EndpointUnreachable, check_endpoint

    config = load_registry(ctx)
    if not endpoint_only:
        check_file(llm_cache_path(resolve_data_dir(config.config_dir)), ANSWER_STORE, quick)
    if store_only:
        return
    overrides = {key: value for key, value in {"base_url": base_url, "model": model}.items() if value is not None}
    settings = config.llm.model_copy(update=overrides)
    api_key = os.environ.get("OPENAI_API_KEY")
    if not settings.configured(api_key):
        click.echo("no LLM endpoint configured (llm.base_url, $OPENAI_BASE_URL or $OPENAI_API_KEY): not looked at")
        return
    try:
        report = check_endpoint(settings, api_key, model_given="model" in settings.model_fields_set or bool(model))
    except EndpointUnreachable as error:
        _fail(str(error))
    for line in report.lines():
        click.echo(line)
    click.echo("\nput in conteb.yaml:\n" + report.yaml_block())


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
