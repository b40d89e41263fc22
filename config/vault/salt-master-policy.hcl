# minion-vault-operator: the Vault ACL policy of a Salt master beside the operator.
#
# The master (saltext-vault, issue:type approle) keeps handing minions their
# role IDs and secret IDs; the operator owns everything else: roles, entities,
# aliases and ACL policies. With this policy the master can only issue:
# each saltext call that would create, rewrite or delete what the operator
# owns (a missing role, AppRole parameters unlike the role's,
# vault.sync_approles, vault.sync_entities, vault.cleanup_auth, the deprecated
# vault.generate_token) is refused with a 403 instead of fighting the
# operator, and deleting a MinionBinding really revokes its minion.
# See docs/operations.md ("Running beside a Salt master").
#
# It assumes the minions' AppRole auth method is mounted at "salt-minions"
# (the MinionTemplate's spec.appRole.mount): change "auth/salt-minions/"
# below for another mount. `minionvault import` writes a copy for the mount
# it imports.
#
#   vault policy write salt-master config/vault/salt-master-policy.hcl
#
# The master's own token upkeep (auth/token/lookup-self, renew-self) is in
# Vault's "default" policy; add both here if the master's login sets
# token_no_default_policy.

# Read a minion's role: saltext caches it for an hour (bind_secret_id,
# secret_id_num_uses) and compares its issue parameters with it. No create
# or update: Vault checks the role path's existence, so a POST needs
# "create" for a missing role and "update" for an existing one.
path "auth/salt-minions/role/+" {
  capabilities = ["read"]
}

# Hand the role ID to the minion (response-wrapped by default).
path "auth/salt-minions/role/+/role-id" {
  capabilities = ["read"]
}

# Generate a secret ID for the minion. This path has no existence check: a
# POST needs "update".
path "auth/salt-minions/role/+/secret-id" {
  capabilities = ["update"]
}

# Deliberately absent: "list" on auth/salt-minions/role (sync_approles,
# sync_entities and cleanup_auth fail at their first call, before any
# write), identity/* and sys/auth/* (only saltext's entity and alias code
# needs them), sys/policy* and auth/token/create* (old minions calling
# vault.generate_token fail visibly instead of getting tokens without an
# entity).
