//go:build integration

package harness

import (
	"os"
	"strings"
	"testing"
)

func TestVaultClass(t *testing.T) {
	tests := []struct {
		op, path string
		class    string
		write    bool
	}{
		{"update", "auth/salt-minions/role/m00001", "role", true},
		{"create", "auth/salt-minions/role/m00001", "role", true},
		{"read", "auth/salt-minions/role/m00001", "role", false},
		{"read", "auth/salt-minions/role/m00001/role-id", "role/role-id", false},
		{"delete", "auth/salt-minions/role/m00001", "role", true},
		{"update", "identity/entity/name/salt_minion_m00001", "entity", true},
		{"read", "identity/entity/name/salt_minion_m00001", "entity", false},
		{"update", "identity/entity-alias", "alias", true},
		{"delete", "identity/entity-alias/id/abc", "alias", true},
		{"update", "identity/lookup/entity", "lookup", false},
		{"update", "sys/policies/acl/bench_role_r1", "policy", true},
		{"read", "sys/policies/acl/bench_role_r1", "policy", false},
		{"list", "sys/policies/acl", "policy", false},
		{"read", "sys/auth", "sys/auth", false},
		{"read", "auth/token/lookup-self", "token", false},
		{"update", "auth/token/renew-self", "token", true},
		{"read", "sys/seal-status", "sys", false},
		{"list", "identity/entity/id", "entity list", false},
		{"list", "identity/entity/id/", "entity list", false},
		{"list", "auth/salt-minions/role/", "role list", false},
		{"list", "auth/salt-minions/role", "role list", false},
		{"read", "secret/data/x", "other", false},
	}
	for _, tc := range tests {
		class, write := vaultClass(tc.op, tc.path)
		if class != tc.class || write != tc.write {
			t.Errorf("vaultClass(%s, %s) = %s, %v; want %s, %v", tc.op, tc.path, class, write, tc.class, tc.write)
		}
	}
}

func TestReadAudits(t *testing.T) {
	dir := t.TempDir()
	vault := dir + "/vault.log"
	lines := `{"type":"request","auth":{"accessor":"op"},"request":{"operation":"update","path":"auth/salt-minions/role/m1"}}
{"type":"response","auth":{"accessor":"op"},"request":{"operation":"update","path":"auth/salt-minions/role/m1"}}
{"type":"response","auth":{"accessor":"op"},"request":{"operation":"read","path":"auth/salt-minions/role/m1/role-id"}}
{"type":"response","auth":{"accessor":"op"},"request":{"operation":"update","path":"identity/lookup/entity"}}
{"type":"response","auth":{"accessor":"floor"},"request":{"operation":"update","path":"identity/entity-alias"},"error":"1 error occurred"}
{"type":"response","auth":{"accessor":"root"},"request":{"operation":"read","path":"sys/policies/acl"}}
{"type":"response","request":{"operation":"read","path":"sys/seal-status"}}
{"type":"response","auth":{"accessor":"op"},"request":{"operation":"upd`
	if err := os.WriteFile(vault, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readVaultAudit(vault, 0, int64(len(lines)), map[string]string{"op": "operator", "floor": "floor"})
	if err != nil {
		t.Fatal(err)
	}
	if op := got["operator"]; op.Writes != 1 || op.Reads != 2 || op.By["role W"] != 1 || op.By["lookup R"] != 1 {
		t.Errorf("operator: %+v", op)
	}
	if fl := got["floor"]; fl.Writes != 1 || fl.Reads != 0 || fl.Failed["alias W"] != 1 {
		t.Errorf("floor: %+v", fl)
	}
	// From the middle of the first response: that line belongs to the phase before.
	from := int64(strings.Index(lines, "}}\n{\"type\":\"response\"") + 10)
	got, err = readVaultAudit(vault, from, int64(len(lines)), map[string]string{"op": "operator"})
	if err != nil {
		t.Fatal(err)
	}
	if op := got["operator"]; op.Writes != 0 || op.Reads != 2 {
		t.Errorf("operator from offset %d: %+v", from, op)
	}

	kube := dir + "/kube.log"
	klines := `{"stage":"ResponseComplete","verb":"patch","user":{"username":"op"},"objectRef":{"resource":"minionbindings","subresource":"status"},"responseStatus":{"code":200}}
{"stage":"ResponseComplete","verb":"patch","user":{"username":"op"},"objectRef":{"resource":"minionbindings","subresource":"status"},"responseStatus":{"code":409}}
{"stage":"ResponseComplete","verb":"create","user":{"username":"op"},"objectRef":{"resource":"events"},"responseStatus":{"code":201}}
{"stage":"ResponseComplete","verb":"get","user":{"username":"op"},"objectRef":{"resource":"namespaces"},"responseStatus":{"code":200}}
{"stage":"ResponseComplete","verb":"watch","user":{"username":"op"},"objectRef":{"resource":"minionbindings"},"responseStatus":{"code":200}}
{"stage":"ResponseComplete","verb":"create","user":{"username":"admin"},"objectRef":{"resource":"minionbindings"},"responseStatus":{"code":201}}
`
	if err := os.WriteFile(kube, []byte(klines), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := readKubeAudit(kube, 0, int64(len(klines)), map[string]string{"op": "operator"})
	if err != nil {
		t.Fatal(err)
	}
	if op := k["operator"]; op.Writes != 3 || op.Reads != 1 || op.By["patch minionbindings/status"] != 2 || op.Failed["patch minionbindings/status"] != 1 || op.By["create events"] != 1 {
		t.Errorf("kube operator: %+v", op)
	}
	// A log that rotated during the phase is an error, not a count of 0.
	if _, err := readKubeAudit(kube, int64(len(klines)), 10, map[string]string{"op": "operator"}); err == nil {
		t.Error("a log that shrank during the phase was read without an error")
	}
}
