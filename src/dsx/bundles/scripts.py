"""deploy.sh and undeploy.sh for the Helm bundle, with every recipe value shell-quoted.

Commands are built as argument lists and joined with `shlex.quote`, so a chart name,
namespace, URL or version from a recipe is always one literal word: `$(...)`, backticks, `;`
and globs reach helm or kubectl as text, never the shell. Helm's positional arguments follow
`--`, so a release or chart named `--post-renderer` stays a name, never a flag. The scripts add
only fixed text of their own around those words: a library of bash functions (`_DEPLOY_LIB`,
`_UNDEPLOY_LIB`) that read recipe values only as quoted `"$1"` arguments, never through eval.

deploy.sh: pre-flight (tools, context, reachability, versions, namespaces, releases left pending,
CRDs the bundle needs but does not install), then each component in deploymentOrder with retries and back-off; before
a component whose dependency is not yet checked, the health asserts of everything installed
since (CRDs Established, releases deployed, workloads rolled out). `--best-effort` keeps going
past a failed component, skips what needs it, and exits non-zero naming both.

undeploy.sh: reverse order; a release stuck in pending-* is rolled back or uninstalled without
hooks; webhook configurations labelled with a release's instance name are removed; objects the
bundle installed that stay Terminating after a grace period lose their finalizers. Nothing is
selected that the bundle did not install.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Any

from dsx import serialization
from dsx.bundles import components
from dsx.bundles.options import HELM_TIMEOUT, BundleOptions
from dsx.errors import BadInputError
from dsx.model.recipe import ComponentRef, ComponentType, Recipe

WAIT_ARGS = '${wait_args[@]+"${wait_args[@]}"}'
"""The optional `--wait --timeout` words, safe under `set -u` on bash < 4.4."""

BUILTIN_GROUPS = frozenset(
    {
        "",
        "admissionregistration.k8s.io",
        "apiextensions.k8s.io",
        "apiregistration.k8s.io",
        "apps",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "autoscaling",
        "batch",
        "certificates.k8s.io",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "events.k8s.io",
        "flowcontrol.apiserver.k8s.io",
        "internal.apiserver.k8s.io",
        "networking.k8s.io",
        "node.k8s.io",
        "policy",
        "rbac.authorization.k8s.io",
        "resource.k8s.io",
        "scheduling.k8s.io",
        "storage.k8s.io",
        "storagemigration.k8s.io",
    }
)
"""API groups every cluster serves; any other group in a manifest comes from a CRD."""

_GROUP = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$")
_KIND = re.compile(r"^[A-Z][A-Za-z0-9]{0,62}$")


def command_line(args: Sequence[str], *, trailing: str = "", positional: Sequence[str] = ()) -> str:
    """`args`, then `trailing` shell text as is (more flags), then `--` and the positional words."""
    words = [shlex.quote(a) for a in args]
    if trailing:
        words.append(trailing)
    if positional:
        words.extend(["--", *(shlex.quote(p) for p in positional)])
    return " ".join(words)


def helm_install_args(ref: ComponentRef, values_path: str) -> tuple[list[str], list[str]]:
    """`helm upgrade --install` as (command and flags, positional release and chart)."""
    chart = components.oci_chart_url(ref) if components.is_oci(ref) else ref.chart
    repo = [] if components.is_oci(ref) else ["--repo", ref.source]
    flags = ["helm", "upgrade", "--install", *repo, "--version", ref.version, "--namespace", ref.namespace]
    return [*flags, "--create-namespace", "--values", values_path], [ref.name, chart]


def helm_uninstall_args(ref: ComponentRef) -> tuple[list[str], list[str]]:
    """`helm uninstall` as (command and flags, positional release)."""
    return ["helm", "uninstall", "--namespace", ref.namespace, "--ignore-not-found"], [ref.name]


def kustomize_url(ref: ComponentRef) -> str:
    """Remote kustomization as kubectl reads it: `<repo>//<path>?ref=<tag>`."""
    return f"{ref.source.rstrip('/')}//{ref.path.strip('/')}?ref={ref.version}"


def manifests_dir(ref: ComponentRef) -> str:
    return f"{ref.name}/manifests/"


def custom_kinds(ref: ComponentRef) -> list[tuple[str, str]]:
    """(group, kind) of every custom resource in a Manifest component whose CRD it does not ship itself.

    These need a CRD served and Established before `kubectl apply`; a manifest that does not
    parse, or names a group or kind outside the Kubernetes syntax, adds no wait (apply reports it).
    """
    used: set[tuple[str, str]] = set()
    shipped: set[tuple[str, str]] = set()
    for file_name, text in sorted(ref.manifests.items()):
        try:
            documents = serialization.parse_yaml_documents(text, source=f"{ref.name}/manifests/{file_name}")
        except BadInputError:
            continue
        for doc in documents:
            if not isinstance(doc, dict):
                continue
            api_version, kind = str(doc.get("apiVersion", "")), str(doc.get("kind", ""))
            group = api_version.rpartition("/")[0]
            if kind == "CustomResourceDefinition" and group == "apiextensions.k8s.io":
                spec = _mapping(doc.get("spec"))
                shipped.add((str(spec.get("group", "")), str(_mapping(spec.get("names")).get("kind", ""))))
            elif group not in BUILTIN_GROUPS and _GROUP.match(group) and _KIND.match(kind):
                used.add((group, kind))
    return sorted(used - shipped)


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def dependency_closure(recipe: Recipe, name: str) -> set[str]:
    """Every component `name` needs, directly or through others."""
    by_name = {r.name: r for r in recipe.component_refs}
    seen: set[str] = set()
    todo = list(by_name[name].dependency_refs)
    while todo:
        dep = todo.pop()
        if dep not in seen:
            seen.add(dep)
            todo.extend(by_name[dep].dependency_refs)
    return seen


def required_crds(recipe: Recipe) -> list[tuple[str, str]]:
    """Custom kinds a Manifest component uses that nothing it depends on can install (no chart or
    kustomization among its dependencies): the cluster must serve them before deploy.sh starts."""
    needed: set[tuple[str, str]] = set()
    for ref in recipe.component_refs:
        if ref.type is not ComponentType.MANIFEST:
            continue
        installers = [
            d for d in dependency_closure(recipe, ref.name) if recipe.component(d).type is not ComponentType.MANIFEST
        ]
        if not installers:
            needed.update(custom_kinds(ref))
    return sorted(needed)


_HEADER = """#!/usr/bin/env bash
# {purpose}
# Generated by {generator} from recipe {recipe}; checksums.txt covers this file.
# Usage: ./{script} [OPTION...]
{usage}
set -euo pipefail
cd -- "$(dirname -- "${{BASH_SOURCE[0]}}")"
SCRIPT={script}
"""

_DEPLOY_USAGE = f"""#   --dry-run           print every command instead of running it (no cluster needed)
#   --best-effort       keep going past a failed component; skip only what needs it; exit 1 naming both
#   --no-wait           no helm --wait and no health asserts between dependency levels
#   --retries N         retries per step after the first attempt (default 3)
#   --retry-delay S     back-off base in seconds: S*n*n before retry n, at most 120 (default 5)
#   --timeout DURATION  helm --wait, CRD, rollout and health timeout, as 30s, 10m, 1h (default {HELM_TIMEOUT})
#   --skip-preflight    do not check tools, context, versions, namespaces, releases and CRDs first
#   --verify-key FILE   first run `dsx verify` on this bundle with public key FILE ($DSX_CLI, default dsx);
#                       deploy nothing unless it is verified (checked under --dry-run too)
#   --verify-state FILE with --verify-key: the highest revision verified so far; an older bundle is refused
#                       and a newer one recorded (keep FILE outside the bundle, one per cluster)"""

