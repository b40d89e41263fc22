package patch

import (
	"context"
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

func TestFieldMergePatch(t *testing.T) {
	for _, tc := range []struct {
		name, before, after, want string
	}{
		{"nothing changed", `{"a":1}`, `{"a":1}`, `{"status":{}}`},
		{"a value changed", `{"a":1,"b":"x"}`, `{"a":2,"b":"x"}`, `{"status":{"a":2}}`},
		{"a field removed is null", `{"a":1,"b":"x"}`, `{"b":"x"}`, `{"status":{"a":null}}`},
		{"a field added", `{}`, `{"c":{"d":true}}`, `{"status":{"c":{"d":true}}}`},
		{"nested: only what differs", `{"e":{"id":"1","m":{"k":"v"}}}`, `{"e":{"id":"1","m":{"k":"w"}}}`, `{"status":{"e":{"m":{"k":"w"}}}}`},
		{"a list is replaced whole", `{"l":["a","b"]}`, `{"l":["a","c"]}`, `{"status":{"l":["a","c"]}}`},
		{"everything removed", `{"a":1}`, `{}`, `{"status":{"a":null}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := jsonFieldPatch("status", json.RawMessage(tc.before), json.RawMessage(tc.after))
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, []byte(tc.want)) {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
	// The diff assumes valid JSON (it panics on anything else), which
	// json.Marshal checks first.
	if _, err := jsonFieldPatch("status", json.RawMessage(`{`), json.RawMessage(`{}`)); err == nil {
		t.Error("broken JSON: no error")
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// The patches carry the part that changed and nothing else (not the spec,
// whose grains and pillar are most of a binding), leave what someone else
// changed meanwhile alone, and leave obj with the metadata the API server
// holds after them, as the full answer did.
func TestPatchesSendOnlyWhatChanged(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	pillar := v1alpha1.NewDocument([]byte(`{"roles":["web"],"big":"pillar"}`))
	b := &v1alpha1.MinionBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "salt", Name: "web01", Generation: 1, Annotations: map[string]string{"theirs": "1"}},
		Spec:       v1alpha1.MinionBindingSpec{MinionID: "web01", TemplateRef: v1alpha1.MinionTemplateReference{Name: "t"}, Pillar: &pillar},
	}
	base := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1alpha1.MinionBinding{}).WithObjects(b).Build()
	var sent []string
	c := interceptor.NewClient(base, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			data, _ := p.Data(obj)
			sent = append(sent, string(data))
			if _, ok := obj.(*metav1.PartialObjectMetadata); !ok {
				t.Errorf("a metadata patch asks for the whole %T back", obj)
			}
			return c.Patch(ctx, obj, p, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			data, _ := p.Data(obj)
			sent = append(sent, sub+" "+string(data))
			if _, ok := obj.(*metav1.PartialObjectMetadata); !ok {
				t.Errorf("a status patch asks for the whole %T back", obj)
			}
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	})
	obj := &v1alpha1.MinionBinding{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(b), obj); err != nil {
		t.Fatal(err)
	}

	// Someone else changes an annotation and the spec (a new generation)
	// after the operator read the binding.
	other := obj.DeepCopy()
	other.Annotations["theirs"] = "2"
	other.Spec.MinionID, other.Generation = "web02", obj.Generation+1
	if err := base.Update(ctx, other); err != nil {
		t.Fatal(err)
	}

	if err := AddFinalizer(ctx, c, obj, func() bool { obj.Annotations["ours"] = "rec"; return true }); err != nil {
		t.Fatal(err)
	}
	want := `{"metadata":{"annotations":{"ours":"rec"},"finalizers":["` + v1alpha1.Finalizer + `"]}}`
	if len(sent) != 1 || !jsonEqual(t, []byte(sent[0]), []byte(want)) {
		t.Errorf("metadata patch %q, want %s", sent, want)
	}
	stored := &v1alpha1.MinionBinding{}
	if err := base.Get(ctx, client.ObjectKeyFromObject(b), stored); err != nil {
		t.Fatal(err)
	}
	if obj.ResourceVersion != stored.ResourceVersion || obj.Annotations["theirs"] != "2" || obj.Annotations["ours"] != "rec" || len(obj.Finalizers) != 1 {
		t.Errorf("after the patch obj has metadata %+v, the API server %+v", obj.ObjectMeta, stored.ObjectMeta)
	}
	if obj.Spec.Pillar == nil || obj.Spec.MinionID != "web01" {
		t.Errorf("the spec was lost: %+v", obj.Spec)
	}
	// obj holds the spec it was read with, so it keeps that spec's
	// generation: a status written from it must not claim the newer one.
	if obj.Generation != stored.Generation-1 {
		t.Errorf("obj's generation %d with the spec of generation %d (the API server's %d)", obj.Generation, stored.Generation-1, stored.Generation)
	}

	sent = nil
	before := obj.Status.DeepCopy()
	obj.Status.ObservedGeneration = 1
	obj.Status.Policies = []string{"salt_role_web"}
	if err := Status(ctx, c, obj, before, func(b *v1alpha1.MinionBinding) *v1alpha1.MinionBindingStatus { return &b.Status }); err != nil {
		t.Fatal(err)
	}
	want = `status {"status":{"observedGeneration":1,"policies":["salt_role_web"]}}`
	if len(sent) != 1 || sent[0][:7] != "status " || !jsonEqual(t, []byte(sent[0][7:]), []byte(want[7:])) {
		t.Errorf("status patch %q, want %s", sent, want)
	}
	if err := base.Get(ctx, client.ObjectKeyFromObject(b), stored); err != nil {
		t.Fatal(err)
	}
	if stored.Status.ObservedGeneration != 1 || len(stored.Status.Policies) != 1 || obj.ResourceVersion != stored.ResourceVersion || stored.Annotations["theirs"] != "2" {
		t.Errorf("after the status patch: stored %+v %+v, obj's resourceVersion %s", stored.Status, stored.Annotations, obj.ResourceVersion)
	}

	// Nothing changed: nothing sent.
	sent = nil
	if err := Status(ctx, c, obj, obj.Status.DeepCopy(), func(b *v1alpha1.MinionBinding) *v1alpha1.MinionBindingStatus { return &b.Status }); err != nil {
		t.Fatal(err)
	}
	if err := Metadata(ctx, c, obj, func() bool { return false }); err != nil {
		t.Fatal(err)
	}
	if len(sent) != 0 {
		t.Errorf("sent %q for nothing changed", sent)
	}
}
