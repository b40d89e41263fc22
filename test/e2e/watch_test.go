//go:build integration

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// apiRequest is one request of the operator to the API server about
// Secrets or ConfigMaps.
type apiRequest struct {
	verb      string // get, list, watch
	resource  string // secrets, configmaps
	namespace string
	name      string
	metadata  bool // asked for PartialObjectMetadata(List) only
}

// apiRecorder records the operator's requests for Secrets and ConfigMaps.
type apiRecorder struct {
	mu   sync.Mutex
	reqs []apiRequest
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (a *apiRecorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if req, ok := parseAPIRequest(r); ok {
			a.mu.Lock()
			a.reqs = append(a.reqs, req)
			a.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

// parseAPIRequest reads /api/v1/[namespaces/NS/]{secrets,configmaps}[/NAME].
func parseAPIRequest(r *http.Request) (apiRequest, bool) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) < 3 || parts[0] != "api" || parts[1] != "v1" || r.Method != http.MethodGet {
		return apiRequest{}, false
	}
	rest := parts[2:]
	var req apiRequest
	if rest[0] == "namespaces" && len(rest) >= 3 {
		req.namespace, rest = rest[1], rest[2:]
	}
	if rest[0] != "secrets" && rest[0] != "configmaps" || len(rest) > 2 {
		return apiRequest{}, false
	}
	req.resource = rest[0]
	switch {
	case len(rest) == 2:
		req.verb, req.name = "get", rest[1]
	case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
		req.verb = "watch"
	default:
		req.verb = "list"
	}
	req.metadata = strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadata")
	return req, true
}

func (a *apiRecorder) all() []apiRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.reqs)
}

// gets counts the GETs of one object.
func (a *apiRecorder) gets(resource, namespace, name string) int {
	n := 0
	for _, r := range a.all() {
		if r.verb == "get" && r.resource == resource && r.namespace == namespace && r.name == name {
			n++
		}
	}
	return n
}

