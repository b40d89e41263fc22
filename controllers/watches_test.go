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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// withFieldIndexes registers every field index of the operator (the
// same functions SetupIndexes registers) with a fake client.
func withFieldIndexes(b *fake.ClientBuilder) *fake.ClientBuilder {
	for _, f := range FieldIndexes {
		b = b.WithIndex(f.obj, f.field, f.extract)
	}
	return b
}

// metadataOf is what a metadata watch hands a map function.
func metadataOf(kind, namespace, name string) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	return m
}

// watchFixtures: two connections, three templates, and bindings that reach
// a connection through their template, their status (switching away) or
// their record (their template gone, being deleted).
func watchFixtures() []client.Object {
	secretRef := func(ns, name string) v1alpha1.SecretReference {
		return v1alpha1.SecretReference{Namespace: ns, Name: name}
	}
	cmRef := func(ns, name string) v1alpha1.ParameterConfigMapReference {
		return v1alpha1.ParameterConfigMapReference{ConfigMapReference: v1alpha1.ConfigMapReference{Namespace: ns, Name: name}}
	}
	template := func(name, conn string, cms ...v1alpha1.ParameterConfigMapReference) *v1alpha1.MinionTemplate {
		t := &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.MinionTemplateSpec{
			ConnectionRef: v1alpha1.VaultConnectionReference{Name: conn}}}
		if len(cms) > 0 {
			t.Spec.Parameters = &v1alpha1.ParametersSpec{Root: "vault", ConfigMapRefs: cms}
		}
		return t
	}
	binding := func(name, tpl string, edit func(*v1alpha1.MinionBinding)) *v1alpha1.MinionBinding {
		b := &v1alpha1.MinionBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "salt", Name: name}, Spec: v1alpha1.MinionBindingSpec{
			MinionID: name, TemplateRef: v1alpha1.MinionTemplateReference{Name: tpl}}}
		if edit != nil {
			edit(b)
		}
		return b
	}
	record := func(conns ...string) func(*v1alpha1.MinionBinding) {
		return func(b *v1alpha1.MinionBinding) {
			var inv ownership.Inventory
			for _, c := range conns {
				inv = append(inv, ownership.Placement{Connection: c, Mount: "salt-minions", Entity: "salt_minion_" + b.Name + "_" + c})
			}
			b.Annotations = map[string]string{v1alpha1.VaultObjectsAnnotation: inv.Encode()}
		}
	}
	return []client.Object{
		&v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "vault"}, Spec: v1alpha1.VaultConnectionSpec{
			Address: "https://vault", TLS: &v1alpha1.VaultTLS{CASecretRef: &v1alpha1.CASecretReference{SecretReference: secretRef("ops", "ca")}},
			Auth: v1alpha1.VaultAuth{Token: &v1alpha1.TokenAuth{SecretRef: v1alpha1.TokenSecretReference{SecretReference: secretRef("ops", "token")}}}}},
		&v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: v1alpha1.VaultConnectionSpec{
			Address: "https://other", TLS: &v1alpha1.VaultTLS{CASecretRef: &v1alpha1.CASecretReference{SecretReference: secretRef("ops", "ca")}},
			Auth: v1alpha1.VaultAuth{AppRole: &v1alpha1.AppRoleAuth{RoleID: "r", SecretIDSecretRef: v1alpha1.SecretIDSecretReference{SecretReference: secretRef("ops", "approle")}}}}},
		template("with", "vault", cmRef("salt", "params"), cmRef("salt", "more")),
		template("also", "vault", cmRef("salt", "params"), cmRef("salt", "params")),
		template("without", "other"),
		binding("b1", "with", nil),
		binding("b2", "without", nil),
		binding("b3", "also", nil),
		binding("switching", "without", func(b *v1alpha1.MinionBinding) { b.Status.Connection = "vault" }),
		binding("orphan", "gone", record("vault")),
		binding("orphan-other", "gone", record("other", "other")),
		binding("bad-record", "gone", func(b *v1alpha1.MinionBinding) {
			b.Annotations = map[string]string{v1alpha1.VaultObjectsAnnotation: "not json"}
		}),
	}
}

// listsOnlyByIndex fails the test when a map function lists without a
// field selector: listing the fleet and filtering is what the indexes
// replace.
func listsOnlyByIndex(t *testing.T) interceptor.Funcs {
	return interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		lo := &client.ListOptions{}
		lo.ApplyOptions(opts)
		if lo.FieldSelector == nil || lo.FieldSelector.Empty() {
			t.Errorf("%T listed without an index", list)
		}
		return c.List(ctx, list, opts...)
	}}
}

