# conteb-pipeline: `make run` (set up + build_conteb on the sample), `make test`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# Everything stays inside the repository: Dagster's home, library caches, no telemetry.
# An exported DAGSTER_HOME is kept: the runs and the workers (make workers) must share one instance.
export DAGSTER_HOME ?= $(CURDIR)/.dagster
export DAGSTER_MODULE_NAME := pipelines.definitions
export HF_HOME := $(CURDIR)/.cache/huggingface
export HF_DATASETS_OFFLINE ?= 1
export HF_HUB_OFFLINE ?= 1
export MPLCONFIGDIR := $(CURDIR)/.cache/matplotlib
export DO_NOT_TRACK := 1
export NO_MKDOCS_2_WARNING := 1

# Every make target runs dagster through DAGSTER. The commands this project documents (`dagster job execute`,
# `dagster dev`) start with Dagster 1.13's SupersessionWarning ("Function `dev_command` is superseded ... Use 'dg dev'
# instead"), raised through click.core: left out of the make targets' output, nothing else (the filter matches only a
# warning from click.core whose message starts with "Function"; the processes dagster dev starts inherit it).
DAGSTER := PYTHONWARNINGS=ignore:Function:Warning:click.core $(BIN)/dagster
JOB := $(DAGSTER) job execute

.PHONY: run train evaluate reproduce test test-durations lint docs docs-serve dev bench device-check clean venv workers workers-stop
venv: $(STAMP)

# torch==2.13.0 first: a CPU build on this machine's disk, so the resolver never pulls a
# multi-gigabyte CUDA build for a `torch` requirement further down.
$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) (set PYTHON=...)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

# The registry is checked first (its problems on one line each, no traceback), then, with execution.executor: celery,
# the broker and the workers (conteb workers check: one line when one is missing). conteb status runs either way: it
# says where datasets landed, what waits for review and what to do next. A run that stops at a review gate succeeds
# (nothing downstream of the queue runs; assets/review.py): conteb status exits 3 for scripts, and make exits 0, since
# waiting for a person is the normal state of this pipeline, not a failure. A crash exits non-zero.
run: $(STAMP)
	@$(BIN)/conteb validate --no-sources >/dev/null || exit 2
	@$(BIN)/conteb workers check --quiet || exit 2
	@$(JOB) -j build_conteb; $(BIN)/conteb status --run-status $$? || { code=$$?; [ $$code -eq 3 ] || exit $$code; }

# InSeNT and the +Training control on the train split of conteb.yaml's `training.tasks` (after `make run`), then
# `make evaluate`: the report shows them beside every baseline on the test split.
train: $(STAMP)
	@$(BIN)/conteb validate --no-sources >/dev/null || exit 2
	@$(BIN)/conteb workers check --quiet || exit 2
	@$(JOB) -j train_insent && $(MAKE) --no-print-directory evaluate

# Every configured retrieval system on every task; reports in data/reports/ (after `make run`).
evaluate: $(STAMP)
	@$(BIN)/conteb validate --no-sources >/dev/null || exit 2
	@$(BIN)/conteb workers check --quiet || exit 2
	@$(JOB) -j evaluate_conteb && echo "reports: $${CONTEB_DATA_DIR:-data}/reports/report.html (report.md beside it)"

# The paper's controlled experiment (conteb.yaml `reproduce:`): InSeNT (plain and anchored windows) and the +Training
# control trained on the train splits of SQuAD v1.1 dev (made context-dependent), COVID-QA, the State of the Union
# addresses (pseudo-queries) and generated documents; every baseline on the test splits of SQuAD, COVID-QA and two
# held-out generated tasks; report in data/reports/reproduce/ (its time on 2 CPU cores: bench/BENCHMARKS.md). The
# registry is checked first, as for run/train/evaluate (the job runs in process: no Celery workers are needed).
reproduce: $(STAMP)
	@$(BIN)/conteb validate --no-sources >/dev/null || exit 2
	$(JOB) -j reproduce_conteb

# The whole suite on parallel workers (pytest-xdist): two per core, each test file whole on one worker (its module
# fixtures built once), the longest files first (tests/support/schedule.py), one torch thread a worker
# (tests/conftest.py). `make test TEST_WORKERS=0` runs it in one process.
# Bytecode is written (into the ignored __pycache__/ folders) even where the environment sets
# PYTHONDONTWRITEBYTECODE: else every worker and every process a test starts compiles the project again (what that
# costs: bench/BENCHMARKS.md, "Figures moved out of docstrings and comments").
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile
test: $(STAMP)
	$(PYTEST)

# The whole suite, then its durations written to tests/durations.json (commit it: a fresh clone's `make test` order).
test-durations: $(STAMP)
	$(PYTEST) --save-durations

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports   # the layering contracts in pyproject.toml [tool.importlinter]
	$(BIN)/mypy          # the core, the registry and the domain packages ([tool.mypy])

# The manual (docs/, mkdocs.yml) into .cache/site/; --strict: a broken link or anchor, or a registry key, command or
# file a page mentions that the code no longer has (docs/hooks/reference.py), fails the build.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict

docs-serve: $(STAMP)
	$(BIN)/mkdocs serve --strict

# The Celery executor (conteb.yaml `execution: {executor: celery}`): Debian's redis-server on 127.0.0.1 (installed
# when missing) and N workers (default: execution.celery.workers), pids and logs in .cache/celery/; they stay up for
# every `make run` / `make evaluate` until `make workers-stop`. `make workers run` does both on a fresh clone.
workers: $(STAMP)
	@bash scripts/install-redis.sh
	@if bash scripts/workers.sh status >/dev/null 2>&1; then echo "workers: already running (make workers-stop to restart them)"; \
	else bash scripts/workers.sh start $(N); fi

workers-stop:
	@bash scripts/workers.sh stop

# workspace.yaml names the code location; DAGSTER_MODULE_NAME would be a second pointer.
dev: $(STAMP)
	@echo "make dev: the Dagster UI at http://127.0.0.1:3000 (Ctrl-C stops it)."
	@echo "  Its sensor review_queue_sensor is ON: every 30 s it reads the review queues; once every queue of a task is"
	@echo "  decided, it launches a run of what uses the reviewed output (reviewed tables, answerability, conteb_dataset),"
	@echo "  once per completion, so its first tick after a make run whose review completed launches one run."
	@echo "  Turn it off in the UI: Automation > review_queue_sensor."
	@env -u DAGSTER_MODULE_NAME $(DAGSTER) dev -w workspace.yaml

bench: $(STAMP)
	$(BIN)/python bench/curation_overhead.py

# For a lent GPU machine (bench/BENCHMARKS.md, "Device check"): a few bf16 InSeNT steps on one GPU, then DDP on two
# when present; timings and losses in device-check.json. Without CUDA it says so and runs nothing. Under 10 minutes.
# DEVICE_CHECK_PYTHON: an interpreter with the project's dependencies where .venv is not built (the GPU image's).
DEVICE_CHECK_PYTHON ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,python3)
device-check:
	$(DEVICE_CHECK_PYTHON) scripts/device_check.py --out device-check.json

clean:
	rm -rf data/conteb data/stages data/reports .cache
