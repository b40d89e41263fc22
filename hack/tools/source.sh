# Sourced by build.sh and vault/build.sh: the patched module sources that
# the tools build from (bin/.build/*-src, ignored by git), for modules
# whose published source needs a change to build the way we want.

# download_field <field>: a string field of `go mod download -json` on stdin.
download_field() { sed -n 's/^[[:space:]]*"'"$1"'": "\(.*\)",$/\1/p'; }

# module_source <module> <version> <h1 hash>: download the module at that
# version from the proxy and print its folder in the module cache, after
# checking it against the hash pinned by the caller. Run outside any module,
# so that the version asked for is the one fetched (a go.mod replacing the
# module with its patched copy would answer with the copy).
module_source() {
  local scratch json sum dir
  scratch="$(mktemp -d)"
  json="$(cd "$scratch" && GOFLAGS= go mod download -json "$1@$2")" || { rm -rf "$scratch"; return 1; }
  rm -rf "$scratch"
  sum="$(download_field Sum <<<"$json")"
  dir="$(download_field Dir <<<"$json")"
  if [ "$sum" != "$3" ]; then
    echo "source.sh: $1@$2 has hash '$sum', want $3" >&2
    return 1
  fi
  echo "$dir"
}

# prepare <dir> <module dir> <patch>: copy the module's source to dir and
# apply the patch, unless dir already holds exactly that (the patch applies
# to pristine source only, so a changed patch or version means a fresh copy).
# Under a lock: builds run side by side (make -j) may prepare the same copy.
prepare() {
  local dir="$1" from="$2" patch="$3" want
  want="$(basename "$from") $(sha256sum <"$patch")"
  mkdir -p "$(dirname "$dir")"
  (
    flock 9
    if [ "$(cat "$dir/.minionvault-prepared" 2>/dev/null)" = "$want" ]; then
      exit 0
    fi
    echo "   copying $(basename "$from") to $dir and applying $(basename "$patch")"
    rm -rf "$dir"
    cp -R "$from" "$dir"
    chmod -R u+w "$dir"
    patch -s -p1 -d "$dir" --no-backup-if-mismatch <"$patch"
    echo "$want" >"$dir/.minionvault-prepared"
  ) 9>"$dir.lock"
}
