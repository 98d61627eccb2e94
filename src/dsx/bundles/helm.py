"""Helm deployer: a folder per component and scripts that install them in order.

Each component folder holds the fully merged `values.yaml` (or `manifests/`), and a README
with the exact command; `deploy.sh` runs those commands in deploymentOrder and
`undeploy.sh` reverses them. Charts stay upstream, pinned by version: no umbrella chart.
"""

from __future__ import annotations

from dsx import serialization
from dsx.bundles import readme, scripts
from dsx.bundles.options import HELM_TIMEOUT, BundleOptions
from dsx.file_tree import FileTree
from dsx.model.recipe import ComponentRef, ComponentType, Recipe


def render(recipe: Recipe, options: BundleOptions) -> FileTree:
    files: dict[str, bytes] = {}
    for ref in recipe.component_refs:
        if ref.type is ComponentType.HELM:
            files[f"{ref.name}/values.yaml"] = serialization.dump_yaml(ref.values).encode("utf-8")
        for file_name, text in sorted(ref.manifests.items()):
            files[f"{ref.name}/manifests/{file_name}"] = text.encode("utf-8")
        files[f"{ref.name}/README.md"] = _component_readme(ref).encode("utf-8")
    files["deploy.sh"] = scripts.deploy_script(recipe, options).encode("utf-8")
    files["undeploy.sh"] = scripts.undeploy_script(recipe, options).encode("utf-8")
    apply = (
        readme.fenced(
            [
                "./deploy.sh --dry-run  # prints every command; contacts no cluster",
                "./deploy.sh            # pre-flight, then installs in deploymentOrder with retries and health checks",
                "./deploy.sh --best-effort   # goes on past a failed component; exit 1 names it",
                "./undeploy.sh          # reverse order; clears pending releases, leftover webhooks, stuck finalizers",
            ]
        )
        + "See `./deploy.sh --help` and `./undeploy.sh --help` for every option.\n"
    )
    files["README.md"] = readme.root_readme(recipe, "helm", options, apply).encode("utf-8")
    return FileTree(files, frozenset({"deploy.sh", "undeploy.sh"}))


def _component_readme(ref: ComponentRef) -> str:
    rows = [("type", ref.type.value), ("version", ref.version), ("namespace", ref.namespace)]
    if ref.type is ComponentType.HELM:
        rows[1:1] = [("chart", ref.chart), ("source", ref.source)]
        flags, positional = scripts.helm_install_args(ref, "values.yaml")
        install = scripts.command_line([*flags, "--wait", "--timeout", HELM_TIMEOUT], positional=positional)
        flags, positional = scripts.helm_uninstall_args(ref)
        remove = scripts.command_line(flags, positional=positional)
    elif ref.type is ComponentType.MANIFEST:
        # each object names its namespace (kubectl refuses one that differs from an explicit --namespace)
        install = scripts.command_line(["kubectl", "apply", "--filename", "manifests/"])
        remove = scripts.command_line(["kubectl", "delete", "--filename", "manifests/"])
    else:
        rows[1:1] = [("source", ref.source), ("path", ref.path)]
        url = scripts.kustomize_url(ref)
        install = scripts.command_line(["kubectl", "apply", "--namespace", ref.namespace, "--kustomize", url])
        remove = scripts.command_line(["kubectl", "delete", "--namespace", ref.namespace, "--kustomize", url])
    table = "| field | value |\n|---|---|\n" + "".join(f"| {k} | {readme.cell(v)} |\n" for k, v in rows)
    needs = ", ".join(ref.dependency_refs) or "nothing"
    return (
        f"# {ref.name}\n\n{table}\nInstall after: {readme.cell(needs)}.\n\n"
        f"## Install (from this folder)\n\n{readme.fenced([install])}\n"
        f"## Uninstall\n\n{readme.fenced([remove])}"
    )
