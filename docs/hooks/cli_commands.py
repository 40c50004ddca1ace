"""The ``conteb`` command line, read from its click parsers (for the manual).

:func:`commands` walks the group ``cli.main:main`` and every subcommand, as ``conteb --help`` would show them;
:func:`check_command` resolves a command line mentioned in a page (``conteb review accept --task sample``) against
them: an unknown subcommand or option is named, with the closest known one.
"""

from __future__ import annotations

import inspect
import shlex
from dataclasses import dataclass
from functools import cache

import click

from conteb.config import closest_name  # the one "did you mean" of the registry and the command line

ENTRY_POINT = "cli.main:main"
PROGRAM = "conteb"


@dataclass
class Command:
    """One command: ``path`` (``conteb review serve``), its parser and the click context it runs in."""

    path: str
    command: click.Command
    context: click.Context

    @property
    def anchor(self) -> str:
        return self.path.replace(" ", "-")


@cache
def _main() -> click.Group:
    module, name = ENTRY_POINT.split(":")
    return getattr(__import__(module, fromlist=[name]), name)


@cache
def commands() -> list[Command]:
    """``conteb`` and every subcommand, depth first, subcommands in name order."""
    out: list[Command] = []

    def walk(command: click.Command, name: str, parent: click.Context | None) -> None:
        context = click.Context(command, info_name=name, parent=parent)
        path = f"{parent.command_path} {name}" if parent else name
        out.append(Command(path=path, command=command, context=context))
        if isinstance(command, click.Group):
            for sub in sorted(command.list_commands(context)):
                child = command.get_command(context, sub)
                if child is not None and not child.hidden:
                    walk(child, sub, context)

    walk(_main(), PROGRAM, None)
    return out


def _option_names(command: click.Command, context: click.Context) -> dict[str, click.Parameter]:
    return {
        name: param
        for param in command.get_params(context)
        if isinstance(param, click.Option)
        for name in (*param.opts, *param.secondary_opts)
    }


def _takes_value(param: click.Parameter) -> bool:
    return isinstance(param, click.Option) and not param.is_flag and not param.count


def _is_placeholder(token: str) -> bool:
    return token in ("...", "…") or token.startswith(("<", "{", "$")) or token.isupper()


def check_command(line: str) -> str | None:
    """Why the command line ``line`` (``conteb ...`` or ``.venv/bin/conteb ...``, shell comments allowed) names a
    subcommand or an option ``conteb`` does not have, or None. Arguments and placeholders (``<task>``, ``...``,
    ``[--stage ...]``) are not judged."""
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError:
        tokens = line.split()
    tokens = [token.strip("[]") for token in tokens[1:]]
    by_path = {c.path: c for c in commands()}
    current = by_path[PROGRAM]
    skip = False
    for token in tokens:
        if skip or not token:
            skip = False
            continue
        if token.startswith("-"):
            if token in ("-", "--"):
                continue
            name = token.split("=", 1)[0]
            options = _option_names(current.command, current.context)
            if name not in options:
                close = closest_name(name, options)
                hint = f" (did you mean '{close}'?)" if close else f" (its options: {', '.join(sorted(options))})"
                return f"'{current.path}' has no option '{name}'{hint}"
            skip = "=" not in token and _takes_value(options[name])
            continue
        if not isinstance(current.command, click.Group):
            continue  # an argument of a command
        if _is_placeholder(token):
            return None
        child = by_path.get(f"{current.path} {token}")
        if child is None:
            known = sorted(current.command.list_commands(current.context))
            close = closest_name(token, known)
            hint = f"did you mean '{current.path} {close}'?" if close else f"its commands: {', '.join(known)}"
            return f"no command '{current.path} {token}' ({hint})"
        current = child
    return None


# ---------------------------------------------------------------- the page


def _help_text(command: click.Command) -> str:
    """The command's help as Markdown paragraphs (click's ``\\b`` no-rewrap markers become line breaks)."""
    text = inspect.cleandoc(command.help or command.short_help or "")
    paragraphs = []
    for block in text.split("\n\n"):
        if block.startswith("\b\n"):
            paragraphs.append("\n".join(f"{line}  " for line in block[2:].splitlines()))
        else:
            paragraphs.append(block)
    return "\n\n".join(paragraphs)


def summary_text(command: click.Command) -> str:
    """The command's summary for the index table: its ``short_help``, else the whole first paragraph of its help
    (not click's ``get_short_help_str``, which cuts it at a length with an ellipsis)."""
    if command.short_help:
        return command.short_help
    first = inspect.cleandoc(command.help or "").split("\n\n", 1)[0]
    return " ".join(first.replace("\b", "").split())


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _param_row(param: click.Parameter, context: click.Context) -> str:
    if isinstance(param, click.Option):
        names = ", ".join(f"`{name}`" for name in (*param.opts, *param.secondary_opts))
        if param.is_flag:
            kind = "flag"
        elif isinstance(param.type, click.Choice):
            kind = " or ".join(f"`{choice}`" for choice in param.type.choices)
        else:
            kind = param.type.name.lower()
        if param.multiple:
            kind += ", repeatable"
        default = param.get_default(context, call=False)
        if callable(default) or default in (None, (), []) or (param.is_flag and default is False):
            shown = ""
        else:
            shown = f"`{default}`"
        return f"| {names} | {kind} | {shown} | {_cell(param.help or '')} |"
    required = "required" if param.required else "optional"
    return f"| `{param.human_readable_name}` (argument) | {param.type.name.lower()}, {required} | | |"


def render_cli_page() -> str:
    """The Markdown of the generated CLI reference page."""
    lines = [
        "# Command line (`conteb`)",
        "",
        "Generated from the click parsers of `cli/` (`cli.main:main`) each time the manual is built: what",
        "`conteb ... --help` prints, for every command. Do not edit; change the code's help texts instead.",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    for item in commands():
        summary = summary_text(item.command)
        lines.append(f"| [`{item.path}`](#{item.anchor}) | {_cell(summary)} |")
    for item in commands():
        level = "#" * min(2 + item.path.count(" ") - 1, 4) if item.path != PROGRAM else "##"
        lines += ["", f"{level} `{item.path}` {{#{item.anchor}}}", "", _help_text(item.command), ""]
        usage = item.command.collect_usage_pieces(item.context)
        lines += ["```text", f"Usage: {item.path} {' '.join(usage)}".rstrip(), "```", ""]
        params = [p for p in item.command.get_params(item.context) if not (isinstance(p, click.Option) and p.hidden)]
        if params:
            lines += ["| option | type | default | description |", "|---|---|---|---|"]
            lines += [_param_row(param, item.context) for param in params]
        if isinstance(item.command, click.Group):
            subs = [c for c in commands() if c.path.rsplit(" ", 1)[0] == item.path and c.path != item.path]
            if subs:
                lines += ["", "Commands: " + ", ".join(f"[`{c.path}`](#{c.anchor})" for c in subs) + "."]
    return "\n".join(lines) + "\n"