_UNDEPLOY_USAGE = """#   --dry-run           print every command instead of running it (no cluster needed)
#   --grace DURATION    how long controllers get to finalize deleted objects before their finalizers
#                       are cleared (default 30s)
#   --timeout DURATION  how long to wait for objects to be gone after that (default 2m)
#   --skip-preflight    do not check tools, context and reachability first
# Undeploys every component even when one fails, then exits 1 naming the failures."""

# Fixed shell text shared by both scripts: option helpers, dry-run, retries, pre-flight, queries.
# Recipe values reach these functions only as quoted positional arguments.
_COMMON_LIB = r"""
die() { echo "$SCRIPT: $*" >&2; exit 1; }
usage_error() { echo "$SCRIPT: $*; see --help" >&2; exit 2; }
duration_s() {  # duration_s 10m -> 600; fails on anything but digits and one of s, m, h
  local n=${1%[smh]} unit=${1##*[0-9]}
  case "$n" in ''|*[!0-9]*) return 1 ;; esac
  case "$unit" in
    s) echo "$((10#$n))" ;;
    m) echo "$((10#$n * 60))" ;;
    h) echo "$((10#$n * 3600))" ;;
    *) return 1 ;;
  esac
}
whole_number() { case "$2" in ''|*[!0-9]*) usage_error "$1 takes a whole number, got '$2'" ;; esac; }

exec 3>&1  # run prints to the script's stdout even where a caller discards the command's own output
run() {  # run CMD...: prints it under --dry-run, runs it otherwise
  if [ "$dry_run" = 1 ]; then
    { printf '+'; printf ' %q' "$@"; printf '\n'; } >&3
    return 0
  fi
  "$@"
}

in_list() {  # in_list WORD LIST...
  local word=$1 item
  shift
  for item in "$@"; do
    if [ "$item" = "$word" ]; then return 0; fi
  done
  return 1
}

release_status() {  # release_status NAMESPACE RELEASE: deployed, failed, pending-install, ... or nothing
  { helm status --namespace "$1" --output json -- "$2" 2>/dev/null || true; } \
    | { grep -o '"status":"[a-z-]*"' || true; } | head -n 1 | cut -d '"' -f 4
}

in_namespace() {  # in_namespace NAMESPACE CMD...: CMD with NAMESPACE as kubectl's default namespace
  # `kubectl --namespace` refuses a manifest whose objects name another namespace; an overlay
  # kubeconfig that only sets the current context's namespace makes it a default instead
  local context cluster user overlay status=0
  context=$(kubectl config current-context) || return 1
  cluster=$(kubectl config view --minify --output 'jsonpath={.contexts[0].context.cluster}') || return 1
  user=$(kubectl config view --minify --output 'jsonpath={.contexts[0].context.user}') || return 1
  overlay=$(mktemp) || return 1
  printf '{"apiVersion":"v1","kind":"Config","contexts":[{"name":"%s","context":%s}]}\n' "$(json_text "$context")" \
    "{\"cluster\":\"$(json_text "$cluster")\",\"user\":\"$(json_text "$user")\",\"namespace\":\"$1\"}" >"$overlay"
  shift
  KUBECONFIG="$overlay:${KUBECONFIG:-$HOME/.kube/config}" "$@" || status=$?
  rm -f -- "$overlay"
  return "$status"
}

json_text() {  # json_text TEXT: TEXT escaped for a JSON string
  local text=${1//\\/\\\\}
  printf '%s' "${text//\"/\\\"}"
}

objects_of() {  # objects_of NAMESPACE FILE|-: "namespace Kind[.group]/name" of each object that exists
  local ns api kind name
  { in_namespace "$1" kubectl get --filename "$2" --ignore-not-found --no-headers \
      --output 'custom-columns=NS:.metadata.namespace,API:.apiVersion,KIND:.kind,NAME:.metadata.name' \
      2>/dev/null || true; } \
    | while read -r ns api kind name; do
        if [ -z "$name" ]; then continue; fi
        case "$api" in */*) kind="$kind.${api%/*}" ;; esac
        if [ "$ns" = "<none>" ]; then ns=$1; fi
        printf '%s %s/%s\n' "$ns" "$kind" "$name"
      done
}

release_objects() {  # release_objects NAMESPACE RELEASE: objects_of what the release's manifest lists
  { helm get manifest --namespace "$1" -- "$2" 2>/dev/null || true; } | objects_of "$1" -
}

check_cluster() {  # pre-flight shared by both scripts: tools, context, reachability, versions
  local tool context helm_version kubectl_version
  if [ "$dry_run" = 1 ]; then
    run kubectl config current-context
    run kubectl get --raw /readyz
    run helm version --template '{{.Version}}'
    run kubectl version --client --output yaml
    return 0
  fi
  for tool in helm kubectl; do
    command -v "$tool" >/dev/null 2>&1 || die "pre-flight: $tool is not on PATH"
  done
  context=$(kubectl config current-context 2>/dev/null) \
    || die "pre-flight: no current kubectl context (set KUBECONFIG or run kubectl config use-context NAME)"
  kubectl get --raw /readyz >/dev/null 2>&1 \
    || die "pre-flight: the API server of context $context is not reachable or not ready (kubectl get --raw /readyz)"
  helm_version=$(helm version --template '{{.Version}}' 2>/dev/null) || die "pre-flight: helm version failed"
  case "$helm_version" in
    v3.1[3-9].*|v3.[2-9][0-9].*|v[4-9].*) ;;
    *) die "pre-flight: helm $helm_version is too old; need v3.13 or later" ;;
  esac
  kubectl_version=$(kubectl version --client --output yaml 2>/dev/null | sed -n 's/^ *gitVersion: //p' | head -n 1)
  case "$kubectl_version" in
    v1.2[5-9].*|v1.[3-9][0-9].*) ;;
    *) die "pre-flight: kubectl ${kubectl_version:-of unknown version} is too old; need v1.25 or later" ;;
  esac
  echo "pre-flight: context $context, helm $helm_version, kubectl $kubectl_version"
}
"""

