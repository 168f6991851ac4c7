# `make run` and `make test` take a fresh clone all the way: venv, packages, database, then the work.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
# Runs a command with the embedded PostgreSQL and Redis (unless DATABASE_URL / REDIS_URL name real ones) and stops
# the servers it started when the command ends, Ctrl-C included.
WITH_SERVICES := $(PY) -m heteroflow_site.local_services run --
PYTEST_ARGS ?=
# The demo's web port (`make run PORT=8100`): Daphne, the simulated fleet, the CSRF origins and the URLs printed.
PORT ?= 8000

.PHONY: run serve test fuzz install bench soak stop clean-data

install: $(INSTALLED)

$(INSTALLED): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	@# The project itself, editable, for its console script: .venv/bin/hf (the command-line client).
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(INSTALLED)

# The local demo speaks plain HTTP on 127.0.0.1 and keeps a secret key of its own in .data/ (see README, For operators,
# "Production", for a real deployment).
# honcho gives each process a PORT of its own (web the first, `-p`); the fleet reads the web's from HETEROFLOW_WEB_PORT.
RUN_ENV = SECRET_KEY="$$(cat .data/secret_key)" SESSION_COOKIE_SECURE=false CSRF_COOKIE_SECURE=false PORT=$(PORT) \
	HETEROFLOW_WEB_PORT=$(PORT)

run: $(INSTALLED)
	$(PY) -c "from heteroflow_site.configuration import keep_local_secret_key; keep_local_secret_key('.data')"
	@$(PY) -m heteroflow_site.local_services run --tracked -- $(MAKE) --no-print-directory serve

serve: $(INSTALLED)
	$(RUN_ENV) $(PY) manage.py migrate --noinput
	$(RUN_ENV) $(PY) manage.py seed_demo --force
	@echo ""
	@echo "HeteroFlow control plane: http://127.0.0.1:$(PORT)/   (admin: admin / heteroflow-admin; alice / alice-password)"
	@echo "API: http://127.0.0.1:$(PORT)/api/v1/tasks   OpenAPI: http://127.0.0.1:$(PORT)/api/schema/docs/"
	@echo "Health: http://127.0.0.1:$(PORT)/readyz   Ctrl-C stops everything, the embedded PostgreSQL and Redis too."
	@echo "If a process is left over (a killed terminal): make stop"
	@echo ""
	@# Ctrl-C (exit 130) is how a run ends.
	$(RUN_ENV) $(VENV)/bin/honcho start -f Procfile -p $(PORT) || [ $$? -eq 130 ]

# pytest exits 5 when it collected no tests: that is a failure here like any other non-zero exit.
test: $(INSTALLED)
	@command -v chromium >/dev/null || echo "Chromium missing: the browser tests will be skipped (apt-get install chromium)"
	$(WITH_SERVICES) $(PY) -m pytest -n 2 --dist loadfile --create-db $(PYTEST_ARGS)

stop:
	$(PY) -m heteroflow_site.local_services stop

# The schema fuzzer of tests/site/test_api_fuzz.py (every check, allowed and forbidden requests) with many more
# examples per operation than `make test` runs, and the coverage phase's boundary values.
FUZZ_EXAMPLES ?= 200
fuzz: $(INSTALLED)
	HETEROFLOW_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) HETEROFLOW_FUZZ_STATEFUL_EXAMPLES=$(FUZZ_EXAMPLES) \
		HETEROFLOW_FUZZ_COVERAGE=1 \
		$(WITH_SERVICES) $(PY) -m pytest tests/site/test_api_fuzz.py -p no:xdist --create-db -q -s $(PYTEST_ARGS)

# Benchmarks run with DEBUG off (Django keeps every query in memory with it on) and a one-off secret key.
BENCH_ENV = SECRET_KEY="$$($(PY) -c 'import secrets; print(secrets.token_urlsafe(50))')"

bench: $(INSTALLED)
	$(BENCH_ENV) $(WITH_SERVICES) $(PY) manage.py bench_scheduler --nodes 300 --pending 2000
	$(BENCH_ENV) $(WITH_SERVICES) $(PY) manage.py bench_scheduler --nodes 5000 --pending 10000 --instances 1,2

# The whole system under load and faults (docs/soak-test.md); about 10 minutes with these defaults.
SOAK_ARGS ?= --minutes 8 --nodes 24 --tenants 4 --rate 2 --faults all
soak: $(INSTALLED)
	$(BENCH_ENV) $(WITH_SERVICES) $(PY) manage.py soak $(SOAK_ARGS)

clean-data:
	rm -rf .data
