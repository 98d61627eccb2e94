"""Bundle render, sign and verify times.

Render: the largest shipped recipe (most components among the candidate leaf criteria) for
each of the five deployers, in memory. Sign and verify: a bundle of 1,000 files (a Manifest
component with ~990 manifests plus the usual files), both in memory and through a directory
on disk, Ed25519 and ECDSA P-256. Medians of REPEAT runs, in milliseconds.

Run: .venv/bin/python bench/bench_bundles.py   (or `make bench`)
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from dsx import file_tree as tree
from dsx.bundles import render
from dsx.bundles.options import Deployer
from dsx.files import signing as signing_files
from dsx.model import criteria as criteria_model
from dsx.model.recipe import Recipe
from dsx.recipes import resolve
from dsx.signing import attest, verify
from dsx.signing.signer import Algorithm
from dsx.signing.verdict import TrustLevel

REPEAT = 7
TARGET_FILES = 1000
CANDIDATES = [
    {"service": "eks", "accelerator": "h100", "os": "ubuntu", "intent": "training", "platform": "kubeflow"},
    {"service": "eks", "accelerator": "gb200", "os": "ubuntu", "intent": "inference", "platform": "dynamo"},
    {"service": "eks", "accelerator": "h100", "os": "ubuntu", "intent": "inference", "platform": "dynamo"},
    {"service": "aks", "accelerator": "h100", "os": "ubuntu", "intent": "training", "platform": "kubeflow"},
    {"service": "gke", "accelerator": "h100", "os": "cos", "intent": "training", "platform": "kubeflow"},
]


def median_ms(action: Callable[[], object]) -> float:
    samples = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        action()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def largest_recipe() -> Recipe:
    recipes = [resolve.resolve(criteria_model.parse_criteria(c, source="bench")) for c in CANDIDATES]
    return max(recipes, key=lambda r: (len(r.component_refs), len(str(r.to_dict()))))


def thousand_file_recipe(base: Recipe) -> Recipe:
    document = base.to_dict()
    rendered = render.render(base, Deployer.HELM)
    room = TARGET_FILES - len(rendered.files) - 1  # the component README joins too
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{n}\ndata:\n  key: '{n}'\n"
    document["componentRefs"].append(
        {
            "name": "bulk-manifests",
            "type": "Manifest",
            "namespace": "bulk",
            "version": "v1",
            "manifests": {f"cm-{n:04d}.yaml": manifest.format(n=n) for n in range(room)},
        }
    )
    document["deploymentOrder"].append("bulk-manifests")
    return Recipe.from_dict(document, source="bench")


def main() -> None:
    print("command: .venv/bin/python bench/bench_bundles.py")
    recipe = largest_recipe()
    print(f"largest recipe: {recipe.metadata.name} ({len(recipe.component_refs)} components)")
    for deployer in Deployer:
        files = len(render.render(recipe, deployer).files)
        took = median_ms(lambda d=deployer: render.render(recipe, d))
        print(f"  render {deployer.value:<12} {took:8.2f} ms  ({files} files)")

    big = thousand_file_recipe(recipe)
    bundle = render.render(big, Deployer.HELM)
    print(f"sign/verify bundle of {len(bundle.files)} files (median of {REPEAT})")
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        for algorithm in Algorithm:
            paths = signing_files.write_key_pair(base / algorithm.value, algorithm)
            signer = signing_files.load_signer(paths.private)
            trusted = [signing_files.load_public_key(paths.public)]
            signed = attest.attest_bundle(bundle, signer)
            assert verify.verify_bundle_tree(signed, trusted, target="bench").level is TrustLevel.VERIFIED
            sign_memory = median_ms(lambda s=signer: attest.attest_bundle(bundle, s))
            verify_memory = median_ms(lambda t=trusted, b=signed: verify.verify_bundle_tree(b, t, target="bench"))
            folder = base / f"bundle-{algorithm.value}"
            tree.write_tree(bundle, folder)
            sign_disk = median_ms(lambda s=signer, f=folder: signing_files.sign_bundle_directory(f, s))
            verify_disk = median_ms(lambda t=trusted, f=folder: signing_files.verify_path(f, t))
            print(
                f"  {algorithm.value:<11} sign {sign_memory:7.2f} ms in memory, {sign_disk:7.2f} ms on disk;"
                f" verify {verify_memory:7.2f} ms in memory, {verify_disk:7.2f} ms on disk"
            )
            shutil.rmtree(folder)


if __name__ == "__main__":
    main()