_DEPLOY_LIB = r"""
wait_for=1 best_effort=0 dry_run=0 preflight=1 retries=3 retry_delay_s=5 timeout=__TIMEOUT__
verify_key="" verify_state=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    --no-wait) wait_for=0 ;;
    --best-effort) best_effort=1 ;;
    --dry-run) dry_run=1 ;;
    --skip-preflight) preflight=0 ;;
    --retries|--retry-delay|--timeout|--verify-key|--verify-state)
      [ "$#" -ge 2 ] || usage_error "$1 needs a value"
      case "$1" in
        --retries) retries=$2 ;;
        --retry-delay) retry_delay_s=$2 ;;
        --verify-key) verify_key=$2 ;;
        --verify-state) verify_state=$2 ;;
        *) timeout=$2 ;;
      esac
      shift ;;
    -h|--help) sed -n '2,/^set -euo/p' -- "$SCRIPT" | sed '$d'; exit 0 ;;
    *) usage_error "unknown argument: $1" ;;
  esac
  shift
done
whole_number --retries "$retries"
whole_number --retry-delay "$retry_delay_s"
timeout_s=$(duration_s "$timeout") || usage_error "--timeout takes a duration such as 90s, 10m or 1h, got '$timeout'"
if [ -n "$verify_state" ] && [ -z "$verify_key" ]; then usage_error "--verify-state goes with --verify-key"; fi
if [ -n "$verify_key" ]; then  # before anything else: an unverified or rolled-back bundle deploys nothing
  verify_args=(verify . --key "$verify_key")
  if [ -n "$verify_state" ]; then verify_args+=(--state "$verify_state"); fi
  "${DSX_CLI:-dsx}" "${verify_args[@]}" || die "the bundle did not verify (see above); nothing deployed"
fi
if [ "$wait_for" = 1 ]; then wait_args=(--wait --timeout "$timeout"); else wait_args=(); fi
failed=() skipped=() unchecked=()

retry() {  # retry CMD...: up to 1 + --retries attempts, sleeping retry-delay*n*n (at most 120) s before retry n
  local attempt=0 delay
  while :; do
    if "$@"; then return 0; fi
    attempt=$((attempt + 1))
    if [ "$attempt" -gt "$retries" ]; then return 1; fi
    delay=$((retry_delay_s * attempt * attempt))
    if [ "$delay" -gt 120 ]; then delay=120; fi
    echo "  attempt $attempt failed; retry $attempt of $retries in ${delay}s" >&2
    sleep "$delay"
  done
}

ensure_namespace() {
  if [ "$dry_run" = 1 ]; then run kubectl create namespace "$1"; return 0; fi
  # no `--` here: kubectl counts only the words before it as NAME; namespaces are DNS-1123 labels
  kubectl create namespace "$1" --dry-run=client --output yaml | kubectl apply --filename - >/dev/null
}

crd_for() {  # crd_for GROUP KIND: the resource (plural) serving KIND in GROUP, or nothing
  { kubectl api-resources --api-group "$1" --no-headers 2>/dev/null || true; } \
    | awk -v kind="$2" '$NF == kind { print $1; exit }'
}

wait_crd() {  # wait_crd GROUP KIND: until the API serves KIND and its CRD is Established
  local plural deadline=$((SECONDS + timeout_s))
  if [ "$dry_run" = 1 ]; then echo "+ wait for the CRD of $2 in $1 to be Established"; return 0; fi
  while :; do
    plural=$(crd_for "$1" "$2")
    if [ -n "$plural" ]; then
      kubectl wait --for condition=Established --timeout "$timeout" "customresourcedefinition/$plural.$1" >/dev/null \
        || { echo "  CRD $plural.$1 not Established within $timeout" >&2; return 1; }
      return 0
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then echo "  no CRD serves $2 in $1 after $timeout" >&2; return 1; fi
    sleep 2
  done
}

preflight_checks() {
  local ns phase item
  if [ "$preflight" = 0 ]; then echo "pre-flight: skipped"; return 0; fi
  check_cluster
  for ns in "${namespaces[@]}"; do
    if [ "$dry_run" = 1 ]; then
      run kubectl get namespace "$ns" --ignore-not-found --output 'jsonpath={.status.phase}'
      continue
    fi
    phase=$(kubectl get namespace "$ns" --ignore-not-found --output 'jsonpath={.status.phase}') \
      || die "pre-flight: cannot read namespace $ns"
    [ "$phase" != Terminating ] || die "pre-flight: namespace $ns is Terminating; wait until it is gone"
  done
  for item in ${releases[@]+"${releases[@]}"}; do
    if [ "$dry_run" = 1 ]; then run helm status --namespace "${item%%/*}" --output json -- "${item#*/}"; continue; fi
    case "$(release_status "${item%%/*}" "${item#*/}")" in
      pending-*) die "pre-flight: release ${item#*/} in ${item%%/*} is stuck in a pending state from an interrupted" \
        "run; ./undeploy.sh clears it (or helm rollback)" ;;
    esac
  done
  for item in ${required_crds[@]+"${required_crds[@]}"}; do
    if [ "$dry_run" = 1 ]; then echo "+ check that the cluster serves ${item#*/} in ${item%%/*}"; continue; fi
    [ -n "$(crd_for "${item%%/*}" "${item#*/}")" ] \
      || die "pre-flight: no CRD serves ${item#*/} in ${item%%/*}; install it first (no component of this bundle does)"
  done
}

rolled_out() {  # rolled_out < objects_of lines: every Deployment, DaemonSet and StatefulSet rolled out
  local ns obj
  while read -r ns obj; do
    case "$obj" in
      Deployment.apps/*|DaemonSet.apps/*|StatefulSet.apps/*)
        run kubectl rollout status --namespace "$ns" --timeout "$timeout" "$obj" >/dev/null \
          || { echo "  $obj in $ns not rolled out within $timeout" >&2; return 1; } ;;
    esac
  done
}

health_release() {  # health_release NAMESPACE RELEASE: deployed, and its workloads rolled out
  local status
  if [ "$dry_run" = 1 ]; then
    run helm status --namespace "$1" --output json -- "$2"
    echo "+ kubectl rollout status for each workload of: helm get manifest --namespace $1 -- $2"
    return 0
  fi
  status=$(release_status "$1" "$2")
  [ "$status" = deployed ] || { echo "  release $2 in $1 is ${status:-missing}, not deployed" >&2; return 1; }
  release_objects "$1" "$2" | rolled_out
}

health_manifests() {  # health_manifests NAMESPACE DIR: the objects exist and workloads rolled out
  if [ "$dry_run" = 1 ]; then
    echo "+ kubectl rollout status for each workload of: kubectl get --namespace $1 --filename $2"
    return 0
  fi
  objects_of "$1" "$2" | rolled_out
}

check_health() {  # health asserts for everything installed since the last check
  local idx
  if [ "${#unchecked[@]}" = 0 ]; then return 0; fi
  if [ "$wait_for" = 1 ]; then
    if [ "$dry_run" = 1 ] || [ -n "$(kubectl get customresourcedefinitions --output name || true)" ]; then
      run kubectl wait --for condition=Established --all customresourcedefinitions --timeout "$timeout" >/dev/null \
        || echo "  warning: not every CRD is Established" >&2
    fi
    for idx in "${unchecked[@]}"; do
      echo "health: ${names[$idx]}"
      if ! "health_$idx"; then fail_component "$idx"; fi
    done
  fi
  unchecked=()
}

fail_component() {
  failed+=("${names[$1]}")
  echo "$SCRIPT: ${names[$1]} failed" >&2
  if [ "$best_effort" = 0 ]; then
    die "stopping at ${names[$1]}; --best-effort continues with the components that do not need it"
  fi
}

deploy_component() {  # deploy_component INDEX DESCRIPTION DEPENDENCY...
  local idx=$1 what=$2 dep pending=0 item
  shift 2
  for dep in "$@"; do
    for item in ${unchecked[@]+"${unchecked[@]}"}; do
      if [ "${names[$item]}" = "$dep" ]; then pending=1; fi
    done
  done
  if [ "$pending" = 1 ]; then check_health; fi
  for dep in "$@"; do
    if in_list "$dep" ${failed[@]+"${failed[@]}"}; then
      echo "[$((idx + 1))/${#names[@]}] ${names[$idx]}: skipped, needs $dep" >&2
      failed+=("${names[$idx]}")
      skipped+=("${names[$idx]}")
      return 0
    fi
  done
  echo "[$((idx + 1))/${#names[@]}] $what"
  if "install_$idx"; then unchecked+=("$idx"); else fail_component "$idx"; fi
}

finish() {
  check_health
  if [ "${#failed[@]}" -gt 0 ]; then
    echo "$SCRIPT: failed: ${failed[*]}${skipped[*]:+ (not attempted, a dependency failed: ${skipped[*]})}" >&2
    exit 1
  fi
  echo "deployed ${#names[@]} components"
}
"""

