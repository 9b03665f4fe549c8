# GAGAR Studio. `make demo` runs the embedded default; `make test` runs every test.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_ENV := DEBUG=1 GAGAR_DATA_DIR=$(CURDIR)/var/demo
PG_URL ?= postgres://postgres@127.0.0.1:5432/postgres
TEST_ENV := SECRET_KEY=test-only-secret-key

.PHONY: install install-llm demo test test-fast test-core test-sqlite test-postgres lint bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

# The LLM grader's CPU stack (torch from the wheel on disk, transformers, xgrammar
# without the triton it pulls in but does not need on CPU): for tests and benches.
$(VENV)/.installed-llm: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[dev,llm]'
	$(PY) -m pip install --quiet --no-deps xgrammar==0.2.9
	touch $@

install: $(VENV)/.installed

install-llm: $(VENV)/.installed-llm

demo: install
	$(DEMO_ENV) PY=$(PY) bash scripts/demo.sh

# The tests of the pure core and of the sample generator run once, without Django or its settings;
# the Django suites (everything else) run on each database.
test: install-llm
	bash scripts/services.sh
	bash scripts/browser.sh
	$(MAKE) --no-print-directory lint test-core test-sqlite test-postgres

test-core:
	$(PY) -m pytest -q tests/grading tests/sample

test-sqlite:
	$(TEST_ENV) GAGAR_DATA_DIR=$(CURDIR)/var/test-sqlite $(PY) -m pytest -q --ignore=tests/grading --ignore=tests/sample

test-postgres:
	$(TEST_ENV) DATABASE_URL=$(PG_URL) GAGAR_DATA_DIR=$(CURDIR)/var/test-postgres $(PY) -m pytest -q --ignore=tests/grading --ignore=tests/sample

test-fast: install-llm
	bash scripts/services.sh
	$(TEST_ENV) GAGAR_DATA_DIR=$(CURDIR)/var/test-sqlite $(PY) -m pytest -q -m "not browser and not slow"

lint: install
	$(VENV)/bin/ruff check .

bench: install-llm
	$(PY) bench/advantages.py
	DATABASE_URL=$(PG_URL) $(PY) bench/ingest.py
	DATABASE_URL=$(PG_URL) $(PY) bench/grading.py
	$(PY) bench/pages.py
	$(PY) bench/agentic.py
	$(PY) bench/gpu_grader.py --small

clean:
	rm -rf $(VENV) var
