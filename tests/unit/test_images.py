"""Area of concern: the images dsx ships carry one name and one tag everywhere. dsx.images names
them (tag = dsx.__version__); the Containerfiles, `make image`, the chart, the rendered manifests,
the catalog and the docs must agree with it, and the dsx image must stay free of torch. Nothing
here builds an image (`make image` is never part of `make test`)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from dsx import __version__, images

REPO = Path(__file__).resolve().parents[2]
CONTAINERFILES = {
    "dsx": REPO / "deploy/images/dsx/Containerfile",
    "dsx-workload": REPO / "deploy/images/dsx-workload/Containerfile",
}
IMAGE_REFERENCE = re.compile(r"ghcr\.io/dsx-run/([a-z0-9-]+)(?::([A-Za-z0-9_.<>-]+))?")


def _instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Containerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", path.read_text(encoding="utf-8"))
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def _args(path: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for instruction, rest in _instructions(path):
        if instruction == "ARG" and "=" in rest:
            name, default = rest.split("=", 1)
            found.setdefault(name, default)
    return found


def _joined(path: Path, instructions: set[str]) -> str:
    return " ".join(rest for instruction, rest in _instructions(path) if instruction in instructions)


def _expand(value: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], value)


def _image_requirements() -> ModuleType:
    spec = importlib.util.spec_from_file_location("image_requirements", REPO / "hack/image-requirements.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_names_come_from_the_version() -> None:
    assert f"ghcr.io/dsx-run/dsx:{__version__}" == images.DSX_IMAGE
    assert f"ghcr.io/dsx-run/dsx-workload:{__version__}" == images.WORKLOAD_IMAGE


@pytest.mark.parametrize("name", sorted(CONTAINERFILES))
def test_containerfile_version_is_the_package_version(name: str) -> None:
    path = CONTAINERFILES[name]
    args = _args(path)
    assert args["VERSION"] == __version__, f"{path}: ARG VERSION={args['VERSION']}, dsx.__version__ is {__version__}"
    labels = _joined(path, {"LABEL"})
    assert f'org.opencontainers.image.title="{name}"' in labels
    assert 'org.opencontainers.image.version="${VERSION}"' in labels
    assert _instructions(path)[-2:] == [("ENTRYPOINT", '["dsx"]'), ("CMD", '["--help"]')]
    # the last commit's time reaches pip, which then writes .pyc files without install-time mtimes
    assert ("ARG", "SOURCE_DATE_EPOCH") in _instructions(path)


def test_workload_image_is_built_on_the_dsx_image_of_the_same_version() -> None:
    path = CONTAINERFILES["dsx-workload"]
    args = _args(path)
    base = next(rest for instruction, rest in _instructions(path) if instruction == "FROM")
    assert _expand(_expand(base, args), args) == images.DSX_IMAGE


def test_containerfiles_install_only_hash_checked_pins_and_the_versioned_wheel() -> None:
    dsx = _joined(CONTAINERFILES["dsx"], {"COPY", "RUN"})
    assert "dist/dsx-${VERSION}-py3-none-any.whl" in dsx
    assert "--require-hashes" in dsx and "-r /opt/dsx-requirements/dsx.txt" in dsx
    workload = _joined(CONTAINERFILES["dsx-workload"], {"RUN"})
    assert "--require-hashes" in workload and "-r /opt/dsx-requirements/dsx-workload.txt" in workload
    for path in CONTAINERFILES.values():
        for instruction, rest in _instructions(path):
            if instruction == "RUN" and "pip install" in rest:
                for command in [c for c in rest.split("&&") if "pip install" in c]:
                    # no resolver and no index: the build installs exactly the wheels make image fetched
                    assert "--no-deps" in command and "--no-index" in command, f"{path}: {command.strip()}"


def test_make_image_tags_from_the_version_and_stays_out_of_make_test() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    registry = re.search(r"^IMAGE_REGISTRY \?= (\S+)$", makefile, re.MULTILINE)
    assert registry is not None and registry.group(1) == images.REGISTRY
    assert "VERSION := $(shell sed -n 's/^__version__ = " in makefile and "src/dsx/__init__.py" in makefile
    assert "--timestamp $(SOURCE_DATE_EPOCH) --build-arg SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH)" in makefile
    assert "-t $(IMAGE_REGISTRY)/dsx:$(VERSION)" in makefile
    assert "-t $(IMAGE_REGISTRY)/dsx-workload:$(VERSION)" in makefile
    test_rule = re.search(r"^test:(.*)$", makefile, re.MULTILINE)
    assert test_rule is not None and "image" not in test_rule.group(1)


def test_chart_names_the_dsx_image_at_the_package_version() -> None:
    chart = REPO / "deploy/helm/dsx-sentinel"
    values = yaml.safe_load((chart / "values.yaml").read_text(encoding="utf-8"))
    assert values["image"]["repository"] == images.DSX_REPOSITORY
    assert values["image"]["tag"] == ""  # the appVersion
    assert yaml.safe_load((chart / "Chart.yaml").read_text(encoding="utf-8"))["appVersion"] == __version__


def test_every_reference_in_manifests_catalog_and_docs_agrees() -> None:
    roots = [REPO / "deploy", REPO / "src/dsx/catalog", REPO / "docs", REPO / "README.md"]
    files = [p for root in roots for p in ([root] if root.is_file() else sorted(root.rglob("*"))) if p.is_file()]
    seen = 0
    for path in files:
        if path.suffix not in {".yaml", ".yml", ".md", ".tpl", ".txt"}:
            continue
        for match in IMAGE_REFERENCE.finditer(path.read_text(encoding="utf-8")):
            name, tag = match.groups()
            where = f"{path.relative_to(REPO)}: {match.group(0)}"
            assert name in {"dsx", "dsx-workload"}, where
            assert tag in {None, __version__, "<version>"}, f"{where} (dsx.__version__ is {__version__})"
            seen += 1
    assert seen > 10  # the sentinel, monitor and snapshot manifests, the catalog, the docs


def test_dsx_image_requirements_are_the_lock_without_torch() -> None:
    module = _image_requirements()
    dsx = module.closure({"all"})
    workload = module.closure({"all", "collectives"}) - dsx
    assert {"lightkube", "psycopg", "psycopg-binary", "fastapi", "nvidia-ml-py", "cel-expr-python"} <= dsx
    assert "torch" not in dsx and "numpy" not in dsx
    assert {"torch", "numpy"} <= workload
    entries = module.lock_entries(dsx)
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==", entries, re.MULTILINE)
    assert len(pins) == len(dsx)
    for block in re.split(r"\n(?=[A-Za-z0-9])", entries.strip()):
        assert "--hash=sha256:" in block, block.splitlines()[0]