_UNDEPLOY_LIB = r"""
dry_run=0 preflight=1 grace=30s timeout=2m
while [ "$#" -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1 ;;
    --skip-preflight) preflight=0 ;;
    --no-wait) ;;  # accepted for symmetry with deploy.sh; undeploy never waits on helm
    --grace|--timeout)
      [ "$#" -ge 2 ] || usage_error "$1 needs a value"
      if [ "$1" = --grace ]; then grace=$2; else timeout=$2; fi
      shift ;;
    -h|--help) sed -n '2,/^set -euo/p' -- "$SCRIPT" | sed '$d'; exit 0 ;;
    *) usage_error "unknown argument: $1" ;;
  esac
  shift
done
grace_s=$(duration_s "$grace") || usage_error "--grace takes a duration such as 30s or 2m, got '$grace'"
timeout_s=$(duration_s "$timeout") || usage_error "--timeout takes a duration such as 30s or 2m, got '$timeout'"
failed=()

clear_finalizers() {  # clear_finalizers NAMESPACE OBJECT: drop the finalizers of a Terminating object
  run kubectl patch --namespace "$1" --type merge --patch '{"metadata":{"finalizers":null}}' "$2" >/dev/null
}

clear_instances() {  # clear_instances CRD: the finalizers of the instances a deleted CRD waits for
  local ns name
  while IFS=/ read -r ns name; do
    [ -n "$name" ] || continue
    echo "  clearing finalizers of $1 $name${ns:+ in $ns} (its CRD is being deleted)"
    if [ -n "$ns" ]; then clear_finalizers "$ns" "$1/$name"; else clear_finalizers default "$1/$name"; fi
  done < <(kubectl get "$1" --all-namespaces --ignore-not-found \
    --output 'jsonpath={range .items[*]}{.metadata.namespace}{"/"}{.metadata.name}{"\n"}{end}' 2>/dev/null || true)
}

settle() {  # settle < objects_of lines: wait --grace for deletion, then clear finalizers of what is stuck
  local ns obj deleting deadline n
  local -a spaces=() objects=() stuck=()
  while read -r ns obj; do
    if [ -n "$obj" ]; then spaces+=("$ns"); objects+=("$obj"); fi
  done
  if [ "${#objects[@]}" = 0 ]; then return 0; fi
  deadline=$((SECONDS + grace_s))
  for n in "${!objects[@]}"; do
    gone_by "$deadline" "${spaces[$n]}" "${objects[$n]}" && continue
    deleting=$(kubectl get --namespace "${spaces[$n]}" --ignore-not-found \
      --output 'jsonpath={.metadata.deletionTimestamp}' "${objects[$n]}" 2>/dev/null || true)
    [ -n "$deleting" ] || continue  # kept on purpose (helm.sh/resource-policy: keep), or not ours to force
    stuck+=("$n")
    case "${objects[$n]}" in
      CustomResourceDefinition.apiextensions.k8s.io/*) clear_instances "${objects[$n]#*/}" ;;
      *)
        echo "  clearing finalizers of ${objects[$n]} in ${spaces[$n]} (still Terminating after $grace)"
        clear_finalizers "${spaces[$n]}" "${objects[$n]}" || echo "  could not patch ${objects[$n]}" >&2 ;;
    esac
  done
  deadline=$((SECONDS + timeout_s))
  for n in ${stuck[@]+"${stuck[@]}"}; do
    gone_by "$deadline" "${spaces[$n]}" "${objects[$n]}" \
      || { echo "  ${objects[$n]} in ${spaces[$n]} still present after $timeout" >&2; return 1; }
  done
}

gone_by() {  # gone_by DEADLINE NAMESPACE OBJECT: wait until OBJECT is deleted, at most until DEADLINE (SECONDS)
  local left=$(($1 - SECONDS))
  if [ "$left" -lt 1 ]; then left=1; fi
  kubectl wait --for=delete --namespace "$2" --timeout "${left}s" "$3" >/dev/null 2>&1
}

remove_webhooks() {  # remove_webhooks RELEASE: webhook configurations carrying the release's instance label
  run kubectl delete validatingwebhookconfigurations,mutatingwebhookconfigurations \
    --selector "app.kubernetes.io/instance=$1" --ignore-not-found >/dev/null
}

remove_release() {  # remove_release NAMESPACE RELEASE
  local ns=$1 rel=$2 status objects
  local -a no_hooks=()
  if [ "$dry_run" = 1 ]; then
    run helm status --namespace "$ns" --output json -- "$rel"
    echo "+ when pending-upgrade or pending-rollback: helm rollback --namespace $ns -- $rel; when pending-*: --no-hooks"
    run helm uninstall --namespace "$ns" --ignore-not-found -- "$rel"
    remove_webhooks "$rel"
    echo "+ after $grace: kubectl patch away the finalizers of what the release installed and is still Terminating"
    return 0
  fi
  status=$(release_status "$ns" "$rel")
  objects=$(release_objects "$ns" "$rel")
  case "$status" in
    '') echo "  release $rel is not installed" ;;
    pending-upgrade|pending-rollback)
      echo "  release $rel is $status: rolling back, then uninstalling without hooks"
      helm rollback --namespace "$ns" -- "$rel" >/dev/null 2>&1 || echo "  rollback of $rel failed; uninstalling" >&2
      no_hooks=(--no-hooks) ;;
    pending-install|uninstalling)
      echo "  release $rel is $status: uninstalling without hooks"
      no_hooks=(--no-hooks) ;;
  esac
  if [ -n "$status" ]; then
    helm uninstall --namespace "$ns" --ignore-not-found ${no_hooks[@]+"${no_hooks[@]}"} -- "$rel" >/dev/null \
      || { echo "  helm uninstall $rel failed" >&2; return 1; }
  fi
  remove_webhooks "$rel" || return 1
  printf '%s\n' "$objects" | settle
}

remove_manifests() {  # remove_manifests NAMESPACE DIR
  local objects=
  if [ "$dry_run" = 0 ]; then
    objects=$(objects_of "$1" "$2")
  fi
  run kubectl delete --namespace "$1" --ignore-not-found --wait=false --filename "$2" >/dev/null || return 1
  if [ "$dry_run" = 1 ]; then
    echo "+ after $grace: kubectl patch away the finalizers of those objects still Terminating"
    return 0
  fi
  printf '%s\n' "$objects" | settle
}

remove_component() {  # remove_component INDEX DESCRIPTION
  echo "[$(( ${#names[@]} - $1 ))/${#names[@]}] $2"
  if ! "remove_$1"; then failed+=("${names[$1]}"); echo "$SCRIPT: ${names[$1]} not fully removed" >&2; fi
}

finish() {
  if [ "${#failed[@]}" -gt 0 ]; then echo "$SCRIPT: not fully removed: ${failed[*]}" >&2; exit 1; fi
  echo "removed ${#names[@]} components; namespaces are kept"
}
"""


