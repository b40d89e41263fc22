package ownership

import (
	"strings"
	"testing"
)

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

func TestDecidePolicy(t *testing.T) {
	self := PolicyOwner{Cluster: "c-1", Template: "salt"}
	const want = "path \"salt/data/roles/web\" {\n  capabilities = [\"read\"]\n}\n"
	ours := self.Header() + want
	previous := PolicyOwner{Template: "salt"}.Header() + want
	otherCluster := PolicyOwner{Cluster: "c-2", Template: "salt"}.Header() + want
	otherTemplate := PolicyOwner{Cluster: "c-1", Template: "other"}.Header() + want
	otherCase := PolicyOwner{Cluster: "c-1", Template: "Salt"}.Header() + want
	tests := []struct {
		name string
		f    PolicyFacts
		want PolicyDecision
	}{
		{"absent, not wanted", PolicyFacts{}, PolicyAbsent},
		{"absent, not wanted, adopt changes nothing", PolicyFacts{Adopt: true}, PolicyAbsent},
		{"absent, wanted: written", PolicyFacts{Wanted: true, Want: want}, PolicyWrite},
		{"ours, as wanted", PolicyFacts{Found: true, Actual: ours, Wanted: true, Want: want}, PolicyKeep},
		{"ours, Vault added a trailing newline", PolicyFacts{Found: true, Actual: ours + "\n\n", Wanted: true, Want: want}, PolicyKeep},
		{"ours, Vault dropped the trailing newline", PolicyFacts{Found: true, Actual: strings.TrimRight(ours, "\n"), Wanted: true, Want: want}, PolicyKeep},
		{"ours, a rule differs", PolicyFacts{Found: true, Actual: ours + "path \"x\" {}\n", Wanted: true, Want: want}, PolicyWrite},
		{"ours, whitespace inside differs", PolicyFacts{Found: true, Actual: strings.Replace(ours, "  capabilities", "capabilities", 1), Wanted: true, Want: want}, PolicyWrite},
		{"ours, not wanted: deleted", PolicyFacts{Found: true, Actual: ours}, PolicyDelete},
		{"the previous release's header: rewritten with ours", PolicyFacts{Found: true, Actual: previous, Wanted: true, Want: want}, PolicyWrite},
		{"the previous release's header, not wanted: deleted", PolicyFacts{Found: true, Actual: previous}, PolicyDelete},
		{"another cluster's", PolicyFacts{Found: true, Actual: otherCluster, Wanted: true, Want: want}, PolicyNotOwned},
		{"another cluster's, not wanted: left", PolicyFacts{Found: true, Actual: otherCluster}, PolicyNotOwned},
		{"another cluster's, adopted", PolicyFacts{Found: true, Actual: otherCluster, Wanted: true, Want: want, Adopt: true}, PolicyWrite},
		{"another template's", PolicyFacts{Found: true, Actual: otherTemplate, Wanted: true, Want: want}, PolicyNotOwned},
		{"another template's, not wanted, adopt: left", PolicyFacts{Found: true, Actual: otherTemplate, Adopt: true}, PolicyNotOwned},
		{"a template whose name differs in case is another template", PolicyFacts{Found: true, Actual: otherCase, Wanted: true, Want: want}, PolicyNotOwned},
		{"no header", PolicyFacts{Found: true, Actual: want, Wanted: true, Want: want}, PolicyNotOwned},
		{"no header, not wanted: left", PolicyFacts{Found: true, Actual: want}, PolicyNotOwned},
		{"no header, adopted", PolicyFacts{Found: true, Actual: want, Wanted: true, Want: want, Adopt: true}, PolicyWrite},
		{"our header edited by hand", PolicyFacts{Found: true, Actual: strings.Replace(ours, "Do not edit", "Edited", 1), Wanted: true, Want: want}, PolicyNotOwned},
		{"ours, adopt changes nothing", PolicyFacts{Found: true, Actual: ours, Wanted: true, Want: want, Adopt: true}, PolicyKeep},
		{"not found, whatever text came with it", PolicyFacts{Actual: ours}, PolicyAbsent},
		// A built-in policy is nobody's: never deleted whatever header it
		// was given, never written or adopted, never someone else's.
		{"default with our header, not wanted: not deleted", PolicyFacts{Name: "default", Found: true, Actual: ours}, PolicyBuiltin},
		{"default-ceiling with our header, not wanted: not deleted", PolicyFacts{Name: "default-ceiling", Found: true, Actual: ours}, PolicyBuiltin},
		{"default-ceiling wanted and adopted: not written", PolicyFacts{Name: "default-ceiling", Found: true, Actual: want, Wanted: true, Want: want, Adopt: true}, PolicyBuiltin},
		{"default-ceiling wanted: not someone else's", PolicyFacts{Name: "default-ceiling", Found: true, Actual: want, Wanted: true, Want: want}, PolicyBuiltin},
		{"Default, as Vault sanitises it", PolicyFacts{Name: " Default", Found: true, Actual: ours}, PolicyBuiltin},
		{"response-wrapping wanted, absent: not written", PolicyFacts{Name: "response-wrapping", Wanted: true, Want: want}, PolicyBuiltin},
		{"control-group, not found", PolicyFacts{Name: "control-group"}, PolicyBuiltin},
		{"root", PolicyFacts{Name: "root", Found: true, Wanted: true, Want: want, Adopt: true}, PolicyBuiltin},
		{"a name like a built-in is ours as any", PolicyFacts{Name: "default-ceiling-web", Found: true, Actual: ours}, PolicyDelete},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DecidePolicy(self, tt.f)
			if got.Decision != tt.want {
				t.Fatalf("DecidePolicy = %s, want %s", got.Decision, tt.want)
			}
			if wantBody := self.Header() + tt.f.Want; (got.Decision == PolicyWrite) != (got.Body == wantBody) {
				t.Errorf("body %q, want %q for a write only", got.Body, wantBody)
			}
		})
	}
}
