# dsx developer tasks. `make demo` and `make test` are the two README commands.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt 2>/dev/null | sha256sum | cut -c1-12)

.PHONY: demo test lint typecheck unit bench control-plane clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(STAMP): $(PY) pyproject.toml
	$(PIP) install --quiet -c constraints.txt -e '.[all,collectives,dev]'
	rm -f $(VENV)/.installed-*; touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/dsx demo

control-plane: $(STAMP)
	bash hack/build-control-plane.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench

typecheck: $(STAMP)
	$(VENV)/bin/mypy

test: $(STAMP) control-plane
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/mypy
	$(PY) -m pytest -p no:cacheprovider

unit: $(STAMP)
	$(PY) -m pytest -p no:cacheprovider -m "not integration"

bench: $(STAMP)
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) build dist .mypy_cache .ruff_cache
