"""Area of concern: a bundle's README names the Secrets its workloads need and it does not ship,
in the words the workloads' `dsx.run/secret.<name>` annotations give, so a GitOps install does not
wait forever at a wave whose pods cannot start."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dsx.bundles import readme
from dsx.bundles.options import Deployer
from dsx.file_tree import FileTree
from dsx.model import criteria as criteria_model
from dsx.model.recipe import Recipe
from dsx.recipes import resolve

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  annotations:
    dsx.run/secret.api-db: "key url: the PostgreSQL URL"
spec:
  template:
    spec:
      containers:
        - name: api
          image: example/api:1
          env:
            - {name: DB, valueFrom: {secretKeyRef: {name: api-db, key: url}}}
            - {name: CACHE, valueFrom: {secretKeyRef: {name: api-cache, key: url, optional: true}}}
          envFrom: [{secretRef: {name: api-shipped}}]
      volumes:
        - {name: certs, secret: {secretName: api-certs}}
---
apiVersion: v1
kind: Secret
metadata: {name: api-shipped}
stringData: {a: b}
"""


def manifest_recipe() -> Recipe:
    doc = {
        "apiVersion": "dsx.run/v1alpha1",
        "kind": "Recipe",
        "metadata": {"name": "t", "generator": "dsx/test", "criteria": {}, "overlays": [], "unvalidatedCriteria": []},
        "constraints": [],
        "componentRefs": [
            {
                "name": "api",
                "type": "Manifest",
                "namespace": "apps",
                "version": "1.0.0",
                "values": {},
                "dependencyRefs": [],
                "healthCheckAsserts": [],
                "manifests": {"api.yaml": DEPLOYMENT},
            }
        ],
        "deploymentOrder": ["api"],
    }
    return Recipe.from_dict(doc, source="recipe.yaml").with_digest()


def test_needed_secrets_the_bundle_does_not_ship_are_listed_with_their_words() -> None:
    assert readme.operator_secrets(manifest_recipe()) == [
        ("api-certs", "apps", "Deployment api", "not described by its workloads"),
        ("api-db", "apps", "Deployment api", "key url: the PostgreSQL URL"),
    ]  # optional api-cache and shipped api-shipped are not


@pytest.mark.parametrize("deployer", list(Deployer))
def test_every_deployers_readme_says_what_the_sentinel_needs(
    deployer: Deployer, render_bundle: Callable[..., FileTree]
) -> None:
    criteria = criteria_model.Criteria(
        service="eks", accelerator="h100", os="ubuntu", intent="training", platform="kubeflow"
    )
    recipe = resolve.resolve(criteria)
    text = render_bundle(deployer, recipe).files["README.md"].decode()
    section = text.split("## Create before applying\n", 1)[1].split("\n## ", 1)[0]
    assert (
        "| dsx-sentinel-store | dsx-system | Deployment dsx-sentinel | key url: the event store, a PostgreSQL"
        in section
    )
    # the monitors post with their pods' own tokens (monitor.auth serviceAccountToken), not this Secret
    assert "| dsx-sentinel-tokens | dsx-system | Deployment dsx-sentinel |" in section
    assert "the database must exist" in section
