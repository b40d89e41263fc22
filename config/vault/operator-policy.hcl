# minion-vault-operator: the Vault ACL policy of the operator's own token.
#
# Least privilege for exactly the calls pkg/vault makes. It assumes the
# AppRole auth method of the minions is mounted at "salt-minions": if you
# use another mount path, change "auth/salt-minions/" below (the operator
# reads the mount's accessor from sys/auth, which needs no change).
#
#   vault policy write minionvault-operator config/vault/operator-policy.hcl
#
# Give the operator's login (Kubernetes or AppRole role, or token) this
# policy, and token_no_default_policy=true: it does not rely on Vault's
# "default" policy, and "default" is templated, so Vault parses it again on
# every request the operator makes.
#
# IMPORTANT: sys/policies/acl/* lets the operator write ANY ACL policy,
# including one that grants everything, and to change or delete policies it
# did not create. Vault cannot restrict that by policy content, only by name.
# What keeps the operator to its own policies are the MinionTemplate guard
# rails (spec.allowedPolicies globs, the policy name and substituted value
# checks, no "root") and the ownership header the controller writes into
# every policy it manages. Review who may create or edit MinionTemplates
# accordingly. To narrow it further,
# replace "sys/policies/acl/*" with the name prefixes your templates allow,
# e.g. "sys/policies/acl/salt_role_*" and "sys/policies/acl/saltstack/*".

# AppRole roles of the minions: one role per MinionBinding. "+" is one path
# segment, so this does not grant role/<name>/secret-id (issuing secret IDs)
# or role/<name>/role-id updates.
path "auth/salt-minions/role/+" {
  capabilities = ["create", "read", "update", "delete"]
}

# The mount's role names, for the sweep for lost minions: roles the
# operator wrote whose MinionBinding is gone without its deletion having
# run (docs/concepts.md, "The lifecycle of a minion"). Names only.
path "auth/salt-minions/role" {
  capabilities = ["list"]
}

# The role ID, to find the minion's entity alias (read only). A new role's
# role ID is chosen by the operator and sent with the role's creation
# (role/+ above), so that its alias can exist before the role does.
path "auth/salt-minions/role/+/role-id" {
  capabilities = ["read"]
}

# The accessor of the AppRole mount, for entity aliases.
path "sys/auth" {
  capabilities = ["read"]
}

# Entities by name: read, create, replace metadata, delete.
path "identity/entity/name/+" {
  capabilities = ["create", "read", "update", "delete"]
}

# The entities' IDs, names and aliases (not their metadata), for the sweep
# for lost minions: which entity each role's logins lead to, without a
# lookup per role. The marker is read with the entity, above, by name.
path "identity/entity/id" {
  capabilities = ["list"]
}

# Whose login an AppRole role leads to: the entity holding the alias named
# by the role's role ID (a POST that changes nothing). The operator asks it
# only when that alias is not on the minion's own entity, to prove whether
# the role is the binding's before it writes or deletes it.
path "identity/lookup/entity" {
  capabilities = ["update"]
}

# Entity aliases: create (or move a login's alias to the minion's entity),
# rename after the role was re-created, delete.
path "identity/entity-alias" {
  capabilities = ["create", "update"]
}
path "identity/entity-alias/id/+" {
  capabilities = ["update", "delete"]
}

# The ACL policies rendered from MinionTemplates (see IMPORTANT above).
path "sys/policies/acl/*" {
  capabilities = ["create", "read", "update", "delete"]
}

# Their names: after a start, and to delete a template's policies, the
# operator lists them and reads the ownership header of those it has no
# record of (a template with a policy per minion keeps no list of names).
path "sys/policies/acl" {
  capabilities = ["list"]
}

# The operator's own token: learn its TTL, renew it.
path "auth/token/lookup-self" {
  capabilities = ["read"]
}
path "auth/token/renew-self" {
  capabilities = ["update"]
}

# The server version (sys/seal-status is unauthenticated in Vault; listed
# so that the policy documents every call).
path "sys/seal-status" {
  capabilities = ["read"]
}
