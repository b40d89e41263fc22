package ownership

import "testing"

func TestPolicyHeader(t *testing.T) {
	for _, o := range []PolicyOwner{{Cluster: "c-1", Template: "salt-minions"}, {Template: `odd "name"`}, {Cluster: "a:b.c_d-e", Template: "t in cluster x"}} {
		got, ok := ParseHeader(o.Header() + "path \"a\" {\n  capabilities = [\"read\"]\n}\n")
		if !ok || got != o {
			t.Errorf("ParseHeader(%q) = %+v, %v; want %+v", o.Header(), got, ok, o)
		}
	}
	legacy := "# Managed by minion-vault-operator for MinionTemplate \"salt-minions\". Do not edit: changes are overwritten.\npath \"a\" {}\n"
	if got, ok := ParseHeader(legacy); !ok || got != (PolicyOwner{Template: "salt-minions"}) {
		t.Errorf("the previous release's header: %+v, %v", got, ok)
	}
	for _, foreign := range []string{
		"", "path \"a\" {}", "# Managed by someone else\n",
		"# Managed by minion-vault-operator for MinionTemplate x. Do not edit: changes are overwritten.\n",
		"# Managed by minion-vault-operator for MinionTemplate \"x\" in cluster \"a b\". Do not edit: changes are overwritten.\n",
		"# Managed by minion-vault-operator for MinionTemplate \"x\" in cluster c. Do not edit: changes are overwritten.\n",
		"# Managed by minion-vault-operator for MinionTemplate \"x\" for cluster \"c\". Do not edit: changes are overwritten.\n",
		"# Managed by minion-vault-operator for MinionTemplate \"\". Do not edit: changes are overwritten.\n",
		"# Managed by minion-vault-operator for MinionTemplate \"x\". Do not edit\n",
	} {
		if o, ok := ParseHeader(foreign); ok {
			t.Errorf("ParseHeader(%q) = %+v, want none", foreign, o)
		}
	}
}

func TestPolicyOwnerOwns(t *testing.T) {
	me := PolicyOwner{Cluster: "c-1", Template: "t"}
	tests := []struct {
		found PolicyOwner
		want  bool
	}{
		{me, true},
		{PolicyOwner{Template: "t"}, true}, // the previous release's header
		{PolicyOwner{Cluster: "c-2", Template: "t"}, false},
		{PolicyOwner{Cluster: "c-1", Template: "u"}, false},
		{PolicyOwner{Template: "u"}, false},
	}
	for _, tt := range tests {
		if got := me.Owns(tt.found); got != tt.want {
			t.Errorf("Owns(%+v) = %v, want %v", tt.found, got, tt.want)
		}
	}
}

func FuzzParseHeader(f *testing.F) {
	f.Add(PolicyOwner{Cluster: "c-1", Template: "t"}.Header())
	f.Add(PolicyOwner{Template: "t"}.Header())
	f.Fuzz(func(t *testing.T, hcl string) {
		o, ok := ParseHeader(hcl)
		if !ok {
			return
		}
		if again, ok := ParseHeader(o.Header()); !ok || again != o {
			t.Fatalf("%q parsed as %+v, which writes %q and reads back as %+v, %v", hcl, o, o.Header(), again, ok)
		}
	})
}
