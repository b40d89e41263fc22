package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/convert"
	"github.com/minionvault/minion-vault-operator/pkg/render"
)

// Templates compiles each MinionTemplate once per generation (and per
// version of its ConfigMaps) and shares the result between reconciles.
type Templates struct {
	Client client.Client

	mu sync.Mutex
	m  map[types.UID]compiledTemplate
}

type compiledTemplate struct {
	key string
	c   *render.Compiled
}

// Compile returns the compiled template. An error is a template problem
// (a ConfigMap missing, a file that is not YAML), not a transient one,
// unless it is an API error.
func (t *Templates) Compile(ctx context.Context, tpl *v1alpha1.MinionTemplate) (*render.Compiled, error) {
	var versions []string
	data := map[string]map[string]string{}
	if p := tpl.Spec.Parameters; p != nil {
		for _, ref := range p.ConfigMapRefs {
			cm := &corev1.ConfigMap{}
			if err := t.Client.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, cm); err != nil {
				if apierrors.IsNotFound(err) {
					return nil, waiting(waitingForConfigMap, "ConfigMap %s/%s of the parameter stack does not exist", ref.Namespace, ref.Name)
				}
				return nil, err
			}
			data[ref.Namespace+"/"+ref.Name] = cm.Data
			versions = append(versions, cm.ResourceVersion)
		}
	}
	key := fmt.Sprintf("%d/%s", tpl.Generation, strings.Join(versions, ","))
	t.mu.Lock()
	if e, ok := t.m[tpl.UID]; ok && e.key == key {
		t.mu.Unlock()
		return e.c, nil
	}
	t.mu.Unlock()

	configMaps := func(ns, name string) (map[string]string, error) {
		d, ok := data[ns+"/"+name]
		if !ok {
			return nil, fmt.Errorf("not loaded")
		}
		return d, nil
	}
	rt, err := convert.Template(tpl.Name, &tpl.Spec, configMaps, nil)
	if err != nil {
		return nil, err
	}
	c := render.Compile(rt)
	t.mu.Lock()
	if t.m == nil {
		t.m = map[types.UID]compiledTemplate{}
	}
	t.m[tpl.UID] = compiledTemplate{key: key, c: c}
	t.mu.Unlock()
	return c, nil
}

// Forget drops a deleted template.
func (t *Templates) Forget(uid types.UID) {
	t.mu.Lock()
	delete(t.m, uid)
	t.mu.Unlock()
}
