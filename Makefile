# dsx developer tasks. `make demo` and `make test` are the two README commands.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
LOCK := requirements.lock
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml $(LOCK) 2>/dev/null | sha256sum | cut -c1-12)
SOURCES := src tests bench hack

.PHONY: demo test install lock lint typecheck deps unit fuzz bench control-plane screenshots dist clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# Every package comes from the lock, pinned and hash-checked (pip and the build backend too);
# dsx itself is installed editable without build isolation, so nothing unpinned is fetched.
$(STAMP): $(PY) pyproject.toml $(LOCK)
	$(PIP) install --quiet --disable-pip-version-check --require-hashes --no-deps -r $(LOCK)
	$(PIP) install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(PIP) check
	rm -f $(VENV)/.installed-*; touch $(STAMP)

install: $(STAMP)

# Regenerate the lock: every direct and transitive dependency of .[all,collectives,dev] (plus pip and
# hatchling) for CPython 3.11 on linux x86_64, exact versions with hashes. Commit the result.
lock: $(PY)
	$(PIP) install --quiet --disable-pip-version-check --require-hashes --no-deps -r $(LOCK)  # brings uv
	$(VENV)/bin/uv pip compile pyproject.toml hack/lock-tools.in --extra all --extra collectives --extra dev \
	  --generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	  --quiet -o $(LOCK)

demo: $(STAMP)
	$(VENV)/bin/dsx demo

control-plane: $(STAMP)
	bash hack/build-control-plane.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check $(SOURCES)
	$(VENV)/bin/ruff format --check $(SOURCES)

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# every third-party import declared in pyproject.toml, every declared package used
deps: $(STAMP)
	$(VENV)/bin/deptry src tests bench hack

test: lint typecheck deps control-plane
	$(PY) -m pytest -p no:cacheprovider

unit: $(STAMP)
	$(PY) -m pytest -p no:cacheprovider -m "not integration"

# 20,000+ hostile cases per document kind and parser (tests/fuzz): no exit 8, traceback, hang or
# stray write; prints the table. DSX_FUZZ_CASES and DSX_FUZZ_JOBS change the size and the processes.
fuzz: $(STAMP)
	$(PY) -m pytest -p no:cacheprovider -m fuzz tests/fuzz -s -q

bench: $(STAMP)
	$(PY) bench/run.py

# A wheel in dist/ (hatchling from the lock, no build isolation: nothing unpinned is fetched); it carries
# the catalog data and hack/build-control-plane.sh (as dsx/sim/build-control-plane.sh)
dist: $(STAMP)
	rm -rf dist
	$(PIP) wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation --wheel-dir dist .
	@ls dist/*.whl

# The certification report as a browser draws it: docs/images/certification-report.png (needs Chromium)
screenshots: $(STAMP)
	DSX=$(VENV)/bin/dsx bash hack/screenshots.sh

clean:
	rm -rf $(VENV) build dist .mypy_cache .ruff_cache
