#!/usr/bin/env bash
# Build the Kubernetes control-plane binaries dsx sim needs from the Go module proxy.
#
# Why a wrapper module: k8s.io/kubernetes requires its staging modules at v0.0.0 with
# relative replaces, which Go ignores for dependencies. We map each k8s.io/<x> v0.0.0 to the
# published v0.<minor>.<patch> and build from a scratch module. etcd gets its own wrapper so
# version selection does not cross-contaminate.
#
# Measured on 2 cores with empty Go caches (2026-11-29): 534 s; binaries 405 MB, plus a Go
# module cache of 1.4 GB and a build cache of 3.7 GB under the dsx cache folder (reused).
#
# The certification engine's controllers come next: JobSet and Kubeflow Trainer's controller
# manager (the versions the recipe's kubeflow-trainer 2.1.0 chart deploys), with the CRDs and
# webhook configurations their module sources ship, copied beside the binaries (engine/). The
# JobSet proxy entry lists no versions, so it is built from a wrapper module that requires the
# exact one. Measured on 2 cores with the Kubernetes modules cached (2026-12-02): about 8 minutes.
#
# Usage: hack/build-control-plane.sh [OUT_DIR]
#   K8S_VERSION (default 1.36.3), ETCD_VERSION (3.6.16), KWOK_VERSION (0.8.0),
#   JOBSET_VERSION (0.10.1), TRAINER_VERSION (2.1.0)
#   OUT_DIR defaults to ~/.cache/dsx/control-plane/v$K8S_VERSION
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.36.3}"
ETCD_VERSION="${ETCD_VERSION:-3.6.16}"
KWOK_VERSION="${KWOK_VERSION:-0.8.0}"
JOBSET_VERSION="${JOBSET_VERSION:-0.10.1}"
TRAINER_VERSION="${TRAINER_VERSION:-2.1.0}"
CACHE_ROOT="${DSX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dsx}"
OUT_DIR="${1:-$CACHE_ROOT/control-plane/v$K8S_VERSION}"
WORK="$CACHE_ROOT/go-build-work"

export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
export GOFLAGS="-trimpath -mod=mod"
export GOMODCACHE="${GOMODCACHE:-$CACHE_ROOT/gomod}"
export GOCACHE="${GOCACHE:-$CACHE_ROOT/gocache}"
export CGO_ENABLED=0
export GOPROXY="${GOPROXY:-https://proxy.golang.org,direct}"

minor="${K8S_VERSION#*.}"; minor="${minor%%.*}"
staging_version="v0.${K8S_VERSION#1.}"

mkdir -p "$OUT_DIR" "$WORK"
start=$(date +%s)
log() { echo "[build-control-plane] $*" >&2; }

have() { [ -x "$OUT_DIR/$1" ]; }

