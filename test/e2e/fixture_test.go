//go:build integration

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// saltMinions is the scene of the operator's basic behaviours (apply,
// resync, pillar change, drift, refusals, deletion, foreign policies): a
// namespace the template selects, a token connection to the suite's Vault,
// and a template that assigns policies, renders the entity's metadata from
// the pillar and writes one ACL policy per pillar role.
//
// Each test builds its own, named for it: the tests share one API server
// and one Vault, where minion IDs, ACL policy names and the names events
// are found by must not meet. Its names are the old story's with the
// test's name in front: minion web01 of the scene "apply" is apply-web01,
// the template salt-minions is apply-minions, the role policy salt_role_web
// is apply_role_web.
type saltMinions struct {
	s *suite
	// ns is the namespace the template selects (labelled team=<ns>).
	ns string
	// conn and tpl are the VaultConnection and the MinionTemplate.
	conn, tpl string
	// role is the prefix of the template's role policies: role+"web".
	role string
}

// newSaltMinions creates the namespace, the connection and the template of
// the scene name.
func newSaltMinions(s *suite, name string) *saltMinions {
	s.t.Helper()
	ctx := context.Background()
	f := &saltMinions{s: s, ns: name, conn: name + "-vault", tpl: name + "-minions", role: name + "_role_"}
	s.must(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns, Labels: map[string]string{"team": f.ns}}}))
	s.must(s.c.Create(ctx, tokenConnection(f.conn, s.env.Vault.Addr, "vault-token")))
	s.must(s.c.Create(ctx, &v1alpha1.MinionTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: f.tpl},
		Spec: v1alpha1.MinionTemplateSpec{
			ConnectionRef: v1alpha1.VaultConnectionReference{Name: f.conn},
			Policies:      &v1alpha1.PoliciesSpec{Assign: []string{"saltstack/minions", "saltstack/{minion}", f.role + "{pillar[roles]}"}},
			Metadata:      &v1alpha1.MetadataSpec{Entity: map[string]string{"roles": "{pillar[roles]}"}},
			PillarPaths:   []string{"salt/data/minions/{minion}"},
			PolicyDocuments: []v1alpha1.PolicyDocument{{
				Name:  f.role + "{pillar[roles]}",
				Rules: []v1alpha1.PolicyRule{{Path: "salt/data/roles/{pillar[roles]}", Capabilities: []v1alpha1.PolicyCapability{"read", "list"}}},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": f.ns}},
			AllowedPolicies:   []string{"saltstack/*", f.role + "*"},
		},
	}))
	return f
}

// id is the scene's name for one of the story's: its minion IDs, bindings
// and other objects of its own (web01 is <scene>-web01).
func (f *saltMinions) id(name string) string { return f.ns + "-" + name }

// bind creates the binding of the story's minion name (web01) in the
// scene's namespace, on its template, with these pillar roles; the binding
// is named by its minion ID.
func (f *saltMinions) bind(name string, roles ...string) {
	f.s.t.Helper()
	b := binding(f.ns, f.id(name), f.id(name), map[string]any{"roles": roles})
	b.Spec.TemplateRef.Name = f.tpl
	f.s.must(f.s.c.Create(context.Background(), b))
}

// waitReady waits for the binding of the story's minion name to be Ready.
func (f *saltMinions) waitReady(name string) *v1alpha1.MinionBinding {
	f.s.t.Helper()
	return f.s.waitReady(f.ns, f.id(name))
}

// template reads the scene's template.
func (f *saltMinions) template() *v1alpha1.MinionTemplate {
	f.s.t.Helper()
	mt := &v1alpha1.MinionTemplate{}
	f.s.must(f.s.c.Get(context.Background(), types.NamespacedName{Name: f.tpl}, mt))
	return mt
}

// waitPolicies waits until the template's status counts bindings bindings
// and manages exactly the role policies of roles: it wrote them.
func (f *saltMinions) waitPolicies(t *testing.T, bindings int32, roles ...string) {
	t.Helper()
	var names []string
	for _, r := range roles {
		names = append(names, f.role+r)
	}
	eventually(t, 20*time.Second, "template policies", func() error {
		mt := &v1alpha1.MinionTemplate{}
		if err := f.s.c.Get(context.Background(), types.NamespacedName{Name: f.tpl}, mt); err != nil {
			return err
		}
		if mt.Status.Bindings != bindings || !managesExactly(mt, names...) {
			return fmt.Errorf("status %+v", mt.Status)
		}
		return nil
	})
}

// unreachableVault is the address of no Vault: nothing listens on port 1.
const unreachableVault = "http://127.0.0.1:1"

// createVia creates a token connection conn to addr with a one-second
// timeout, and a template tpl on it that assigns nothing: the story's
// "down" connection and its "via-down" template.
func (s *suite) createVia(conn, tpl, addr string) {
	s.t.Helper()
	ctx := context.Background()
	s.must(s.c.Create(ctx, &v1alpha1.VaultConnection{
		ObjectMeta: metav1.ObjectMeta{Name: conn},
		Spec: v1alpha1.VaultConnectionSpec{
			Address: addr, Timeout: &metav1.Duration{Duration: time.Second},
			Auth: v1alpha1.VaultAuth{Token: &v1alpha1.TokenAuth{SecretRef: v1alpha1.TokenSecretReference{
				SecretReference: v1alpha1.SecretReference{Name: "vault-token", Namespace: "minionvault-system"}}}},
		},
	}))
	s.must(s.c.Create(ctx, &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: tpl}, Spec: v1alpha1.MinionTemplateSpec{
		ConnectionRef: v1alpha1.VaultConnectionReference{Name: conn},
	}}))
}

// createNamespace creates a namespace without labels.
func (s *suite) createNamespace(name string) {
	s.t.Helper()
	s.must(s.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
}

// setAddress points the VaultConnection name at addr, again on a conflict
// (the operator writes the connection's status meanwhile).
func (s *suite) setAddress(name, addr string) {
	s.t.Helper()
	s.must(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		vc := &v1alpha1.VaultConnection{}
		if err := s.c.Get(context.Background(), types.NamespacedName{Name: name}, vc); err != nil {
			return err
		}
		vc.Spec.Address = addr
		return s.c.Update(context.Background(), vc)
	}))
}
