"""Longest tests first: the order that keeps ``pytest -n`` (``make test``) from ending on one long test.

pytest-xdist's ``load`` scheduler hands tests out in collection order, so a long end-to-end test collected last
runs alone at the end while the other workers idle. This plugin (registered in ``tests/conftest.py``) records every
test's call duration of a run in pytest's cache (``.pytest_cache``, key :data:`CACHE_KEY`) and, on the next run,
sorts the collected tests by that duration, longest first (Graham's LPT rule; tests never timed keep their place
after the timed ones of at least :data:`FIRST_FROM_S`, in collection order, and before the shorter ones). The
order depends only on the cache file, so every xdist worker collects the same order, as xdist requires. Untimed
tests of :data:`UNTIMED_FIRST`, the slowest modules measured here (issue 21's ``--durations``), count as long, so
a fresh clone (no cache) starts with them too.
"""

from __future__ import annotations

import pytest

CACHE_KEY = "conteb/durations"
FIRST_FROM_S = 2.0  # timed tests under this many seconds keep their collection order, after the untimed ones
UNTIMED_GUESS_S = 30.0  # what an untimed test of UNTIMED_FIRST is assumed to take
UNTIMED_FIRST = (  # the slowest modules measured here: their tests go first until they have been timed
    "tests/test_celery_executor.py",
    "tests/test_evaluation_e2e.py",
    "tests/test_reproduce.py",
    "tests/test_dagster_ui.py",
    "tests/test_training_assets.py",
    "tests/test_run_interrupts.py",
    "tests/test_mteb_task.py",
    "tests/training/test_train_e2e.py",
    "tests/test_llm_stages_e2e.py",
    "tests/test_sharded_stages.py",
)


def expected_seconds(nodeid: str, durations: dict[str, float]) -> float | None:
    """The test's recorded duration; :data:`UNTIMED_GUESS_S` for an untimed test of :data:`UNTIMED_FIRST`; else
    None (unknown)."""
    if nodeid in durations:
        return durations[nodeid]
    return UNTIMED_GUESS_S if nodeid.split("::", 1)[0] in UNTIMED_FIRST else None


def order_key(nodeid: str, durations: dict[str, float]) -> tuple[int, float]:
    """Sort key of a test (the caller adds its collection index, so equal keys keep their order): the long ones
    by decreasing duration, then the unknown ones, then the short ones."""
    seconds = expected_seconds(nodeid, durations)
    if seconds is None:
        return (1, 0.0)
    return (0, -seconds) if seconds >= FIRST_FROM_S else (2, 0.0)


class LongestFirst:
    """The plugin: reorders the collection, and records the durations of the run (on the controller, or alone)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.durations: dict[str, float] = {}

    def _cached(self) -> dict[str, float]:
        cache = getattr(self.config, "cache", None)
        return dict(cache.get(CACHE_KEY, {})) if cache is not None else {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        durations = self._cached()
        indexed = sorted(enumerate(items), key=lambda pair: (*order_key(pair[1].nodeid, durations), pair[0]))
        items[:] = [item for _, item in indexed]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and report.skipped):
            self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration
        elif report.when == "setup":
            self.durations[report.nodeid] = report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        cache = getattr(self.config, "cache", None)
        if cache is None or hasattr(self.config, "workerinput") or not self.durations:
            return  # an xdist worker: its reports reach the controller, which records them
        merged = {**self._cached(), **self.durations}
        cache.set(CACHE_KEY, {nodeid: round(seconds, 3) for nodeid, seconds in merged.items()})
