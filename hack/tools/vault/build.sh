#!/usr/bin/env bash
# Builds one Vault line (VAULT_VERSION, one of pkg/vault/tested-versions.txt)
# into $BIN/$VAULT_OUT: bin/vault for the default line (the last of that
# file), bin/vault-<version> for the others. Called by hack/tools/build.sh
# vault, vault-<version> and vault-fetch (make vault, make vaults); line.sh
# calls `build.sh prepare`.
#
# VAULT_FLAVOR=minimal (the default) is Vault's own `minimal` build tag (the
# AppRole, token, userpass, cert and JWT auth methods, KV, PKI, SSH, transit,
# the database engine, the file/socket/syslog audit devices, inmem and raft
# storage) plus the Kubernetes auth method, which the patch registers: all
# the operator and its tests use. The patch also leaves out of it what
# nothing here uses and pulls in SDKs: Okta MFA, Vault Agent and Vault Proxy
# (`vault agent`, `vault proxy`), the Circonus and Stackdriver telemetry
# sinks, the cloud KMS seals (auto-unseal with AWS, Azure, GCP, AliCloud or
# OCI), and (go-discover-minimal.patch) raft's cloud auto-join. Vault 1.15 to
# 1.17 have no `minimal` tag: their patch carries Vault 1.18's back (the
# addon plugins, storage backends and login handlers moved unchanged behind
# !minimal), so every line's minimal build is the same set of features.
# v1.21.4 compiles 939 packages besides the standard library, the full build
# 2,331 (docs/development.md), through minimal.mod: go.mod with the modules
# it shares with kube-apiserver and etcd at their versions (align.sh), so
# that `make run`, which builds Vault after them, compiles those once. The
# other lines (923 to 938 packages) build through their go.mod, which is
# their minimal build with the modules they share with the default's raised
# to its versions (line.sh), so that `make vaults` compiles those once.
# VAULT_FLAVOR=full builds every builtin plugin (the default line only).
# `vault version` says which: v1.21.4+minionvault-minimal or
# v1.21.4+minionvault-full.
#
# Why not `go build github.com/hashicorp/vault`: Vault's module zip does not
# contain its nested sdk and api modules, and no published
# github.com/hashicorp/vault/sdk matches a Vault release exactly (see
# docs/development.md). So, for each line:
#   1. take the module source of Vault $VAULT_VERSION from the module cache
#      (checked against the hash pinned below, module_sums),
#   2. copy it to bin/.build/vault-src-$VAULT_VERSION (ignored by git: one per
#      line, so that two lines can be prepared side by side) and make it
#      writable,
#   3. apply $VAULT_VERSION/vault.patch from this folder: the smallest change
#      that makes it compile against the published sdk and api that its
#      go.mod pins (the patch's go.mod hunk moves a line to another
#      published sdk or api where that is the smaller change), plus the
#      minimal build's cuts,
#   4. build it through $VAULT_VERSION/'s module (go.mod/go.sum pin every
#      dependency, minimal.mod/minimal.sum for the default's minimal build;
#      their replace points github.com/hashicorp/vault at the copy).
# `build.sh fetch` does 1 to 3 and downloads the build's modules: make run
# does it while kube-apiserver compiles.
# No Vault source is kept in git.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
BIN="${BIN:-$root/bin}"
VAULT_VERSION="${VAULT_VERSION:?}"
# The binary's name in $BIN: vault for the default line, vault-<version>
# for the others (hack/tools/build.sh says which).
VAULT_OUT="${VAULT_OUT:-vault}"
VAULT_FLAVOR="${VAULT_FLAVOR:-minimal}"
case "$VAULT_FLAVOR" in
minimal) tags=minimal ;;
full) tags= ;;
*)
  echo "vault/build.sh: VAULT_FLAVOR is minimal or full, not '$VAULT_FLAVOR'" >&2
  exit 2
  ;;
esac
export PATH="/usr/local/go/bin:$PATH" GOWORK=off CGO_ENABLED="${CGO_ENABLED:-0}"

# The module hash of github.com/hashicorp/vault at each version built here
# (pkg/vault/tested-versions.txt lists them).
declare -A module_sums=(
  [v1.15.6]="h1:RM1jdvgOAGQL5i1peh8cdwt5RC0GvMJZ2TTLeQXmcDI="
  [v1.16.3]="h1:KjGzz/iBQON4BmclK6kapQBHqg0YCte1m0Yrxbr1eo8="
  [v1.17.6]="h1:vGJ0vi7pjimbl+G/YljuYvsGCZ5tlrOwlgwOMtU6Mio="
  [v1.18.5]="h1:CYtixI0G+kD+y/Q2FnWdbAs03iOGbdcKyRrgmPvKaVE="
  [v1.19.5]="h1:19wLqRe9MagoARp1nqayb0erZ4TAgGG6URMA+WoB8J0="
  [v1.20.4]="h1:kgr05ZotZVub1dvukCcQUbGGyGnNKWdQV+ZaHTTiYMI="
  [v1.21.4]="h1:KHGcdSnJtombvae1gDk+jZ50kiFngJPFDOvcCJRnU0c="
)
want_sum="${module_sums[$VAULT_VERSION]:-}"
# go-discover, cut to no provider for every line's minimal build (below).
disco_version=v1.1.1-0.20250922102917-55e5010ad859
disco_sum="h1:CYvtQfS6WBZdva446zuZEpHxDfI3GTenOM4SCmGWUR8="
line="$here/$VAULT_VERSION"
patch_file="$line/vault.patch"
if [ -z "$want_sum" ] || [ ! -f "$patch_file" ]; then
  echo "vault/build.sh: no pinned hash or $VAULT_VERSION/vault.patch for Vault $VAULT_VERSION (see docs/development.md: updating Vault)" >&2
  exit 1
