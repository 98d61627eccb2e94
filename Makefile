# dsx developer tasks. `make demo` and `make test` are the two README commands.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
LOCK := requirements.lock
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml $(LOCK) 2>/dev/null | sha256sum | cut -c1-12)
SOURCES := src tests bench hack hatch_build.py
# the shipped catalog compiled into the package (hatch_build.py; `pip install -e .` writes it too)
COMPILED := src/dsx/catalog/compiled.json
COMPILED_FROM := hatch_build.py $(shell find src/dsx/catalog/overlays src/dsx/catalog/components src/dsx/recipes src/dsx/model -type f -name '*.py' -o -type f -name '*.yaml' 2>/dev/null)

.PHONY: demo test install lock lint typecheck deps imports unit fuzz bench control-plane screenshots dist image image-dsx \
  image-workload image-base clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# Every package comes from the lock, pinned and hash-checked (pip and the build backend too);
# dsx itself is installed editable without build isolation, so nothing unpinned is fetched.
$(STAMP): $(PY) pyproject.toml $(LOCK)
	$(PIP) install --quiet --disable-pip-version-check --require-hashes --no-deps -r $(LOCK)
	$(PIP) install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(PIP) check
	rm -f $(VENV)/.installed-*; touch $(STAMP)

# again when the catalog or the code that compiles it changed after the install
$(COMPILED): $(STAMP) $(COMPILED_FROM)
	$(PY) hatch_build.py

install: $(STAMP) $(COMPILED)

# Regenerate the lock: every direct and transitive dependency of .[all,collectives,dev] (plus pip and
# hatchling) for CPython 3.11 on linux x86_64, exact versions with hashes. Commit the result.
lock: $(PY)
	$(PIP) install --quiet --disable-pip-version-check --require-hashes --no-deps -r $(LOCK)  # brings uv
	$(VENV)/bin/uv pip compile pyproject.toml hack/lock-tools.in --extra all --extra collectives --extra dev \
	  --generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	  --quiet -o $(LOCK)

demo: $(STAMP) $(COMPILED)
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

# the import rules of docs/architecture.md (.importlinter): tiers, independent domains, confined clients
imports: $(STAMP)
	$(VENV)/bin/lint-imports --no-cache

test: lint typecheck deps imports control-plane $(COMPILED)
	$(PY) -m pytest -p no:cacheprovider

unit: $(STAMP) $(COMPILED)
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

# The images, tagged from dsx.__version__ (src/dsx/images.py names the same ones; a unit test keeps
# the Containerfiles, the chart and the manifests in step): $(IMAGE_REGISTRY)/dsx:<version> (sentinel,
# monitor, snapshot agent: dsx[all]) and $(IMAGE_REGISTRY)/dsx-workload:<version> (certify worker:
# dsx[all,collectives], several GB of torch and CUDA). Never part of `make test`. The base is Debian
# bookworm made with mmdebstrap (python3, python3-venv, ca-certificates, and systemd for the
# journalctl the kernel-log monitor runs) from Debian's archive as it
# was on DEBIAN_SNAPSHOT (snapshot.debian.org), so no registry is pulled from and the same commit
# gets the same packages; DEBIAN_MIRROR=http://deb.debian.org/debian takes today's archive instead.
# BASE_IMAGE=docker.io/library/python:3.11-slim@sha256:<digest> uses a pulled base instead. Every
# FROM names its base by digest (the one just built or pulled), never by a tag that can move. Push
# with `$(IMAGE_TOOL) push $(IMAGE_REGISTRY)/dsx:<version>` (docs/container-images.md). IMAGE_TOOL:
# buildah or podman.
VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' src/dsx/__init__.py)
IMAGE_REGISTRY ?= ghcr.io/dsx-run
IMAGE_TOOL ?= buildah
BASE_IMAGE ?= localhost/dsx-base:bookworm
DEBIAN_SNAPSHOT ?= 20261201T000000Z
DEBIAN_MIRROR ?= http://snapshot.debian.org/archive/debian/$(DEBIAN_SNAPSHOT)
DEBIAN_SECURITY_MIRROR ?= http://snapshot.debian.org/archive/debian-security/$(DEBIAN_SNAPSHOT)
# `name@sha256:…` of a local image: what a FROM names
IMAGE_DIGEST = $(1)@$$(if [ "$(IMAGE_TOOL)" = podman ]; then podman image inspect --format '{{.Digest}}' $(1); \
  else buildah inspect --type image --format '{{.FromImageDigest}}' $(1); fi)
