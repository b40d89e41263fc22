//go:build integration

package audit

// How many Vault requests an online audit makes, against a real Vault dev
// server: a fleet shaped like the samples (a templated shared policy, a
// policy per role and one per minion, an entity per minion with its alias
// named by the role ID, a few identity groups, some roles without an entity)
// is written straight into Vault, then the audit reads it through a
// counting proxy, and Vault's own file audit log counts the requests of
// the auditor's token too.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/minionvault/minion-vault-operator/internal/testing/testenv"
)

// benchRoles are the Salt roles of the fleet; minion i has two of them.
var benchRoles = []string{"web", "db", "ci", "mail", "cache"}

// onlineFleet is a fleet written into Vault for the request counts.
type onlineFleet struct {
	mount    string
	minions  int
	entities int
}

// seedOnlineFleet writes n minions on a new AppRole mount: per minion a
// policy bench-<mount>/<minion>, a role with the token policies the
// samples' template gives, and (all but every 25th) an entity with the
// operator's metadata and an alias named by the role ID; every 20th entity
// is in a group, which is in a parent group, each with a policy.
func seedOnlineFleet(tb testing.TB, root *vaultapi.Client, n int) onlineFleet {
	tb.Helper()
	ctx := context.Background()
	mount := fmt.Sprintf("bench-%d", n)
	if err := root.Sys().EnableAuthWithOptionsWithContext(ctx, mount, &vaultapi.EnableAuthOptions{Type: "approle"}); err != nil {
		tb.Fatal(err)
	}
	auths, err := root.Sys().ListAuthWithContext(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	accessor := auths[mount+"/"].Accessor
	put := func(name, text string) {
		if err := root.Sys().PutPolicyWithContext(ctx, name, text); err != nil {
			tb.Fatal(err)
		}
	}
	rule := func(p, caps string) string { return fmt.Sprintf("path %q {\n  capabilities = [%s]\n}\n", p, caps) }
	put(mount+"/minions", rule("salt/data/roles/{{identity.entity.metadata.roles__0}}", `"read"`)+
		rule("salt/data/roles/{{identity.entity.metadata.roles__1}}", `"read"`)+
		rule("salt/data/roles/{{identity.entity.metadata.roles__2}}", `"read"`)+
		rule("salt/data/env/{{identity.entity.metadata.env}}", `"read"`))
	for _, r := range benchRoles {
		put(mount+"_role_"+r, rule("salt/data/roles/"+r, `"read", "list"`)+rule("salt/metadata/roles/"+r, `"list"`))
	}
	put(mount+"-group", rule("salt/data/group/*", `"read"`))
	put(mount+"-parent", rule("salt/data/parent/*", `"read"`))

	var mu sync.Mutex
	var grouped []string
	entities := 0
	var failed atomic.Value
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := seedMinion(ctx, root, mount, accessor, i, rule, &mu, &grouped, &entities); err != nil {
					failed.Store(err)
				}
			}
		}()
	}
	for i := range n {
		if failed.Load() != nil {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		tb.Fatal(err)
	}
	g, err := root.Logical().WriteWithContext(ctx, "identity/group", map[string]any{"name": mount + "-group",
		"policies": []string{mount + "-group"}, "member_entity_ids": grouped})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := root.Logical().WriteWithContext(ctx, "identity/group", map[string]any{"name": mount + "-parent",
		"policies": []string{mount + "-parent"}, "member_group_ids": []string{g.Data["id"].(string)}}); err != nil {
		tb.Fatal(err)
	}
	return onlineFleet{mount: mount, minions: n, entities: entities}
}

func seedMinion(ctx context.Context, root *vaultapi.Client, mount, accessor string, i int, rule func(string, string) string,
	mu *sync.Mutex, grouped *[]string, entities *int) error {
	id := fmt.Sprintf("m%05d", i)
	a, b := benchRoles[i%len(benchRoles)], benchRoles[(i+1)%len(benchRoles)]
	if err := root.Sys().PutPolicyWithContext(ctx, mount+"/"+id, rule("salt/data/minions/"+id, `"read"`)); err != nil {
		return err
	}
	roleID := fmt.Sprintf("%s-role-id-%s", mount, id)
	if _, err := root.Logical().WriteWithContext(ctx, "auth/"+mount+"/role/"+id, map[string]any{
		"role_id": roleID, "token_policies": []string{mount + "/minions", mount + "/" + id, mount + "_role_" + a, mount + "_role_" + b},
		"token_num_uses": 10, "token_explicit_max_ttl": "60s", "secret_id_ttl": "60s",
	}); err != nil {
		return err
	}
	if i%25 == 24 {
		return nil // a role made by hand, never logged in: no entity
	}
	roles := []string{a, b}
	if b < a {
		roles = []string{b, a}
	}
	e, err := root.Logical().WriteWithContext(ctx, "identity/entity", map[string]any{"name": "salt_minion_" + mount + "_" + id,
		"metadata": map[string]string{"minion-id": id, "roles": strings.Join(roles, ","), "roles__0": roles[0], "roles__1": roles[1],
			"env": "prod", "minionvault-owner": "bench"}})
	if err != nil {
		return err
	}
	eid := e.Data["id"].(string)
	if _, err := root.Logical().WriteWithContext(ctx, "identity/entity-alias", map[string]any{"name": roleID, "canonical_id": eid,
		"mount_accessor": accessor}); err != nil {
		return err
	}
	mu.Lock()
	*entities++
	if i%20 == 0 {
		*grouped = append(*grouped, eid)
	}
	mu.Unlock()
	return nil
}