def _header(script: str, purpose: str, usage: str, recipe: Recipe, options: BundleOptions) -> str:
    return _HEADER.rstrip("\n").format(
        purpose=purpose,
        generator=options.generator,
        recipe=shlex.quote(recipe.metadata.name).replace("\n", " "),
        script=script,
        usage=usage,
    )


def _array(name: str, words: Sequence[str]) -> str:
    return f"{name}=(" + " ".join(shlex.quote(w) for w in words) + ")"


def _install_body(ref: ComponentRef) -> list[str]:
    if ref.type is ComponentType.HELM:
        flags, positional = helm_install_args(ref, f"{ref.name}/values.yaml")
        return [command_line(["retry", "run", *flags], trailing=WAIT_ARGS, positional=positional)]
    lines = [command_line(["retry", "ensure_namespace", ref.namespace])]
    if ref.type is ComponentType.MANIFEST:
        lines += [command_line(["wait_crd", group, kind]) for group, kind in custom_kinds(ref)]
        # the component's namespace as kubectl's default, not --namespace: kubectl refuses an object
        # whose namespace differs from an explicit one (the sentinel's RBAC spans three)
        apply = ["in_namespace", ref.namespace, "kubectl", "apply", "--filename", manifests_dir(ref)]
    else:
        apply = ["kubectl", "apply", "--namespace", ref.namespace, "--kustomize", kustomize_url(ref)]
    return [*lines, command_line(["retry", "run", *apply])]


