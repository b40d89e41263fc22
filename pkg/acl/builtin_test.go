package acl

import "testing"

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
