#!/usr/bin/env bash
# Checks Vault binaries by hand (docs/development.md, other Vault lines):
#
#   hack/tools/vault/check.sh bin/vault bin/vault-v1.19.5 ...   (default: bin/vault*)
#
# For each: a dev server on loopback enables the AppRole and Kubernetes auth
# methods, takes a Kubernetes auth config and an AppRole role; then a server
# with raft storage starts, is initialised and unsealed, and lists itself as
# the raft leader. Every server listens on 127.0.0.1 (CHECK_PORT, default
# 18200, and the two after it) and its files live in a temporary folder.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
port="${CHECK_PORT:-18200}"
if [ $# -eq 0 ]; then
  set -- "$root"/bin/vault "$root"/bin/vault-v*
fi
tmp="$(mktemp -d)"
pid=
trap '[ -z "$pid" ] || kill "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT

# A self-signed certificate that nothing trusts: the Kubernetes auth method
# only wants a CA to be configured.
cat >"$tmp/ca.crt" <<'EOF'
-----BEGIN CERTIFICATE-----
MIIBlDCCATmgAwIBAgIUd8Om6QUed+CDaiX0UkLOHo6tGYEwCgYIKoZIzj0EAwIw
HzEdMBsGA1UEAwwUbWluaW9udmF1bHQgY2hlY2suc2gwHhcNMjYxMjA3MTc1MjQ3
WhcNMzYxMjA0MTc1MjQ3WjAfMR0wGwYDVQQDDBRtaW5pb252YXVsdCBjaGVjay5z
aDBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABIN6OeoJlcFESSo6QE2M0KZ8riyk
n/cG17Ft0VxJ9L6AIWSd0cUaO/V8nI+L0h9LOhik2OGCFRUC+KRHihWhfmejUzBR
MB0GA1UdDgQWBBT3WLt43YUc4ehE8J+R1ZVg6Y99pjAfBgNVHSMEGDAWgBT3WLt4
3YUc4ehE8J+R1ZVg6Y99pjAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0kA
MEYCIQC7cqadmV9uIBOuO7N/27huB15+nTcSq1Ax0aPydy/5UAIhANePrYwaGzGZ
sx7DpuHNzfAjcU1FA8RR8MFbmvaq/xO5
-----END CERTIFICATE-----
EOF

# up <vault>: wait (10 s at most) until the server at VAULT_ADDR answers,
# sealed or not (`vault status` exits 1 only when it cannot ask).
up() {
  local i rc
  for i in $(seq 50); do
    rc=0
    "$1" status >/dev/null 2>&1 || rc=$?
    [ "$rc" = 1 ] || return 0
    sleep 0.2
  done
  echo "check.sh: $1 did not answer at $VAULT_ADDR" >&2
  return 1
}

# stop: end the server started last.
stop() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=
}

check() {
  local bin="$1" dir init key token
  dir="$tmp/$(basename "$bin")"
  mkdir -p "$dir/raft"
  echo ">> $("$bin" version)"

  export VAULT_ADDR="http://127.0.0.1:$port" VAULT_TOKEN=root
  "$bin" server -dev -dev-root-token-id=root -dev-listen-address="127.0.0.1:$port" >"$dir/dev.log" 2>&1 &
  pid=$!
  up "$bin"
  "$bin" auth enable approle >/dev/null
  "$bin" auth enable kubernetes >/dev/null
  "$bin" write auth/kubernetes/config kubernetes_host=https://127.0.0.1:6443 \
    disable_local_ca_jwt=true kubernetes_ca_cert="@$tmp/ca.crt" >/dev/null
  "$bin" write auth/approle/role/check token_policies=default >/dev/null
  "$bin" read -field=role_id auth/approle/role/check/role-id >/dev/null
  echo "   dev server: approle and kubernetes auth enabled and configured"
  stop

  cat >"$dir/raft.hcl" <<EOF
storage "raft" {
  path    = "$dir/raft"
  node_id = "check"
}
listener "tcp" {
  address         = "127.0.0.1:$((port + 1))"
  cluster_address = "127.0.0.1:$((port + 2))"
  tls_disable     = true
}
api_addr      = "http://127.0.0.1:$((port + 1))"
cluster_addr  = "http://127.0.0.1:$((port + 2))"
disable_mlock = true
EOF
  export VAULT_ADDR="http://127.0.0.1:$((port + 1))"
  unset VAULT_TOKEN
  "$bin" server -config="$dir/raft.hcl" >"$dir/raft.log" 2>&1 &
  pid=$!
  up "$bin"
  init="$("$bin" operator init -key-shares=1 -key-threshold=1 -format=json | tr -d ' \n')"
  key="$(sed -n 's/.*"unseal_keys_b64":\["\([^"]*\)".*/\1/p' <<<"$init")"
  token="$(sed -n 's/.*"root_token":"\([^"]*\)".*/\1/p' <<<"$init")"
  "$bin" operator unseal "$key" >/dev/null
  local i
  for i in $(seq 50); do
    VAULT_TOKEN="$token" "$bin" operator raft list-peers 2>/dev/null | grep -q 'check .*leader' && break
    [ "$i" -lt 50 ] || {
      echo "check.sh: $bin's raft server did not become leader ($dir/raft.log):" >&2
      cat "$dir/raft.log" >&2
      return 1
    }
    sleep 0.2
  done
  echo "   raft server: initialised, unsealed, leader"
  stop
}

for bin in "$@"; do
  check "$bin"
done
