#!/usr/bin/env bash
# Builds a test tool into $BIN (default: <repo>/bin) from the Go module proxy:
#
#   hack/tools/build.sh kube-apiserver|kubectl|etcd|vault|controller-gen|promtool|image-builder|helm
#   hack/tools/build.sh kubelet|kube-controller-manager|kube-scheduler|kube-proxy|containerd|runc|cni|pause
#   hack/tools/build.sh kube-apiserver etcd ...   (tools of hack/tools/k8s: one go build)
#   hack/tools/build.sh vault-vX.Y.Z              (another Vault line: bin/vault-vX.Y.Z)
#   hack/tools/build.sh vault-fetch               (Vault's source and modules, no compile)
#
# The second line is the single-node cluster of internal/localenv (test/node).
#
# Each tool is pinned by the go.mod of its module folder under hack/tools/ and
# by the versions below (hack/tools.mk passes the same ones). After a
# successful build the script writes $BIN/.stamp-<tool>-<version>; make uses the
# stamp to decide whether a tool is missing or of the wrong version.
#
# make tools runs the builds one at a time; make run builds kube-apiserver and
# etcd together while Vault's modules download, then Vault beside the
# operator (hack/tools.mk says why).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# module_source and prepare.
. "$here/source.sh"
BIN="${BIN:-$root/bin}"
export PATH="/usr/local/go/bin:$PATH"
# The tool modules are separate from the main module, and their go.sum files
# are committed: never let a build edit them behind our back. The compile
# settings are the Makefile's (it says why), so that the packages the tools
# share with each other and with the operator compile once; a caller's
# GOFLAGS come after, and win, but for what follows.
#
# What only the tools compile (tool-only.txt, from tool-only.sh: most of
# kube-apiserver, etcd and Vault) compiles without inlining: a fifth less
# for the compiler to do there, on a first run bound by the CPU, and
# test/scale shows the servers no slower (docs/development.md has both
# measurements). A package takes all its flags from the last -gcflags whose
# pattern matches it, so these repeat -dwarf=false and come last (after
# the Makefile's -gcflags=all=..., which would otherwise undo them).
no_inline=
while read -r p; do
  case "$p" in '' | '#'*) continue ;; esac
  no_inline+=" '-gcflags=$p/...=-dwarf=false -l'"
done <"$here/tool-only.txt"
export GOFLAGS="-mod=readonly -trimpath -gcflags=all=-dwarf=false${GOFLAGS:+ $GOFLAGS}$no_inline"
export GOWORK=off
export CGO_ENABLED="${CGO_ENABLED:-0}"

KUBERNETES_VERSION="${KUBERNETES_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.0}"
VAULT_VERSION="${VAULT_VERSION:-v1.21.4}"
CONTROLLER_GEN_VERSION="${CONTROLLER_GEN_VERSION:-v0.23.0}"
PROMTOOL_VERSION="${PROMTOOL_VERSION:-v0.316.0}"
HELM_VERSION="${HELM_VERSION:-v4.3.2}"
GGCR_VERSION="${GGCR_VERSION:-v0.22.1}"
CONTAINERD_VERSION="${CONTAINERD_VERSION:-v2.4.2}"
RUNC_VERSION="${RUNC_VERSION:-v1.5.3}"
CNI_PLUGINS_VERSION="${CNI_PLUGINS_VERSION:-v1.10.0}"
PAUSE_VERSION="${PAUSE_VERSION:-v1}"

tool="${1:?usage: build.sh kube-apiserver|kubectl|etcd|vault|vault-vX.Y.Z|vault-fetch|controller-gen|helm|promtool|image-builder|kubelet|kube-controller-manager|kube-scheduler|kube-proxy|containerd|runc|cni|pause [more tools of hack/tools/k8s]}"
mkdir -p "$BIN"

