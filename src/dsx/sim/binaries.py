"""Where the control-plane binaries come from: envtest's variables, the dsx cache, or a build.

Order, per binary: `TEST_ASSET_KUBE_APISERVER` / `TEST_ASSET_ETCD` / `TEST_ASSET_KUBECTL`
(the envtest overrides) → `$KUBEBUILDER_ASSETS/<name>` → `<cache>/control-plane/v<k8s>/<name>`.
If any is still missing, `hack/build-control-plane.sh` (in an installed wheel:
`dsx/sim/build-control-plane.sh`, the same file) builds all of them into the cache from
the Go module proxy (about 10 minutes on 2 cores); without the script or Go, a one-line
error says how to provide them. Binaries are never committed.
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from dsx import errors, settings
from dsx.settings import folders

NAMES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kubectl")
ENGINE_NAMES = ("jobset-controller", "trainer-controller-manager")
"""The certification engine's controllers (`dsx sim up --engine`), built by the same script."""
ENV_OVERRIDES = {
    "kube-apiserver": "TEST_ASSET_KUBE_APISERVER",
    "etcd": "TEST_ASSET_ETCD",
    "kubectl": "TEST_ASSET_KUBECTL",
}
MINIMUM_KUBERNETES = (1, 34)
BUILD_SCRIPT = Path("hack") / "build-control-plane.sh"
SHIPPED_SCRIPT = Path(__file__).resolve().parent / "build-control-plane.sh"
"""Where a wheel carries hack/build-control-plane.sh (pyproject.toml: force-include)."""


@dataclass(frozen=True)
class Binaries:
    paths: dict[str, Path]
    kubernetes_version: str
    """As the apiserver reports it, e.g. v1.36.3."""

    def __getitem__(self, name: str) -> Path:
        return self.paths[name]

    def to_dict(self) -> dict[str, str]:
        return {name: str(path) for name, path in sorted(self.paths.items())}


def cache_dir() -> Path:
    return folders.paths().control_plane_cache / f"v{settings.KUBERNETES_VERSION}"


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def locate(env: Mapping[str, str], cache: Path) -> tuple[dict[str, Path], list[str]]:
    """(found paths, missing names) by the resolution order, without building anything."""
    found: dict[str, Path] = {}
    assets = env.get("KUBEBUILDER_ASSETS")
    for name in NAMES:
        override = ENV_OVERRIDES.get(name)
        if override and env.get(override):
            path = Path(env[override])
            if not _executable(path):
                raise errors.BadInputError(f"{override}={path}: not an executable file")
            found[name] = path
            continue
        candidates = ([Path(assets) / name] if assets else []) + [cache / name]
        for candidate in candidates:
            if _executable(candidate):
                found[name] = candidate
                break
    return found, [n for n in NAMES if n not in found]


def build_script() -> Path | None:
    """The build script: shipped in the installed package, else hack/ of this checkout or the working directory."""
    if SHIPPED_SCRIPT.is_file():
        return SHIPPED_SCRIPT
    package_root = Path(__file__).resolve().parents[3]
    for base in (package_root, Path.cwd()):
        script = base / BUILD_SCRIPT
        if script.is_file():
            return script
    return None


def _how_to_provide(missing: list[str], cache: Path) -> str:
    script = build_script()
    return (
        f"control-plane binaries missing: {', '.join(missing)}; set KUBEBUILDER_ASSETS to a folder holding "
        f"{', '.join(NAMES)}, or put them in {cache}, or run bash {script or BUILD_SCRIPT} "
        "(needs Go >= 1.26 and the Go module proxy)"
    )


BUILD_STEP = re.compile(r"\[build-control-plane\] step \d+/\d+ (?P<name>[a-z-]+) ")
BUILD_TAIL_LINES = 15


def build_log(cache: Path) -> Path:
    """Where the last build's whole output is kept (beside the binaries' folder, so it survives a retry)."""
    return cache.parent / f"build-{cache.name}.log"