// requestCounter is a proxy in front of Vault that counts every request
// that passes it.
type requestCounter struct {
	srv *httptest.Server
	n   atomic.Int64
	mu  sync.Mutex
	// by counts the requests by kind, paths by method and path.
	by, paths map[string]int
}

func newRequestCounter(tb testing.TB, addr string) *requestCounter {
	tb.Helper()
	u, err := url.Parse(addr)
	if err != nil {
		tb.Fatal(err)
	}
	c := &requestCounter{by: map[string]int{}, paths: map[string]int{}}
	proxy := httputil.NewSingleHostReverseProxy(u)
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.n.Add(1)
		c.mu.Lock()
		c.by[r.Method+" "+requestClass(r.URL.Path)]++
		c.paths[r.Method+" "+r.URL.RequestURI()]++
		c.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	tb.Cleanup(c.srv.Close)
	return c
}

func (c *requestCounter) reset() {
	c.n.Store(0)
	c.mu.Lock()
	c.by, c.paths = map[string]int{}, map[string]int{}
	c.mu.Unlock()
}

// twice lists the requests made more than once.
func (c *requestCounter) twice() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for p, n := range c.paths {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s ×%d", p, n))
		}
	}
	return out
}

// requestClass is a request path with the per-object part replaced.
func requestClass(p string) string {
	seg := strings.Split(strings.Trim(strings.TrimPrefix(p, "/v1/"), "/"), "/")
	switch {
	case len(seg) >= 4 && seg[0] == "auth" && seg[2] == "role":
		seg[3] = "*"
	case len(seg) >= 4 && seg[0] == "identity" && (seg[2] == "id" || seg[2] == "name"):
		seg[3] = "*"
	case len(seg) >= 4 && seg[0] == "sys" && seg[1] == "policies":
		seg = append(seg[:3], "*")
	}
	return strings.Join(seg, "/")
}

