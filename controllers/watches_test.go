package controllers

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// A ConfigMap or Secret change wakes exactly the bindings that depend on
// it, so a fix ends a RenderFailed or AccessDenied without a manual poke.
func TestWatchMappings(t *testing.T) {
	params := &v1alpha1.ParametersSpec{ConfigMapRefs: []v1alpha1.ParameterConfigMapReference{{ConfigMapReference: v1alpha1.ConfigMapReference{Namespace: "salt", Name: "params"}}}}
	withParams := &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: "with"}, Spec: v1alpha1.MinionTemplateSpec{
		ConnectionRef: v1alpha1.VaultConnectionReference{Name: "vault"}, Parameters: params}}
	without := &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: "without"}, Spec: v1alpha1.MinionTemplateSpec{
		ConnectionRef: v1alpha1.VaultConnectionReference{Name: "other"}}}
	conn := &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "vault"}, Spec: v1alpha1.VaultConnectionSpec{
		Address: "http://vault", Auth: v1alpha1.VaultAuth{Token: &v1alpha1.TokenAuth{SecretRef: v1alpha1.TokenSecretReference{
			SecretReference: v1alpha1.SecretReference{Namespace: "ops", Name: "token"}}}}}}
	b1 := &v1alpha1.MinionBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "salt", Name: "b1"}, Spec: v1alpha1.MinionBindingSpec{
		MinionID: "b1", TemplateRef: v1alpha1.MinionTemplateReference{Name: "with"}}}
	b2 := &v1alpha1.MinionBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "salt", Name: "b2"}, Spec: v1alpha1.MinionBindingSpec{
		MinionID: "b2", TemplateRef: v1alpha1.MinionTemplateReference{Name: "without"}}}
	h := newHarness(t, withParams, without, conn, b1, b2)
	ctx := context.Background()
	names := func(reqs []reconcile.Request) []string {
		var out []string
		for _, r := range reqs {
			out = append(out, r.Name)
		}
		slices.Sort(out)
		return out
	}
	tests := []struct {
		name string
		got  []reconcile.Request
		want []string
	}{
		{"the parameter ConfigMap", h.r.bindingsOfConfigMap(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "salt", Name: "params"}}), []string{"b1"}},
		{"another ConfigMap", h.r.bindingsOfConfigMap(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "params"}}), nil},
		{"the token Secret", h.r.bindingsOfSecret(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "token"}}), []string{"b1"}},
		{"another Secret", h.r.bindingsOfSecret(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "salt", Name: "token"}}), nil},
	}
	for _, tc := range tests {
		if got := names(tc.got); !slices.Equal(got, tc.want) {
			t.Errorf("%s: woke %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := templatesUsingConfigMap(ctx, h.c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "salt", Name: "params"}}); !slices.Equal(got, []string{"with"}) {
		t.Errorf("templates %q", got)
	}
}

// A template whose own patterns are wrong (a rule path placeholder missing
// from the policy name) says so itself, Stalled, not Ready.
func TestTemplateWithOwnProblemsIsStalled(t *testing.T) {
	objs := fixtures(map[string]any{"roles": []string{"web"}})
	tpl := objs[2].(*v1alpha1.MinionTemplate)
	tpl.Spec.PolicyDocuments = []v1alpha1.PolicyDocument{{Name: "fixed", Rules: []v1alpha1.PolicyRule{
		{Path: "salt/data/{pillar[roles]}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}}}
	h := newHarness(t, objs...)
	r := &MinionTemplateReconciler{Client: h.c, Recorder: h.rec, Connections: h.r.Connections, Templates: h.r.Templates}
	ctx := context.Background()
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: "t"}}); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.MinionTemplate{}
	if err := h.c.Get(ctx, types.NamespacedName{Name: "t"}, got); err != nil {
		t.Fatal(err)
	}
	stalled := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.StalledCondition)
	if stalled == nil || stalled.Status != metav1.ConditionTrue || !strings.Contains(stalled.Message, "used in the rule path but not in the name") {
		t.Fatalf("conditions %+v", got.Status.Conditions)
	}
	if h.v.Writes() != 0 {
		t.Errorf("%d Vault writes", h.v.Writes())
	}
}
