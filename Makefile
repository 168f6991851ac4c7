# `make run` and `make test` take a fresh clone all the way: venv, packages, database, then the work.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: run test install bench clean-data

install: $(INSTALLED)

$(INSTALLED): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $(INSTALLED)

run: $(INSTALLED)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py seed_demo
	@echo ""
	@echo "HeteroFlow control plane: http://127.0.0.1:8000/   (admin: admin / heteroflow-admin)"
	@echo "API: http://127.0.0.1:8000/api/v1/tasks   OpenAPI: http://127.0.0.1:8000/api/schema/docs/"
	@echo ""
	$(VENV)/bin/honcho start -f Procfile

# pytest exits 5 when it collected no tests: that is a failure here like any other non-zero exit.
test: $(INSTALLED)
	$(PY) -m pytest -n 2 --dist loadfile --create-db $(PYTEST_ARGS)

bench: $(INSTALLED)
	$(PY) manage.py bench_scheduler --nodes 300 --pending 2000
	$(PY) manage.py bench_scheduler --nodes 5000 --pending 10000

clean-data:
	rm -rf .data