fi
# One copy per version, so that two lines can be prepared side by side: the
# go.mod of each line's folder refers to its path.
src="$root/bin/.build/vault-src-$VAULT_VERSION"

mode="${1:-build}"
case "$mode" in
build)
  if [ "$VAULT_OUT" = vault ]; then
    echo ">> building vault $VAULT_VERSION, $VAULT_FLAVOR build (first time: about 3 to 4 min alone on a quiet 2-core machine, about 2 beside the operator after kube-apiserver's build, which compiled 290 of its packages; it peaks at about 2.2 GB of memory)"
  else
    echo ">> building $VAULT_OUT, $VAULT_FLAVOR build (first time, after bin/vault has filled the build cache: about a minute on a 2-core machine, most of it the packages of Vault itself and its sdk; alone from an empty cache about as long as bin/vault)"
  fi
  ;;
# `make run` fetches while kube-apiserver compiles: the downloads are most of
# a minute of network and little CPU, and Vault's build then only compiles.
fetch) echo ">> fetching vault $VAULT_VERSION's source and the modules of its $VAULT_FLAVOR build (no compile yet)" ;;
# line.sh: only the patched sources (Vault's, go-discover's), to write a
# line's go.mod from.
prepare) ;;
*)
  echo "vault/build.sh: build, fetch or prepare, not '$mode'" >&2
  exit 2
  ;;
esac

# module_source, download_field and prepare.
. "$here/../source.sh"

echo "   fetching github.com/hashicorp/vault@$VAULT_VERSION from the module proxy"
vault_dir="$(module_source github.com/hashicorp/vault "$VAULT_VERSION" "$want_sum")"
prepare "$src" "$vault_dir" "$patch_file"

mkdir -p "$line"
cd "$line"
# The default line's folder has go.mod (Vault's own pins: the full build)
# and minimal.mod (the minimal build, aligned by align.sh); the other lines'
# have go.mod only, which is their minimal build (line.sh writes it).
modfile="$line/go.mod"
if [ "$VAULT_FLAVOR" = full ] && [ ! -f "$line/minimal.mod" ]; then
  echo "vault/build.sh: Vault $VAULT_VERSION has only the minimal build here ($VAULT_VERSION/go.mod); VAULT_FLAVOR=full is the default line's" >&2
  exit 1
fi
if [ "$VAULT_FLAVOR" = minimal ]; then
  # The minimal build also leaves out raft's cloud auto-join: go-discover's
  # providers pull in the AWS (EC2, ECS), Azure, GCE, vSphere, OpenStack and
  # Kubernetes client libraries, 463 of the 1,910 packages Vault compiles.
  # Its source comes from the module cache (checked against the hash
  # below), patched to register no provider; every line's minimal build
  # replaces the module with that one copy (the same version for all: its
  # API has not changed since v1.15).
  # minimal.mod (align.sh) also raises the modules Vault shares with
  # kube-apiserver and etcd to their versions, so that they compile once;
  # the other lines' go.mod raises those they share with the default
  # line's minimal build to its versions (line.sh).
  disco_dir="$(module_source github.com/hashicorp/go-discover "$disco_version" "$disco_sum")"
  prepare "$root/bin/.build/go-discover-src" "$disco_dir" "$here/go-discover-minimal.patch"
  [ ! -f "$line/minimal.mod" ] || modfile="$line/minimal.mod"
fi
[ "$mode" != prepare ] || exit 0

# Listing the build's packages downloads the modules that hold them,
# sixteen at a time (build.sh's download says why); when they are all in
# the module cache already, it takes a second.
GOMAXPROCS=16 go list -modfile="$modfile" -tags "$tags" -deps github.com/hashicorp/vault >/dev/null
[ "$mode" != fetch ] || exit 0

echo "   compiling and linking"
# GOFLAGS are build.sh's: -mod=readonly and kube-apiserver's compile settings.
go build -modfile="$modfile" -tags "$tags" \
  -ldflags "-s -w -X github.com/hashicorp/vault/version.VersionMetadata=minionvault-$VAULT_FLAVOR" \
  -o "$BIN/$VAULT_OUT" github.com/hashicorp/vault
"$BIN/$VAULT_OUT" version
