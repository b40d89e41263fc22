//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/testing/faultproxy"
)

// fleetState is one look at the fleet: the operator's status read from
// the API server and Vault read directly (not through the proxy).
type fleetState struct {
	at time.Time
	// notReady are the bindings not (yet) Ready at their generation.
	notReady []string
	// wrong are bindings Ready at their generation whose role, entity or
	// alias Vault does not hold as wanted: a broken invariant.
	wrong []string
	// The template's policies in Vault against what the bindings render.
	missing, stale, outdated []string
	templateReady            bool
	template                 string // its Ready condition
}

func (st fleetState) converged() bool {
	return len(st.notReady) == 0 && len(st.wrong) == 0 && st.policiesRight() && st.templateReady
}

func (st fleetState) policiesRight() bool {
	return len(st.missing) == 0 && len(st.stale) == 0 && len(st.outdated) == 0
}

func (st fleetState) String() string {
	return fmt.Sprintf("%d bindings not Ready %v; Ready but wrong in Vault %v; policies missing %v, stale %v, outdated %v; template %s",
		len(st.notReady), st.notReady[:min(3, len(st.notReady))], st.wrong, st.missing, st.stale, st.outdated, st.template)
}

// observe reads the fleet's status and Vault.
func (f *faultFleet) observe(t *testing.T) fleetState {
	t.Helper()
	ctx := context.Background()
	st := fleetState{at: time.Now()}
	list := &v1alpha1.MinionBindingList{}
	f.s.must(f.s.c.List(ctx, list, client.InNamespace(faultNamespace)))
	byName := map[string]*v1alpha1.MinionBinding{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	for i := range faultBindings {
		m := faultMinion(i)
		b := byName[m]
		if b == nil || !isReady(b) || b.Generation != f.gen[m] {
			st.notReady = append(st.notReady, m+": "+readySummary(b))
			continue
		}
		if err := f.bindingInVault(m); err != nil {
			st.wrong = append(st.wrong, fmt.Sprintf("%s (Ready=True at generation %d): %v", m, b.Generation, err))
		}
	}
	st.missing, st.stale, st.outdated = f.policiesInVault(t)
	tpl := &v1alpha1.MinionTemplate{}
	f.s.must(f.s.c.Get(ctx, client.ObjectKey{Name: faultTemplate}, tpl))
	c := apimeta.FindStatusCondition(tpl.Status.Conditions, v1alpha1.ReadyCondition)
	st.templateReady = c != nil && c.Status == metav1.ConditionTrue && tpl.Status.ObservedGeneration == tpl.Generation && tpl.Generation == f.tplGen
	if c != nil {
		st.template = fmt.Sprintf("Ready=%s %s at generation %d/%d: %.120s", c.Status, c.Reason, tpl.Status.ObservedGeneration, tpl.Generation, c.Message)
	}
	return st
}

func readySummary(b *v1alpha1.MinionBinding) string {
	if b == nil {
		return "not found"
	}
	c := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition)
	if c == nil {
		return "no Ready condition"
	}
	return fmt.Sprintf("Ready=%s %s (generation %d/%d): %.240s", c.Status, c.Reason, b.Status.ObservedGeneration, b.Generation, c.Message)
}

// bindingInVault checks a minion's role, entity and alias in Vault.
func (f *faultFleet) bindingInVault(m string) error {
	logical := f.s.root.Logical()
	role, err := logical.Read("auth/salt-minions/role/" + m)
	if err != nil || role == nil {
		return fmt.Errorf("role: %v %v", role, err)
	}
	want := []string{"saltstack/" + m}
	for _, r := range f.roles[m] {
		want = append(want, faultPolicy+r)
	}
	if got := strs(role.Data["token_policies"]); !sameSet(got, want) {
		return fmt.Errorf("token_policies %v, want %v", got, want)
	}
	entity, err := logical.Read("identity/entity/name/salt_minion_" + m)
	if err != nil || entity == nil {
		return fmt.Errorf("entity: %v %v", entity, err)
	}
	roles := slices.Sorted(slices.Values(f.roles[m]))
	if got := metadataOf(entity.Data)["roles"]; got != strings.Join(roles, ",") {
		return fmt.Errorf("entity metadata roles %q, want %q", got, strings.Join(roles, ","))
	}
	id, err := logical.Read("auth/salt-minions/role/" + m + "/role-id")
	if err != nil || id == nil {
		return fmt.Errorf("role ID: %v", err)
	}
	aliases, _ := entity.Data["aliases"].([]any)
	if len(aliases) != 1 || aliases[0].(map[string]any)["name"] != id.Data["role_id"] {
		return fmt.Errorf("aliases %v, want one named %v", aliases, id.Data["role_id"])
	}
	return nil
}

