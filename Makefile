# GAGAR Studio. `make demo` runs the embedded default; `make test` runs every test.
PYTHON ?= python3.11
# The second Python the tests run on (core and SQLite suites, without the LLM and trainer extras).
PYTHON313 ?= $(shell bash scripts/find-python.sh 3.13)
VENV ?= .venv
VENV313 ?= .venv-py313
VERL_VENV ?= .venv-verl
PY := $(VENV)/bin/python
PY313 := $(VENV313)/bin/python
PIP_INSTALL = -m pip install --quiet
# The demo keeps its data in the default GAGAR_DATA_DIR (./var), where the README's commands look.
DEMO_ENV := DEBUG=1
# PostgreSQL: the benches use this database; each test suite one of its own beside it, named
# after it (postgres_rest: pytest creates test_postgres_rest), so that suites can run side by side.
PG_URL ?= postgres://postgres@127.0.0.1:5432/postgres
TEST_ENV := SECRET_KEY=test-only-secret-key
# How many suites `make test` runs at once: five a core, as they mostly wait (on worker processes,
# leases, a browser: see test), and no more than there are. Their waits give up after several
# times what each names (tests/workers/conftest.py), so a loaded machine is slower, not red.
TEST_JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); s=$(words $(TEST_SUITES)); echo $$(( 5 * n < s ? 5 * n : s )))

.PHONY: install install-test install-llm install-verl install-py313 demo test test-fast test-core test-sqlite \
	test-postgres test-postgres-slow test-postgres-browser test-postgres-workers test-postgres-rest test-trainers \
	test-py313 test-py313-core test-py313-sqlite test-py313-workers test-py313-rest lint bench clean

# The app alone, at the versions in requirements/app.txt: all the demo needs.
$(VENV)/.installed: requirements/app.txt pyproject.toml client/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) $(PIP_INSTALL) -r requirements/app.txt -e . -e ./client
	touch $@

# The tests' tools (pytest, playwright, ruff, scipy...): no torch.
$(VENV)/.installed-test: $(VENV)/.installed requirements/test.txt
	$(PY) $(PIP_INSTALL) -r requirements/test.txt -e '.[dev]' -e ./client
	touch $@

# The LLM grader's CPU stack and the real trainers (torch from the wheel on disk, transformers,
# TRL, datasets, xgrammar without the triton it pulls in but does not need on CPU), one torch
# for all of them: for tests and benches.
$(VENV)/.installed-llm: $(VENV)/.installed requirements/llm.txt
	$(PY) $(PIP_INSTALL) -r requirements/llm.txt -e '.[llm]' -e ./client
	$(PY) $(PIP_INSTALL) --no-deps xgrammar==0.2.9
	touch $@

# Python 3.13 for its suites: the app and the tests' tools, without the LLM extra.
$(VENV313)/.installed: requirements/app.txt requirements/test.txt pyproject.toml client/pyproject.toml
	test -n "$(PYTHON313)" || { echo "no Python 3.13: install it (pyenv install 3.13) or set PYTHON313"; exit 1; }
	test -x $(PY313) || $(PYTHON313) -m venv $(VENV313)
	$(PY313) $(PIP_INSTALL) -r requirements/test.txt -e '.[dev]' -e ./client
	touch $@

# verl 0.9.1 pins transformers<5.11 and pulls ray[default], wandb and more, so its tests get a
# venv of their own: verl without its dependencies, plus what its GRPO estimator, batch reward
# manager and reward loop import, and the client (installed without Django, as a trainer installs it).
# OpenRLHF 0.11.2 (it pins deepspeed, flash-attn, vllm...) comes without its dependencies too:
# the reward server's test runs only its reward request code, which needs aiohttp and pylatexenc.
# So do verifiers 0.3.1 (its classic Rubric; 0.4 has no group reward functions) and ART 0.5.18
# (the last for Python 3.11), with what `import verifiers`, `import art` and ART's advantage and
# packing code import: no model clients run, no sandbox, no litellm call.
$(VERL_VENV)/.installed: client/pyproject.toml
	test -x $(VERL_VENV)/bin/python || $(PYTHON) -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/python $(PIP_INSTALL) torch==2.13.0 numpy packaging pyyaml omegaconf codetiming \
		orjson ray==2.60.0 tensordict==0.10.0 transformers==5.10.4 aiohttp==3.14.5 pylatexenc==2.11
	$(VERL_VENV)/bin/python $(PIP_INSTALL) --no-deps verl==0.9.1 openrlhf==0.11.2
	$(VERL_VENV)/bin/python $(PIP_INSTALL) --no-deps verifiers==0.3.1 openpipe-art==0.5.18 openai==3.60.0 \
		anthropic==2.17.0 httpx2==2.16.2 sniffio==1.3.1 opentelemetry-api==1.45.2 jiter==0.19.0 \
		docstring-parser==0.18.0 renderers==0.1.12 prime-pydantic-config==0.4.3 tenacity==9.2.1 \
		litellm==1.82.0 fastuuid==0.14.0 tiktoken==0.14.0 python-dotenv==1.2.4 polars==1.33.1 \
		pydantic-settings==2.16.3 h2==4.4.1 hyperframe==6.1.0 pillow==13.0.0
	$(VERL_VENV)/bin/python $(PIP_INSTALL) -e ./client
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

install-llm: $(VENV)/.installed-llm

install-verl: $(VERL_VENV)/.installed

install-py313: $(VENV313)/.installed

demo: install
	$(DEMO_ENV) PY=$(PY) bash scripts/demo.sh

