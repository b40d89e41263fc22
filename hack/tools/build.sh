#!/usr/bin/env bash
# Builds one test tool into $BIN (default: <repo>/bin) from the Go module proxy:
#
#   hack/tools/build.sh kube-apiserver|kubectl|etcd|vault|controller-gen
#
# Each tool is pinned by the go.mod of its module folder under hack/tools/ and
# by the versions below (hack/tools.mk passes the same ones). After a
# successful build the script writes $BIN/.stamp-<tool>-<version>; make uses the
# stamp to decide whether a tool is missing or of the wrong version.
#
# Builds run one at a time: the Vault link alone peaks at about 6 GB.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
BIN="${BIN:-$root/bin}"
export PATH="/usr/local/go/bin:$PATH"
# The tool modules are separate from the main module, and their go.sum files
# are committed: never let a build edit them behind our back.
export GOFLAGS="-mod=readonly${GOFLAGS:+ $GOFLAGS}"
export GOWORK=off
export CGO_ENABLED="${CGO_ENABLED:-0}"

KUBERNETES_VERSION="${KUBERNETES_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.0}"
VAULT_VERSION="${VAULT_VERSION:-v1.21.4}"
CONTROLLER_GEN_VERSION="${CONTROLLER_GEN_VERSION:-v0.23.0}"

tool="${1:?usage: build.sh kube-apiserver|kubectl|etcd|vault|controller-gen}"
mkdir -p "$BIN"

# stamp <tool> <version>: record a finished build, dropping stamps of other versions.
stamp() {
  rm -f "$BIN/.stamp-$1-"*
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
finish() {
  local size
  size="$(du -h "$BIN/$1" | cut -f1)"
  echo ">> built $1 $2 in $((SECONDS - started)) s ($size)"
}

case "$tool" in
kube-apiserver | kubectl)
  check_pin "$here/k8s" k8s.io/kubernetes "$KUBERNETES_VERSION"
  v="${KUBERNETES_VERSION#v}"
  major="${v%%.*}"
  minor="${v#*.}"
  minor="${minor%%.*}"
  ldflags="-s -w"
  # What k8s.io/kubernetes' hack/lib/version.sh sets; without it the binaries
  # say v0.0.0-master, and clients that look at the server version misbehave.
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo ">> building $tool $KUBERNETES_VERSION from k8s.io/kubernetes (first time: kube-apiserver 6-15 min, kubectl about 1 min more)"
  (cd "$here/k8s" && go build -trimpath -ldflags "$ldflags" -o "$BIN/$tool" "k8s.io/kubernetes/cmd/$tool")
  stamp "$tool" "$KUBERNETES_VERSION"
  finish "$tool" "$KUBERNETES_VERSION"
  ;;
etcd)
  check_pin "$here/k8s" go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
  echo ">> building etcd $ETCD_VERSION (first time: ~1 min)"
  (cd "$here/k8s" && go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3)
  stamp etcd "$ETCD_VERSION"
  finish etcd "$ETCD_VERSION"
  ;;
controller-gen)
  check_pin "$here/controller-gen" sigs.k8s.io/controller-tools "$CONTROLLER_GEN_VERSION"
  echo ">> building controller-gen $CONTROLLER_GEN_VERSION (first time: ~1 min)"
  (cd "$here/controller-gen" && go build -trimpath -ldflags "-s -w" -o "$BIN/controller-gen" sigs.k8s.io/controller-tools/cmd/controller-gen)
  stamp controller-gen "$CONTROLLER_GEN_VERSION"
  finish controller-gen "$CONTROLLER_GEN_VERSION"
  ;;
vault)
  VAULT_VERSION="$VAULT_VERSION" BIN="$BIN" "$here/vault/build.sh"
  stamp vault "$VAULT_VERSION"
  finish vault "$VAULT_VERSION"
  ;;
*)
  echo "build.sh: unknown tool $tool" >&2
  exit 2
  ;;
esac
