"""dsx: configure, certify and operate GPU Kubernetes clusters.

The package is tiered; imports point down (see docs/architecture.md):
foundation (model, errors, settings, serialization) → domain (recipes, bundles,
signing, certify, health, lint) → adapters (kube, store) → entry points (cli, api,
controllers).
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
