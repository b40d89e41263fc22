package clusterfacts

import (
	"context"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/watch"
	"github.com/minionvault/minion-vault-operator/internal/convert"
	"github.com/minionvault/minion-vault-operator/pkg/render"
)

// ConfigMaps: list and watch for the metadata watches, get for the data of
// the ConfigMaps a template's parameter stack names, read by name.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch

// Templates compiles each MinionTemplate once per generation (and per
// version of its ConfigMaps) and shares the result between reconciles.
type Templates struct {
	// Client reads ConfigMap data when APIReader is nil.
	Client client.Client
	// APIReader reads ConfigMap data from the API server, by name: the
	// operator caches no ConfigMap data.
	APIReader client.Reader
	// Metadata reads ConfigMaps' metadata from the cache the ConfigMap
	// watches fill: a template whose ConfigMaps kept their
	// resourceVersions is not read again (nil: every Compile reads them).
	Metadata client.Reader
	// Renders keeps renders of bindings with these compiled templates, for
	// the controllers that share them (nil: none kept).
	Renders *Renders

	mu sync.Mutex
	m  map[types.UID]compiledTemplate
}

// compiledTemplate is a template compiled at key, or why it does not
// compile there (kept too: a broken parameter file is not read again by
// every binding's reconcile).
type compiledTemplate struct {
	key string
	c   *render.Compiled
	err error
}

// Compile returns the compiled template. An error is a template problem
// (a ConfigMap missing, a file that is not YAML), not a transient one,
// unless it is an API error. The ConfigMaps' data is read only when the
// template was not compiled from their current versions yet.
func (t *Templates) Compile(ctx context.Context, tpl *v1alpha1.MinionTemplate) (*render.Compiled, error) {
	if c, err := t.current(ctx, tpl); c != nil || err != nil {
		return c, err
	}
	var versions []string
	data := map[string]map[string]string{}
	var r client.Reader = t.Client
	if t.APIReader != nil {
		r = t.APIReader
	}
	for _, ref := range configMapRefs(tpl) {
		cm := &corev1.ConfigMap{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, &errMissingConfigMap{ref: ref}
			}
			return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", ref.Namespace, ref.Name, err)
		}
		data[watch.ObjectKey(ref.Namespace, ref.Name)] = cm.Data
		versions = append(versions, cm.ResourceVersion)
	}
	key := compileKey(tpl, versions)
	if e, ok := t.cached(tpl, key); ok {
		return e.c, e.err
	}

	configMaps := func(ns, name string) (map[string]string, error) {
		d, ok := data[watch.ObjectKey(ns, name)]
		if !ok {
			return nil, fmt.Errorf("not loaded")
		}
		return d, nil
	}
	var c *render.Compiled
	rt, err := convert.Template(tpl.Name, &tpl.Spec, configMaps, nil)
	if err == nil {
		c = render.Compile(rt)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.m[tpl.UID]; ok && e.key == key {
		// Another reconcile compiled it meanwhile (a start wakes the
		// template and its bindings at once): keep one compiled template
		// per key, since the template reconciler scans all the template's
		// policies again when the one it gets is not the one it indexed.
		return e.c, e.err
	}
	if t.m == nil {
		t.m = map[types.UID]compiledTemplate{}
	}
	t.m[tpl.UID] = compiledTemplate{key: key, c: c, err: err}
	return c, err
}

// current is the compiled template when the metadata cache shows its
// ConfigMaps at the versions it was compiled from, or the waiting error of
// a ConfigMap the cache does not have (its watch wakes the template's
// bindings when it appears). (nil, nil): Compile reads the ConfigMaps.
func (t *Templates) current(ctx context.Context, tpl *v1alpha1.MinionTemplate) (*render.Compiled, error) {
	if t.Metadata == nil {
		return nil, nil
	}
	var versions []string
	for _, ref := range configMapRefs(tpl) {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		if err := t.Metadata.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, m); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, &errMissingConfigMap{ref: ref}
			}
			return nil, nil
		}
		versions = append(versions, m.ResourceVersion)
	}
	e, _ := t.cached(tpl, compileKey(tpl, versions))
	return e.c, e.err
}

// cached is the outcome of compiling tpl at key, if it was compiled there.
func (t *Templates) cached(tpl *v1alpha1.MinionTemplate, key string) (compiledTemplate, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.m[tpl.UID]
	if !ok || e.key != key {
		return compiledTemplate{}, false
	}
	return e, true
}

// compileKey: a template is compiled again when its generation or a
// ConfigMap's resourceVersion changes.
func compileKey(tpl *v1alpha1.MinionTemplate, versions []string) string {
	return fmt.Sprintf("%d/%s", tpl.Generation, strings.Join(versions, ","))
}

func configMapRefs(tpl *v1alpha1.MinionTemplate) []v1alpha1.ParameterConfigMapReference {
	if p := tpl.Spec.Parameters; p != nil {
		return p.ConfigMapRefs
	}
	return nil
}

// errMissingConfigMap is a ConfigMap of the parameter stack that does not
// exist (yet): unlike the template's other problems, its watch ends the
// wait, so Facts.Compile tells it apart.
type errMissingConfigMap struct {
	ref v1alpha1.ParameterConfigMapReference
}

func (e *errMissingConfigMap) Error() string {
	return fmt.Sprintf("ConfigMap %s/%s of the parameter stack does not exist", e.ref.Namespace, e.ref.Name)
}

// Forget drops a deleted template.
func (t *Templates) Forget(uid types.UID) {
	t.mu.Lock()
	delete(t.m, uid)
	t.mu.Unlock()
}
