#!/usr/bin/env bash
# Builds the vault server into $BIN/vault. Called by hack/tools/build.sh vault.
#
# VAULT_FLAVOR=minimal (the default) is Vault's own `minimal` build tag (the
# AppRole, token, userpass, cert and JWT auth methods, KV, PKI, SSH, transit,
# the database engine, the file/socket/syslog audit devices, inmem and raft
# storage) plus the Kubernetes auth method, which the patch registers: all
# the operator and its tests use. The patch also leaves out of it what pulls
# in cloud SDKs that nothing here uses: Okta MFA, Vault Agent's cloud
# auto-auth methods, the cloud KMS seals (auto-unseal with AWS, Azure, GCP,
# AliCloud or OCI), and (go-discover-minimal.patch) raft's cloud auto-join.
# It compiles 1,010 packages besides the standard library, the full build
# 2,331 (docs/development.md).
# VAULT_FLAVOR=full builds every builtin plugin. `vault version` says which:
# v1.21.4+minionvault-minimal or v1.21.4+minionvault-full.
#
# Why not `go build github.com/hashicorp/vault`: Vault's module zip does not
# contain its nested sdk module, and no published github.com/hashicorp/vault/sdk
# matches any recent Vault release exactly (see docs/development.md). So:
#   1. take the module source of Vault $VAULT_VERSION from the module cache
#      (checked against the hash pinned below),
#   2. copy it to bin/.build/vault-src (ignored by git) and make it writable,
#   3. apply vault-$VAULT_VERSION.patch from this folder: the smallest change
#      that makes it compile against the published sdk pinned in go.mod here,
#   4. build it through this folder's module (go.mod/go.sum pin every
#      dependency; its replace points github.com/hashicorp/vault at the copy).
# No Vault source is kept in git.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
BIN="${BIN:-$root/bin}"
VAULT_VERSION="${VAULT_VERSION:?}"
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

# The module hash of github.com/hashicorp/vault at the pinned version.
declare -A module_sums=(
  [v1.21.4]="h1:KHGcdSnJtombvae1gDk+jZ50kiFngJPFDOvcCJRnU0c="
)
want_sum="${module_sums[$VAULT_VERSION]:-}"
patch_file="$here/vault-$VAULT_VERSION.patch"
if [ -z "$want_sum" ] || [ ! -f "$patch_file" ]; then
  echo "vault/build.sh: no pinned hash or patch for Vault $VAULT_VERSION (see docs/development.md: updating Vault)" >&2
  exit 1
fi
src="$root/bin/.build/vault-src" # go.mod here refers to this path

echo ">> building vault $VAULT_VERSION, $VAULT_FLAVOR build (first time: about 3 to 4 min alone on a quiet 2-core machine, 6 to 8 beside kube-apiserver; it peaks at about 2.2 GB of memory)"
echo "   fetching github.com/hashicorp/vault@$VAULT_VERSION from the module proxy"
got_sum="$(cd "$(mktemp -d)" && GOFLAGS= go mod download -json "github.com/hashicorp/vault@$VAULT_VERSION" | sed -n 's/^[[:space:]]*"Sum": "\(.*\)",$/\1/p')"
if [ "$got_sum" != "$want_sum" ]; then
  echo "vault/build.sh: github.com/hashicorp/vault@$VAULT_VERSION has hash '$got_sum', want $want_sum" >&2
  exit 1
fi
mod_dir="$(GOFLAGS= go env GOMODCACHE)/github.com/hashicorp/vault@$VAULT_VERSION"

# A fresh copy each time: the patch applies to pristine source only.
echo "   copying the source to $src and applying $(basename "$patch_file")"
rm -rf "$src"
mkdir -p "$(dirname "$src")"
cp -R "$mod_dir" "$src"
chmod -R u+w "$src"
patch -s -p1 -d "$src" --no-backup-if-mismatch < "$patch_file"

cd "$here"
modfile="$here/go.mod"
if [ "$VAULT_FLAVOR" = minimal ]; then
  # The minimal build also leaves out raft's cloud auto-join: go-discover's
  # providers pull in the AWS (EC2, ECS), Azure, GCE, vSphere, OpenStack and
  # Kubernetes client libraries, 463 of the 1,910 packages Vault compiles.
  # Its source comes from the module cache (checked against go.sum), patched
  # to register no provider, and replaces the module through a copy of go.mod.
  echo "   copying github.com/hashicorp/go-discover and applying go-discover-minimal.patch (no cloud auto-join)"
  disco_dir="$(GOFLAGS=-mod=readonly go mod download -json github.com/hashicorp/go-discover | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  disco_src="$root/bin/.build/go-discover-src"
  rm -rf "$disco_src"
  cp -R "$disco_dir" "$disco_src"
  chmod -R u+w "$disco_src"
  patch -s -p1 -d "$disco_src" --no-backup-if-mismatch < "$here/go-discover-minimal.patch"
  modfile="$root/bin/.build/vault-minimal.mod"
  cp "$here/go.mod" "$modfile"
  cp "$here/go.sum" "${modfile%.mod}.sum"
  go mod edit -modfile="$modfile" -replace "github.com/hashicorp/go-discover=$disco_src"
fi

echo "   compiling and linking"
GOFLAGS=-mod=readonly go build -modfile="$modfile" -trimpath -tags "$tags" \
  -ldflags "-s -w -X github.com/hashicorp/vault/version.VersionMetadata=minionvault-$VAULT_FLAVOR" \
  -o "$BIN/vault" github.com/hashicorp/vault
"$BIN/vault" version