# Several tools of hack/tools/k8s (the Kubernetes components and etcd) are
# built by one go build: the packages they share compile once, and while one
# binary links the other core compiles. `make run` builds kube-apiserver and
# etcd together, `make integration-tools` the node components.
k8s_tools=()
for t in "$@"; do
  case "$t" in
  kube-apiserver | kubectl | kubelet | kube-controller-manager | kube-scheduler | kube-proxy | etcd) k8s_tools+=("$t") ;;
  *)
    if [ $# -gt 1 ]; then
      echo "build.sh: only tools of hack/tools/k8s build together, not $t" >&2
      exit 2
    fi
    ;;
  esac
done
label="$tool"
if [ ${#k8s_tools[@]} -gt 0 ]; then
  label="${k8s_tools[*]}"
  label="${label// /, }"
fi

# stamp <tool> <version>: record a finished build, dropping stamps of other
# versions. bin/vault's (.stamp-vault-<version>) are not those of the other
# Vault lines' bin/vault-<version> (.stamp-vault-<version>-line).
stamp() {
  local f
  for f in "$BIN/.stamp-$1-"*; do
    [[ "$1" == vault && "$f" == *-line ]] || rm -f "$f"
  done
  touch "$BIN/.stamp-$1-$2"
}

# check_pin <module dir> <module> <version>: the go.mod must pin what the Makefile says.
check_pin() {
  local got
  got="$(cd "$1" && go list -m -f '{{.Version}}' "$2")"
  if [ "$got" != "$3" ]; then
    echo "build.sh: $1/go.mod pins $2 $got, but $3 was asked for; update the go.mod (see docs/development.md)" >&2
    exit 1
  fi
}

started=$SECONDS
# A first build runs for minutes without a word from the go command: a line
# a minute shows a newcomer that it is still working, and for how long.
if [ "${TOOLS_TICK:-60}" -gt 0 ]; then
  (
    # The sleep dies with the ticker: an orphaned one would hold the
    # output open (and a pipe reading it) for up to a minute after the build.
    trap 'kill "$nap" 2>/dev/null; exit 0' TERM
    while :; do
      sleep "${TOOLS_TICK:-60}" &
      nap=$!
      wait "$nap"
      echo "   ... still building $label: $((SECONDS - started)) s so far"
    done
  ) &
  ticker=$!
fi
trap 'kill "${ticker:-}" 2>/dev/null || true; stop_std' EXIT
finish() {
  local size
  size="$(du -h "$BIN/$1" | cut -f1)"
  echo ">> built $1 $2 in $((SECONDS - started)) s ($size)"
}

# download <module dir> <package>...: the modules that hold the packages
# and everything they import. go build loads packages, and fetches their
# modules, GOMAXPROCS at a time, so on two cores a first build waits on the
# network two modules at a time: 24 to 27 s for kube-apiserver's and etcd's,
# against 17 s sixteen at a time (measured; the compile that follows runs
# with the machine's own GOMAXPROCS).
download() {
  (cd "$1" && shift && GOMAXPROCS=16 go list -deps "$@" >/dev/null)
}

# While a first build's modules download, the cores are mostly idle: the
# standard library's packages that every tool imports compile meanwhile, at
# nice 19 so that they never slow the download, and stop when it is done
# (what finished is in the build cache, where the go build after finds it).
# A process group of their own: the go command ignores SIGINT, and SIGTERM
# must reach the compilers too. GOTMPDIR: a go command killed leaves its
# work folder behind.
std_roots=(net/http crypto/tls crypto/x509 encoding/json text/template regexp os/exec log/slog runtime/pprof compress/gzip)
std_warm=
warm_std() {
  std_tmp="$(mktemp -d)"
  GOTMPDIR="$std_tmp" setsid nice -n 19 go build "${std_roots[@]}" >/dev/null 2>&1 &
  std_warm=$!
}
stop_std() {
  [ -n "$std_warm" ] || return 0
  kill -TERM -- "-$std_warm" 2>/dev/null || kill -TERM "$std_warm" 2>/dev/null || true
  wait "$std_warm" 2>/dev/null || true
  std_warm=
  rm -rf "$std_tmp"
}

# k8s.io/apiserver, patched: hack/tools/k8s/go.mod points it at
# bin/.build/k8s-apiserver-src, the published module with
# k8s/apiserver-<version>.patch applied. The patch leaves out a helper for
# tests only that brings kube-apiserver 60 packages of client-go's fake
# clientsets: 44.5 of the 956 compile and link seconds of its build with
# etcd (go build -debug-trace, docs/development.md). With -trimpath the copy's packages have the
# module cache's names, so those the patch does not change stay one build
# with the operator's tests, which import some of them.
declare -A apiserver_sums=(
  [v0.37.2]="h1:9Jq73PeHAA0RThpW7ou6lBcO2+SxLcPrAgleONSMUNQ="
)
prepare_apiserver() {
  local v="v0.${KUBERNETES_VERSION#v1.}" sum patch dir
  sum="${apiserver_sums[$v]:-}"
  patch="$here/k8s/apiserver-$v.patch"
  if [ -z "$sum" ] || [ ! -f "$patch" ]; then
    echo "build.sh: no pinned hash or patch for k8s.io/apiserver $v (see docs/development.md: updating Kubernetes)" >&2
    exit 1
  fi
  dir="$(module_source k8s.io/apiserver "$v" "$sum")"
  prepare "$root/bin/.build/k8s-apiserver-src" "$dir" "$patch"
}

# build_k8s: the tools of k8s_tools in one go build.
build_k8s() {
  local pkgs=() versions= t v major minor ldflags out version
  warm_std
  prepare_apiserver
  for t in "${k8s_tools[@]}"; do
    case "$t" in
    etcd) pkgs+=(go.etcd.io/etcd/server/v3) ;;
    *) pkgs+=("k8s.io/kubernetes/cmd/$t") ;;
    esac
  done
  if [[ " ${k8s_tools[*]} " == *" etcd "* ]]; then
    check_pin "$here/k8s" go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
    versions="etcd $ETCD_VERSION"
  fi
  if [ "${k8s_tools[*]}" != etcd ]; then
    check_pin "$here/k8s" k8s.io/kubernetes "$KUBERNETES_VERSION"
    versions="Kubernetes $KUBERNETES_VERSION${versions:+, $versions}"
  fi
  v="${KUBERNETES_VERSION#v}"
  major="${v%%.*}"
  minor="${v#*.}"
  minor="${minor%%.*}"
  ldflags="-s -w"
  # What k8s.io/kubernetes' hack/lib/version.sh sets; without it the binaries
  # say v0.0.0-master, and clients that look at the server version misbehave.
  # etcd links neither package.
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo ">> building $label ($versions) in one go build (first time: kube-apiserver and etcd 5 to 9 min on a quiet 2-core machine, the node components and kubectl 4 to 7)"
  mkdir -p "$BIN/.build"
  out="$(mktemp -d "$BIN/.build/k8s-out.XXXXXX")"
  { download "$here/k8s" "${pkgs[@]}" && stop_std && (cd "$here/k8s" && go build -ldflags "$ldflags" -o "$out/" "${pkgs[@]}"); } || { rm -rf "$out"; exit 1; }
  for t in "${k8s_tools[@]}"; do
    case "$t" in
    # go build names etcd's binary after go.etcd.io/etcd/server/v3: server.
    etcd) mv "$out/server" "$BIN/etcd" && version="$ETCD_VERSION" ;;
    *) mv "$out/$t" "$BIN/$t" && version="$KUBERNETES_VERSION" ;;
    esac
    stamp "$t" "$version"
    finish "$t" "$version"
  done
  rmdir "$out"
}

