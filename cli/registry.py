"""The registry a command works on: the file given to ``conteb --config``, else ``$CONTEB_CONFIG`` or ``conteb.yaml``.

Every subcommand loads it through :func:`load_registry`, so an invalid registry is reported the same way everywhere:
its problems on stderr, one line each, and exit status 1.
"""

from __future__ import annotations

import sys

import click

from conteb.config import ConfigError
from project.config import ProjectConfig, load_config


def load_registry(ctx: click.Context) -> ProjectConfig:
    """The registry of this invocation (``ctx.find_root().obj`` holds the ``--config`` path, or None); exits 1 with
    the problems when it is unreadable or invalid."""
    try:
        return load_config(ctx.find_root().obj)
    except ConfigError as error:
        click.echo(str(error), err=True)
        sys.exit(1)
