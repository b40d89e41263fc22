// Package saltext is the part of saltext-vault 1.8.0's master logic that
// the master-check (internal/mastercheck) needs: the master's `vault:`
// configuration with saltext's defaults merged in (utils/vault/factory.py
// parse_config: Config), the issue parameters it writes to roles
// (runners/vault.py _parse_issue_params: ParseIssueParams) and its
// comparison of them with a role as Vault reads it (_approle_params_match:
// ParamsMatch), on the repository's model of Python values (pkg/value).
//
// The Salt master replayer (internal/testing/saltmaster, test support)
// runs the master's whole call sequence on this same code; the trace of
// saltext itself it replays (its testdata) holds this package's vectors
// too.
package saltext
