"""The fingerprint a Celery step carries: everything that shapes its output, part by part.

A run's process sends :func:`step_fingerprint` with every step; a worker computes its own once, when it starts (the
moment it loads the registry and imports the code), and refuses a step whose fingerprint differs, naming each part
that differs (:func:`fingerprint_differences`). The parts (name -> 16 hex digits, or words for the LLM's):

* ``registry``: :func:`project.config.registry_fingerprint` (the resolved ``conteb.yaml`` and the data folder);
* ``prompt <file>.yaml``: the SHA-256 of each prompt file of :func:`llm.prompts.prompts_dir` (its bytes: the same
  digest as the prompt's tag);
* ``code``: :func:`code_version`;
* ``llm endpoint``, ``llm model``, ``llm key``: what the LLM stages of this process would call (:func:`llm_parts`):
  the endpoint as resolved from the registry *and the environment* (``$OPENAI_BASE_URL``), the model, and where
  the API key comes from (the variable's name, or ``none``), never the key itself. A worker started from another
  shell than the run's would otherwise call (and bill) another endpoint than the run's.

:func:`code_version` hashes the sources of the project's packages as Python imports them (the checkout for an
editable install, ``site-packages`` for a wheel), not ``git HEAD`` plus a dirty flag: it needs no git (images and
wheels have none), it sees uncommitted edits exactly, and it ignores what does not run (untracked data, docs,
tests). ``python -m project.fingerprint`` prints what it costs (bench/BENCHMARKS.md, "Figures moved out of
docstrings and comments").
``cli/`` is left out: no step runs it. Prompt files are left out of ``code`` (they are their own parts).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from llm.prompts import PROMPTS_DIR, prompts_dir
from llm.settings import LLMSettings
from project.config import ProjectConfig, registry_fingerprint

CODE_PACKAGES = (
    "conteb", "project", "llm", "curation", "review", "training", "evaluation", "embedding", "assets", "pipelines"
)  # fmt: skip
"""The packages whose sources :func:`code_version` hashes: every package a step imports (``cli`` is not one)."""
REGISTRY_PART = "registry"
CODE_PART = "code"
PROMPT_PART = "prompt "  # + the file's name: "prompt reformulation.yaml"
LLM_ENDPOINT_PART = "llm endpoint"
LLM_MODEL_PART = "llm model"
LLM_KEY_PART = "llm key"
LLM_PARTS = (LLM_ENDPOINT_PART, LLM_MODEL_PART, LLM_KEY_PART)
API_KEY_ENV = "OPENAI_API_KEY"
"""The variable the LLM resource reads the API key from (``pipelines/definitions.py``)."""
NO_KEY = "none"
DIGITS = 16


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:DIGITS]


def package_dirs() -> list[Path]:
    """The folder of each package of :data:`CODE_PACKAGES`, as the import system finds it (nothing is imported)."""
    out: list[Path] = []
    for name in CODE_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            out.extend(Path(location) for location in spec.submodule_search_locations)
    return out


def _is_source(relative: Path) -> bool:
    """Whether a file of a package (path relative to the package) is part of the code: not a compiled cache, an
    editor's swap or backup file, or anything hidden (an open editor must not make the workers refuse steps)."""
    if "__pycache__" in relative.parts or relative.suffix in (".pyc", ".pyo"):
        return False
    if any(part.startswith(".") for part in relative.parts):
        return False
    return not (relative.name.endswith("~") or (relative.name.startswith("#") and relative.name.endswith("#")))