if [ ${#k8s_tools[@]} -gt 0 ]; then
  build_k8s
  exit 0
fi

case "$tool" in
controller-gen)
  check_pin "$here/controller-gen" sigs.k8s.io/controller-tools "$CONTROLLER_GEN_VERSION"
  echo ">> building controller-gen $CONTROLLER_GEN_VERSION (first time: ~1 min)"
  (cd "$here/controller-gen" && go build -ldflags "-s -w" -o "$BIN/controller-gen" sigs.k8s.io/controller-tools/cmd/controller-gen)
  stamp controller-gen "$CONTROLLER_GEN_VERSION"
  finish controller-gen "$CONTROLLER_GEN_VERSION"
  ;;
promtool)
  # Prometheus' rule checker and rule unit-test runner, for the alerts of
  # config/prometheus (make test runs `promtool check rules` and `promtool
  # test rules`).
  check_pin "$here/promtool" github.com/prometheus/prometheus "$PROMTOOL_VERSION"
  echo ">> building promtool $PROMTOOL_VERSION (first time: a few minutes)"
  # What Prometheus' own build stamps: without it `promtool --version` is
  # empty. The module's v0.3XX.Y is Prometheus 3.XX.Y.
  v="${PROMTOOL_VERSION#v0.3}"
  ldflags="-s -w -X github.com/prometheus/common/version.Version=3.${v:0:2}.${v#*.}"
  ldflags+=" -X github.com/prometheus/common/version.Branch=HEAD -X github.com/prometheus/common/version.Revision=$PROMTOOL_VERSION"
  # remove_all_sd: none of Prometheus' service discoveries (the cloud SDKs,
  # client-go), which checking and testing rules never use: 247 of the
  # 1,363 packages promtool would otherwise compile.
  (cd "$here/promtool" && go build -tags remove_all_sd -ldflags "$ldflags" -o "$BIN/promtool" github.com/prometheus/prometheus/cmd/promtool)
  stamp promtool "$PROMTOOL_VERSION"
  finish promtool "$PROMTOOL_VERSION"
  ;;