// Every watch maps a changed Secret, ConfigMap, connection or template to
// exactly the objects that depend on it, through the field indexes, each
// once: a fix ends a RenderFailed or AccessDenied without a manual poke,
// and nothing else is woken.
func TestWatchMappings(t *testing.T) {
	h := newHarness(t)
	h.c = withFieldIndexes(fake.NewClientBuilder().WithScheme(h.c.Scheme())).
		WithObjects(watchFixtures()...).WithInterceptorFuncs(listsOnlyByIndex(t)).Build()
	br := &MinionBindingReconciler{Client: h.c}
	tr := &MinionTemplateReconciler{Client: h.c}
	cr := &VaultConnectionReconciler{Client: h.c}
	ctx := context.Background()
	conn := func(name string) client.Object {
		return &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	tests := []struct {
		name string
		got  []reconcile.Request
		want []string
	}{
		{"bindings of a ConfigMap two templates read", br.bindingsOfConfigMap(ctx, metadataOf("ConfigMap", "salt", "params")), []string{"salt/b1", "salt/b3"}},
		{"bindings of a ConfigMap one template reads", br.bindingsOfConfigMap(ctx, metadataOf("ConfigMap", "salt", "more")), []string{"salt/b1"}},
		{"bindings of a ConfigMap of that name elsewhere", br.bindingsOfConfigMap(ctx, metadataOf("ConfigMap", "other", "params")), nil},
		{"bindings of a token Secret", br.bindingsOfSecret(ctx, metadataOf("Secret", "ops", "token")),
			[]string{"salt/b1", "salt/b3", "salt/orphan", "salt/switching"}},
		{"bindings of an AppRole Secret", br.bindingsOfSecret(ctx, metadataOf("Secret", "ops", "approle")),
			[]string{"salt/b2", "salt/orphan-other", "salt/switching"}},
		{"bindings of a CA both connections read, each once", br.bindingsOfSecret(ctx, metadataOf("Secret", "ops", "ca")),
			[]string{"salt/b1", "salt/b2", "salt/b3", "salt/orphan", "salt/orphan-other", "salt/switching"}},
		{"bindings of a Secret of that name elsewhere", br.bindingsOfSecret(ctx, metadataOf("Secret", "salt", "token")), nil},
		{"bindings of a connection: template, status and record", br.bindingsOfConnection(ctx, conn("vault")),
			[]string{"salt/b1", "salt/b3", "salt/orphan", "salt/switching"}},
		{"bindings of a connection nothing uses", br.bindingsOfConnection(ctx, conn("unused")), nil},
		{"bindings of a template", br.bindingsOfTemplate(ctx, &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: "without"}}),
			[]string{"salt/b2", "salt/switching"}},
		{"templates of a connection", tr.templatesOfConnection(ctx, conn("vault")), []string{"also", "with"}},
		{"templates of a ConfigMap", tr.templatesOfConfigMap(ctx, metadataOf("ConfigMap", "salt", "params")), []string{"also", "with"}},
		{"templates of another ConfigMap", tr.templatesOfConfigMap(ctx, metadataOf("ConfigMap", "salt", "token")), nil},
		{"connections of a shared CA", cr.connectionsOfSecret(ctx, metadataOf("Secret", "ops", "ca")), []string{"other", "vault"}},
		{"connections of a token", cr.connectionsOfSecret(ctx, metadataOf("Secret", "ops", "token")), []string{"vault"}},
		{"connections of an unrelated Secret", cr.connectionsOfSecret(ctx, metadataOf("Secret", "ops", "unrelated")), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, r := range tc.got {
				got = append(got, strings.TrimPrefix(r.Namespace+"/"+r.Name, "/"))
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("woke %q, want %q", got, tc.want)
			}
		})
	}
}

// The index keys themselves: each reference an object makes, once, and
// nothing for a record that cannot be read.
func TestFieldIndexKeys(t *testing.T) {
	keys := map[string]func(client.Object) []string{}
	for _, f := range FieldIndexes {
		keys[f.field] = f.extract
	}
	objs := map[string]client.Object{}
	for _, o := range watchFixtures() {
		objs[o.GetName()] = o
	}
	tests := []struct {
		index, object string
		want          []string
	}{
		{TemplateConfigMapIndex, "also", []string{"salt/params"}},
		{TemplateConfigMapIndex, "with", []string{"salt/more", "salt/params"}},
		{TemplateConfigMapIndex, "without", nil},
		{TemplateConnectionIndex, "with", []string{"vault"}},
		{ConnectionSecretIndex, "vault", []string{"ops/ca", "ops/token"}},
		{ConnectionSecretIndex, "other", []string{"ops/approle", "ops/ca"}},
		{BindingConnectionIndex, "b1", nil},
		{BindingConnectionIndex, "switching", []string{"vault"}},
		{BindingConnectionIndex, "orphan-other", []string{"other"}},
		{BindingConnectionIndex, "bad-record", nil},
		{TemplateRefIndex, "orphan", []string{"gone"}},
		{MinionIDIndex, "b1", []string{"b1"}},
		// The wrong kind is no key, not a panic.
		{MinionIDIndex, "vault", nil},
		{ConnectionSecretIndex, "b1", nil},
	}
	for _, tc := range tests {
		if got := keys[tc.index](objs[tc.object]); !slices.Equal(got, tc.want) {
			t.Errorf("%s of %s = %q, want %q", tc.index, tc.object, got, tc.want)
		}
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
	r := &MinionTemplateReconciler{Client: h.c, Recorder: h.rec, Connections: h.r.Connections, Templates: h.r.Templates, ClusterID: testCluster}
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
