#!/usr/bin/env bash
# The compatibility suite (docs/compatibility.md): the same tests against
# every Vault line in pkg/vault/tested-versions.txt, one server at a time.
# Called by `make compat` after `make vaults`; `COMPAT_LINES="v1.19.5"`
# runs some lines only. Writes a table of each line's result and time to
# $BIN/compat/report.md and fails when any line fails.
#
# What runs against each line:
#   test/e2e   TestCompatibilityRestart  the version read and judged; a
#                                         restart writes nothing, every object
#                                         still provably the operator's
#              the basic behaviours      creation, resync, pillar change,
#                                         drift correction, bad input,
#                                         deletion and retention, Vault
#                                         unreachable, foreign policies
#                                         (basic, below: the twelve tests of
#                                         the former TestOperator story)
#              TestOwnership (1 to 5)    switches, hand-deleted roles, half-
#                                         failed applies, no needless writes
#              TestSwitchBetweenTwoConnectionsToOneVault
#              TestConnections (kubernetes auth)   the Kubernetes auth login
#              TestSaltMasterBesideTheOperator     the Salt master beside the
#                                         operator (its calls replayed): A, the
#                                         issue-only policy; B, its written
#                                         policy failing closed; C, saltext's
#                                         quickstart policy, each fight
#              TestTenantForgeries       a hostile tenant's forged bindings,
#                                         annotations, finalizers and status
#   pkg/acl    TestIntegrationAgreesWithVault      the access audit's
#                                         evaluator against the server's own
#                                         sys/capabilities, random cases
#              TestIntegrationWriteParity          the policies the release
#                                         refuses, the audit's parser refuses
#              TestIntegrationSpecRows             the specification's rows
#   test/dev   TestDevOnce               the quickstart story
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${BIN:-$root/bin}"
cd "$root"

mapfile -t all < <(grep -v '^[[:space:]]*#' pkg/vault/tested-versions.txt | grep -v '^[[:space:]]*$')
default="${all[-1]}"
read -r -a lines <<<"${COMPAT_LINES:-${all[*]}}"

# The basic behaviours, a test each (test/e2e, docs/development.md).
basic='TestApplyWritesWhatTheBindingsRender|TestResyncInSyncWritesNothing|TestPillarChangeIsFollowed|TestDriftIsCorrectedOrOnlyReported|TestBadInputIsRefused|TestDeletionRemovesVaultObjects|TestDeletionRetainsVaultObjects|TestRetainedObjectsAreNotHandedToTheDuplicate|TestUnreachableVaultIsSaidAndConverges|TestDeletionWaitsForAnUnreachableVault|TestAForeignPolicyIsNotOverwritten|TestDeletionDoesNotHangWithoutAConnection'
run='^(TestCompatibilityRestart|'"$basic"'|TestOwnership|TestSwitchBetweenTwoConnectionsToOneVault|TestConnections|TestSaltMasterBesideTheOperator|TestTenantForgeries|TestIntegrationAgreesWithVault|TestIntegrationWriteParity|TestIntegrationSpecRows|TestDevOnce)$'
# Subtests that say nothing of the server's line: the 100-handover loop and
# TestConnections' other subtests (Secrets, backoff, metrics, logs).
skip='^TestOwnership$/^handover|^TestConnections$/^(a_rotated|Vault_down|metrics|no_credential)'

out="$BIN/compat"
mkdir -p "$out"
report="$out/report.md"
{
  echo "# Compatibility suite, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "| Vault | result | time (s) | tests |"
  echo "|---|---|---|---|"
} >"$report"
failed=()
suite_start=$(date +%s)
for v in "${lines[@]}"; do
  bin="$BIN/vault-$v"
  [ "$v" = "$default" ] && bin="$BIN/vault"
  if [ ! -x "$bin" ]; then
    echo "compat: $bin missing: run \`make vaults\`" >&2
    exit 1
  fi
  echo ">> compatibility suite against $("$bin" version | head -1)"
  log="$out/$v.log"
  start=$(date +%s)
  set +e
  # Two packages at a time, each with its own servers: mostly waiting on
  # them, not computing.
  VAULT_BIN="$bin" MINIONVAULT_TOOLS_DIR="$BIN" go test -tags integration -count=1 -p 2 -timeout 15m -v \
    -run "$run" -skip "$skip" ./test/e2e/ ./pkg/acl/ ./test/dev/ >"$log" 2>&1
  rc=$?
  set -e
  secs=$(($(date +%s) - start))
  passed=$(grep -c -E '^\s*--- PASS' "$log" || true)
  fails=$(grep -c -E '^\s*--- FAIL' "$log" || true)
  if [ $rc -eq 0 ]; then
    result=pass
  else
    result=FAIL
    failed+=("$v")
    grep -E '^\s*--- FAIL|^FAIL|_test.go:[0-9]+:' "$log" | head -40 >&2 || true
  fi
  echo "   $v: $result in ${secs}s ($passed passed, $fails failed; log $log)"
  echo "| $v | $result | $secs | $passed passed, $fails failed |" >>"$report"
done
total=$(($(date +%s) - suite_start))
{
  echo
  echo "Total: ${total}s for ${#lines[@]} lines."
} >>"$report"
cat "$report"
if [ ${#failed[@]} -gt 0 ]; then
  echo "compat: failed against ${failed[*]} (logs in $out)" >&2
  exit 1
fi
