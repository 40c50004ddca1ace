"""The Celery app of the workers: ``celery -A pipelines.worker:app worker`` (``scripts/workers.sh``).

Importing this module loads the code location (``pipelines.definitions``: the registry, ``$CONTEB_DATA_DIR``) once,
before the worker forks its pool, and builds the app from that same registry: its ``execution.celery`` block and the
worker's fingerprint (:func:`project.fingerprint.step_fingerprint`: the registry, the prompt files and the code as
they are now), which the step task compares with the one each step carries (``pipelines/celery_steps.py``). A
worker therefore runs exactly the definitions, prompts and code it checks against, or refuses the step.
"""

from __future__ import annotations

from pipelines.celery import worker_app
from pipelines.definitions import CONFIG
from project.fingerprint import step_fingerprint

app = worker_app(CONFIG.execution.celery, step_fingerprint(CONFIG))
