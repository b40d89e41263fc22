package acl

import "testing"

// TestKVPath is the KV v2 table of the ACL specification (section 1.6).
func TestKVPath(t *testing.T) {
	cases := []struct {
		op, logical string
		version     int
		path        string
		need        Caps
		any         bool
		wantErr     bool
	}{
		{op: "read", logical: "salt/roles/web", version: 2, path: "salt/data/roles/web", need: Read},
		{op: "write", logical: "salt/roles/web", version: 2, path: "salt/data/roles/web", need: Create | Update, any: true},
		{op: "patch", logical: "salt/roles/web", version: 2, path: "salt/data/roles/web", need: Patch},
		{op: "delete", logical: "salt/roles/web", version: 2, path: "salt/data/roles/web", need: Delete},
		{op: "delete-versions", logical: "salt/roles/web", version: 2, path: "salt/delete/roles/web", need: Update},
		{op: "undelete", logical: "salt/roles/web", version: 2, path: "salt/undelete/roles/web", need: Update},
		{op: "destroy", logical: "salt/roles/web", version: 2, path: "salt/destroy/roles/web", need: Update},
		{op: "metadata-read", logical: "salt/roles/web", version: 2, path: "salt/metadata/roles/web", need: Read},
		{op: "metadata-write", logical: "salt/roles/web", version: 2, path: "salt/metadata/roles/web", need: Update},
		{op: "metadata-delete", logical: "salt/roles/web", version: 2, path: "salt/metadata/roles/web", need: Delete},
		{op: "subkeys", logical: "salt/roles/web", version: 2, path: "salt/subkeys/roles/web", need: Read},
		{op: "list", logical: "salt/roles", version: 2, path: "salt/metadata/roles/", need: List},
		{op: "list", logical: "salt/roles/", version: 2, path: "salt/metadata/roles/", need: List},
		{op: "read", logical: "/kv/a", version: 1, path: "kv/a", need: Read},
		{op: "list", logical: "kv/a", version: 1, path: "kv/a/", need: List},
		{op: "destroy", logical: "kv/a", version: 1, wantErr: true},
		{op: "read", logical: "other/a", version: 2, wantErr: true},
		{op: "fly", logical: "salt/a", version: 2, wantErr: true},
	}
	for _, c := range cases {
		mount := "salt"
		if c.version == 1 {
			mount = "kv"
		}
		r, err := KVPath(mount, c.logical, c.version, c.op)
		if (err != nil) != c.wantErr {
			t.Errorf("%s %s: error %v", c.op, c.logical, err)
			continue
		}
		if err == nil && (r.Path != c.path || r.Need != c.need || r.Any != c.any) {
			t.Errorf("%s %s v%d = %+v, want %s %v any=%v", c.op, c.logical, c.version, r, c.path, c.need, c.any)
		}
	}
	w, _ := KVPath("salt", "salt/a", 2, "write")
	if !w.Allowed(Update) || !w.Allowed(Create|Read) || w.Allowed(Read) || w.Allowed(Deny) {
		t.Error("a write needs create or update")
	}
}