def build(cache: Path, *, progress: Callable[[str], None]) -> None:
    """Run the build script into `cache`, relaying its per-binary progress lines.

    A failure is the build's own error — which binary, its exit status, the log's last lines
    and the log's path — never a readiness timeout of what it did not build.
    """
    script = build_script()
    if script is None:
        raise errors.NotFoundError(_how_to_provide(list(NAMES), cache) + " — the script is not in this installation")
    if shutil.which("go") is None:
        raise errors.NotFoundError(_how_to_provide(list(NAMES), cache) + " — no `go` on PATH to build them")
    progress(
        f"building control-plane binaries into {cache} with {script} (first run only; about 10 minutes on 2 cores)"
    )
    env = {
        **os.environ,
        "K8S_VERSION": settings.KUBERNETES_VERSION,
        "ETCD_VERSION": settings.ETCD_VERSION,
        "KWOK_VERSION": settings.KWOK_VERSION,
        "JOBSET_VERSION": settings.JOBSET_VERSION,
        "TRAINER_VERSION": settings.TRAINER_VERSION,
    }
    log = build_log(cache)
    log.parent.mkdir(parents=True, exist_ok=True)
    tail: collections.deque[str] = collections.deque(maxlen=BUILD_TAIL_LINES)
    building = "Go modules"
    with open(log, "w", encoding="utf-8") as kept:
        process = subprocess.Popen(
            ["bash", str(script), str(cache)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        assert process.stdout is not None
        with process:
            for line in process.stdout:
                kept.write(line)
                line = line.rstrip()
                if not line:
                    continue
                tail.append(line)
                if line.startswith("[build-control-plane]"):
                    step = BUILD_STEP.match(line)
                    if step:
                        building = step.group("name")
                    progress(line.removeprefix("[build-control-plane] "))
    if process.returncode != 0:
        raise errors.UnavailableError(
            f"control-plane build failed while building {building} (exit status {process.returncode}); "
            f"log {log}, last lines: {' | '.join(tail)}"
        )


@dataclass(frozen=True)
class Engine:
    """The certification engine's controllers and the manifests their module sources ship."""

    jobset: Path
    trainer: Path
    jobset_crds: Path
    jobset_webhooks: Path
    trainer_crds: Path
    trainer_webhooks: Path


def engine_files(cache: Path) -> Engine:
    jobset = cache / "engine" / f"jobset-v{settings.JOBSET_VERSION}"
    trainer = cache / "engine" / f"trainer-v{settings.TRAINER_VERSION}"
    return Engine(
        jobset=cache / "jobset-controller",
        trainer=cache / "trainer-controller-manager",
        jobset_crds=jobset / "crds.yaml",
        jobset_webhooks=jobset / "webhooks.yaml",
        trainer_crds=trainer / "crds.yaml",
        trainer_webhooks=trainer / "webhooks.yaml",
    )


def resolve_engine(
    *, cache: Path | None = None, allow_build: bool = True, progress: Callable[[str], None] = lambda _: None
) -> Engine:
    """JobSet's and Trainer's controllers (built into the control-plane cache with the rest when missing)."""
    cache = cache_dir() if cache is None else cache
    found = engine_files(cache)
    wanted = [found.jobset, found.trainer, found.jobset_crds, found.trainer_crds]
    if not all(p.is_file() for p in wanted):
        if not allow_build:
            raise errors.NotFoundError(
                f"certification engine missing in {cache} ({', '.join(ENGINE_NAMES)} and their CRDs); "
                f"run bash {build_script() or BUILD_SCRIPT}"
            )
        build(cache, progress=progress)
    if not all(p.is_file() for p in wanted):
        raise errors.NotFoundError(f"the build left no {', '.join(str(p) for p in wanted if not p.is_file())}")
    return found


def kubernetes_version(apiserver: Path) -> str:
    """The version the apiserver binary reports; must be ≥ 1.34."""
    try:
        out = subprocess.run(
            [str(apiserver), "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise errors.BadInputError(f"{apiserver}: cannot run --version: {exc}") from exc
    match = re.search(r"v(\d+)\.(\d+)\.(\d+)\S*", out)
    if not match:
        raise errors.BadInputError(f"{apiserver}: --version printed no Kubernetes version ({out.strip()[:80]!r})")
    if (int(match.group(1)), int(match.group(2))) < MINIMUM_KUBERNETES:
        raise errors.BadInputError(
            f"{apiserver}: Kubernetes {match.group(0)} is too old; dsx sim needs >= "
            f"{MINIMUM_KUBERNETES[0]}.{MINIMUM_KUBERNETES[1]}"
        )
    return match.group(0)


def resolve(
    *,
    env: Mapping[str, str] | None = None,
    cache: Path | None = None,
    allow_build: bool = True,
    progress: Callable[[str], None] = lambda _: None,
) -> Binaries:
    env = os.environ if env is None else env
    cache = cache_dir() if cache is None else cache
    found, missing = locate(env, cache)
    if missing:
        if not allow_build:
            raise errors.NotFoundError(_how_to_provide(missing, cache))
        build(cache, progress=progress)
        found, missing = locate(env, cache)
        if missing:
            raise errors.NotFoundError(_how_to_provide(missing, cache))
    version = kubernetes_version(found["kube-apiserver"])
    folders = sorted({str(path.parent) for path in found.values()})
    progress(f"control-plane binaries (Kubernetes {version}) from {', '.join(folders)}")
    return Binaries(found, version)
