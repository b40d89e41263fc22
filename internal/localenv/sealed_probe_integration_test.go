//go:build integration

package localenv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"math/rand/v2"

	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// BenchmarkSealedStandbyAnswers (a diagnostic of Vault, not of the
// operator, so a benchmark: `go test -tags integration -run '^$' -bench
// SealedStandbyAnswers -benchtime 1x ./internal/localenv/`) restarts a
// standby sealed, unseals it, and asks
// it, from the kill until well after the unseal, what the connection check
// asks (sys/seal-status, auth/token/lookup-self, sys/auth) and sys/health:
// raw requests every 50 ms, and the operator's own check (pkg/vault's
// ServerInfo, CheckToken, AuthMounts in a row) in a tight loop. Every
// answer whose cluster ID or AppRole accessors differ from the steady ones
// is logged, and the rounds with a passing operator check with another
// identity (a sealed seal-status, then the token lookup and sys/auth
// passing) are counted. PROBE_ROUNDS, PROBE_GAP (between seal-status and
// the lookup), PROBE_PERIOD (between checks; 2s is the operator's retry),
// PROBE_RETRIES (the check's requests retried as pkg/vault does by default).
func BenchmarkSealedStandbyAnswers(b *testing.B) {
	var t testing.TB = b
	rounds := 1
	if s := os.Getenv("PROBE_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	ctx := context.Background()
	env, err := Start(ctx, Options{NoKubernetes: true, VaultCluster: ClusterOptions{Nodes: 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
	v, c := env.Vault, env.Vault.Cluster
	token, err := v.OperatorToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < rounds; round++ {
		sb, err := c.Standby(ctx)
		if err != nil {
			t.Fatal(err)
		}
		probeSealedRestart(t, ctx, c, sb, token, round)
		if err := c.WaitHealthy(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d of %d sealed restarts had a passing check with another identity", badRounds.Load(), rounds)
}

var badRounds atomic.Int32

type probeAnswer struct {
	at     time.Duration
	what   string
	status int
	note   string
}

func probeSealedRestart(t testing.TB, ctx context.Context, c *Cluster, sb int, token string, round int) {
	n := c.Nodes[sb]
	steadyAcc := map[string]string{}
	var auth struct {
		Data map[string]struct{ Type, Accessor string } `json:"data"`
	}
	if err := c.call(ctx, n, http.MethodGet, "sys/auth", token, nil, &auth); err != nil {
		t.Fatal(err)
	}
	for p, m := range auth.Data {
		if m.Type == "approle" {
			steadyAcc[p] = m.Accessor
		}
	}
	steady := identityOf(c.ClusterID, steadyAcc)
	t.Logf("round %d: standby %s, cluster %s, approle mounts %v", round, n.ID, c.ClusterID, steadyAcc)

	pctx, stop := context.WithCancel(ctx)
	t0 := time.Now()
	var mu sync.Mutex
	var odd []probeAnswer
	counts := map[string]int{}
	rec := func(a probeAnswer) {
		mu.Lock()
		defer mu.Unlock()
		counts[a.what+" "+strconv.Itoa(a.status)]++
		if a.note != "" {
			odd = append(odd, a)
		}
	}
	var wg sync.WaitGroup
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(path, tok string) (int, map[string]any) {
		req, _ := http.NewRequestWithContext(pctx, http.MethodGet, n.Addr+"/v1/"+path, nil)
		if tok != "" {
			req.Header.Set("X-Vault-Token", tok)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return resp.StatusCode, m
	}
	// Raw polls, every 50 ms each.
	for _, path := range []string{"sys/seal-status", "sys/auth", "sys/health", "auth/token/lookup-self"} {
		path := path
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pctx.Err() == nil {
				at := time.Since(t0)
				st, m := get(path, token)
				a := probeAnswer{at: at, what: path, status: st}
				switch path {
				case "sys/seal-status":
					id, _ := m["cluster_id"].(string)
					if st == 200 && id != c.ClusterID && m["sealed"] != true {
						a.note = fmt.Sprintf("sealed=%v cluster_id=%q", m["sealed"], id)
					}
				case "sys/auth":
					if st == 200 {
						data, _ := m["data"].(map[string]any)
						acc := map[string]string{}
						for p, v := range data {
							if mm, ok := v.(map[string]any); ok && mm["type"] == "approle" {
								acc[p], _ = mm["accessor"].(string)
							}
						}
						if fmt.Sprint(acc) != fmt.Sprint(steadyAcc) {
							a.note = fmt.Sprintf("approle mounts %v", acc)
						}
					}
				case "sys/health":
					id, _ := m["cluster_id"].(string)
					if st == 429 && id != c.ClusterID {
						a.note = fmt.Sprintf("standby with cluster_id=%q", id)
					}
				}
				if st != 200 && st != 429 && path != "sys/health" && st != 0 && st != 503 {
					errs, _ := json.Marshal(m["errors"])
					a.note = fmt.Sprintf("status %d %s", st, errs)
				}
				rec(a)
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	// The operator's check, in a tight loop on one keep-alive client made
	// before the kill; gap is the time between its first request
	// (sys/seal-status) and its second (the token lookup): a loaded
	// operator's.
	gap := 20 * time.Millisecond
	if s := os.Getenv("PROBE_GAP"); s != "" {
		gap, _ = time.ParseDuration(s)
	}
	// period is the pause after each check: 5 ms (a tight loop) by
	// default; 2s is the operator's minRetry after a failed check.
	period := 5 * time.Millisecond
	if s := os.Getenv("PROBE_PERIOD"); s != "" {
		period, _ = time.ParseDuration(s)
	}
	vc, err := vault.New(ctx, vault.Config{Address: n.Addr, Timeout: 2 * time.Second, Auth: vault.Auth{Token: token}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var passed, failed int
	var bad, checks []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Each request sent once, as the operator's check does since
		// vault.WithoutRetries; PROBE_RETRIES=1: with pkg/vault's read
		// retries, as it did before.
		check := vault.WithoutRetries(pctx)
		if os.Getenv("PROBE_RETRIES") != "" {
			check = pctx
		}
		for pctx.Err() == nil {
			at := time.Since(t0)
			info, err := vc.ServerInfo(check)
			if err == nil {
				time.Sleep(gap)
				err = vc.CheckToken(check)
			}
			var mounts map[string]vault.AuthMount
			if err == nil {
				mounts, err = vc.AuthMounts(check)
			}
			mu.Lock()
			if period > time.Second {
				checks = append(checks, fmt.Sprintf("+%s..+%s cluster_id=%q err=%v", at.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond), info.ClusterID, err))
			}
			if err != nil {
				failed++
			} else {
				passed++
				acc := map[string]string{}
				for p, m := range mounts {
					if m.Type == "approle" {
						acc[p+"/"] = m.Accessor
					}
				}
				if id := identityOf(info.ClusterID, acc); id != steady {
					bad = append(bad, fmt.Sprintf("+%s cluster_id=%q version=%q approle=%v", at.Round(time.Millisecond), info.ClusterID, info.Version, acc))
				}
			}
			mu.Unlock()
			time.Sleep(period)
		}
	}()

	if period > time.Second {
		// A random phase of the checks against the unseal.
		time.Sleep(time.Duration(rand.N(int64(period))))
	}
	killed, err := c.Kill(sb)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx, sb, false); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(killed.Add(5 * time.Second)))
	unsealAt := time.Since(t0)
	if err := c.Unseal(ctx, sb); err != nil {
		t.Fatal(err)
	}
	unsealed := time.Since(t0)
	time.Sleep(5 * time.Second)
	stop()
	wg.Wait()
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var cs []string
	for _, k := range keys {
		cs = append(cs, fmt.Sprintf("%s: %d", k, counts[k]))
	}
	t.Logf("round %d: killed +%s, unseal sent +%s, answered unsealed +%s; answers %s", round,
		killed.Sub(t0).Round(time.Millisecond), unsealAt.Round(time.Millisecond), unsealed.Round(time.Millisecond), strings.Join(cs, ", "))
	for _, a := range odd {
		t.Logf("round %d odd: +%s %s %d %s", round, a.at.Round(time.Millisecond), a.what, a.status, a.note)
	}
	t.Logf("round %d: operator checks passed %d, failed %d", round, passed, failed)
	for _, ch := range checks {
		t.Logf("round %d check %s", round, ch)
	}
	for _, b := range bad {
		t.Logf("round %d: BAD a passing check with another identity: %s", round, b)
	}
	if len(bad) > 0 {
		badRounds.Add(1)
	}
	if cl, ok := vc.(io.Closer); ok {
		_ = cl.Close()
	}
}

func identityOf(clusterID string, acc map[string]string) string {
	var parts []string
	for p, a := range acc {
		parts = append(parts, p+"="+a)
	}
	sort.Strings(parts)
	return clusterID + "|" + strings.Join(parts, ",")
}
