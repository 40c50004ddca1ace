"""The Celery app of the workers: ``celery -A pipelines.worker:app worker`` (``scripts/workers.sh``).

Importing this module loads the code location (``pipelines.definitions``: the registry, ``$CONTEB_DATA_DIR``) once,
before the worker forks its pool, and builds the app from that same registry: its ``execution.celery`` block and its
fingerprint (:func:`project.config.registry_fingerprint`), which the step task compares with the one each step
carries (``pipelines/celery_steps.py``). A worker therefore runs exactly the definitions it checks against.
"""

from __future__ import annotations

from pipelines.celery import worker_app
from pipelines.definitions import CONFIG, REGISTRY

app = worker_app(CONFIG.execution.celery, REGISTRY)
