# GAGAR Studio. `make demo` runs the embedded default; `make test` runs every test.
PYTHON ?= python3.11
VENV ?= .venv
VERL_VENV ?= .venv-verl
PY := $(VENV)/bin/python
# The demo keeps its data in the default GAGAR_DATA_DIR (./var), where the README's commands look.
DEMO_ENV := DEBUG=1
PG_URL ?= postgres://postgres@127.0.0.1:5432/postgres
TEST_ENV := SECRET_KEY=test-only-secret-key

.PHONY: install install-llm install-verl demo test test-fast test-core test-sqlite test-postgres test-trainers lint bench clean

$(VENV)/.installed: pyproject.toml client/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]' -e ./client
	touch $@

# The LLM grader's CPU stack (torch from the wheel on disk, transformers, xgrammar
# without the triton it pulls in but does not need on CPU): for tests and benches.
$(VENV)/.installed-llm: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[dev,llm]'
	$(PY) -m pip install --quiet --no-deps xgrammar==0.2.9
	touch $@

# verl 0.9.1 pins transformers<5.11 and pulls ray[default], wandb and more, so its tests get a
# venv of their own: verl without its dependencies, plus what its GRPO estimator, batch reward
# manager and reward loop import, and the client (installed without Django, as a trainer installs it).
# OpenRLHF 0.11.2 (it pins deepspeed, flash-attn, vllm...) comes without its dependencies too:
# the reward server's test runs only its reward request code, which needs aiohttp and pylatexenc.
$(VERL_VENV)/.installed: client/pyproject.toml
	test -x $(VERL_VENV)/bin/python || $(PYTHON) -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/python -m pip install --quiet torch==2.13.0 numpy packaging pyyaml omegaconf codetiming \
		orjson ray==2.60.0 tensordict==0.10.0 transformers==5.10.4 aiohttp==3.14.5 pylatexenc==2.11
	$(VERL_VENV)/bin/python -m pip install --quiet --no-deps verl==0.9.1 openrlhf==0.11.2
	$(VERL_VENV)/bin/python -m pip install --quiet -e ./client
	touch $@

install: $(VENV)/.installed

install-llm: $(VENV)/.installed-llm

install-verl: $(VERL_VENV)/.installed

demo: install
	$(DEMO_ENV) PY=$(PY) bash scripts/demo.sh

# The tests of the pure core and of the sample generator run once, without Django or its settings;
# the Django suites (everything else) run on each database.
test: install-llm install-verl
	bash scripts/services.sh
	bash scripts/browser.sh
	bash scripts/sandbox.sh
	$(MAKE) --no-print-directory lint test-core test-sqlite test-postgres test-trainers

test-core:
	$(PY) -m pytest -q tests/grading tests/sample

# The slow tests (worker kills, the chaos test, the agentic worker: mostly waiting out leases
# and a model) and the browser tests (they test pages, which no database changes) run once, on
# PostgreSQL; the rest run on both databases.
test-sqlite:
	$(TEST_ENV) GAGAR_DATA_DIR=$(CURDIR)/var/test-sqlite $(PY) -m pytest -q -m "not slow and not browser" --ignore=tests/grading \
		--ignore=tests/sample --ignore=tests/trainers

test-postgres:
	$(TEST_ENV) DATABASE_URL=$(PG_URL) GAGAR_DATA_DIR=$(CURDIR)/var/test-postgres $(PY) -m pytest -q --ignore=tests/grading --ignore=tests/sample \
		--ignore=tests/trainers

# The real trainers (TRL in this venv, verl in its own) against the running app: once, on PostgreSQL.
test-trainers: install-verl
	$(TEST_ENV) DATABASE_URL=$(PG_URL) GAGAR_DATA_DIR=$(CURDIR)/var/test-trainers $(PY) -m pytest -q tests/trainers

test-fast: install-llm
	bash scripts/services.sh
	bash scripts/sandbox.sh
	$(TEST_ENV) GAGAR_DATA_DIR=$(CURDIR)/var/test-sqlite $(PY) -m pytest -q -m "not browser and not slow" \
		--ignore=tests/trainers

lint: install
	$(VENV)/bin/ruff check .

bench: install-llm
	$(PY) bench/advantages.py
	DATABASE_URL=$(PG_URL) $(PY) bench/ingest.py
	DATABASE_URL=$(PG_URL) $(PY) bench/grading.py
	DATABASE_URL=$(PG_URL) $(PY) bench/api.py
	$(PY) bench/export.py
	$(PY) bench/pages.py
	$(PY) bench/large_group.py
	$(PY) bench/agentic.py
	$(PY) bench/gpu_grader.py --small

clean:
	rm -rf $(VENV) $(VERL_VENV) var
