#!/usr/bin/env bash
# The two host packages the single-node cluster of test/node needs besides
# Go: libseccomp's headers, to build runc with seccomp (the operator's
# Deployment asks for the RuntimeDefault profile), and nft, for kube-proxy's
# nftables mode. Checked by what they provide, not by a package manager's
# records; installed with apt when missing and run as root (CI, a fresh
# Debian machine), otherwise named, before any build starts: a newcomer
# should not learn of them from runc's build twenty minutes in.
set -euo pipefail

missing=()
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
pkg-config --exists libseccomp 2>/dev/null || missing+=(libseccomp-dev)
command -v nft >/dev/null 2>&1 || [ -x /usr/sbin/nft ] || missing+=(nftables)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo ">> installing host packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  exit 0
fi
echo "make test needs the host packages ${missing[*]} (Debian: sudo apt-get install ${missing[*]}; see docs/development.md)" >&2
exit 1