// auditedRequests counts the responses to accessor's token in Vault's file
// audit log.
func auditedRequests(tb testing.TB, file, accessor string) int {
	tb.Helper()
	f, err := os.Open(file)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e struct {
			Type string `json:"type"`
			Auth *struct {
				Accessor string `json:"accessor"`
			} `json:"auth"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			tb.Fatal(err)
		}
		if e.Type == "response" && e.Auth != nil && e.Auth.Accessor == accessor {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return n
}

// onlineAuditor is a token that reads everything (no write), Vault's file
// audit log of its requests, and the proxy the audit reaches Vault
// through.
type onlineAuditor struct {
	token, accessor, log string
	counter              *requestCounter
}

func newOnlineAuditor(tb testing.TB, env *testenv.Vault) *onlineAuditor {
	tb.Helper()
	ctx := context.Background()
	root := env.Client
	a := &onlineAuditor{log: filepath.Join(tb.TempDir(), "vault-audit.log")}
	dev := "bench-file-" + filepath.Base(filepath.Dir(a.log))
	if err := root.Sys().EnableAuditWithOptionsWithContext(ctx, dev, &vaultapi.EnableAuditOptions{Type: "file",
		Options: map[string]string{"file_path": a.log, "hmac_accessor": "false"}}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = root.Sys().DisableAuditWithContext(ctx, dev) })
	if err := root.Sys().PutPolicyWithContext(ctx, "bench-auditor", `path "*" { capabilities = ["read", "list"] }
`); err != nil {
		tb.Fatal(err)
	}
	s, err := root.Auth().Token().CreateWithContext(ctx, &vaultapi.TokenCreateRequest{Policies: []string{"bench-auditor"}, NoDefaultPolicy: true, TTL: "2h"})
	if err != nil {
		tb.Fatal(err)
	}
	a.token, a.accessor = s.Auth.ClientToken, s.Auth.Accessor
	a.counter = newRequestCounter(tb, env.Addr)
	return a
}

// run runs fn as the auditor (VAULT_ADDR the proxy, VAULT_TOKEN its token)
// and returns the requests the proxy saw and those Vault's audit log has.
func (a *onlineAuditor) run(tb testing.TB, fn func()) (proxied, audited int) {
	tb.Helper()
	tb.Setenv("VAULT_ADDR", a.counter.srv.URL)
	tb.Setenv("VAULT_TOKEN", a.token)
	before := auditedRequests(tb, a.log, a.accessor)
	a.counter.reset()
	fn()
	return int(a.counter.n.Load()), auditedRequests(tb, a.log, a.accessor) - before
}

// onlineWhoCan is an online who-can of every minion of the fleet.
func onlineWhoCan(tb testing.TB, f onlineFleet) {
	tb.Helper()
	fleet, err := LoadOnline(context.Background(), f.mount, "")
	if err != nil {
		tb.Fatal(err)
	}
	r := WhoCan(fleet, WhoCanQuery{Path: "salt/data/roles/db"})
	if r.Count.Minions != f.minions || r.Count.Matching == 0 {
		tb.Fatalf("who-can: %+v", r.Count)
	}
	// The rules are those of the version the server reports.
	if r.Vault.Source != VersionFromServer || r.Vault.Version == "" || r.Vault.Testing == "" || len(r.Vault.Rules) == 0 {
		tb.Fatalf("who-can's rules: %+v", r.Vault)
	}
}

// BenchmarkOnlineRequests is an online who-can (the whole fleet read) at
// 180 and 10,000 minions; requests/minion counts every HTTP request to
// Vault, audited/minion those Vault's file audit log has of the auditor.
func BenchmarkOnlineRequests(b *testing.B) {
	for _, n := range []int{180, 10000} {
		b.Run(fmt.Sprintf("minions=%d", n), func(b *testing.B) {
			env := testenv.Get(b).Vault
			f := seedOnlineFleet(b, env.Client, n)
			a := newOnlineAuditor(b, env)
			var proxied, audited int
			b.ResetTimer()
			for b.Loop() {
				proxied, audited = a.run(b, func() { onlineWhoCan(b, f) })
			}
			b.ReportMetric(float64(proxied), "requests")
			b.ReportMetric(float64(proxied)/float64(n), "requests/minion")
			b.ReportMetric(float64(audited)/float64(n), "audited/minion")
			a.counter.mu.Lock()
			b.Logf("%d minions (%d with an entity): %d requests, %d in Vault's audit log: %v", n, f.entities, proxied, audited, a.counter.by)
			a.counter.mu.Unlock()
		})
	}
}

// onlineFloor is the fewest requests an exact online read of the whole
// fleet makes: per role its role and role ID, per entity the entity, per
// policy the minions name its text, per group the group, and five
// listings or lookups once per call (sys/health, sys/auth, the roles, the
// policy names, the entities). See online.go for why nothing cheaper
// answers exactly.
func (f onlineFleet) onlineFloor() int {
	const policies = 1 + 5 + 2 + 1 // the shared one, per role, the groups', default
	const groups = 2
	return 2*f.minions + f.entities + (f.minions + policies) + groups + 5
}

// TestIntegrationOnlineReadsEachObjectOnce catches a regression of the
// online audit's requests at 500 minions: no request twice, no more than
// the floor (about 4 per minion on this fleet: role, role ID, entity and
// the minion's own policy), and what-can of one minion a constant.
func TestIntegrationOnlineReadsEachObjectOnce(t *testing.T) {
	env := testenv.Get(t).Vault
	f := seedOnlineFleet(t, env.Client, 500)
	a := newOnlineAuditor(t, env)
	proxied, audited := a.run(t, func() { onlineWhoCan(t, f) })
	if twice := a.counter.twice(); len(twice) > 0 {
		t.Errorf("requests made more than once: %v", twice)
	}
	if floor := f.onlineFloor(); proxied > floor || audited > floor {
		a.counter.mu.Lock()
		t.Errorf("%d requests (%d in Vault's audit log) for %d minions, %d entities: more than %d: %v", proxied, audited, f.minions, f.entities, floor, a.counter.by)
		a.counter.mu.Unlock()
	}
	t.Logf("who-can of %d minions: %d requests (%.2f per minion), %d in Vault's audit log", f.minions, proxied, float64(proxied)/float64(f.minions), audited)

	// what-can reads the one minion it explains, whatever the fleet.
	proxied, _ = a.run(t, func() {
		fleet, err := LoadOnlineWith(context.Background(), OnlineOptions{Mount: f.mount, Roles: []string{"m00040"}})
		if err != nil {
			t.Fatal(err)
		}
		m := fleet.Minion("m00040")
		if m == nil || len(fleet.Minions()) != 1 || m.live == nil || len(m.subject.Groups) != 2 {
			t.Fatalf("what-can m00040: %+v", m)
		}
		if r := WhatCan(fleet, m, []string{"salt/data/minions/m00040", "salt/data/group/x"}); r.Explain[0].Capabilities[0] != "read" || r.Explain[1].Capabilities[0] != "read" {
			t.Fatalf("what-can m00040: %+v", r.Explain)
		}
	})
	// sys/health, sys/auth, the policy names, the role, its role ID, the
	// entities, the entity, two groups, five policies (default, the shared
	// one, its own, its two roles') and two of the groups.
	if proxied > 16 {
		a.counter.mu.Lock()
		t.Errorf("what-can of one minion: %d requests: %v", proxied, a.counter.by)
		a.counter.mu.Unlock()
	}
}
