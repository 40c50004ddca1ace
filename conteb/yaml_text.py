"""The one reader of the YAML the project reads from users: the registry (``conteb.yaml``, ``$CONTEB_CONFIG``), the
prompt files, training YAML and the front matter of dataset and model cards.

:func:`load_yaml` is ``yaml.safe_load`` with a bound on nesting: PyYAML composes a document recursively, so a file
nested thousands of levels deep (``[[[[...]]]]`` or one key under another) ends in a ``RecursionError`` traceback
instead of an error naming the file. Beyond :data:`MAX_YAML_DEPTH` levels of sequences and mappings it raises
:class:`YAMLNestingError`, a ``yaml.YAMLError`` with a one-line message, so every caller that already reports a
``yaml.YAMLError`` with its file reports this too. No real registry, prompt or card comes near the bound.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import Node

MAX_YAML_DEPTH = 100
"""The deepest nesting of sequences and mappings :func:`load_yaml` reads (a registry uses fewer than ten)."""


class YAMLNestingError(yaml.YAMLError):
    """The text nests sequences and mappings deeper than :data:`MAX_YAML_DEPTH`; the message is one line."""


class _BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses to compose nodes nested deeper than :data:`MAX_YAML_DEPTH`."""

    _depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self._depth >= MAX_YAML_DEPTH:
            mark = self.peek_event().start_mark
            raise YAMLNestingError(
                f"nested too deeply (more than {MAX_YAML_DEPTH} levels, at line {mark.line + 1}, "
                f"column {mark.column + 1})"
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)  # type: ignore[no-any-return]
        finally:
            self._depth -= 1


def load_yaml(text: str | bytes) -> Any:
    """The Python value of one YAML document, as ``yaml.safe_load`` reads it (``None`` for an empty one).

    Raises ``yaml.YAMLError`` for text that is not YAML and :class:`YAMLNestingError` (one of them) for text nested
    deeper than :data:`MAX_YAML_DEPTH` levels.
    """
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
