# The two commands the README promises: `make demo` and `make test`; `make check` is the fast loop.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
UV := $(shell command -v uv 2>/dev/null)
CHROMIUM := /usr/bin/chromium

.PHONY: setup demo up down e2e test check faults lint lock bench clean image

# the editable install leaves the project's modules uncompiled (and uv its requirements, unless
# told): where PYTHONDONTWRITEBYTECODE is set, every process (each `tokokita-etl run`, each
# Airflow task) would compile them again
$(BIN)/tokokita-etl: requirements.txt requirements-runtime.txt constraints.txt pyproject.toml
ifdef UV
	uv venv -q --allow-existing -p $(PY) $(VENV)
	uv pip install -q --compile-bytecode -p $(BIN)/python -r requirements.txt -c constraints.txt
	uv pip install -q -p $(BIN)/python --no-deps -e .
else
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q -r requirements.txt -c constraints.txt
	$(BIN)/pip install -q --no-deps -e .
endif
	$(BIN)/python -m compileall -q include plugins dags
	touch $@

setup: $(BIN)/tokokita-etl

# the sample week through a running Airflow on SQLite (airflow_home/, no Docker), then stop
demo: setup
	$(BIN)/python -m stack demo

# api-server, scheduler, dag-processor, triggerer on airflow_home/: UI on :8080 (or next free)
up: setup
	$(BIN)/python -m stack up

down:
	@if [ -x $(BIN)/python ]; then $(BIN)/python -m stack down; fi

# the docker-compose stack's image (Dockerfile: the runtime requirements only), as the compose
# file names it; compose v2 (`docker compose`) or v1 (`docker-compose`), whichever is installed
image:
	@if docker compose version >/dev/null 2>&1; then docker compose build; \
	else docker-compose build; fi

# The tests' PostgreSQL is TOKOKITA_TEST_PG_URL's server (default 127.0.0.1:5432, database
# tokokita_test, created when missing), or a throw-away server for the run when nothing
# listens there (tests/pgserver.py, started by tests/conftest.py).

# only the end-to-end test on a running Airflow
e2e: setup
	$(BIN)/python -m pytest tests/e2e $(PYTEST_ARGS)

# the whole suite in one run on TEST_WORKERS pytest-xdist workers (default 3), a test module at
# a time each, longest first (tests/conftest.py): the real containers and the modules that start
# an Airflow stack (about 1.5 GB each; a stack keeps about two thirds of a core busy) begin at
# once, and the modules that start nothing fill the time their stacks spend waiting; with
# PYTEST_ARGS a run that selects no test passes (pytest's exit 5)
TEST_WORKERS ?= 3
test: setup $(CHROMIUM)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
	  $(PYTEST_ARGS) $(if $(PYTEST_ARGS),|| [ $$? -eq 5 ])

# the fast loop: lint and every test that starts no Airflow stack and no browser, and not the
# fault suite, on two pytest-xdist workers, a test module at a time each (each worker has an
# Airflow home of its own, tests/airflow_support.py); docs/running.md; `make test` runs
# these and everything else
CHECK_MARKERS := not e2e and not browser and not faults
CHECK_WORKERS ?= 2
check: setup
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n $(CHECK_WORKERS) --dist loadfile -m "$(CHECK_MARKERS)" $(PYTEST_ARGS)

# Debian's Chromium for the browser tests (tests/browser.py); Playwright's download is not used
$(CHROMIUM):
	@if [ "$$(id -u)" != 0 ]; then \
	  echo "$@ is missing: install Debian's chromium package (sudo apt-get install chromium)" >&2; \
	  exit 1; \
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null

lint: setup
	$(BIN)/ruff check .

lock:
	uv pip compile -q -p $(PY) requirements.txt -o constraints.txt

bench: setup
	$(BIN)/python -m bench --all

# the long fault suite: 10,000 fuzzed partitions, kills, concurrent dates, warehouse outages
# and freezes, quarantine file vs table; then the scale-out profile's faults on a running
# stack, every case (`make test` runs the quick modes; docs/running.md)
faults: setup
	TOKOKITA_FAULTS=long $(BIN)/python -m pytest tests/faults -q -p no:cacheprovider $(PYTEST_ARGS)
	TOKOKITA_FAULTS=long $(BIN)/python -m pytest tests/e2e/test_scale_out_faults.py -q \
	  -p no:cacheprovider $(PYTEST_ARGS)

clean: down
	rm -rf data/warehouse data/gold data/quarantine data/state data/staging airflow_home
