package admission

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/convert"
	"github.com/minionvault/minion-vault-operator/pkg/render"
)

// facts is a Source from maps.
type facts struct {
	templates  map[string]*v1alpha1.MinionTemplate
	namespaces map[string]map[string]string
	bindings   []*v1alpha1.MinionBinding
	compileErr error
	lookupErr  error
}

func (f *facts) Template(_ context.Context, name string) (*v1alpha1.MinionTemplate, error) {
	return f.templates[name], f.lookupErr
}

func (f *facts) NamespaceLabels(_ context.Context, ns string) (map[string]string, error) {
	return f.namespaces[ns], nil
}

func (f *facts) Claimants(_ context.Context, id string) ([]*v1alpha1.MinionBinding, error) {
	var out []*v1alpha1.MinionBinding
	for _, b := range f.bindings {
		if strings.EqualFold(b.Spec.MinionID, id) {
			out = append(out, b)
		}
	}
	return out, nil
}

func (f *facts) Compile(_ context.Context, tpl *v1alpha1.MinionTemplate) (*render.Compiled, error) {
	if f.compileErr != nil {
		return nil, f.compileErr
	}
	rt, err := convert.Template(tpl.Name, &tpl.Spec, nil, nil)
	if err != nil {
		return nil, err
	}
	return render.Compile(rt), nil
}

func template(mutate func(*v1alpha1.MinionTemplateSpec)) *v1alpha1.MinionTemplate {
	t := &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}, Spec: v1alpha1.MinionTemplateSpec{
		ConnectionRef: v1alpha1.VaultConnectionReference{Name: "vault"},
		Policies:      &v1alpha1.PoliciesSpec{Assign: []string{"salt_role_{pillar[roles]}"}},
		Metadata:      &v1alpha1.MetadataSpec{Entity: map[string]string{"roles": "{pillar[roles]}"}},
	}}
	if mutate != nil {
		mutate(&t.Spec)
	}
	return t
}

var t0 = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

func binding(ns, name, minion string, created metav1.Time, roles ...string) *v1alpha1.MinionBinding {
	raw, _ := json.Marshal(map[string]any{"roles": roles})
	pillar := v1alpha1.NewDocument(raw)
	return &v1alpha1.MinionBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), CreationTimestamp: created},
		Spec: v1alpha1.MinionBindingSpec{MinionID: minion, TemplateRef: v1alpha1.MinionTemplateReference{Name: "t"},
			Pillar: &pillar},
	}
}