def _health_body(ref: ComponentRef) -> str:
    if ref.type is ComponentType.HELM:
        return command_line(["health_release", ref.namespace, ref.name])
    if ref.type is ComponentType.MANIFEST:
        return command_line(["health_manifests", ref.namespace, manifests_dir(ref)])
    return ":  # a remote kustomization: kubectl apply is its check"


def _function(name: str, comment: str, body: Sequence[str]) -> str:
    lines = [f"{name}() {{  # {comment}"]
    lines += [f"  {line} || return 1" if not line.startswith(":") else f"  {line}" for line in body]
    return "\n".join([*lines, "}"])


def _describe(ref: ComponentRef) -> str:
    return f"{ref.name} {ref.version} -> namespace {ref.namespace}"


def _comment(ref: ComponentRef) -> str:
    return re.sub(r"[^A-Za-z0-9_.:/ -]", "?", f"{ref.name} ({ref.type.value})")


def deploy_script(recipe: Recipe, options: BundleOptions) -> str:
    ordered = recipe.ordered_components()
    lines = [
        _header("deploy.sh", "Installs every component in deploymentOrder.", _DEPLOY_USAGE, recipe, options),
        _COMMON_LIB.rstrip("\n"),
        _DEPLOY_LIB.replace("__TIMEOUT__", HELM_TIMEOUT).rstrip("\n"),
        "",
        _array("names", [r.name for r in ordered]),
        _array("namespaces", sorted({r.namespace for r in ordered})),
        _array("releases", [f"{r.namespace}/{r.name}" for r in ordered if r.type is ComponentType.HELM]),
        _array("required_crds", [f"{g}/{k}" for g, k in required_crds(recipe)]),
    ]
    for n, ref in enumerate(ordered):
        lines.append("")
        lines.append(_function(f"install_{n}", _comment(ref), _install_body(ref)))
        lines.append(_function(f"health_{n}", _comment(ref), [_health_body(ref)]))
    lines += ["", "preflight_checks"]
    for n, ref in enumerate(ordered):
        lines.append(command_line(["deploy_component", str(n), _describe(ref), *ref.dependency_refs]))
    lines.append("finish")
    return "\n".join(lines) + "\n"


