"""`dsx recipe` and `dsx query`: criteria in, a version-pinned recipe (or one value of it) out.

Only click is imported at module level; the engine is imported inside the commands so
`dsx recipe` starts fast (docs/cli-startup.md, bench/bench_cli.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from dsx.cli import output as cli_output

F = TypeVar("F", bound=Callable[..., Any])

CRITERIA_FLAGS = {
    "service": "--service",
    "accelerator": "--accelerator",
    "os_name": "--os",
    "intent": "--intent",
    "platform": "--platform",
    "nodes": "--nodes",
    "config_path": "--config",
    "snapshot_path": "--snapshot",
}
"""Parameter name of each criteria flag (see `criteria_options`) → the flag as users type it."""


def criteria_options(func: F) -> F:
    """The criteria flags shared by `recipe` and `query` (values are checked by the engine).

    The help lists each dimension's allowed values from `dsx.model.criteria.DIMENSIONS`, read
    when the flags are made, so the table is the only place a value is named.
    """
    from dsx.model.criteria import describe

    decorators = [
        click.option("--service", default=None, metavar="NAME", help=describe("service")),
        click.option(
            "--accelerator",
            "--gpu",
            "accelerator",
            default=None,
            metavar="NAME",
            help=f"{describe('accelerator')} (alias --gpu)",
        ),
        click.option("--os", "os_name", default=None, metavar="NAME", help=describe("os")),
        click.option("--intent", default=None, metavar="NAME", help=describe("intent")),
        click.option("--platform", default=None, metavar="NAME", help=describe("platform")),
        click.option("--nodes", default=None, metavar="N", help="GPU node count (integer >= 1)."),
        click.option(
            "--config",
            "config_path",
            default=None,
            metavar="FILE",
            help="YAML file with the same keys; flags override it.",
        ),
        click.option(
            "--snapshot",
            "snapshot_path",
            default=None,
            metavar="FILE",
            help="Derive service, accelerator, os and nodes from a snapshot (or `kubectl get nodes -o yaml`).",
        ),
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def document_from_flags(params: dict[str, Any], strict: bool) -> dict[str, Any]:
    """The recipe document the criteria flags (and --config, --snapshot) ask for: what `dsx recipe`
    writes and `dsx query` reads, with no model object between."""
    from dsx.recipes import resolve

    document = resolve.document(_criteria_from_flags(params).to_dict())
    if strict:
        meta = document["metadata"]
        resolve.check_validated(meta["name"], meta["criteria"], meta["unvalidatedCriteria"])
    return document


def resolve_from_flags(params: dict[str, Any], strict: bool) -> Any:
    """The recipe the criteria flags (and --config, --snapshot) ask for, for commands that use it (lint, bundle)."""
    from dsx.recipes import resolve

    recipe = resolve.resolve(_criteria_from_flags(params))
    if strict:
        resolve.require_validated(recipe)
    return recipe


def _criteria_from_flags(params: dict[str, Any]) -> Any:
    from dsx.recipes import inputs

    flags = {
        "service": params["service"],
        "accelerator": params["accelerator"],
        "os": params["os_name"],
        "intent": params["intent"],
        "platform": params["platform"],
        "nodes": params["nodes"],
    }
    gathered = inputs.gather(flags, config=_named(params["config_path"]), snapshot=_named(params["snapshot_path"]))
    for warning in gathered.warnings:
        click.echo(f"dsx: warning: {warning}", err=True)
    return gathered.criteria


def _named(path: str | None) -> Any:
    if not path:
        return None
    from dsx.files import documents
    from dsx.recipes import inputs

    return inputs.NamedDocument(path, documents.load_mapping_file(path))


def recipe_or_criteria(recipe_path: str | None, params: dict[str, Any], *, required: bool = False) -> Any:
    """`--recipe FILE|-` or the criteria flags, never both; `required` refuses neither being given.

    Shared by every command that reads a recipe (query, lint, bundle), so the rule and its
    message are the same everywhere.
    """
    from dsx.errors import BadInputError

    given = [flag for name, flag in CRITERIA_FLAGS.items() if params.get(name) is not None]
    if recipe_path and given:
        raise BadInputError(f"--recipe and criteria flags ({', '.join(given)}) are exclusive")
    if recipe_path:
        from dsx.files import documents

        return documents.recipe(recipe_path)
    if required and not given:
        raise BadInputError(
            "give --recipe FILE (or - for stdin) or criteria flags such as --service eks --accelerator h100"
        )
    return resolve_from_flags(params, strict=False)


def _components_table(document: dict[str, Any]) -> str:
    rows = [
        [
            ref["name"],
            ref["type"],
            ref["version"],
            ref["namespace"],
            ref.get("chart") or ref.get("path") or "",
            ", ".join(ref["dependencyRefs"]),
        ]
        for ref in ({r["name"]: r for r in document["componentRefs"]}[name] for name in document["deploymentOrder"])
    ]
    meta = document["metadata"]
    head = f"recipe {meta['name']}  overlays: {', '.join(meta['overlays'])}\n"
    if meta["unvalidatedCriteria"]:
        head += f"unvalidated criteria: {', '.join(meta['unvalidatedCriteria'])}\n"
    return head + cli_output.format_table(["component", "type", "version", "namespace", "chart", "after"], rows)


@click.group("recipe", invoke_without_command=True)
@criteria_options
@click.option("--strict", is_flag=True, help="Exit 2 unless an overlay validates this exact combination.")
@cli_output.format_options
@click.pass_context
def recipe(ctx: click.Context, /, strict: bool, fmt: str, output: str | None, **params: Any) -> None:
    """Resolve criteria into a version-pinned recipe.

    Example: dsx recipe --service eks --accelerator h100 --os ubuntu --intent training
    --platform kubeflow -o recipe.yaml

    `dsx recipe list` lists the catalog's recipes and checks every leaf.
    """
    if ctx.invoked_subcommand is not None:
        from dsx.errors import BadInputError

        flags = {**CRITERIA_FLAGS, "strict": "--strict", "fmt": "--format", "output": "--output"}
        given = [flags[n] for n in ctx.params if ctx.get_parameter_source(n) is click.core.ParameterSource.COMMANDLINE]
        if given:
            raise BadInputError(
                f"{', '.join(given)}: give the options of `dsx recipe {ctx.invoked_subcommand}` after"
                f" {ctx.invoked_subcommand!r} (dsx recipe {ctx.invoked_subcommand} --help lists them)"
            )
        return
    cli_output.emit(document_from_flags(params, strict), fmt, output, table=_components_table)


LIST_FORMATS = ("table", "yaml", "json")


def _list_table(document: dict[str, Any]) -> str:
    from dsx.model.criteria import DIMENSIONS

    items = document["recipes"]
    if not items:
        return "(no matching overlays)\n"
    rows = []
    for item in items:
        health = item.get("health")
        rows.append(
            [
                item["name"],
                *(item["criteria"].get(d, "any") for d in DIMENSIONS),
                "yes" if item["isLeaf"] else "no",
                health["status"] if health else "-",
                item["source"],
            ]
        )
    table = cli_output.format_table(["name", *DIMENSIONS, "leaf", "status", "source"], rows)
    problems = [
        f"{item['name']}: {finding['check']}: {finding['problem']}"
        for item in items
        if item.get("health")
        for finding in item["health"]["findings"]
    ]
    return table + "".join(f"{line}\n" for line in problems)


@recipe.command("list")
@click.option("--service", default=None, metavar="NAME", help="Only overlays that name this service.")
@click.option("--accelerator", "--gpu", "accelerator", default=None, metavar="NAME", help="Only this accelerator.")
@click.option("--os", "os_name", default=None, metavar="NAME", help="Only this OS.")
@click.option("--intent", default=None, metavar="NAME", help="Only this intent.")
@click.option("--platform", default=None, metavar="NAME", help="Only this platform.")
@click.option(
    "--no-health",
    "--skip-health",
    "no_health",
    is_flag=True,
    help="List without resolving the leaves (no status, exit 0).",
)
@cli_output.format_options_for(LIST_FORMATS)
def list_recipes(no_health: bool, fmt: str, output: str | None, **filters: str | None) -> None:
    """Every overlay of the catalog with its criteria; each leaf checked.

    A leaf (an overlay no other builds on) must resolve strictly, state only constraints dsx
    validate measures, pin every chart (source, chart, exact version) and declare health
    asserts for every component. Exits 1 when a listed leaf fails, so CI can gate on it.
    Filters match exactly: --service eks leaves out overlays that do not name a service.
    """
    from dsx.errors import CheckFailedError
    from dsx.model.dimensions import normalize_flags
    from dsx.recipes import catalog, listing
    from dsx.validation import facts

    named = {"service": filters["service"], "accelerator": filters["accelerator"], "os": filters["os_name"]}
    named |= {"intent": filters["intent"], "platform": filters["platform"]}
    wanted = {d: str(v) for d, v in normalize_flags(named).items()}
    found = listing.entries(catalog.load(), filters=wanted, health=not no_health, measured=facts.measured)
    cli_output.emit({"recipes": [e.to_dict() for e in found]}, fmt, output, table=_list_table)
    failed = [e.name for e in found if e.health is not None and not e.health.passed]
    if failed:
        raise CheckFailedError(f"{len(failed)} of {sum(e.is_leaf for e in found)} leaves failed: {', '.join(failed)}")


@click.command("query")
@criteria_options
@click.option(
    "--recipe",
    "recipe_path",
    default=None,
    metavar="FILE",
    help="Query a saved recipe instead of resolving criteria.",
)
@click.option(
    "--selector",
    required=True,
    metavar="PATH",
    help="Dot path with list indexes, e.g. components.gpu-operator.values.driver.version",
)
@cli_output.format_options
def query(selector: str, recipe_path: str | None, fmt: str, output: str | None, **params: Any) -> None:
    """Read one value of the hydrated recipe (all values merged).

    Scalars print bare; maps and lists print in --format.
    """
    from dsx.recipes import selector as selector_module

    resolved = recipe_or_criteria(recipe_path, params) if recipe_path else document_from_flags(params, strict=False)
    value = selector_module.select(selector_module.hydrated(resolved), selector)
    cli_output.emit_selected(value, fmt, output)