# Every test. The suites below run side by side (TEST_JOBS at once, each with a data folder and,
# on PostgreSQL, a database of its own); each one's output comes whole when it ends, and any
# failure fails the run. Most of their time is spent waiting (on worker processes, leases, a
# browser, a trainer), so running them all at once keeps two cores busy.
test: install-test install-llm install-verl install-py313
	bash scripts/services.sh
	bash scripts/browser.sh
	bash scripts/sandbox.sh
	@echo "make test: $(TEST_SUITES), $(TEST_JOBS) at a time; each prints when it ends"
	@mkdir -p var && rm -f var/failed-suites && start=$$(date +%s); \
		$(MAKE) --no-print-directory -k -j$(TEST_JOBS) --output-sync=target $(addprefix suite-,$(TEST_SUITES)); \
		status=$$?; echo "make test: $$(( $$(date +%s) - start )) s," \
			"$$([ $$status = 0 ] && echo passed || echo "FAILED: $$(cat var/failed-suites 2>/dev/null)")"; \
		exit $$status

# One suite of `make test`, named in its summary when it fails.
suite-%:
	@$(MAKE) --no-print-directory $* || { printf "%s " $* >> var/failed-suites; exit 1; }

# The Django suite runs on PostgreSQL with Python 3.11 (with the LLM extra) and on SQLite with
# Python 3.13: each database and each Python once. Longest first, so that make starts them first.
TEST_SUITES := test-postgres-rest test-py313-rest test-trainers test-postgres-slow test-postgres-browser \
	test-postgres-workers test-py313-workers test-core test-py313-core lint

# The tests of the pure core and of the sample generator run without Django or its settings.
test-core:
	$(PY) -m pytest -q tests/grading tests/sample

DJANGO_TESTS := --ignore=tests/grading --ignore=tests/sample --ignore=tests/trainers
# The Django suite's two halves that run side by side: the tests of workers, the client and the
# API (real worker processes, mostly waiting), and the rest.
WORKER_TESTS := tests/workers tests/client tests/webapp/api
OTHER_TESTS := $(DJANGO_TESTS) $(addprefix --ignore=,$(WORKER_TESTS))

# The slow tests (worker kills, the chaos test, the agentic worker: mostly waiting out leases
# and a model) and the browser tests (they test pages, which no database changes) run on
# PostgreSQL only; the rest on both databases.
test-sqlite:
	$(TEST_ENV) GAGAR_DATA_DIR=$(CURDIR)/var/test-sqlite $(PY) -m pytest -q -m "not slow and not browser" $(DJANGO_TESTS)

# On PostgreSQL in four parts that can run side by side: the slow tests, the browser tests and
# the two halves of the rest.
test-postgres: test-postgres-slow test-postgres-browser test-postgres-workers test-postgres-rest

test-postgres-slow:
	$(TEST_ENV) DATABASE_URL=$(PG_URL)_slow GAGAR_DATA_DIR=$(CURDIR)/var/test-postgres-slow $(PY) -m pytest -q \
		-m "slow and not browser" $(DJANGO_TESTS)

test-postgres-browser:
	$(TEST_ENV) DATABASE_URL=$(PG_URL)_browser GAGAR_DATA_DIR=$(CURDIR)/var/test-postgres-browser $(PY) -m pytest -q \
		-m browser $(DJANGO_TESTS)

test-postgres-workers:
	$(TEST_ENV) DATABASE_URL=$(PG_URL)_workers GAGAR_DATA_DIR=$(CURDIR)/var/test-postgres-workers $(PY) -m pytest -q \
		-m "not slow and not browser" $(WORKER_TESTS)

test-postgres-rest:
	$(TEST_ENV) DATABASE_URL=$(PG_URL)_rest GAGAR_DATA_DIR=$(CURDIR)/var/test-postgres-rest $(PY) -m pytest -q \
		-m "not slow and not browser" $(OTHER_TESTS)

# The real trainers (TRL in this venv, verl in its own) against the running app: once, on PostgreSQL.
test-trainers: install-verl
	$(TEST_ENV) DATABASE_URL=$(PG_URL)_trainers GAGAR_DATA_DIR=$(CURDIR)/var/test-trainers $(PY) -m pytest -q \
		tests/trainers

# Python 3.13 without the LLM and trainer extras (the CPU torch on disk is for 3.11): the core
# and the SQLite suite; the tests that need torch, transformers or xgrammar skip, saying so.
test-py313: test-py313-core test-py313-sqlite

test-py313-core: install-py313
	$(PY313) -m pytest -q tests/grading tests/sample

test-py313-sqlite: test-py313-workers test-py313-rest

test-py313-workers: install-py313
	$(TEST_ENV) GAGAR_DATA_DIR=$(CURDIR)/var/test-py313-workers $(PY313) -m pytest -q -m "not slow and not browser" \
		$(WORKER_TESTS)

test-py313-rest: install-py313
	$(TEST_ENV) GAGAR_DATA_DIR=$(CURDIR)/var/test-py313-rest $(PY313) -m pytest -q -m "not slow and not browser" \
		$(OTHER_TESTS)

test-fast: install-test install-llm
	bash scripts/services.sh
	bash scripts/sandbox.sh
	$(TEST_ENV) GAGAR_DATA_DIR=$(CURDIR)/var/test-sqlite $(PY) -m pytest -q -m "not browser and not slow" \
		--ignore=tests/trainers

lint: install-test
	$(VENV)/bin/ruff check .

bench: install-test install-llm
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
	rm -rf $(VENV) $(VENV313) $(VERL_VENV) var