# the wheels an image installs, fetched here (where pip's index, proxy and CA are configured) and
# bind-mounted into the build, which then needs no network
IMAGE_WHEELS := $(PIP) download --quiet --disable-pip-version-check --no-deps --require-hashes --only-binary=:all:
SOURCE_DATE_EPOCH := $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_BUILD := $(IMAGE_TOOL) build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(shell git rev-parse --short=12 HEAD 2>/dev/null) \
  --timestamp $(SOURCE_DATE_EPOCH) --build-arg SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH)

# Debian bookworm's Python 3.11 and nothing else (a file target: made once, reused)
build/image/rootfs.tar:
	mkdir -p build/image
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) mmdebstrap --variant=minbase --format=tar \
	  --aptopt='Acquire::Check-Valid-Until "false"' --include=python3,python3-venv,ca-certificates,systemd bookworm $@.tmp \
	  "deb $(DEBIAN_MIRROR) bookworm main" "deb $(DEBIAN_SECURITY_MIRROR) bookworm-security main"
	mv $@.tmp $@

image-base:
	@if [ "$(BASE_IMAGE)" = localhost/dsx-base:bookworm ] && ! $(IMAGE_TOOL) inspect --type image $(BASE_IMAGE) >/dev/null 2>&1; then \
	  $(MAKE) build/image/rootfs.tar && \
	  if [ "$(IMAGE_TOOL)" = podman ]; then podman import build/image/rootfs.tar $(BASE_IMAGE); \
	  else c=$$(buildah from scratch) && buildah add $$c build/image/rootfs.tar / && buildah commit --rm $$c $(BASE_IMAGE); fi; \
	fi

image: image-dsx image-workload

image-dsx: dist image-base
	mkdir -p build/image
	$(PY) hack/image-requirements.py all > build/image/dsx.txt
	$(IMAGE_WHEELS) -d build/image/wheels-dsx -r build/image/dsx.txt
	base="$(BASE_IMAGE)"; case "$$base" in *@sha256:*) ;; *) base="$(call IMAGE_DIGEST,$(BASE_IMAGE))";; esac; \
	$(IMAGE_BUILD) --build-arg BASE_IMAGE="$$base" -f deploy/images/dsx/Containerfile -t $(IMAGE_REGISTRY)/dsx:$(VERSION) .

image-workload: image-dsx
	$(PY) hack/image-requirements.py all,collectives --minus all > build/image/dsx-workload.txt
	$(IMAGE_WHEELS) -d build/image/wheels-workload -r build/image/dsx-workload.txt
	$(IMAGE_BUILD) --build-arg DSX_IMAGE="$(call IMAGE_DIGEST,$(IMAGE_REGISTRY)/dsx:$(VERSION))" \
	  -f deploy/images/dsx-workload/Containerfile \
	  -t $(IMAGE_REGISTRY)/dsx-workload:$(VERSION) .
	@$(IMAGE_TOOL) images $(IMAGE_REGISTRY)/dsx:$(VERSION) && $(IMAGE_TOOL) images $(IMAGE_REGISTRY)/dsx-workload:$(VERSION)

# The certification report as a browser draws it: docs/images/certification-report.png (needs Chromium)
screenshots: $(STAMP)
	DSX=$(VENV)/bin/dsx bash hack/screenshots.sh

clean:
	rm -rf $(VENV) build dist .mypy_cache .ruff_cache
