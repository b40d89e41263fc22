package acl

import (
	"fmt"
	"runtime"
	"testing"
)

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// benchFleet is a fleet shaped like the operator's: the default policy, a
// templated minions policy, one policy per role with globs, + and a deny,
// and minions with one to three roles (a few dozen distinct token policy
// lists for n minions).
func benchFleet(tb testing.TB, n int) (*Evaluator, []Subject) {
	tb.Helper()
	docs := map[string]string{
		"default": DefaultPolicy,
		"saltstack_minions": rule("salt/data/minions/{{identity.entity.name}}", "read") +
			rule("salt/data/minions/{{identity.entity.name}}/*", "read", "list") +
			rule("salt/data/roles/{{identity.entity.metadata.roles__0}}/*", "read") +
			rule("salt/data/roles/{{identity.entity.metadata.roles__1}}/*", "read") +
			rule("salt/data/roles/{{identity.entity.metadata.roles__2}}/*", "read") +
			rule("salt/metadata/*", "list"),
	}
	const roles = 20
	for r := range roles {
		docs[fmt.Sprintf("salt_role_r%d", r)] = rule(fmt.Sprintf("salt/data/roles/r%d", r), "read") +
			rule(fmt.Sprintf("salt/data/roles/r%d/*", r), "read", "list") +
			rule(fmt.Sprintf("salt/data/shared/+/r%d", r), "read") +
			rule(fmt.Sprintf("salt/data/roles/r%d/secret", r), "deny") +
			rule("sys/*", "deny")
	}
	ev, err := New(docs, Options{})
	if err != nil {
		tb.Fatal(err)
	}
	subjects := make([]Subject, n)
	for i := range subjects {
		k := 1 + i%3
		md := map[string]string{"minion-id": fmt.Sprintf("m%05d", i)}
		tok := []string{"saltstack_minions"}
		for j := range k {
			r := fmt.Sprintf("r%d", (i+j*7)%roles)
			md[fmt.Sprintf("roles__%d", j)] = r
			tok = append(tok, "salt_role_"+r)
		}
		subjects[i] = Subject{
			TokenPolicies: LoginPolicies(tok, true),
			Entity:        &Entity{ID: fmt.Sprintf("id-%05d", i), Name: fmt.Sprintf("m%05d", i), Metadata: md},
		}
	}
	return ev, subjects
}

// BenchmarkWhoCan10k is who-can on one path for 10,000 rendered minions:
// one op is the whole fleet (goal: 50 ms on one core).
func BenchmarkWhoCan10k(b *testing.B) {
	ev, subjects := benchFleet(b, 10000)
	before := heapInUse()
	prepared := make([]*Prepared, len(subjects))
	for i, s := range subjects {
		prepared[i] = ev.Prepare(s)
	}
	held := heapInUse() - before
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		granted := 0
		for _, p := range prepared {
			if p.Check("salt/data/roles/r3/db-password").Caps.Allows(Read) {
				granted++
			}
		}
		if granted == 0 {
			b.Fatal("nobody can read")
		}
	}
	// The memory the rendered fleet holds (goal: 64 MiB at 10,000).
	b.ReportMetric(float64(held)/(1<<20), "fleet-MiB")
	runtime.KeepAlive(prepared)
}

// BenchmarkPrepare10k is the one-off cost of rendering the templated rules
// of 10,000 minions (the base is compiled once per token policy list).
func BenchmarkPrepare10k(b *testing.B) {
	ev, subjects := benchFleet(b, 10000)
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range subjects {
			if p := ev.Prepare(s); p.Err() != nil {
				b.Fatal(p.Err())
			}
		}
	}
}

// BenchmarkWhatCan is what-can for one minion: render its templated rules,
// list its patterns and explain ten paths (goal: 10 ms).
func BenchmarkWhatCan(b *testing.B) {
	ev, subjects := benchFleet(b, 100)
	paths := []string{"salt/data/minions/m00042", "salt/data/roles/r1/x", "salt/data/roles/r1/secret",
		"salt/data/shared/a/r1", "sys/mounts", "cubbyhole/x", "identity/entity/name/m00042",
		"salt/metadata/roles/", "secret/x", "salt/data/roles/r8/"}
	b.ReportAllocs()
	for b.Loop() {
		p := ev.Prepare(subjects[42])
		if len(p.Patterns()) == 0 {
			b.Fatal("no patterns")
		}
		for _, path := range paths {
			_ = p.Explain(path)
		}
	}
}