helm)
  # The chart's tests (charts/minion-vault-operator): lint, template, and
  # install and upgrade on the node. Its k8s.io modules are the operator's
  # (v0.37.2), so what it shares with the operator's tests compiles once.
  # `helm version` says the version of this variable (without it: v4.3).
  check_pin "$here/helm" helm.sh/helm/v4 "$HELM_VERSION"
  echo ">> building helm $HELM_VERSION (first time: 2 to 4 min)"
  (cd "$here/helm" && go build -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" -o "$BIN/helm" helm.sh/helm/v4/cmd/helm)
  stamp helm "$HELM_VERSION"
  finish helm "$HELM_VERSION"
  ;;
image-builder)
  # Our own code (hack/tools/image), on go-containerregistry: `make image`.
  check_pin "$here/image" github.com/google/go-containerregistry "$GGCR_VERSION"
  (cd "$here/image" && go build -ldflags "-s -w" -o "$BIN/image-builder" .)
  stamp image-builder "$GGCR_VERSION"
  finish image-builder "$GGCR_VERSION"
  ;;
containerd)
  # containerd with its CRI plugin, the runc shim, and ctr (images import).
  check_pin "$here/containerd" github.com/containerd/containerd/v2 "$CONTAINERD_VERSION"
  echo ">> building containerd $CONTAINERD_VERSION (containerd, containerd-shim-runc-v2, ctr)"
  ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=${CONTAINERD_VERSION#v}"
  for cmd in containerd containerd-shim-runc-v2 ctr; do
    (cd "$here/containerd" && go build -ldflags "$ldflags" -o "$BIN/$cmd" "github.com/containerd/containerd/v2/cmd/$cmd")
  done
  stamp containerd "$CONTAINERD_VERSION"
  finish containerd "$CONTAINERD_VERSION"
  ;;
runc)
  # cgo and the seccomp tag, as runc's own Makefile builds it: the operator's
  # Deployment asks for the RuntimeDefault seccomp profile, which runc can
  # only apply with libseccomp (Debian's libseccomp-dev, installed by .ci/run).
  check_pin "$here/runc" github.com/opencontainers/runc "$RUNC_VERSION"
  echo ">> building runc $RUNC_VERSION (cgo, libseccomp)"
  (cd "$here/runc" && CGO_ENABLED=1 go build -tags "seccomp urfave_cli_no_docs" \
    -ldflags "-s -w -X main.version=${RUNC_VERSION#v}" -o "$BIN/runc" github.com/opencontainers/runc)
  stamp runc "$RUNC_VERSION"
  finish runc "$RUNC_VERSION"
  ;;
cni)
  # The CNI plugins the node's pod network uses, in their own folder
  # (containerd's CNI bin_dirs).
  check_pin "$here/cni" github.com/containernetworking/plugins "$CNI_PLUGINS_VERSION"
  echo ">> building the CNI plugins $CNI_PLUGINS_VERSION (bridge, host-local, loopback)"
  mkdir -p "$BIN/cni"
  for p in main/bridge main/loopback ipam/host-local; do
    (cd "$here/cni" && go build -ldflags "-s -w" -o "$BIN/cni/${p#*/}" "github.com/containernetworking/plugins/plugins/$p")
  done
  stamp cni "$CNI_PLUGINS_VERSION"
  finish cni "$CNI_PLUGINS_VERSION"
  ;;
pause)
  # The node's sandbox image: our own static pause binary in an OCI image
  # (no registry is reachable), as a tar for `ctr images import`.
  check_pin "$here/pause" github.com/google/go-containerregistry "$GGCR_VERSION"
  mkdir -p "$BIN/.build"
  (cd "$here/pause" && go build -ldflags "-s -w" -o "$BIN/.build/pause" ./pause)
  (cd "$here/pause" && go build -ldflags "-s -w" -o "$BIN/.build/pause-image" .)
  "$BIN/.build/pause-image" --binary "$BIN/.build/pause" --ref "localhost/minionvault/pause:$PAUSE_VERSION" --tar "$BIN/pause-image.tar"
  stamp pause "$PAUSE_VERSION"
  finish pause-image.tar "$PAUSE_VERSION"
  ;;
vault)
  VAULT_VERSION="$VAULT_VERSION" BIN="$BIN" "$here/vault/build.sh"
  stamp vault "$VAULT_VERSION"
  finish vault "$VAULT_VERSION"
  ;;
vault-v*)
  # Another Vault line (pkg/vault/tested-versions.txt) than bin/vault's:
  # bin/vault-<version>, its minimal build (`make vaults`).
  v="${tool#vault-}"
  VAULT_VERSION="$v" VAULT_OUT="$tool" BIN="$BIN" "$here/vault/build.sh"
  stamp "$tool" line
  finish "$tool" "$v"
  ;;
vault-fetch)
  VAULT_VERSION="$VAULT_VERSION" BIN="$BIN" "$here/vault/build.sh" fetch
  echo ">> fetched vault $VAULT_VERSION's source and modules in $((SECONDS - started)) s"
  ;;
*)
  echo "build.sh: unknown tool $tool" >&2
  exit 2
  ;;
esac