func TestAdmit(t *testing.T) {
	later := metav1.NewTime(t0.Add(time.Hour))
	deleting := binding("salt", "old", "web01", t0, "web")
	deleting.DeletionTimestamp = &later
	holder := binding("salt", "zz-holder", "web01", later, "web")
	holder.Status.AppRole = &v1alpha1.AppRoleStatus{RoleID: "r-1"}
	selected := template(func(s *v1alpha1.MinionTemplateSpec) {
		s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"salt": "yes"}}
	})
	badSelector := template(func(s *v1alpha1.MinionTemplateSpec) {
		s.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Nope"}}}
	})
	restricted := template(func(s *v1alpha1.MinionTemplateSpec) { s.AllowedPolicies = []string{"salt_role_db"} })
	self := binding("salt", "web01", "web01", t0, "web")

	tests := []struct {
		name       string
		facts      facts
		b          *v1alpha1.MinionBinding
		wantKind   Kind // 0: admitted
		wantReason string
		wantErr    bool // the source's own failure, not a verdict
		// ahead: admitted, contested by this claimant (namespace/name),
		// which comes first and has written nothing
		ahead string
	}{
		{name: "admitted", b: self},
		{name: "template missing", facts: facts{templates: map[string]*v1alpha1.MinionTemplate{}}, b: self,
			wantKind: Waiting, wantReason: v1alpha1.TemplateNotFoundReason},
		{name: "lookup fails", facts: facts{lookupErr: errors.New("etcd down")}, b: self, wantErr: true},
		{name: "namespace selected", facts: facts{templates: map[string]*v1alpha1.MinionTemplate{"t": selected},
			namespaces: map[string]map[string]string{"salt": {"salt": "yes"}}}, b: self},
		{name: "namespace not selected", facts: facts{templates: map[string]*v1alpha1.MinionTemplate{"t": selected},
			namespaces: map[string]map[string]string{"salt": {}}}, b: self,
			wantKind: Stalled, wantReason: v1alpha1.NamespaceNotAllowedReason},
		{name: "invalid selector", facts: facts{templates: map[string]*v1alpha1.MinionTemplate{"t": badSelector}}, b: self,
			wantKind: Stalled, wantReason: v1alpha1.NamespaceNotAllowedReason},
		{name: "older claim comes first (it wrote nothing yet: Vault decides)", facts: facts{bindings: []*v1alpha1.MinionBinding{binding("other", "web01", "WEB01", t0, "web")}},
			b: binding("salt", "web01", "web01", later, "web"), ahead: "other/web01"},
		{name: "same second: name order", facts: facts{bindings: []*v1alpha1.MinionBinding{binding("a", "web01", "web01", t0, "web")}},
			b: binding("b", "web01", "web01", t0, "web"), ahead: "a/web01"},
		{name: "newer claim loses to us", facts: facts{bindings: []*v1alpha1.MinionBinding{binding("other", "web01", "web01", later, "web")}},
			b: self},
		{name: "holder keeps it against an older claim", facts: facts{bindings: []*v1alpha1.MinionBinding{holder}},
			b: self, wantKind: Stalled, wantReason: v1alpha1.DuplicateMinionIDReason},
		{name: "released by a deleting binding", facts: facts{bindings: []*v1alpha1.MinionBinding{deleting}},
			b: binding("salt", "web01", "web01", later, "web"), wantKind: Waiting, wantReason: v1alpha1.MinionIDReleasingReason},
		{name: "compile waits", facts: facts{compileErr: &Verdict{Kind: Waiting, Reason: v1alpha1.RenderFailedReason, Message: "ConfigMap missing"}},
			b: self, wantKind: Waiting, wantReason: v1alpha1.RenderFailedReason},
		{name: "compile source failure", facts: facts{compileErr: errors.New("api down")}, b: self, wantErr: true},
		{name: "pillar not a mapping", b: func() *v1alpha1.MinionBinding {
			b := binding("salt", "web01", "web01", t0)
			d := v1alpha1.NewDocument([]byte(`[1]`))
			b.Spec.Pillar = &d
			return b
		}(), wantKind: Stalled, wantReason: v1alpha1.RenderFailedReason},
		{name: "guard rail", facts: facts{templates: map[string]*v1alpha1.MinionTemplate{"t": restricted}}, b: self,
			wantKind: Stalled, wantReason: v1alpha1.PolicyNotAllowedReason},
		{name: "glob in metadata", b: binding("salt", "web01", "web01", t0, "*"), wantKind: Stalled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.facts
			if f.templates == nil && f.lookupErr == nil {
				f.templates = map[string]*v1alpha1.MinionTemplate{"t": template(nil)}
			}
			f.bindings = append(f.bindings, tc.b)
			a, err := Admit(context.Background(), &f, tc.b)
			v, isVerdict := AsVerdict(err)
			switch {
			case tc.wantErr:
				if err == nil || isVerdict {
					t.Fatalf("want the source's error, got %v", err)
				}
			case tc.wantKind == 0:
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if a.Result == nil || a.Compiled == nil || a.Template == nil {
					t.Fatalf("admitted without its render: %+v", a)
				}
				got := ""
				if a.Ahead != nil {
					got = a.Ahead.Namespace + "/" + a.Ahead.Name
				}
				if got != tc.ahead || len(a.Rivals) != len(f.bindings)-1 {
					t.Fatalf("ahead %q, %d rivals; want ahead %q", got, len(a.Rivals), tc.ahead)
				}
			default:
				if !isVerdict || v.Kind != tc.wantKind || (tc.wantReason != "" && v.Reason != tc.wantReason) || v.Message == "" {
					t.Fatalf("got %v (%+v), want kind %d reason %s", err, v, tc.wantKind, tc.wantReason)
				}
			}
		})
	}
}

// judge is a Source that decides namespace verdicts itself.
type judge struct {
	facts
	asked   []string
	verdict *Verdict
}

func (j *judge) NamespaceVerdict(_ context.Context, tpl *v1alpha1.MinionTemplate, ns string) (*Verdict, error) {
	j.asked = append(j.asked, tpl.Name+"/"+ns)
	return j.verdict, nil
}

// A NamespaceJudge's verdict is the gate's, whatever the labels say: a
// source that remembers verdicts is asked instead of the selector.
func TestAdmitAsksTheNamespaceJudge(t *testing.T) {
	selected := template(func(s *v1alpha1.MinionTemplateSpec) {
		s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"salt": "yes"}}
	})
	self := binding("salt", "web01", "web01", t0, "web")
	base := facts{templates: map[string]*v1alpha1.MinionTemplate{"t": selected}, namespaces: map[string]map[string]string{"salt": {"salt": "yes"}},
		bindings: []*v1alpha1.MinionBinding{self}}
	no := &Verdict{Kind: Stalled, Reason: v1alpha1.NamespaceNotAllowedReason, Message: "remembered"}
	j := &judge{facts: base, verdict: no}
	if _, err := Admit(context.Background(), j, self); err != no || strings.Join(j.asked, ",") != "t/salt" {
		t.Fatalf("refused: %v, asked %q", err, j.asked)
	}
	j = &judge{facts: base}
	if _, err := Admit(context.Background(), j, self); err != nil || len(j.asked) != 1 {
		t.Fatalf("admitted: %v, asked %q", err, j.asked)
	}
}
