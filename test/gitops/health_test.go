// Package gitops checks what GitOps tools make of the operator's objects:
// kstatus (Flux's wait and healthChecks), Flux's healthCheckExprs from
// docs/gitops.md, and the Argo CD health scripts in config/argocd, run as
// Argo CD runs them. The unit tests here use objects built in the test; the
// integration suite (suite_test.go, states_test.go) drives real objects
// into every state with the real operator and checks the same expectations.
package gitops

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// The kinds and the states an object of them can be in.
const (
	kindConnection = "VaultConnection"
	kindTemplate   = "MinionTemplate"
	kindBinding    = "MinionBinding"

	stateNew       = "new"       // created, not reconciled yet
	stateReady     = "Ready"     // Ready=True
	stateStalled   = "Stalled"   // Ready=False, Stalled=True
	stateWaiting   = "waiting"   // Ready=False, Reconciling=True
	stateDeleting  = "deleting"  // deletionTimestamp set, a finalizer left
	stateSuspended = "suspended" // spec.suspend (bindings only)
	stateStale     = "stale"     // metadata.generation ahead of status.observedGeneration
)

var kinds = []string{kindConnection, kindTemplate, kindBinding}

// expectation is what each tool must say of an object in a state.
type expectation struct {
	KStatus status.Status // kstatus: Flux's wait and healthChecks
	Flux    status.Status // Flux with the healthCheckExprs of docs/gitops.md
	Lua     string        // the Argo CD script's status
	Argo    string        // what Argo CD shows (its deletion rule comes first)
}

// expect is the documented table (docs/gitops.md).
func expect(kind, state string) expectation {
	var e expectation
	switch state {
	case stateNew, stateWaiting, stateStale:
		e = expectation{status.InProgressStatus, status.InProgressStatus, "Progressing", "Progressing"}
	case stateReady:
		e = expectation{status.CurrentStatus, status.CurrentStatus, "Healthy", "Healthy"}
	case stateStalled:
		e = expectation{status.FailedStatus, status.FailedStatus, "Degraded", "Degraded"}
	case stateDeleting:
		e = expectation{status.TerminatingStatus, status.TerminatingStatus, "Progressing", "Progressing"}
	case stateSuspended:
		// kstatus knows no "suspended": Ready=False is InProgress, so Flux
		// waits for a suspended binding until its timeout unless the
		// Kustomization has the healthCheckExprs of docs/gitops.md.
		e = expectation{status.InProgressStatus, status.CurrentStatus, "Suspended", "Suspended"}
	default:
		panic("unknown state " + state)
	}
	if kind == kindBinding && state == stateDeleting {
		// Flux's CEL reader has no deletion rule of its own; the
		// expressions say InProgress.
		e.Flux = status.InProgressStatus
	}
	return e
}

// verdict is what each tool said.
type verdict struct {
	KStatus  status.Status
	KMessage string
	Flux     status.Status
	Lua      argoHealth
	Argo     argoHealth
}

// judge evaluates objects with the shipped configuration.
type judge struct {
	argo map[string]argoOverride
	flux *fluxHealth
}

func newJudge() (*judge, error) {
	argo, err := loadArgoCM(argoCMPath)
	if err != nil {
		return nil, err
	}
	for _, k := range kinds {
		if argo["minionvault.dev/"+k].HealthLua == "" {
			return nil, fmt.Errorf("%s has no health script for %s", argoCMPath, k)
		}
	}
	ks, err := fluxKustomizationFromDocs(gitopsDoc)
	if err != nil {
		return nil, err
	}
	flux, err := newFluxHealth(ks.Spec.HealthCheckExprs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gitopsDoc, err)
	}
	return &judge{argo: argo, flux: flux}, nil
}

func (j *judge) verdict(u *unstructured.Unstructured) (verdict, error) {
	var v verdict
	res, err := status.Compute(u)
	if err != nil {
		return v, fmt.Errorf("kstatus: %w", err)
	}
	v.KStatus, v.KMessage = res.Status, res.Message
	if v.Flux, err = j.flux.Compute(u); err != nil {
		return v, fmt.Errorf("flux: %w", err)
	}
	o := j.argo[u.GroupVersionKind().Group+"/"+u.GetKind()]
	if v.Lua, err = runArgoHealthLua(u, o.HealthLua, o.UseOpenLibs); err != nil {
		return v, fmt.Errorf("argo script: %w", err)
	}
	if v.Argo, err = argoResourceHealth(u, j.argo); err != nil {
		return v, fmt.Errorf("argo: %w", err)
	}
	return v, nil
}

