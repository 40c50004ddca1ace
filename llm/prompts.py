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

The files live in :func:`prompts_dir`: ``$CONTEB_PROMPTS_DIR`` when set (a copy of the prompts to try edits on, or
the tests' own), else ``llm/prompts/`` of the installed package. :func:`load_prompt` reads the file at every call
and memoizes only the parsing, keyed by the file's bytes: a long-lived process (a Celery worker, ``dagster dev``, a
test session) never serves a prompt that is no longer on disk. The Celery executor's step fingerprint
(``project/fingerprint.py``) covers every file of the folder as well.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import jinja2
import yaml

from conteb.yaml_text import load_yaml
from llm.types import LLMRequest

PROMPTS_DIR = Path(__file__).parent / "prompts"
PROMPTS_DIR_ENV = "CONTEB_PROMPTS_DIR"
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


def prompts_dir() -> Path:
    """The folder of the prompt files: ``$CONTEB_PROMPTS_DIR`` when set, else :data:`PROMPTS_DIR`."""
    override = os.environ.get(PROMPTS_DIR_ENV)
    return Path(override).expanduser().resolve() if override else PROMPTS_DIR


def load_prompt(name: str, directory: Path | None = None) -> Prompt:
    """Read ``<directory>/<name>.yaml`` (default: :func:`prompts_dir`) now; only parsing is memoized, by content."""
    path = (directory or prompts_dir()) / f"{name}.yaml"
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        where = f" (${PROMPTS_DIR_ENV} names {path.parent})" if os.environ.get(PROMPTS_DIR_ENV) else ""
        raise FileNotFoundError(f"{path}: no such prompt file{where}") from None
    return _parse(str(path), raw)


@lru_cache(maxsize=64)
def _parse(path: str, raw: bytes) -> Prompt:
    """The prompt of the file ``path`` whose bytes are ``raw`` (``path`` only names it in errors)."""
    try:
        data = load_yaml(raw)
    except yaml.YAMLError as error:
        raise ValueError(f"{path}: not valid YAML: {' '.join(str(error).split())}") from None
    missing = {"name", "version", "system", "user"} - set(data)
    if missing:
        raise ValueError(f"{path}: missing keys {sorted(missing)}")
    return Prompt(data["name"], int(data["version"]), data["system"], data["user"], hashlib.sha256(raw).hexdigest())


def sent_prompt_tag(requests: Sequence[LLMRequest], name: str) -> str:
    """The tag of the prompt ``requests`` were built with (what their rows' ``prompt_version`` must say), or
    ``name``'s current tag when there are none.

    A stage tags its rows from the requests it sent, never by loading the prompt a second time: a prompt file edited
    while the stage ran would otherwise tag answers to the old prompt with the new version. Requests built from two
    versions of one prompt are a bug (``ValueError``).
    """
    tags = {request.prompt_tag for request in requests}
    if len(tags) > 1:
        raise ValueError(f"requests built from {len(tags)} versions of one prompt: {sorted(tags)}")
    return tags.pop() if tags else load_prompt(name).tag
