package audit

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/acl"
)

// benchAuditFleet is a rendered fleet of n minions shaped like the
// samples: a templated minions policy, one policy per role, minions with
// one to three roles. extra is appended to every role policy (a template
// change).
func benchAuditFleet(tb testing.TB, n int, extra string) *Fleet {
	tb.Helper()
	rule := func(p, caps string) string { return fmt.Sprintf("path %q {\n  capabilities = [%s]\n}\n", p, caps) }
	docs := map[string]string{
		"default": acl.DefaultPolicy,
		"saltstack/minions": rule("salt/data/minions/{{identity.entity.name}}/*", `"read", "list"`) +
			rule("salt/data/roles/{{identity.entity.metadata.roles__0}}", `"read"`) +
			rule("salt/data/roles/{{identity.entity.metadata.roles__1}}", `"read"`) +
			rule("salt/data/roles/{{identity.entity.metadata.roles__2}}", `"read"`),
	}
	const roles = 30
	for r := range roles {
		docs[fmt.Sprintf("salt_role_r%d", r)] = rule(fmt.Sprintf("salt/data/roles/r%d", r), `"read", "list"`) +
			rule(fmt.Sprintf("salt/metadata/roles/r%d", r), `"list"`) + strings.ReplaceAll(extra, "ROLE", fmt.Sprintf("r%d", r))
	}
	ev, err := acl.New(docs, acl.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	f := &Fleet{byID: map[string]*Minion{}, docs: docs, ev: ev}
	for i := range n {
		id := fmt.Sprintf("m%05d", i)
		md := map[string]string{"minion-id": id}
		tok := []string{"saltstack/minions"}
		var rs []string
		for j := range 1 + i%3 {
			r := fmt.Sprintf("r%d", (i+j*7)%roles)
			md[fmt.Sprintf("roles__%d", j)] = r
			rs = append(rs, r)
			tok = append(tok, "salt_role_"+r)
		}
		md["roles"] = strings.Join(rs, ",")
		m := &Minion{id: id, role: id, metadata: md, subject: acl.Subject{
			TokenPolicies: acl.LoginPolicies(tok, true),
			Entity:        &acl.Entity{ID: "id-" + id, Name: "salt_minion_" + id, Metadata: md},
		}}
		m.prep = ev.Prepare(m.subject)
		f.minions = append(f.minions, m)
		f.byID[id] = m
	}
	return f
}

// BenchmarkDiff10k is audit diff of a template change (every role policy
// gains a rule) over 10,000 rendered minions (goal: 2 s end to end).
func BenchmarkDiff10k(b *testing.B) {
	base := benchAuditFleet(b, 10000, "")
	head := benchAuditFleet(b, 10000, "path \"salt/data/shared/ROLE/*\" {\n  capabilities = [\"read\"]\n}\n")
	b.ResetTimer()
	for b.Loop() {
		r := Diff(base, head, nil)
		if r.Summary.Gaining != 10000 {
			b.Fatalf("%d gaining", r.Summary.Gaining)
		}
	}
}

// Compared side by side in chunks, the diff is the diff of one pass: the
// minions in order, the counts and the paths (each minion has its own
// templated paths).
func TestDiffFleetsChunks(t *testing.T) {
	base := benchAuditFleet(t, 1500, "")
	head := benchAuditFleet(t, 1400, "path \"salt/data/shared/ROLE/*\" {\n  capabilities = [\"read\"]\n}\n")
	delete(base.byID, "m00007")
	one := diffFleetsWith(base, head, []string{"salt/data/x"}, 1)
	for _, w := range []int{2, 3, 5} {
		if got := diffFleetsWith(base, head, []string{"salt/data/x"}, w); !reflect.DeepEqual(got, one) {
			t.Fatalf("%d workers: %+v, want %+v", w, got.Summary, one.Summary)
		}
	}
	if one.Summary.Minions != 1500 || one.Summary.Gaining == 0 || len(one.Minions) < 100 {
		t.Fatalf("%+v", one.Summary)
	}
}
