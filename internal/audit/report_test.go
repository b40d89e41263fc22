package audit

import (
	"reflect"
	"strings"
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/acl"
)

func TestAuditProbes(t *testing.T) {
	cases := []struct {
		pattern string
		want    []string
	}{
		{"salt/data/roles/db", []string{"salt/data/roles/db"}},
		{"/salt/data/roles/db", []string{"salt/data/roles/db"}},
		{"salt/data/roles/*", []string{"salt/data/roles/", "salt/data/roles/_"}},
		{"identity/oidc/provider/+/authorize", []string{"identity/oidc/provider/_/authorize"}},
		{"*", []string{"_"}},
		{"salt/{{identity.entity.name}}", nil},
	}
	for _, c := range cases {
		if got := probes(c.pattern); !reflect.DeepEqual(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("probes(%q) = %q, want %q", c.pattern, got, c.want)
		}
	}
}

// testFleet builds a fleet directly from policy texts and minions (ID to
// token policies and entity metadata), without manifests.
func testFleet(t *testing.T, docs map[string]string, minions map[string]map[string]string, policies []string) *Fleet {
	t.Helper()
	ev, err := acl.New(docs, acl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &Fleet{byID: map[string]*Minion{}, docs: docs, ev: ev}
	for id, md := range minions {
		m := &Minion{id: id, role: id, metadata: md, subject: acl.Subject{
			TokenPolicies: acl.LoginPolicies(policies, false),
			Entity:        &acl.Entity{ID: "id-" + id, Name: id, Metadata: md},
		}}
		m.prep = ev.Prepare(m.subject)
		f.minions = append(f.minions, m)
		f.byID[id] = m
	}
	return f
}

// TestAuditDiffErrors: a head where every request of a minion fails (a
// templated value that makes "+*") loses access and gains none.
func TestAuditDiffErrors(t *testing.T) {
	docs := map[string]string{"p": "path \"salt/{{identity.entity.metadata.env}}*\" {\n  capabilities = [\"read\"]\n}\npath \"salt/common\" {\n  capabilities = [\"read\"]\n}\n"}
	base := testFleet(t, docs, map[string]map[string]string{"web01": {"env": "prod"}}, []string{"p"})
	head := testFleet(t, docs, map[string]map[string]string{"web01": {"env": "prod+"}}, []string{"p"})
	if base.byID["web01"].prep.Err() != nil || head.byID["web01"].prep.Err() == nil {
		t.Fatal("want the head minion to fail every request")
	}
	r := Diff(base, head, nil)
	if r.Summary.Gaining != 0 || r.Summary.Losing != 1 || len(r.Minions) != 1 {
		t.Fatalf("summary %+v minions %+v", r.Summary, r.Minions)
	}
	for _, c := range r.Minions[0].Changes {
		if len(c.Gained) > 0 || !reflect.DeepEqual(c.Lost, []string{"read"}) || !strings.HasPrefix(c.Head[0], "error: error parsing templated policy") {
			t.Fatalf("change %+v", c)
		}
	}
}

// who-can's count is of the minions Vault would grant: a role with root
// among its policies (Vault refuses the login), a disabled entity and a
// templated rule that renders an invalid pattern get nothing, and are
// listed with why, not counted.
func TestWhoCanCountsOnlyGranted(t *testing.T) {
	docs := map[string]string{"p": "path \"salt/{{identity.entity.metadata.env}}*\" {\n  capabilities = [\"read\"]\n}\npath \"salt/common\" {\n  capabilities = [\"read\"]\n}\n"}
	ev, err := acl.New(docs, acl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &Fleet{byID: map[string]*Minion{}, docs: docs, ev: ev}
	add := func(id string, policies []string, env string, disabled bool) {
		md := map[string]string{"env": env}
		m := &Minion{id: id, role: id, metadata: md, subject: acl.Subject{TokenPolicies: acl.LoginPolicies(policies, false),
			Entity: &acl.Entity{ID: "id-" + id, Name: id, Metadata: md, Disabled: disabled}}}
		m.prep = ev.Prepare(m.subject)
		f.minions = append(f.minions, m)
		f.byID[id] = m
	}
	add("a-ok", []string{"p"}, "prod", false)
	add("b-root", []string{"p", "root"}, "prod", false)
	add("c-disabled", []string{"p"}, "prod", true)
	add("d-invalid", []string{"p"}, "prod+", false)
	cases := []struct {
		name string
		q    WhoCanQuery
		want int
	}{
		{"any access", WhoCanQuery{Path: "salt/common"}, 1},
		{"read", WhoCanQuery{Path: "salt/common", Want: acl.Read}, 1},
		{"a path nobody has", WhoCanQuery{Path: "salt/other"}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := WhoCan(f, c.q)
			if r.Count.Matching != c.want || r.Count.Minions != 4 || r.Count.NoToken != 3 {
				t.Fatalf("count %+v, want %d of 4 (3 with no token)", r.Count, c.want)
			}
			why := map[string]string{}
			for _, m := range r.Minions {
				why[m.Minion] = m.NotGranted
			}
			if why["a-ok"] != "" && c.want == 1 || !strings.Contains(why["b-root"], "refuses the login") ||
				!strings.Contains(why["c-disabled"], "every request") || !strings.Contains(why["d-invalid"], "every request") {
				t.Fatalf("not granted: %q", why)
			}
		})
	}
}

// QueryPath: an empty path and a pattern are errors, unless literal.
func TestQueryPath(t *testing.T) {
	cases := []struct {
		path    string
		literal bool
		ok      bool
	}{
		{"salt/data/roles/db", false, true},
		{"", false, false},
		{"   ", true, false},
		{"/", false, false},
		{"salt/data/+/db", false, false},
		{"salt/data/*", false, false},
		{"salt/data/a+b", true, true},
	}
	for _, c := range cases {
		if err := QueryPath(c.path, c.literal); (err == nil) != c.ok {
			t.Errorf("QueryPath(%q, %v) = %v, want ok %v", c.path, c.literal, err, c.ok)
		}
	}
}
