# Token Factory Portal. `make demo` and `make test` are all a fresh machine needs.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST := $(BIN)/python -m pytest
# Python may keep its bytecode (in __pycache__/, ignored by git) even where the environment
# says not to: otherwise every pytest process rewrites the asserts of all 500 test modules
# afresh (collection 13 s of CPU instead of 6 s, in each worker of each half of the suite).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install demo serve test test-postgres test-sqlite lint format bench soak clean

install: $(STAMP)

$(STAMP): requirements.lock
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.lock
	@touch $@

# The embedded default: SQLite in var/, a Celery worker and beat on a broker in
# var/portal.sqlite3-broker/ (files beside the database, no server), nothing to install. `make demo PORT=8001` picks the port.
PORT ?= 8000
# The demo's webhook receiver (its factory endpoint points there: portal.demo).
RECEIVER_PORT ?= 8009
MIGRATE = $(BIN)/python manage.py migrate --noinput

demo: install
	@mkdir -p var
	@# An embedded database from before the migrations were squashed cannot migrate: it is
	@# demo data only, so it is moved aside and the demo loads afresh.
	$(MIGRATE) || { [ -f var/portal.sqlite3 ] && \
	  mv var/portal.sqlite3 var/portal.sqlite3.old && \
	  echo "var/portal.sqlite3 predates the current migrations: moved to var/portal.sqlite3.old" && \
	  $(MIGRATE); }
	RECEIVER_PORT=$(RECEIVER_PORT) $(BIN)/python manage.py demo
	FACTORY_NAME="$${FACTORY_NAME:-Token Factory}" \
	FACTORY_ADDRESS="$${FACTORY_ADDRESS:-1 Foundry Way\\nReno, NV 89501\\nUnited States}" \
	$(BIN)/python manage.py serve --port $(PORT) --receiver $(RECEIVER_PORT)

# The embedded default on the database at hand (no demo loaded): web server, worker and beat.
serve: install
	@mkdir -p var
	$(MIGRATE)
	$(BIN)/python manage.py serve --port $(PORT)

# The whole suite on a throwaway PostgreSQL and Redis (two pytest-xdist workers, one per core;
# the fault tests stay together on one worker), then the both_backends tests on SQLite. On a
# new machine three installs run at once, each mostly downloading: the system packages
# (apt-get), the virtualenv (pip, then the import contracts and types are checked), and the
# FinOps Foundation's focus-validator, which checks the FOCUS export from a test-only
# environment of its own (it needs Python >= 3.12): scripts/focus-validator.sh installs
# scripts/focus-validator.lock once in ~/.cache (2 to 5 min on a machine that never did, 45 s
# of it CPU), then answers at once; a changed lock installs afresh.
test:
	@packages_log=$$(mktemp) && validator_path=$$(mktemp) && \
	  { scripts/ensure-system-packages.sh > $$packages_log 2>&1 & } && packages=$$! && \
	  { scripts/focus-validator.sh > $$validator_path & } && validator=$$! && \
	  $(MAKE) --no-print-directory install && $(BIN)/lint-imports && $(BIN)/mypy && \
	  { wait $$packages; status=$$?; cat $$packages_log; rm -f $$packages_log; [ $$status -eq 0 ]; } && \
	  wait $$validator && export FOCUS_VALIDATOR=$$(cat $$validator_path) && rm -f $$validator_path && \
	  scripts/with-services.sh $(PYTEST) -p no:cacheprovider -n 2 --dist loadgroup --durations=25
	$(MAKE) --no-print-directory test-sqlite

test-sqlite: install
	DATABASE_URL=sqlite:///:memory: $(PYTEST) -p no:cacheprovider -n 2 -m both_backends -q

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/python manage.py grafana_dashboards --check

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Performance goals, each an interleaved A/B ratio (docs/performance.md); figures in var/bench/.
# BENCH_QUICK=1 for 100k/1M events instead of 1M/10M; BENCH_EVENTS=small,large to choose.
bench: install
	scripts/ensure-system-packages.sh
	scripts/bench.sh

# A soak test runs for minutes (Schemathesis: 1,000 cases of an operation, 5 to 10 min on a
# busy 2-core machine), beyond the suite's 300 s a test: each may take an hour. The billing
# property tests named draw their full number of examples here (`make test` fewer).
SOAK_PROPERTIES = tests/billing/test_rated_usage.py tests/billing/test_ledger_reconciliation.py \
	tests/billing/test_ledger.py
soak: install
	scripts/ensure-system-packages.sh
	scripts/with-services.sh env RELIABILITY_SOAK=1 $(PYTEST) -p no:cacheprovider -q --timeout=3600 tests/reliability tests/e2e $(SOAK_PROPERTIES)

clean:
	rm -rf $(VENV) var .pytest_cache