// policiesInVault compares the template's policies in Vault with the
// names the bindings render and the document's current capabilities.
func (f *faultFleet) policiesInVault(t *testing.T) (missing, stale, outdated []string) {
	t.Helper()
	wanted := map[string]bool{}
	for _, roles := range f.roles {
		for _, r := range roles {
			wanted[faultPolicy+r] = true
		}
	}
	names, err := f.s.root.Sys().ListPolicies()
	f.s.must(err)
	present := map[string]bool{}
	for _, n := range names {
		if strings.HasPrefix(n, faultPolicy) {
			present[n] = true
			if !wanted[n] {
				stale = append(stale, n)
			}
		}
	}
	wantList := slices.Contains(f.caps, "list")
	for n := range wanted {
		if !present[n] {
			missing = append(missing, n)
			continue
		}
		body, err := f.s.root.Sys().GetPolicy(n)
		f.s.must(err)
		if strings.Contains(body, `"list"`) != wantList {
			outdated = append(outdated, n)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	sort.Strings(outdated)
	return missing, stale, outdated
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// check records the broken invariants of one look: a binding Ready=True
// whose objects Vault lacks at once; the template Ready=True while Vault
// lacks a wanted policy or keeps a stale one, once that lasted longer
// than templateGrace.
func (f *faultFleet) check(st fleetState) {
	for _, w := range st.wrong {
		f.violate(strings.Fields(w)[0], "binding Ready while Vault lacks what it wants: "+w)
	}
	if !st.templateReady || st.policiesRight() {
		f.badSince = time.Time{}
		return
	}
	if f.badSince.IsZero() {
		f.badSince = st.at
	}
	if st.at.Sub(f.badSince) >= templateGrace {
		f.violate("template", fmt.Sprintf("template Ready=True for %s while policies are missing %v, stale %v, outdated %v",
			st.at.Sub(f.badSince).Round(time.Second), st.missing, st.stale, st.outdated))
	}
}

// violate records the first violation of a subject (a binding, the
// template) in a phase.
func (f *faultFleet) violate(subject, msg string) {
	if f.violations == nil {
		f.violations = map[string]string{}
	}
	if _, ok := f.violations[subject]; !ok {
		f.violations[subject] = msg
	}
}

// takeViolations returns the phase's violations and starts a new phase.
func (f *faultFleet) takeViolations() []string {
	out := slices.Sorted(maps.Values(f.violations))
	f.violations, f.badSince = nil, time.Time{}
	return out
}

// sampleUntil looks at the fleet every half second until the deadline.
func (f *faultFleet) sampleUntil(t *testing.T, deadline time.Time) {
	t.Helper()
	for time.Now().Before(deadline) {
		f.check(f.observe(t))
		time.Sleep(min(500*time.Millisecond, time.Until(deadline)))
	}
}

// waitConverged samples until the fleet has converged or bound has passed,
// and returns the last look.
func (f *faultFleet) waitConverged(t *testing.T, bound time.Duration) (fleetState, bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		st := f.observe(t)
		f.check(st)
		if st.converged() {
			return st, true
		}
		if time.Now().After(deadline) {
			return st, false
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// byObject counts requests by the kind of Vault object they touch, to tell
// which controller sends them.
func byObject(reqs []faultproxy.Request) map[string]int {
	out := map[string]int{}
	for _, r := range reqs {
		p := strings.TrimPrefix(r.Path, "/v1/")
		switch {
		case strings.HasPrefix(p, "sys/policies/acl"):
			out["policy"]++
		case strings.HasPrefix(p, "auth/token/"):
			out["token"]++
		case strings.HasPrefix(p, "auth/"):
			out["role"]++
		case strings.HasPrefix(p, "identity/"):
			out["identity"]++
		default:
			out["other"]++
		}
	}
	return out
}

// peakPerSecond is the most requests that arrived within one second.
func peakPerSecond(reqs []faultproxy.Request) int {
	per := map[int64]int{}
	peak := 0
	for _, r := range reqs {
		per[r.At.Unix()]++
		peak = max(peak, per[r.At.Unix()])
	}
	return peak
}

// needlessWrites reads Vault's audit log from offset and lists the
// successful writes (and deletes) by the token of accessor that repeat the
// previous successful write of the same path with the same body: Vault
// already held what was sent. Request bodies are compared as the audit
// device logs them (strings HMAC'd, so equal bodies log equal). Logins,
// token upkeep and lookups (POSTs that change nothing) are left out.
func needlessWrites(t *testing.T, path string, offset int64, accessor string) (writes int, dups []string) {
	t.Helper()
	last := map[string]string{} // path -> "operation body" of its last successful write
	(&auditLog{path: path}).scan(t, offset, func(line []byte) {
		var e auditEntry
		if json.Unmarshal(line, &e) != nil || e.Type != "response" || e.Auth.Accessor != accessor || e.Error != "" {
			return
		}
		p, op := e.Request.Path, e.Request.Operation
		if op == "read" || op == "list" || !changesObjects(p) {
			return
		}
		if op == "create" {
			op = "update" // the same write, whether the object existed or not
		}
		var data any
		_ = json.Unmarshal(e.Request.Data, &data)
		body, _ := json.Marshal(data) // map keys sorted
		w := op + " " + string(body)
		writes++
		if last[p] == w {
			dups = append(dups, op+" "+p)
		}
		last[p] = w
	})
	return writes, dups
}

// changesObjects reports whether a write to path (under /v1/) changes the
// objects the operator manages: logins, token upkeep and lookups (POSTs
// that change nothing) do not.
func changesObjects(path string) bool {
	return !strings.HasPrefix(path, "auth/token/") && !strings.HasSuffix(path, "/login") && !strings.HasPrefix(path, "identity/lookup/")
}
