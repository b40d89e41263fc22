package vault

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// conformance runs the whole Client surface against c and checks the
// semantics the controllers rely on. The unit tests run it on the Fake, the
// integration test on a real Vault with the operator's policy: so the Fake
// behaves as Vault does. mount is an AppRole mount; prefix keeps names
// apart between runs.
func conformance(t *testing.T, c Client, mount, prefix string) {
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	status := func(err error) int {
		t.Helper()
		var ve *Error
		if !errors.As(err, &ve) {
			t.Fatalf("err = %v (%T), want *Error", err, err)
		}
		return ve.StatusCode
	}

	t.Run("version and accessor", func(t *testing.T) {
		info, err := c.ServerInfo(ctx)
		if err != nil || !regexp.MustCompile(`^\d+\.\d+\.\d+`).MatchString(info.Version) || !uuidRE.MatchString(info.ClusterID) {
			t.Errorf("ServerInfo = %+v, %v", info, err)
		}
		acc, err := c.MountAccessor(ctx, mount)
		if err != nil || !regexp.MustCompile(`^auth_approle_[0-9a-f]+$`).MatchString(acc) {
			t.Errorf("MountAccessor(%s) = %q, %v", mount, acc, err)
		}
		acc2, err := c.MountAccessor(ctx, mount+"/")
		if err != nil || acc2 != acc {
			t.Errorf("MountAccessor(%s/) = %q, %v", mount, acc2, err)
		}
		if acc, err := c.MountAccessor(ctx, "no-such-mount"); err != nil || acc != "" {
			t.Errorf("absent mount: %q, %v", acc, err)
		}
		mounts, err := c.AuthMounts(ctx)
		if err != nil || mounts[mount] != (AuthMount{Type: "approle", Accessor: acc}) || mounts["token"].Type != "token" {
			t.Errorf("AuthMounts = %+v, %v", mounts, err)
		}
	})

	t.Run("roles", func(t *testing.T) {
		name := prefix + "Web01"
		lower := prefix + "web01"
		if r, err := c.ReadRole(ctx, mount, lower); err != nil || r != nil {
			t.Fatalf("absent role: %v, %v", r, err)
		}
		if id, err := c.ReadRoleID(ctx, mount, lower); err != nil || id != "" {
			t.Fatalf("absent role ID: %q, %v", id, err)
		}
		must(c.WriteRole(ctx, mount, name, map[string]any{
			"bind_secret_id":         true,
			"secret_id_num_uses":     int64(1),
			"secret_id_ttl":          int64(60),
			"token_explicit_max_ttl": "2m",
			"token_ttl":              int64(30),
			"token_num_uses":         int64(10),
			"token_policies":         []string{"salt_role_web", "saltstack/minions"},
			"token_bound_cidrs":      []string{"10.0.0.0/8"},
		}))
		r, err := c.ReadRole(ctx, mount, lower) // lowercased on write
		must(err)
		// The sweep for lost minions lists the mount's roles (lowercased).
		if names, err := c.ListRoles(ctx, mount); err != nil || !slices.Contains(names, lower) || slices.Contains(names, name) {
			t.Errorf("ListRoles = %v, %v: want %s listed, lowercased", names, err, lower)
		}
		want := map[string]any{
			"bind_secret_id":          true,
			"local_secret_ids":        false,
			"secret_id_bound_cidrs":   nil,
			"secret_id_num_uses":      json.Number("1"),
			"secret_id_ttl":           json.Number("60"),
			"token_bound_cidrs":       []any{"10.0.0.0/8"},
			"token_explicit_max_ttl":  json.Number("120"),
			"token_max_ttl":           json.Number("0"),
			"token_no_default_policy": false,
			"token_num_uses":          json.Number("10"),
			"token_period":            json.Number("0"),
			"token_policies":          []any{"salt_role_web", "saltstack/minions"},
			"token_ttl":               json.Number("30"),
			"token_type":              "default",
		}
		if !jsonEqual(r, want) {
			t.Errorf("role =\n%s\nwant\n%s", dump(r), dump(want))
		}
		if r2, err := c.ReadRole(ctx, mount, name); err != nil || !jsonEqual(r2, r) {
			t.Errorf("read by the mixed-case name: %v %v", r2, err)
		}
		id, err := c.ReadRoleID(ctx, mount, lower)
		must(err)
		if !uuidRE.MatchString(id) {
			t.Errorf("role ID %q", id)
		}

		// An update changes only what it names; the role ID stays.
		must(c.WriteRole(ctx, mount, lower, map[string]any{"token_ttl": int64(45), "token_policies": []string{"salt_role_db"}}))
		r, err = c.ReadRole(ctx, mount, lower)
		must(err)
		if r["token_ttl"] != json.Number("45") || r["secret_id_ttl"] != json.Number("60") || !jsonEqual(r["token_policies"], []any{"salt_role_db"}) {
			t.Errorf("after the update: %s", dump(r))
		}
		if id2, _ := c.ReadRoleID(ctx, mount, lower); id2 != id {
			t.Errorf("role ID changed on update: %q -> %q", id, id2)
		}

		err = c.WriteRole(ctx, mount, lower, map[string]any{"token_ttl": int64(100), "token_max_ttl": int64(50)})
		if status(err) != 400 || Transient(err) {
			t.Errorf("token_ttl > token_max_ttl: %v", err)
		}
		err = c.WriteRole(ctx, mount, prefix+"unbound", map[string]any{"bind_secret_id": false})
		if status(err) != 500 || !strings.Contains(err.Error(), "at least one constraint") { // sic
			t.Errorf("a role without constraints: %v", err)
		}

		// Lists are kept as given: trimmed, but neither lowercased, sorted
		// nor deduplicated (the controller compares after normalising).
		must(c.WriteRole(ctx, mount, lower, map[string]any{
			"token_policies":        []string{" Salt_Role_Web ", "a", "a"},
			"secret_id_bound_cidrs": []string{},
			"token_bound_cidrs":     "10.0.0.1, 10.1.0.0/16",
		}))
		r, err = c.ReadRole(ctx, mount, lower)
		must(err)
		for k, want := range map[string]any{
			"token_policies":        []any{"Salt_Role_Web", "a", "a"},
			"secret_id_bound_cidrs": []any{},
			"token_bound_cidrs":     []any{"10.0.0.1", "10.1.0.0/16"},
		} {
			if !jsonEqual(r[k], want) {
				t.Errorf("%s = %s, want %s", k, dump(r[k]), dump(want))
			}
		}
		err = c.WriteRole(ctx, mount, lower, map[string]any{"local_secret_ids": true})
		if status(err) != 400 {
			t.Errorf("local_secret_ids on update: %v", err)
		}
		// A name outside AppRole's pattern: 404 with a message, an error
		// and not "absent".
		if _, err := c.ReadRole(ctx, mount, "bad name!"); status(err) != 404 || Transient(err) {
			t.Errorf("bad role name: %v", err)
		}

		must(c.DeleteRole(ctx, mount, lower))
		if r, err := c.ReadRole(ctx, mount, lower); err != nil || r != nil {
			t.Errorf("deleted role: %v, %v", r, err)
		}
		must(c.DeleteRole(ctx, mount, lower)) // absent: fine

		// A role created with a role ID of the operator's choosing (its
		// alias can exist before the role); role IDs are unique per mount.
		chosen := prefix + "0b5bd3c2-6c6e-4a50-9b1d-2f1b8c9f1e77"
		must(c.WriteRole(ctx, mount, lower, map[string]any{"token_policies": []string{"a"}, "role_id": chosen}))
		if id, err := c.ReadRoleID(ctx, mount, lower); err != nil || id != chosen {
			t.Errorf("chosen role ID: %q, %v", id, err)
		}
		// An update without role_id keeps it.
		must(c.WriteRole(ctx, mount, lower, map[string]any{"token_policies": []string{"b"}}))
		if id, _ := c.ReadRoleID(ctx, mount, lower); id != chosen {
			t.Errorf("role ID after an update: %q", id)
		}
		// (a Go error inside approle: Vault answers 500)
		if err := c.WriteRole(ctx, mount, lower+"-2", map[string]any{"role_id": chosen}); status(err) != 500 || !strings.Contains(err.Error(), "role_id already in use") {
			t.Errorf("a second role with the same role ID: %v", err)
		}
		must(c.DeleteRole(ctx, mount, lower))
	})

	t.Run("entities", func(t *testing.T) {
		name := prefix + "salt_minion_web01"
		if e, err := c.ReadEntityByName(ctx, name); err != nil || e != nil {
			t.Fatalf("absent entity: %v, %v", e, err)
		}
		md := map[string]string{"minion-id": "web01", "roles": "db,web", "roles__0": "db", "roles__1": "web"}
		id, err := c.WriteEntityByName(ctx, name, md)
		must(err)
		if !uuidRE.MatchString(id) {
			t.Errorf("created entity ID %q", id)
		}
		got, err := c.ReadEntityByName(ctx, name)
		must(err)
		if got == nil || got.ID != id || got.Name != name || !maps.Equal(got.Metadata, md) || len(got.Aliases) != 0 {
			t.Errorf("read %+v", got)
		}
		if listed, err := c.ListEntities(ctx); err != nil || !slices.ContainsFunc(listed, func(e Entity) bool { return e.Name == name && e.ID == id }) {
			t.Errorf("ListEntities = %v, %v: want %s (%s) listed", listed, err, name, id)
		}
		// Metadata is replaced wholesale: a key left out is gone. An update
		// answers no ID.
		md2 := map[string]string{"minion-id": "web01", "roles": "web", "roles__0": "web"}
		if again, err := c.WriteEntityByName(ctx, name, md2); err != nil || again != "" {
			t.Errorf("update answered %q, %v", again, err)
		}
		got, err = c.ReadEntityByName(ctx, name)
		must(err)
		if got.ID != id || !maps.Equal(got.Metadata, md2) {
			t.Errorf("metadata after removing a key: %+v", got)
		}
		_, err = c.WriteEntityByName(ctx, name, nil)
		must(err)
		if got, _ := c.ReadEntityByName(ctx, name); got.ID != id || len(got.Metadata) != 0 {
			t.Errorf("cleared %+v", got)
		}
		// Names are case-insensitive; writing another case renames.
		if got, err := c.ReadEntityByName(ctx, prefix+"SALT_minion_web01"); err != nil || got == nil || got.ID != id || got.Name != name {
			t.Errorf("read by another case: %+v, %v", got, err)
		}
		_, err = c.WriteEntityByName(ctx, prefix+"Salt_Minion_Web01", nil)
		must(err)
		if renamed, _ := c.ReadEntityByName(ctx, name); renamed.ID != id || renamed.Name != prefix+"Salt_Minion_Web01" {
			t.Errorf("write by another case: %+v", renamed)
		}
		// Vault's metadata rules, answered with 500.
		many := map[string]string{}
		for i := 0; i < 65; i++ {
			many["k"+strconv.Itoa(i)] = "v"
		}
		long := strings.Repeat("x", 513)
		for what, md := range map[string]map[string]string{
			"65 pairs":      many,
			"a dot in keys": {"roles.0": "web"},
			"vault- prefix": {"vault-x": "y"},
			"long value":    {"k": long},
			"long key":      {strings.Repeat("k", 129): "v"},
		} {
			_, err := c.WriteEntityByName(ctx, name, md)
			if status(err) != 500 || !strings.Contains(err.Error(), "invalid entity metadata") {
				t.Errorf("%s: %v", what, err)
			}
		}
		edge := map[string]string{strings.Repeat("k", 128): strings.Repeat("v", 512), "a=b/c+d_e-f": ""}
		if _, err := c.WriteEntityByName(ctx, name, edge); err != nil {
			t.Errorf("metadata at the limits: %v", err)
		} else if got, _ := c.ReadEntityByName(ctx, name); !maps.Equal(got.Metadata, edge) {
			t.Errorf("metadata at the limits: %v", got.Metadata)
		}
		must(c.DeleteEntityByName(ctx, name))
		if got, err := c.ReadEntityByName(ctx, name); err != nil || got != nil {
			t.Errorf("deleted entity: %+v, %v", got, err)
		}
		must(c.DeleteEntityByName(ctx, name))
	})

	t.Run("aliases", func(t *testing.T) {
		acc, err := c.MountAccessor(ctx, mount)
		must(err)
		id1, err := c.WriteEntityByName(ctx, prefix+"alias-one", map[string]string{"n": "1"})
		must(err)
		id2, err := c.WriteEntityByName(ctx, prefix+"alias-two", map[string]string{"n": "2"})
		must(err)
		// aliases returns the aliases of both entities, as "entity:name".
		aliases := func() []string {
			t.Helper()
			var out []string
			for _, n := range []string{"alias-one", "alias-two"} {
				e, err := c.ReadEntityByName(ctx, prefix+n)
				must(err)
				if e == nil {
					continue
				}
				for _, a := range e.Aliases {
					if a.MountAccessor != acc || a.CanonicalID != e.ID {
						t.Errorf("alias %+v of entity %s", a, e.ID)
					}
					out = append(out, n+":"+a.Name)
				}
			}
			return out
		}
		// listed is the same from the entities' LIST (the sweep's).
		listed := func() []string {
			t.Helper()
			all, err := c.ListEntities(ctx)
			must(err)
			var out []string
			for _, n := range []string{"alias-one", "alias-two"} {
				for _, e := range all {
					if e.Name != prefix+n {
						continue
					}
					for _, a := range e.Aliases {
						if a.MountAccessor == acc {
							out = append(out, n+":"+a.Name)
						}
					}
				}
			}
			return out
		}
		want := func(what string, w ...string) {
			t.Helper()
			if got := aliases(); strings.Join(got, " ") != strings.Join(w, " ") {
				t.Errorf("%s: aliases %q, want %q", what, got, w)
			}
			if got := listed(); strings.Join(got, " ") != strings.Join(w, " ") {
				t.Errorf("%s: aliases listed %q, want %q", what, got, w)
			}
		}
		aname := prefix + "role-id-0001"
		want("none yet")
		id, err := c.CreateEntityAlias(ctx, aname, acc, id1)
		must(err)
		if !uuidRE.MatchString(id) {
			t.Errorf("alias ID %q", id)
		}
		want("created", "alias-one:"+aname)
		// Whose login the alias leads to.
		if e, err := c.LookupEntityByAlias(ctx, aname, acc); err != nil || e == nil || e.ID != id1 || e.Name != prefix+"alias-one" {
			t.Errorf("LookupEntityByAlias = %+v, %v; want entity %s", e, err, id1)
		}
		if e, err := c.LookupEntityByAlias(ctx, aname+"-none", acc); err != nil || e != nil {
			t.Errorf("lookup of an unknown alias = %+v, %v; want nil", e, err)
		}
		got, err := c.ReadEntityByName(ctx, prefix+"alias-one")
		must(err)
		if len(got.Aliases) != 1 || got.Aliases[0] != (Alias{ID: id, Name: aname, MountAccessor: acc, CanonicalID: id1}) {
			t.Errorf("entity aliases %+v", got.Aliases)
		}
		// The entity's alias survives a metadata write.
		_, err = c.WriteEntityByName(ctx, prefix+"alias-one", map[string]string{"n": "1b"})
		must(err)
		want("after a metadata update", "alias-one:"+aname)

		// Creating the same alias again (same entity) changes nothing.
		if again, err := c.CreateEntityAlias(ctx, aname, acc, id1); err != nil || (again != "" && again != id) {
			t.Errorf("re-created alias: %q, %v", again, err)
		}
		// An entity has one alias per mount: a conflict with Vault's state.
		_, err = c.CreateEntityAlias(ctx, aname+"-other", acc, id1)
		if status(err) != 400 || Classify(err) != ClassConflict {
			t.Errorf("second alias on one mount: %v (%s)", err, Classify(err))
		}
		// Renaming it (a role re-created with a new role ID).
		must(c.UpdateEntityAlias(ctx, id, aname+"-renamed", "", ""))
		want("renamed", "alias-one:"+aname+"-renamed")
		must(c.UpdateEntityAlias(ctx, id, aname, "", ""))

		// Point it at the other entity.
		must(c.UpdateEntityAlias(ctx, id, aname, acc, id2))
		want("moved", "alias-two:"+aname)
		// Creating the pair for another entity moves the alias back.
		moved, err := c.CreateEntityAlias(ctx, aname, acc, id1)
		must(err)
		if moved != id {
			t.Errorf("create of an existing pair answered %q, want %q", moved, id)
		}
		want("moved back by a create", "alias-one:"+aname)
		// But not onto an entity that has an alias on the mount already.
		other, err := c.CreateEntityAlias(ctx, aname+"-two", acc, id2)
		must(err)
		_, err = c.CreateEntityAlias(ctx, aname+"-two", acc, id1)
		if status(err) != 400 || Classify(err) != ClassConflict {
			t.Errorf("move onto an entity with an alias: %v (%s)", err, Classify(err))
		}
		err = c.UpdateEntityAlias(ctx, id, aname+"-two", "", "")
		if status(err) != 400 || Classify(err) != ClassConflict {
			t.Errorf("rename onto a taken name: %v (%s)", err, Classify(err))
		}
		must(c.DeleteEntityAlias(ctx, other))

		err = c.UpdateEntityAlias(ctx, "00000000-0000-0000-0000-000000000000", aname, acc, id1)
		if status(err) != 400 || Classify(err) != ClassConflict {
			t.Errorf("update of an unknown alias: %v (%s)", err, Classify(err))
		}
		if _, err := c.CreateEntityAlias(ctx, aname+"-x", "auth_approle_00000000", id1); status(err) != 400 || Classify(err) != ClassConflict {
			t.Errorf("unknown accessor: %v (%s)", err, Classify(err))
		}
		if _, err := c.CreateEntityAlias(ctx, aname+"-x", acc, "00000000-0000-0000-0000-000000000000"); status(err) != 400 || Classify(err) != ClassConflict {
			t.Errorf("unknown entity: %v (%s)", err, Classify(err))
		}

		must(c.DeleteEntityAlias(ctx, id))
		want("deleted")
		must(c.DeleteEntityAlias(ctx, id)) // absent: fine

		// Deleting an entity deletes its aliases: a new entity of the same
		// name has none, and the pair is free again.
		_, err = c.CreateEntityAlias(ctx, aname, acc, id2)
		must(err)
		must(c.DeleteEntityByName(ctx, prefix+"alias-two"))
		id2, err = c.WriteEntityByName(ctx, prefix+"alias-two", nil)
		must(err)
		want("after deleting the entity")
		if _, err := c.CreateEntityAlias(ctx, aname, acc, id2); err != nil {
			t.Errorf("the pair after its entity was deleted: %v", err)
		}
		must(c.DeleteEntityByName(ctx, prefix+"alias-two"))
		must(c.DeleteEntityByName(ctx, prefix+"alias-one"))
	})

	t.Run("policies", func(t *testing.T) {
		name := prefix + "salt_role_web"
		hcl := "# minionvault: owned by MinionTemplate default\npath \"salt/data/roles/web\" {\n  capabilities = [\"list\", \"read\"]\n}\n"
		if h, ok, err := c.ReadPolicy(ctx, name); err != nil || ok || h != "" {
			t.Fatalf("absent policy: %q %v %v", h, ok, err)
		}
		must(c.WritePolicy(ctx, prefix+"Salt_Role_WEB", hcl)) // lowercased
		h, ok, err := c.ReadPolicy(ctx, name)
		must(err)
		if !ok || h != hcl {
			t.Errorf("read %q %v", h, ok)
		}
		nested := prefix + "saltstack/minions"
		must(c.WritePolicy(ctx, nested, hcl))
		if h, ok, err := c.ReadPolicy(ctx, nested); err != nil || !ok || h != hcl {
			t.Errorf("nested name: %q %v %v", h, ok, err)
		}
		must(c.DeletePolicy(ctx, nested))

		err = c.WritePolicy(ctx, "root", hcl)
		if status(err) != 400 || Transient(err) {
			t.Errorf("writing root: %v", err)
		}
		err = c.DeletePolicy(ctx, "default")
		if status(err) != 400 {
			t.Errorf("deleting default: %v", err)
		}
		if _, ok, err := c.ReadPolicy(ctx, "default"); err != nil || !ok {
			t.Errorf("the default policy: %v %v", ok, err)
		}
		if h, ok, err := c.ReadPolicy(ctx, "root"); err != nil || !ok || h != "" {
			t.Errorf("the root policy: %q %v %v", h, ok, err)
		}
		if err := c.WritePolicy(ctx, name, "path {"); status(err) != 400 || !strings.Contains(err.Error(), "failed to parse policy") {
			t.Errorf("invalid HCL: %v", err)
		}
		if err := c.WritePolicy(ctx, name, ""); status(err) != 400 {
			t.Errorf("empty policy: %v", err)
		}

		must(c.DeletePolicy(ctx, name))
		if _, ok, err := c.ReadPolicy(ctx, name); err != nil || ok {
			t.Errorf("deleted policy: %v %v", ok, err)
		}
		must(c.DeletePolicy(ctx, name))
	})
}

// jsonEqual compares JSON-shaped values.
func jsonEqual(a, b any) bool {
	return dump(a) == dump(b)
}

func dump(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}