def code_version(roots: Sequence[Path] | None = None) -> str:
    """16 hex digits of the SHA-256 of every file (its name ``<package>/<path>`` and bytes) under ``roots``
    (default: :func:`package_dirs`), compiled caches and the prompt files (``llm/prompts/``, or
    ``$CONTEB_PROMPTS_DIR`` if it lies in a package) left out."""
    packaged_prompts = f"{PROMPTS_DIR.parent.name}/{PROMPTS_DIR.name}/"
    prompts = prompts_dir().resolve()
    digest = hashlib.sha256()
    for root in package_dirs() if roots is None else roots:
        for path in sorted(root.rglob("*")):
            name = f"{root.name}/{path.relative_to(root).as_posix()}"
            if not _is_source(path.relative_to(root)) or not path.is_file():
                continue
            if name.startswith(packaged_prompts) or path.resolve().is_relative_to(prompts):
                continue
            digest.update(f"{name}\0".encode())
            digest.update(path.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()[:DIGITS]


def prompt_versions(directory: Path | None = None) -> dict[str, str]:
    """``prompt <file>`` -> the digest of the file's bytes, for every ``*.yaml`` of ``directory`` (default:
    :func:`llm.prompts.prompts_dir`)."""
    folder = directory or prompts_dir()
    return {f"{PROMPT_PART}{path.name}": _digest(path.read_bytes()) for path in sorted(folder.glob("*.yaml"))}


def shown_endpoint(url: str) -> str:
    """``url`` as a fingerprint shows it: without a ``user:password@`` or a query (either may hold a secret)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def llm_parts(settings: LLMSettings) -> dict[str, str]:
    """The LLM parts of this process's fingerprint: the endpoint its LLM stages call (``llm.base_url``, else
    ``$OPENAI_BASE_URL``, else the OpenAI API: :meth:`llm.settings.LLMSettings.resolved_base_url`), the model, and
    the key's source (``$OPENAI_API_KEY`` when set, else ``none``); the key's value is never read into it."""
    return {
        LLM_ENDPOINT_PART: shown_endpoint(settings.resolved_base_url()),
        LLM_MODEL_PART: settings.model,
        LLM_KEY_PART: f"${API_KEY_ENV}" if os.environ.get(API_KEY_ENV) else NO_KEY,
    }


def step_fingerprint(config: ProjectConfig) -> dict[str, str]:
    """Part name -> digest of everything that shapes a step's output: the registry, each prompt file, the code, and
    the LLM endpoint, model and key source this process resolves (:func:`llm_parts`)."""
    return {
        REGISTRY_PART: registry_fingerprint(config),
        **prompt_versions(),
        CODE_PART: code_version(),
        **llm_parts(config.llm),
    }


def _parts(fingerprint: object) -> dict[str, str]:
    """``fingerprint`` as received from another process: its parts, or a bare registry digest (a process from before
    the fingerprint had parts) as the ``registry`` part."""
    if isinstance(fingerprint, dict):
        return {str(part): str(digest) for part, digest in fingerprint.items()}
    return {REGISTRY_PART: str(fingerprint)}


_LLM_WORDS = {  # part -> (what it is, where a worker took it from)
    LLM_ENDPOINT_PART: ("LLM endpoint", "llm.base_url, else $OPENAI_BASE_URL of the shell that started it"),
    LLM_MODEL_PART: ("LLM model", "llm.model of the registry it loaded"),
    LLM_KEY_PART: ("LLM key source", "$OPENAI_API_KEY of the shell that started it, if set"),
}


def environment_differs(run: object, worker: object) -> bool:
    """Whether an LLM part differs between a run's fingerprint and a worker's: the worker was started from another
    shell (environment) than the run's, so it must be restarted from the run's."""
    run, worker = _parts(run), _parts(worker)
    return any(part in run and part in worker and run[part] != worker[part] for part in LLM_PARTS)


def fingerprint_differences(run: object, worker: object) -> list[str]:
    """What differs between a run's fingerprint and a worker's (each as received: :func:`step_fingerprint`'s parts,
    or a bare registry digest), in words: one clause per part (registry, each prompt file, code, the LLM's), empty
    when they are the same."""
    run, worker = _parts(run), _parts(worker)
    clauses = []
    for part in sorted(set(run) | set(worker), key=lambda name: (name != REGISTRY_PART, name == CODE_PART, name)):
        ours, theirs = run.get(part, "none"), worker.get(part, "none")
        if ours == theirs:
            continue
        if part == REGISTRY_PART:
            clauses.append(f"registry {ours} but the worker loaded registry {theirs} when it started (conteb.yaml or "
                           "$CONTEB_DATA_DIR changed since)")  # fmt: skip
        elif part == CODE_PART:
            clauses.append(f"code {ours} but the worker imported code {theirs} when it started (the project's "
                           "sources changed since)")  # fmt: skip
        elif part in _LLM_WORDS:
            if part not in run or part not in worker:  # a process from before these parts: its code differs
                continue
            what, origin = _LLM_WORDS[part]
            clauses.append(f"{what} {ours}, but this worker's {what} is {theirs} ({origin})")
        else:
            path = prompts_dir() / part.removeprefix(PROMPT_PART)
            clauses.append(f"prompt file {path} {ours} but the worker loaded {theirs} when it started (the file "
                           "changed since)")  # fmt: skip
    return clauses


if __name__ == "__main__":  # python -m project.fingerprint: the fingerprint of this checkout and what it costs
    import json
    import time

    from project.config import load_config

    started = time.perf_counter()
    code = code_version()
    code_ms = (time.perf_counter() - started) * 1000
    config = load_config()
    started = time.perf_counter()
    parts = step_fingerprint(config)
    total_ms = (time.perf_counter() - started) * 1000
    print(json.dumps(parts, indent=2))
    print(f"code_version: {code_ms:.1f} ms; step_fingerprint: {total_ms:.1f} ms")