// mismatches compares a verdict with the expectation.
func (e expectation) mismatches(v verdict) []string {
	var out []string
	if v.KStatus != e.KStatus {
		out = append(out, fmt.Sprintf("kstatus %s (%s), want %s", v.KStatus, v.KMessage, e.KStatus))
	}
	if v.Flux != e.Flux {
		out = append(out, fmt.Sprintf("Flux with healthCheckExprs %s, want %s", v.Flux, e.Flux))
	}
	if v.Lua.Status != e.Lua {
		out = append(out, fmt.Sprintf("Argo CD script %s, want %s", v.Lua, e.Lua))
	}
	if v.Argo.Status != e.Argo {
		out = append(out, fmt.Sprintf("Argo CD %s, want %s", v.Argo, e.Argo))
	}
	return out
}

// row is one line of the result table.
type row struct {
	kind, state, object, conditions string
	v                               verdict
	problems                        []string
}

// conditionSummary is an object's status in one cell: generations, then
// each condition as Type=Status/Reason.
func conditionSummary(u *unstructured.Unstructured) string {
	var parts []string
	if u.GetDeletionTimestamp() != nil {
		parts = append(parts, "deletionTimestamp")
	}
	obs, found, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if found {
		parts = append(parts, fmt.Sprintf("gen %d/observed %d", u.GetGeneration(), obs))
	} else {
		parts = append(parts, fmt.Sprintf("gen %d/no status", u.GetGeneration()))
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		s := fmt.Sprintf("%v=%v", m["type"], m["status"])
		if r, _ := m["reason"].(string); r != "" {
			s += "/" + r
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// table renders rows as the Markdown table of docs/gitops.md.
func table(rows []row) string {
	var b strings.Builder
	b.WriteString("| kind | state | status the operator wrote | kstatus | Flux + healthCheckExprs | Argo CD script | Argo CD shows |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", r.kind, r.state, r.conditions,
			r.v.KStatus, r.v.Flux, cell(r.v.Lua), cell(r.v.Argo))
	}
	return b.String()
}

func cell(h argoHealth) string {
	s := h.String()
	if len(s) > 90 {
		s = s[:87] + "..."
	}
	return strings.ReplaceAll(s, "|", `\|`)
}

// synthetic builds an object of kind in the shape the API server returns:
// generation, the status the operator writes (observedGeneration < 0 for
// "no status at all"), conditions as "Type=Status/Reason".
func synthetic(kind string, gen, observed int64, deleting, suspend bool, conds ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "minionvault.dev/v1alpha1",
		"kind":       kind,
		"metadata":   map[string]any{"name": "x", "generation": gen, "finalizers": []any{"minionvault.dev/finalizer"}},
		"spec":       map[string]any{},
	}}
	if deleting {
		_ = unstructured.SetNestedField(u.Object, "2026-01-01T00:00:00Z", "metadata", "deletionTimestamp")
	}
	if suspend {
		_ = unstructured.SetNestedField(u.Object, true, "spec", "suspend")
	}
	if observed == -2 {
		return u // no status: the API server before the CRDs defaulted it
	}
	var cs []any
	for _, c := range conds {
		typ, rest, _ := strings.Cut(c, "=")
		st, reason, _ := strings.Cut(rest, "/")
		cs = append(cs, map[string]any{
			"type": typ, "status": st, "reason": reason, "message": "msg of " + typ,
			"observedGeneration": gen, "lastTransitionTime": "2026-01-01T00:00:00Z",
		})
	}
	st := map[string]any{"observedGeneration": observed}
	if cs != nil {
		st["conditions"] = cs
	}
	u.Object["status"] = st
	return u
}

// TestHealthMapping checks the documented table on objects shaped as the
// operator writes them, for every kind.
func TestHealthMapping(t *testing.T) {
	j, err := newJudge()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		state string
		obj   func(kind string) *unstructured.Unstructured
		kinds []string // nil: all
	}{
		{stateNew, func(k string) *unstructured.Unstructured { return synthetic(k, 1, -1, false, false) }, nil},
		{stateReady, func(k string) *unstructured.Unstructured {
			return synthetic(k, 2, 2, false, false, "Ready=True/Succeeded")
		}, nil},
		{stateStalled, func(k string) *unstructured.Unstructured {
			return synthetic(k, 1, 1, false, false, "Ready=False/RenderFailed", "Stalled=True/RenderFailed")
		}, nil},
		{stateWaiting, func(k string) *unstructured.Unstructured {
			return synthetic(k, 1, 1, false, false, "Ready=False/TemplateNotFound", "Reconciling=True/Progressing")
		}, nil},
		// markProgressing: a new generation announced before the work.
		{stateWaiting, func(k string) *unstructured.Unstructured {
			return synthetic(k, 3, 3, false, false, "Reconciling=True/Progressing", "Ready=Unknown/Progressing")
		}, nil},
		{stateDeleting, func(k string) *unstructured.Unstructured {
			return synthetic(k, 1, 1, true, false, "Ready=False/DeletionBlocked", "Reconciling=True/Progressing")
		}, nil},
		{stateSuspended, func(k string) *unstructured.Unstructured {
			return synthetic(k, 2, 2, false, true, "Ready=False/Suspended")
		}, []string{kindBinding}},
		{stateStale, func(k string) *unstructured.Unstructured {
			return synthetic(k, 4, 3, false, false, "Ready=True/Succeeded")
		}, nil},
	}
	var rows []row
	for _, c := range cases {
		for _, k := range kinds {
			if c.kinds != nil && !slices.Contains(c.kinds, k) {
				continue
			}
			u := c.obj(k)
			v, err := j.verdict(u)
			if err != nil {
				t.Fatalf("%s %s: %v", k, c.state, err)
			}
			r := row{kind: k, state: c.state, conditions: conditionSummary(u), v: v, problems: expect(k, c.state).mismatches(v)}
			for _, p := range r.problems {
				t.Errorf("%s %s (%s): %s", k, c.state, r.conditions, p)
			}
			rows = append(rows, r)
		}
	}
	t.Logf("\n%s", table(rows))
}

