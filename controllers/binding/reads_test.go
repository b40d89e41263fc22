package binding

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/connection"
	"github.com/minionvault/minion-vault-operator/controllers/internal/clusterfacts"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// countingReader stands for the API server: it counts the GETs of each
// kind that reach it.
type countingReader struct {
	client.Reader
	mu   sync.Mutex
	gets map[string]int
}

func (r *countingReader) Get(ctx context.Context, key types.NamespacedName, obj client.Object, opts ...client.GetOption) error {
	r.mu.Lock()
	if r.gets == nil {
		r.gets = map[string]int{}
	}
	r.gets[fmt.Sprintf("%T", obj)]++
	r.mu.Unlock()
	return r.Reader.Get(ctx, key, obj, opts...)
}

func (r *countingReader) count(obj client.Object) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gets[fmt.Sprintf("%T", obj)]
}

// Secrets and ConfigMaps are read from the API server only when the
// metadata cache shows a version the operator has not read yet: a fleet's
// reconciles cost no Kubernetes read, a rotated Secret or an edited
// ConfigMap one read each, and a Secret that lacks its key or is missing
// costs no read per binding either.
func TestSecretAndConfigMapReadsPerVersion(t *testing.T) {
	const fleet = 5
	objs := fixtures(map[string]any{"roles": []string{"web"}})
	conn := objs[1].(*v1alpha1.VaultConnection)
	conn.UID = "uid-vault"
	conn.Spec = v1alpha1.VaultConnectionSpec{Address: "http://vault", Auth: v1alpha1.VaultAuth{Token: &v1alpha1.TokenAuth{
		SecretRef: v1alpha1.TokenSecretReference{SecretReference: v1alpha1.SecretReference{Namespace: "salt", Name: "vault-token"}}}}}
	tpl := objs[2].(*v1alpha1.MinionTemplate)
	tpl.UID = "uid-t"
	tpl.Spec.Parameters = &v1alpha1.ParametersSpec{Root: "vault", ConfigMapRefs: []v1alpha1.ParameterConfigMapReference{
		{ConfigMapReference: v1alpha1.ConfigMapReference{Namespace: "salt", Name: "params"}}}}
	base := objs[3].(*v1alpha1.MinionBinding)
	for i := 2; i <= fleet; i++ {
		b := base.DeepCopy()
		b.Name, b.UID, b.Spec.MinionID = fmt.Sprintf("web%02d", i), types.UID(fmt.Sprintf("uid-web%02d", i)), fmt.Sprintf("web%02d", i)
		objs = append(objs, b)
	}
	objs = append(objs,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "salt", Name: "vault-token"}, Data: map[string][]byte{"token": []byte("s.one")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "salt", Name: "params"}, Data: map[string]string{"defaults.yaml": "values: {}\n"}})
	h := newHarness(t, objs...)
	api := &countingReader{Reader: h.c}
	var logins []string
	h.r.Connections = &connection.Connections{Client: h.c, APIReader: api, Metadata: h.c, Cache: &vault.Cache{
		New: func(_ context.Context, cfg vault.Config, _ vault.Observer) (vault.Client, error) {
			logins = append(logins, cfg.Auth.Token)
			return h.v, nil
		}}}
	h.r.Templates = &clusterfacts.Templates{Client: h.c, APIReader: api, Metadata: h.c}
	ctx := context.Background()

	reconcileFleet := func() {
		t.Helper()
		for i := 1; i <= fleet; i++ {
			h.reconcile("salt", fmt.Sprintf("web%02d", i))
		}
	}
	expect := func(when string, secrets, configMaps, wantLogins int) {
		t.Helper()
		if s, c := api.count(&corev1.Secret{}), api.count(&corev1.ConfigMap{}); s != secrets || c != configMaps || len(logins) != wantLogins {
			t.Fatalf("%s: %d Secret and %d ConfigMap reads, %d logins; want %d, %d and %d", when, s, c, len(logins), secrets, configMaps, wantLogins)
		}
	}
	reconcileFleet()
	reconcileFleet()
	expect("two rounds of the fleet", 1, 1, 1)
	if b := h.get("salt", "web05"); !apimeta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.ReadyCondition) {
		t.Fatalf("web05 not Ready: %+v", b.Status.Conditions)
	}

	update := func(obj client.Object, edit func()) {
		t.Helper()
		if err := h.c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		edit()
		if err := h.c.Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	secret, cm := &corev1.Secret{}, &corev1.ConfigMap{}
	secret.Namespace, secret.Name, cm.Namespace, cm.Name = "salt", "vault-token", "salt", "params"
	update(secret, func() { secret.Data["token"] = []byte("s.two") })
	reconcileFleet()
	expect("a rotated token", 2, 1, 2)
	if logins[1] != "s.two" {
		t.Errorf("logged in again with %q, want the rotated token", logins[1])
	}
	update(cm, func() { cm.Data["defaults.yaml"] = "values: {a: 1}\n" })
	reconcileFleet()
	expect("an edited ConfigMap", 2, 2, 2)

	update(secret, func() { secret.Data = map[string][]byte{"other": []byte("x")} })
	h.reconcileWaiting(fleet, `has no key "token"`)
	expect("a Secret without its key", 3, 2, 2)

	if err := h.c.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	h.reconcileWaiting(fleet, "does not exist")
	expect("a missing Secret", 3, 2, 2)
}

// reconcileWaiting reconciles web01..webNN and checks that each waits,
// saying why.
func (h *harness) reconcileWaiting(fleet int, why string) {
	h.t.Helper()
	for i := 1; i <= fleet; i++ {
		name := fmt.Sprintf("web%02d", i)
		h.reconcile("salt", name)
		ready := apimeta.FindStatusCondition(h.get("salt", name).Status.Conditions, v1alpha1.ReadyCondition)
		if ready == nil || ready.Status != metav1.ConditionFalse || !strings.Contains(ready.Message, why) {
			h.t.Fatalf("%s: Ready %+v, want False saying %q", name, ready, why)
		}
	}
}

// Reconciles that compile a template at the same time get one compiled
// template: the template reconciler scans all of its policies again when
// the one it gets is not the one it indexed (test/scale's restart resync
// read every policy twice when a binding's reconcile stored its own).
func TestConcurrentCompilesShareOne(t *testing.T) {
	objs := fixtures(map[string]any{"roles": []string{"web"}})
	tpl := objs[2].(*v1alpha1.MinionTemplate)
	tpl.UID = "uid-t"
	h := newHarness(t, objs...)
	for round := range 20 {
		templates := &clusterfacts.Templates{Client: h.c}
		const callers = 8
		got := make([]any, callers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				c, err := templates.Compile(context.Background(), tpl)
				if err != nil {
					t.Errorf("compile: %v", err)
				}
				got[i] = c
			}()
		}
		close(start)
		wg.Wait()
		cached, _ := templates.Compile(context.Background(), tpl)
		for i, c := range got {
			if c != any(cached) {
				t.Fatalf("round %d: caller %d got a compiled template other than the cached one", round, i)
			}
		}
	}
}
