# GAGAR Studio. `make demo` runs the embedded default; `make test` runs every test.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_ENV := DEBUG=1 GAGAR_DATA_DIR=$(CURDIR)/var/demo
PG_URL ?= postgres://postgres@127.0.0.1:5432/postgres
TEST_ENV := SECRET_KEY=test-only-secret-key

.PHONY: install demo test test-fast test-sqlite test-postgres lint bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

demo: install
	$(DEMO_ENV) PY=$(PY) bash scripts/demo.sh

test: install
	bash scripts/services.sh
	bash scripts/browser.sh
	$(MAKE) --no-print-directory lint test-sqlite test-postgres

test-sqlite:
	$(TEST_ENV) GAGAR_DATA_DIR=$(CURDIR)/var/test-sqlite $(PY) -m pytest -q

test-postgres:
	$(TEST_ENV) DATABASE_URL=$(PG_URL) GAGAR_DATA_DIR=$(CURDIR)/var/test-postgres $(PY) -m pytest -q

test-fast: install
	bash scripts/services.sh
	$(TEST_ENV) GAGAR_DATA_DIR=$(CURDIR)/var/test-sqlite $(PY) -m pytest -q -m "not browser and not slow"

lint: install
	$(VENV)/bin/ruff check .

bench: install
	$(PY) bench/advantages.py
	DATABASE_URL=$(PG_URL) $(PY) bench/ingest.py
	DATABASE_URL=$(PG_URL) $(PY) bench/grading.py
	$(PY) bench/pages.py

clean:
	rm -rf $(VENV) var