def _remove_body(ref: ComponentRef) -> str:
    if ref.type is ComponentType.HELM:
        return command_line(["remove_release", ref.namespace, ref.name])
    if ref.type is ComponentType.MANIFEST:
        return command_line(["remove_manifests", ref.namespace, manifests_dir(ref)])
    delete = [
        "kubectl",
        "delete",
        "--namespace",
        ref.namespace,
        "--ignore-not-found",
        "--kustomize",
        kustomize_url(ref),
    ]
    return command_line(["run", *delete])


def undeploy_script(recipe: Recipe, options: BundleOptions) -> str:
    ordered = recipe.ordered_components()
    purpose = "Removes every component in reverse deploymentOrder, with what its releases leave behind."
    lines = [
        _header("undeploy.sh", purpose, _UNDEPLOY_USAGE, recipe, options),
        _COMMON_LIB.rstrip("\n"),
        _UNDEPLOY_LIB.rstrip("\n"),
        "",
        _array("names", [r.name for r in ordered]),
    ]
    for n, ref in enumerate(ordered):
        lines.append("")
        lines.append(_function(f"remove_{n}", _comment(ref), [_remove_body(ref)]))
    lines += ["", 'if [ "$preflight" = 1 ]; then check_cluster; fi']
    for n in reversed(range(len(ordered))):
        lines.append(
            command_line(
                ["remove_component", str(n), f"removing {ordered[n].name} from namespace {ordered[n].namespace}"]
            )
        )
    lines.append("finish")
    return "\n".join(lines) + "\n"