// The operator holds no Secret or ConfigMap data: it lists and watches
// them as metadata only, its cache keeps no annotation (a Secret's
// last-applied-configuration holds its data), and it GETs by name only
// the Secrets its connections name and the ConfigMaps its templates name,
// once per version, not once per binding.
func TestSecretsAndConfigMapsUncached(t *testing.T) {
	const fleet = 20
	// At most the reconciles running beside the one that logs in (or
	// compiles) read the same new version: 2 binding workers, 2 template
	// workers, 1 connection worker, and this one.
	const perVersion = 6
	s := start(t)
	rec := &apiRecorder{}
	s.wrapAPI = rec.wrap
	s.restartOperator(t)
	ctx := context.Background()
	const ns = "uncached"
	s.must(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"team": "conn"}}}))
	s.must(client.IgnoreAlreadyExists(s.c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "bystander", Labels: map[string]string{"app": "other"}, Annotations: map[string]string{
			"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"password":"Ynlz"}}`}},
		StringData: map[string]string{"password": "bystander-password"},
	})))
	// Outside the operator's namespace: never listed, watched or cached.
	s.must(s.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "outsider"},
		StringData: map[string]string{"password": "outsider-password"}}))
	s.must(s.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "uncached-token"},
		StringData: map[string]string{"token": s.token}}))
	s.must(s.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "params"},
		Data: map[string]string{"defaults.yaml": "values: {}\n"}}))
	s.must(s.c.Create(ctx, tokenConnection("uncached", s.env.Vault.Addr, "uncached-token")))
	tpl := connTemplate("uncached", "uncached")
	tpl.Spec.Parameters = &v1alpha1.ParametersSpec{Root: "vault", ConfigMapRefs: []v1alpha1.ParameterConfigMapReference{
		{ConfigMapReference: v1alpha1.ConfigMapReference{Namespace: ns, Name: "params"}}}}
	s.must(s.c.Create(ctx, tpl))
	for i := range fleet {
		b := binding(ns, fmt.Sprintf("uncached%02d", i), fmt.Sprintf("uncached%02d", i), map[string]any{"roles": []string{"web"}})
		b.Spec.TemplateRef.Name = "uncached"
		s.must(s.c.Create(ctx, b))
	}
	readyAll := func() {
		t.Helper()
		for i := range fleet {
			s.waitReady(ns, fmt.Sprintf("uncached%02d", i))
		}
	}
	resyncAll := func() {
		t.Helper()
		for i := range fleet {
			s.requestReconcile(ns, fmt.Sprintf("uncached%02d", i))
		}
	}
	readyAll()
	secretGets, cmGets := rec.gets("secrets", operatorNamespace, "uncached-token"), rec.gets("configmaps", ns, "params")
	t.Logf("%d bindings Ready: %d GETs of their connection's Secret, %d of their template's ConfigMap", fleet, secretGets, cmGets)
	if secretGets < 1 || secretGets > perVersion || cmGets < 1 || cmGets > perVersion {
		t.Errorf("converging %d bindings read the Secret %d and the ConfigMap %d times; want 1 to %d each", fleet, secretGets, cmGets, perVersion)
	}

	s.run("a resync of every binding reads nothing", func(t *testing.T) {
		resyncAll()
		if s2, c2 := rec.gets("secrets", operatorNamespace, "uncached-token"), rec.gets("configmaps", ns, "params"); s2 != secretGets || c2 != cmGets {
			t.Errorf("a forced resync of %d bindings read the Secret %d and the ConfigMap %d more times", fleet, s2-secretGets, c2-cmGets)
		}
	})

	s.run("a new Secret version is read once per version, not per binding", func(t *testing.T) {
		before := rec.gets("secrets", operatorNamespace, "uncached-token")
		sec := &corev1.Secret{}
		s.must(s.c.Get(ctx, types.NamespacedName{Namespace: operatorNamespace, Name: "uncached-token"}, sec))
		sec.Labels = map[string]string{"rotated": "yes"} // a new resourceVersion, the same token
		s.must(s.c.Update(ctx, sec))
		eventually(t, 30*time.Second, "the new version read", func() error {
			if n := rec.gets("secrets", operatorNamespace, "uncached-token"); n == before {
				return fmt.Errorf("not read yet")
			}
			return nil
		})
		readyAll()
		resyncAll()
		if n := rec.gets("secrets", operatorNamespace, "uncached-token") - before; n > perVersion {
			t.Errorf("one new version of the Secret read %d times by %d bindings; want at most %d", n, fleet, perVersion)
		}
	})

	s.run("lists and watches ask for metadata only, GETs name referenced objects only", func(t *testing.T) {
		referenced := map[string]bool{}
		conns := &v1alpha1.VaultConnectionList{}
		s.must(s.c.List(ctx, conns))
		for _, c := range conns.Items {
			if c.Spec.Auth.Token != nil {
				referenced["secrets/"+c.Spec.Auth.Token.SecretRef.Namespace+"/"+c.Spec.Auth.Token.SecretRef.Name] = true
			}
			if c.Spec.Auth.AppRole != nil {
				referenced["secrets/"+c.Spec.Auth.AppRole.SecretIDSecretRef.Namespace+"/"+c.Spec.Auth.AppRole.SecretIDSecretRef.Name] = true
			}
			if c.Spec.TLS != nil && c.Spec.TLS.CASecretRef != nil {
				referenced["secrets/"+c.Spec.TLS.CASecretRef.Namespace+"/"+c.Spec.TLS.CASecretRef.Name] = true
			}
		}
		tpls := &v1alpha1.MinionTemplateList{}
		s.must(s.c.List(ctx, tpls))
		for _, tpl := range tpls.Items {
			if p := tpl.Spec.Parameters; p != nil {
				for _, ref := range p.ConfigMapRefs {
					referenced["configmaps/"+ref.Namespace+"/"+ref.Name] = true
				}
			}
		}
		lists := 0
		for _, r := range rec.all() {
			switch {
			case r.verb != "get" && !r.metadata:
				t.Errorf("%s of %s in %q asked for whole objects, not metadata", r.verb, r.resource, r.namespace)
			case r.resource == "secrets" && r.namespace != operatorNamespace:
				t.Errorf("%s of Secrets in %q: outside the operator's namespace %s", r.verb, r.namespace, operatorNamespace)
			case r.verb != "get":
				lists++
			case !referenced[r.resource+"/"+r.namespace+"/"+r.name]:
				t.Errorf("GET of %s %s/%s, which no connection or template names", r.resource, r.namespace, r.name)
			}
		}
		if lists == 0 {
			t.Error("no metadata list or watch of Secrets or ConfigMaps recorded: the recorder sees nothing")
		}
	})

	s.run("the cache holds the names and versions of the operator's namespace's Secrets only", func(t *testing.T) {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
		s.must(s.mgr.GetCache().List(ctx, list))
		var seen bool
		for _, m := range list.Items {
			if len(m.Annotations) > 0 || len(m.Labels) > 0 || len(m.ManagedFields) > 0 {
				t.Errorf("cached Secret %s/%s keeps annotations %v, labels %v, %d managedFields", m.Namespace, m.Name, m.Annotations, m.Labels, len(m.ManagedFields))
			}
			if m.Namespace != operatorNamespace {
				t.Errorf("cached Secret %s/%s is outside the operator's namespace %s", m.Namespace, m.Name, operatorNamespace)
			}
			if m.Namespace == operatorNamespace && m.Name == "bystander" {
				seen = m.ResourceVersion != ""
			}
		}
		if !seen {
			t.Errorf("the bystander Secret is not in the metadata cache (with its resourceVersion) among %d", len(list.Items))
		}
	})

	s.run("a ConfigMap or Secret that appears wakes what waits for it", func(t *testing.T) {
		// Both waits requeue after a minute or more: Ready within 30
		// seconds is the metadata watch and the index at work.
		late := connTemplate("uncached-late-cm", "uncached")
		late.Spec.Parameters = &v1alpha1.ParametersSpec{Root: "vault", ConfigMapRefs: []v1alpha1.ParameterConfigMapReference{
			{ConfigMapReference: v1alpha1.ConfigMapReference{Namespace: ns, Name: "late-params"}}}}
		s.must(s.c.Create(ctx, late))
		b := binding(ns, "late-cm", "late-cm", map[string]any{"roles": []string{"web"}})
		b.Spec.TemplateRef.Name = "uncached-late-cm"
		s.must(s.c.Create(ctx, b))
		s.waitReason(ns, "late-cm", v1alpha1.RenderFailedReason)
		s.must(s.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late-params"},
			Data: map[string]string{"defaults.yaml": "values: {}\n"}}))
		s.waitReady(ns, "late-cm")

		s.must(s.c.Create(ctx, tokenConnection("uncached-late", s.env.Vault.Addr, "uncached-late-token")))
		s.must(s.c.Create(ctx, connTemplate("uncached-late-secret", "uncached-late")))
		b = binding(ns, "late-secret", "late-secret", map[string]any{"roles": []string{"web"}})
		b.Spec.TemplateRef.Name = "uncached-late-secret"
		s.must(s.c.Create(ctx, b))
		s.waitReason(ns, "late-secret", v1alpha1.ConnectionNotReadyReason)
		s.must(s.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "uncached-late-token"},
			StringData: map[string]string{"token": s.token}}))
		s.waitReady(ns, "late-secret")
		s.waitConnectionReady("uncached-late")
	})
}
