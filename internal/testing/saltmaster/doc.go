// Package saltmaster is test support: it replays what a Salt master
// running saltext-vault 1.8.0 does to Vault when it issues credentials to
// minions, so that tests can run the master's real call sequence without
// Salt. No product code imports it; the part of saltext the master-check
// needs (the configuration, the issue parameters and their comparison) is
// internal/saltext, which this package builds on.
//
// It ports, with file:line citations to saltext's src/saltext/vault:
//
//   - runners/vault.py: get_config, generate_secret_id, the deprecated
//     generate_token, sync_approles, sync_entities, cleanup_auth, and the
//     internal steps they share (_get_role_id, _manage_approle,
//     _manage_entity, _manage_entity_alias, _lookup_approle_cached with its
//     1 h approle_meta cache, _parse_issue_params, _approle_params_match);
//   - utils/vault/factory.py: the master's own token lookup (parse_config's
//     defaults and merge are internal/saltext's Config);
//   - utils/vault/api.py and client.py: every request's method, path,
//     X-Vault-Wrap-TTL header and body, serialised as `requests` does
//     (Python's json.dumps: ", " and ": ", ASCII-escaped), the wrapping
//     token check of unwrap, and how Vault's statuses become exceptions;
//   - auth.py and kv.py for the minion side (Minion): AppRole login and
//     KV v2 pillar reads.
//
// What the master renders from Salt data (policies:assign, metadata:entity,
// metadata:secret) goes through the repository's port of saltext's
// templating (pkg/template), fed the caller's grains and pillar.
//
// # Fidelity
//
// testdata/saltext-issue-trace.json holds what saltext itself sent and
// returned for a matrix of configurations, Vault states and request
// sequences; hack/saltext/issue_trace.py produced it by running the real
// runner and utils modules (salt stubbed) against a scripted fake Vault,
// the same fake FakeVault is. trace_test.go replays every case and wants
// the same requests byte for byte and the same answers.
//
// # Not ported
//
// Retries (client.py VaultRetry), the master token's renewal and expiry
// (the token is looked up once and must outlive the Master), token-mode
// generate_new_token, generate_token's upgrade_request, the runners' up/down
// minion selection, signature checks (the caller authenticates minions),
// and pillar compilation (MinionData supplies grains and pillar). Where
// saltext iterates a set (sync_approles, sync_entities, cleanup_auth) the
// port goes in sorted order; CPython's order depends on string hashing.
package saltmaster
