"""The fingerprint a Celery step carries: everything that shapes its output, part by part.

A run's process sends :func:`step_fingerprint` with every step; a worker computes its own once, when it starts (the
moment it loads the registry and imports the code), and refuses a step whose fingerprint differs, naming each part
that differs (:func:`fingerprint_differences`). The parts (name -> 16 hex digits):

* ``registry``: :func:`project.config.registry_fingerprint` (the resolved ``conteb.yaml`` and the data folder);
* ``prompt <file>.yaml``: the SHA-256 of each prompt file of :func:`llm.prompts.prompts_dir` (its bytes: the same
  digest as the prompt's tag);
* ``code``: :func:`code_version`.

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
from collections.abc import Sequence
from pathlib import Path

from llm.prompts import PROMPTS_DIR, prompts_dir
from project.config import ProjectConfig, registry_fingerprint

CODE_PACKAGES = (
    "conteb", "project", "llm", "curation", "review", "training", "evaluation", "embedding", "assets", "pipelines"
)  # fmt: skip
"""The packages whose sources :func:`code_version` hashes: every package a step imports (``cli`` is not one)."""
REGISTRY_PART = "registry"
CODE_PART = "code"
PROMPT_PART = "prompt "  # + the file's name: "prompt reformulation.yaml"
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


def step_fingerprint(config: ProjectConfig) -> dict[str, str]:
    """Part name -> digest of everything that shapes a step's output: the registry, each prompt file, the code."""
    return {REGISTRY_PART: registry_fingerprint(config), **prompt_versions(), CODE_PART: code_version()}


def _parts(fingerprint: object) -> dict[str, str]:
    """``fingerprint`` as received from another process: its parts, or a bare registry digest (a process from before
    the fingerprint had parts) as the ``registry`` part."""
    if isinstance(fingerprint, dict):
        return {str(part): str(digest) for part, digest in fingerprint.items()}
    return {REGISTRY_PART: str(fingerprint)}


def fingerprint_differences(run: object, worker: object) -> list[str]:
    """What differs between a run's fingerprint and a worker's (each as received: :func:`step_fingerprint`'s parts,
    or a bare registry digest), in words: one clause per part (registry, each prompt file, code), empty when they
    are the same."""
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