# Progress, one line per binary: "step N/6 NAME (elapsed S s; next: NEXT)". dsx.sim.binaries reads
# these lines to report progress and to name the binary a failed build was working on.
ORDER=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok jobset-controller trainer-controller-manager)
step() {
  local name="$1" i next="done"
  for i in "${!ORDER[@]}"; do
    if [ "${ORDER[$i]}" = "$name" ]; then
      [ $((i + 1)) -lt ${#ORDER[@]} ] && next="${ORDER[$((i + 1))]}"
      log "step $((i + 1))/${#ORDER[@]} $name (elapsed $(( $(date +%s) - start )) s; next: $next)"
      return
    fi
  done
}

# First line of a command's output, without a pipe into head: under pipefail the writer of a long output
# dies of SIGPIPE when head exits first, and the whole script fails (issue 12).
first_line() {
  local out
  out=$("$@" 2>&1) || true
  printf '%s\n' "${out%%$'\n'*}"
}

if ! (have kube-apiserver && have kube-controller-manager && have kube-scheduler && have kubectl); then
  log "kubernetes v$K8S_VERSION (staging $staging_version)"
  mod="$WORK/k8s-$K8S_VERSION"
  rm -rf "$mod"; mkdir -p "$mod"; cd "$mod"
  go mod init dsx.local/cpbuild >/dev/null 2>&1
  gomod_file=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  # every staging requirement pinned at v0.0.0 gets its published version
  replaces=()
  while read -r path; do
    replaces+=("-replace=$path=$path@$staging_version")
  done < <(grep -E '^\s*k8s\.io/[a-z0-9-]+ v0\.0\.0\s*(//.*)?$' "$gomod_file" | awk '{print $1}' | sort -u)
  go mod edit "${replaces[@]}"
  go get "k8s.io/kubernetes@v$K8S_VERSION"
  # an unversioned package path would upgrade k8s.io/kubernetes to the newest release
  go get "k8s.io/kubernetes/cmd/kube-apiserver@v$K8S_VERSION" "k8s.io/kubernetes/cmd/kube-controller-manager@v$K8S_VERSION" \
         "k8s.io/kubernetes/cmd/kube-scheduler@v$K8S_VERSION" "k8s.io/kubernetes/cmd/kubectl@v$K8S_VERSION"
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION \
    -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
    -X k8s.io/component-base/version.gitTreeState=clean \
    -X k8s.io/client-go/pkg/version.gitVersion=v$K8S_VERSION \
    -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    have "$cmd" && continue
    step "$cmd"
    go build -p 2 -ldflags "$ldflags" -o "$OUT_DIR/$cmd" "k8s.io/kubernetes/cmd/$cmd"
  done
fi

if ! have etcd; then
  step etcd
  mod="$WORK/etcd-$ETCD_VERSION"
  rm -rf "$mod"; mkdir -p "$mod"; cd "$mod"
  go mod init dsx.local/etcdbuild >/dev/null 2>&1
  go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION"
  go build -ldflags "-s -w" -o "$OUT_DIR/etcd" go.etcd.io/etcd/server/v3
fi

if ! have kwok; then
  step kwok
  GOBIN="$OUT_DIR" go install -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=v$KWOK_VERSION" \
    "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION"
fi

# Module source of an exact version (the module cache keeps it read-only): its CRDs and webhooks.
module_dir() { go mod download -json "$1@$2" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])'; }
ENGINE_DIR="$OUT_DIR/engine"
if ! have jobset-controller || [ ! -f "$ENGINE_DIR/jobset-v$JOBSET_VERSION/crds.yaml" ]; then
  step jobset-controller
  mod="$WORK/jobset-$JOBSET_VERSION"
  rm -rf "$mod"; mkdir -p "$mod"; cd "$mod"
  go mod init dsx.local/jobsetbuild >/dev/null 2>&1
  go mod edit -require="sigs.k8s.io/jobset@v$JOBSET_VERSION"
  go mod download "sigs.k8s.io/jobset@v$JOBSET_VERSION"
  src=$(module_dir sigs.k8s.io/jobset "v$JOBSET_VERSION")
  go build -ldflags "-s -w" -o "$OUT_DIR/jobset-controller" sigs.k8s.io/jobset
  mkdir -p "$ENGINE_DIR/jobset-v$JOBSET_VERSION"
  cat "$src"/config/components/crd/bases/*.yaml > "$ENGINE_DIR/jobset-v$JOBSET_VERSION/crds.yaml"
  cp "$src/config/components/webhook/manifests.yaml" "$ENGINE_DIR/jobset-v$JOBSET_VERSION/webhooks.yaml"
fi

if ! have trainer-controller-manager || [ ! -f "$ENGINE_DIR/trainer-v$TRAINER_VERSION/crds.yaml" ]; then
  step trainer-controller-manager
  mod="$WORK/trainer-$TRAINER_VERSION"
  rm -rf "$mod"; mkdir -p "$mod"; cd "$mod"
  go mod init dsx.local/trainerbuild >/dev/null 2>&1
  GOBIN="$OUT_DIR" go install -ldflags "-s -w" \
    "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager@v$TRAINER_VERSION"
  src=$(module_dir github.com/kubeflow/trainer/v2 "v$TRAINER_VERSION")
  mkdir -p "$ENGINE_DIR/trainer-v$TRAINER_VERSION"
  for crd in "$src"/manifests/base/crds/trainer.kubeflow.org_*.yaml; do
    printf -- '---\n'; cat "$crd"
  done > "$ENGINE_DIR/trainer-v$TRAINER_VERSION/crds.yaml"
  cp "$src/manifests/base/webhook/manifests.yaml" "$ENGINE_DIR/trainer-v$TRAINER_VERSION/webhooks.yaml"
fi

end=$(date +%s)
log "done in $((end - start)) s; binaries in $OUT_DIR"
du -sh "$OUT_DIR" >&2
for b in kube-apiserver kube-controller-manager kube-scheduler etcd kwok; do
  printf '%s: %s\n' "$b" "$(first_line "$OUT_DIR/$b" --version)" >&2
done
printf 'kubectl: %s\n' "$(first_line "$OUT_DIR/kubectl" version --client)" >&2
