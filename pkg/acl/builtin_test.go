package acl

import (
	"strings"
	"testing"
)

// Every server's built-in policies are known at once, by the name Vault
// sanitises to; a name that only looks like one is not built in.
func TestBuiltin(t *testing.T) {
	tests := []struct {
		name       string
		builtin    bool
		assignable bool
		editable   bool
	}{
		{"root", true, false, false},
		{"default", true, true, true},
		{" Default ", true, true, true},
		{"default-ceiling", true, true, true}, // Vault 2.0 and later
		{"DEFAULT-CEILING", true, true, true},
		{"response-wrapping", true, false, false},
		{"control-group", true, false, false}, // Vault only
		{"default-ceiling-override", false, false, false},
		{"default-admin", false, false, false},
		{"roots", false, false, false},
		{"salt_role_web", false, false, false},
		{"", false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, ok := Builtin(tt.name)
			if ok != tt.builtin || IsBuiltin(tt.name) != tt.builtin {
				t.Fatalf("Builtin(%q) = %v, want %v", tt.name, ok, tt.builtin)
			}
			if b.Assignable != tt.assignable || b.Editable != tt.editable {
				t.Errorf("Builtin(%q) = %+v, want assignable %v, editable %v", tt.name, b, tt.assignable, tt.editable)
			}
		})
	}
	if got := BuiltinPolicies(); len(got) != 5 || got[0].Name != "root" {
		t.Errorf("BuiltinPolicies() = %+v", got)
	}
}

// OpenBao's scan capability (openbao v2.6.2 vault/policy/policy.go
// ScanCapability) is not Vault's: Vault 1.21.4's parser refuses it as any
// unknown name (spec row 44), and so does this one, at admission (the
// rendered body) and in the audit (the whole policy set, loudly, rather
// than an answer without it). OpenBao in turn has no subscribe or
// recover, which Vault accepts.
func TestCapabilitiesOfOtherServers(t *testing.T) {
	tests := []struct {
		name, caps string
		refused    string // the refusal's text, "" when accepted
	}{
		{"OpenBao's scan", `["list", "scan"]`, `invalid capability "scan"`},
		{"scan alone", `["scan"]`, `invalid capability "scan"`},
		{"scan after deny: the walk stopped", `["deny", "scan"]`, ""},
		{"Vault's subscribe and recover (not OpenBao's)", `["subscribe", "recover"]`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "path \"salt/data/web\" {\n  capabilities = " + tt.caps + "\n}\n"
			_, err := Parse("p", doc)
			switch {
			case tt.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused) || !strings.Contains(err.Error(), `path "salt/data/web"`)):
				t.Fatalf("err = %v, want %q naming the path", err, tt.refused)
			}
			if _, err2 := New(map[string]string{"p": doc}, Options{}); (err2 != nil) != (tt.refused != "") {
				t.Errorf("New: %v", err2)
			}
		})
	}
	if _, ok := ParseCap("scan"); ok {
		t.Error("scan is a capability here")
	}
}
