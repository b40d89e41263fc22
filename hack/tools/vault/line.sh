#!/usr/bin/env bash
# Writes <version>/go.mod and go.sum here for a Vault line other than the
# default (pkg/vault/tested-versions.txt lists the lines; the last is the
# default, whose go.mod is Vault's own and whose minimal.mod align.sh
# writes). A line's go.mod is its minimal build, what `make vaults` builds
# into bin/vault-<version>:
#
#   - Vault's own requirements (its go.mod), and its replaces but those of
#     its nested modules (./sdk, ./api...), which the module zip lacks: the
#     published sdk and api that Vault's go.mod names are used instead, and
#     <version>/vault.patch adapts Vault's code to them;
#   - github.com/hashicorp/vault replaced by its patched copy,
#     bin/.build/vault-src-<version> (build.sh prepare lays it out), and
#     go-discover by the one copy every line shares (build.sh says why);
#   - every module the line's minimal build shares with the default line's
#     raised to the default's version (never lowered), but Vault's own
#     modules (github.com/hashicorp/vault*, the plugins), which stay at
#     Vault's pins: a package compiles once for two lines only when its
#     module and everything under it are the same in both, and CI builds
#     every line one after the other.
#
#   line.sh vX.Y.Z            write that line's go.mod and go.sum
#   line.sh --check [vX.Y.Z]  check that line's (each line's whose source is
#                             laid out, without an argument) go.mod loads as
#                             it is and is aligned
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
export PATH="/usr/local/go/bin:$PATH" GOWORK=off CGO_ENABLED=0 LC_ALL=C
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

versions() { grep -v '^[[:space:]]*#' "$root/pkg/vault/tested-versions.txt" | grep .; }
default="$(versions | tail -n1)"

# mods <dir> <modfile> <-mod=...>: "module version" of every package of
# Vault's minimal build through that module file.
mods() {
  (cd "$1" && GOFLAGS="$3" go list -modfile="$2" -deps -tags minimal \
    -f '{{with .Module}}{{.Path}} {{.Version}}{{end}}' github.com/hashicorp/vault | sort -u)
}
# behind <line mods> <default mods>: "module line's default's" for the
# shared modules (not Vault's own) older in the line. sort -V orders
# releases and pseudo-versions as Go does, but not a pre-release against
# its own release: were it wrong, go get would lower that module, and
# line.sh stops on any lowering.
behind() {
  join <(own_out <"$1") <(own_out <"$2") | while read -r m a b; do
    [ "$a" != "$b" ] || continue
    if [ "$(printf '%s\n%s\n' "$a" "$b" | sort -V | head -n1)" = "$a" ]; then
      echo "$m $a $b"
    fi
  done
}
# own_out: all but Vault's own modules (github.com/hashicorp/vault, its
# sdk and api, the plugins), which stay at Vault's pins.
own_out() { grep -vE '^github\.com/hashicorp/vault(-plugin-[^ ]*|/[^ ]*)? ' || true; }

mods "$here/$default" minimal.mod -mod=readonly >"$tmp/default"

check() {
  local v="$1"
  if ! mods "$here/$v" go.mod -mod=readonly >"$tmp/line"; then
    echo "line.sh: $v/go.mod does not load as it is (above); run hack/tools/vault/line.sh $v" >&2
    return 1
  fi
  behind "$tmp/line" "$tmp/default" >"$tmp/behind"
  if [ -s "$tmp/behind" ]; then
    echo "line.sh: $v/go.mod has modules older than the default line's ($default) minimal build (module, $v's, $default's); run hack/tools/vault/line.sh $v:" >&2
    cat "$tmp/behind" >&2
    return 1
  fi
  echo "line.sh: $v/go.mod shares $(join <(own_out <"$tmp/line") <(own_out <"$tmp/default") | awk '$2 == $3' | wc -l) modules with $default's minimal build at its versions ($(wc -l <"$tmp/line") modules)"
}

if [ "${1:-}" = --check ]; then
  shift
  status=0
  if [ $# -gt 0 ]; then
    check "$1" || status=1
  else
    for v in $(versions); do
      [ "$v" != "$default" ] || continue
      [ -d "$root/bin/.build/vault-src-$v" ] || continue
      check "$v" || status=1
    done
  fi
  exit "$status"
fi

v="${1:?usage: line.sh vX.Y.Z | --check [vX.Y.Z]}"
if [ "$v" = "$default" ]; then
  echo "line.sh: $v is the default line: its go.mod is Vault's own, and align.sh writes its minimal.mod" >&2
  exit 2
fi
mkdir -p "$here/$v"
[ -f "$here/$v/vault.patch" ] || : >"$here/$v/vault.patch"
VAULT_VERSION="$v" "$here/build.sh" prepare
src="$root/bin/.build/vault-src-$v"
disco_version="$(sed -n 's/^disco_version=//p' "$here/build.sh")"

dir="$here/$v"
cp "$src/go.mod" "$dir/go.mod"
: >"$dir/go.sum"
edits=(-module "github.com/minionvault/minion-vault-operator/hack/tools/vault/$v"
  -go "$(sed -n 's/^go //p' "$here/$default/go.mod")" -toolchain none)
while read -r old; do
  edits+=(-dropreplace "$old")
done < <(sed -n 's/^replace \([^ ]*\) => \.\/.*/\1/p' "$dir/go.mod")
edits+=(-replace "github.com/hashicorp/vault@$v=../../../../bin/.build/vault-src-$v"
  -replace "github.com/hashicorp/go-discover=../../../../bin/.build/go-discover-src"
  -require "github.com/hashicorp/vault@$v" -require "github.com/hashicorp/go-discover@$disco_version"
  -tool github.com/hashicorp/vault)
go mod edit "${edits[@]}" "$dir/go.mod"
sed -i '1i\
// Generated by hack/tools/vault/line.sh from Vault '"$v"'\x27s go.mod: its minimal\
// build, the modules it shares with the default line\x27s minimal build raised\
// to their versions there. Do not edit; run line.sh.' "$dir/go.mod"

# Raise what the default line's minimal build has newer (go.sum filled as
# the modules load). A raised module can bring in another that the default
# has newer: until none is behind, a few rounds at most.
for round in 1 2 3 4; do
  mods "$dir" go.mod -mod=mod >"$tmp/line"
  behind "$tmp/line" "$tmp/default" >"$tmp/behind"
  [ -s "$tmp/behind" ] || break
  gets="$(awk '{ print $1 "@" $3 }' "$tmp/behind")"
  # shellcheck disable=SC2086 # one argument per module
  (cd "$dir" && GOFLAGS=-mod=mod go get $gets) 2>&1 | tee "$tmp/get"
  if grep -q 'downgraded' "$tmp/get"; then
    echo "line.sh: raising $v's modules to $default's lowered some (above)" >&2
    exit 1
  fi
done
# go get may raise Vault's own modules too (the sdk, through a module that
# requires a newer one): say so, the patch is written against Vault's pins.
for m in github.com/hashicorp/vault/sdk github.com/hashicorp/vault/api; do
  want="$(sed -n "s|^[[:space:]]*$m \\(v[^ ]*\\).*|\\1|p" "$src/go.mod" | head -n1)"
  got="$(cd "$dir" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' "$m")"
  [ "$want" = "$got" ] || echo "line.sh: note: $m is $got here, Vault $v's go.mod names $want" >&2
done
mods "$dir" go.mod -mod=mod >/dev/null
check "$v"
