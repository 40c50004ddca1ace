"""Versioned prompt files (``llm/prompts/<name>.yaml``), rendered with Jinja2.

File shape::

    name: reformulation
    version: 2
    description: ...
    system: |
      ...
    user: |
      ... {{ chunk }} ...

``Prompt.tag`` (``name@vN:<sha256 of the file, 12 hex>``) goes into every cache key and into the
provenance columns of the rows the prompt produced, so editing a prompt invalidates its cache.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import jinja2
import yaml

from conteb.yaml_text import load_yaml

PROMPTS_DIR = Path(__file__).parent / "prompts"
_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False)


@dataclass(frozen=True)
class Prompt:
    name: str
    version: int
    system: str
    user: str
    sha256: str

    @property
    def tag(self) -> str:
        return f"{self.name}@v{self.version}:{self.sha256[:12]}"

    def messages(self, **values: object) -> tuple[dict[str, str], ...]:
        """System and user messages with ``values`` substituted (a missing value is an error)."""
        return (
            {"role": "system", "content": _ENV.from_string(self.system).render(**values).strip()},
            {"role": "user", "content": _ENV.from_string(self.user).render(**values).strip()},
        )


@cache
def load_prompt(name: str, directory: Path = PROMPTS_DIR) -> Prompt:
    """Read ``<directory>/<name>.yaml``."""
    path = directory / f"{name}.yaml"
    raw = path.read_bytes()
    try:
        data = load_yaml(raw)
    except yaml.YAMLError as error:
        raise ValueError(f"{path}: not valid YAML: {' '.join(str(error).split())}") from None
    missing = {"name", "version", "system", "user"} - set(data)
    if missing:
        raise ValueError(f"{path}: missing keys {sorted(missing)}")
    return Prompt(data["name"], int(data["version"]), data["system"], data["user"], hashlib.sha256(raw).hexdigest())