// TestHealthMessages checks what the Argo CD script says besides the
// status: the reason, which is what a user looks for first.
func TestHealthMessages(t *testing.T) {
	j, err := newJudge()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		obj  *unstructured.Unstructured
		want argoHealth
	}{
		{"no status at all", synthetic(kindBinding, 1, -2, false, false), argoHealth{"Progressing", "not reconciled yet"}},
		{"defaulted status", synthetic(kindBinding, 1, -1, false, false), argoHealth{"Progressing", "generation 1 not reconciled yet"}},
		{"stale", synthetic(kindTemplate, 4, 3, false, false, "Ready=True/Succeeded"),
			argoHealth{"Progressing", "generation 4 not reconciled yet (status is of generation 3)"}},
		{"ready", synthetic(kindConnection, 1, 1, false, false, "Ready=True/Succeeded"), argoHealth{"Healthy", "msg of Ready"}},
		{"stalled", synthetic(kindBinding, 1, 1, false, false, "Ready=False/DuplicateMinionID", "Stalled=True/DuplicateMinionID"),
			argoHealth{"Degraded", "DuplicateMinionID: msg of Stalled"}},
		{"waiting", synthetic(kindBinding, 1, 1, false, false, "Ready=False/TemplateNotFound", "Reconciling=True/Progressing"),
			argoHealth{"Progressing", "TemplateNotFound: msg of Ready"}},
		{"deleting", synthetic(kindBinding, 1, 1, true, false, "Ready=False/DeletionBlocked", "Reconciling=True/Progressing"),
			argoHealth{"Progressing", "being deleted; DeletionBlocked: msg of Ready"}},
		{"deleting while Ready", synthetic(kindConnection, 1, 1, true, false, "Ready=True/Succeeded"),
			argoHealth{"Progressing", "being deleted"}},
		{"suspended", synthetic(kindBinding, 2, 2, false, true, "Ready=False/Suspended"), argoHealth{"Suspended", "Suspended: msg of Ready"}},
		// The operator never writes a bare Ready=False; should it, that is
		// no verdict yet, as kstatus says.
		{"bare Ready=False", synthetic(kindBinding, 1, 1, false, false, "Ready=False/VaultUnavailable"),
			argoHealth{"Progressing", "VaultUnavailable: msg of Ready"}},
	} {
		o := j.argo["minionvault.dev/"+c.obj.GetKind()]
		got, err := runArgoHealthLua(c.obj, o.HealthLua, o.UseOpenLibs)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestArgoHarness checks the reproduction of Argo CD's script runner on
// what Argo CD itself does with odd scripts.
func TestArgoHarness(t *testing.T) {
	obj := synthetic(kindBinding, 1, 1, false, false, "Ready=True/Succeeded")
	for _, c := range []struct {
		name, script string
		want         argoHealth
		wantErr      string
	}{
		{"fields of obj", `return {status = "Healthy", message = obj.kind .. " " .. obj.metadata.generation}`, argoHealth{"Healthy", "MinionBinding 1"}, ""},
		{"invalid status", `return {status = "Fine"}`, argoHealth{"Unknown", "Lua returned an invalid health status"}, ""},
		{"nil", `return nil`, argoHealth{}, ""},
		{"empty table", `return {}`, argoHealth{}, ""},
		{"a string", `return "Healthy"`, argoHealth{}, "not string"},
		// The standard libraries stay closed without useOpenLibs.
		{"no string library", `return {status = string.upper("healthy")}`, argoHealth{}, "non-table object(nil) with key 'upper'"},
		{"no os library", `return {status = "Healthy", message = os.date()}`, argoHealth{}, "non-table object(nil) with key 'date'"},
		{"endless loop", `while true do end`, argoHealth{}, "context deadline exceeded"},
	} {
		got, err := runArgoHealthLua(obj, c.script, false)
		switch {
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: %v, %v; want an error with %q", c.name, got, err, c.wantErr)
		case c.wantErr == "" && (err != nil || got != c.want):
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}
