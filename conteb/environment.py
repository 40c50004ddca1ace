"""Keep library caches and state inside the project (nothing written to the user's home).

The Makefile exports the same variables; this module covers runs started without it (e.g.
``dagster dev`` from a shell). Existing values are never overridden.
"""

from __future__ import annotations

import os
from pathlib import Path


def keep_caches_in(project_dir: Path) -> None:
    """Default Hugging Face and matplotlib caches to ``<project_dir>/.cache/``."""
    cache = project_dir / ".cache"
    os.environ.setdefault("HF_HOME", str(cache / "huggingface"))
    os.environ.setdefault("MPLCONFIGDIR", str(cache / "matplotlib"))
