package cli

import (
	"fmt"
	"net/http"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

var bindingGVK = schema.GroupVersionKind{Group: "minionvault.dev", Version: "v1alpha1", Kind: "MinionBinding"}

// countingMapper counts the RESTMapping calls that reach the mapper.
type countingMapper struct {
	meta.RESTMapper
	calls int
}

func (c *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.calls++
	return c.RESTMapper.RESTMapping(gk, versions...)
}

func mapperWith(gvks ...schema.GroupVersionKind) *meta.DefaultRESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for _, gvk := range gvks {
		m.Add(gvk, meta.RESTScopeNamespace)
	}
	return m
}

func TestMemoMapper(t *testing.T) {
	inner := mapperWith(bindingGVK)
	counting := &countingMapper{RESTMapper: inner}
	m := newMemoMapper(counting)
	gk := bindingGVK.GroupKind()

	first, err := m.RESTMapping(gk, "v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	if first.Resource.Resource != "minionbindings" || first.Scope.Name() != meta.RESTScopeNameNamespace {
		t.Fatalf("mapping %+v", first)
	}
	// A caller that changes its copy changes nobody else's.
	first.Resource.Resource = "changed"
	for range 3 {
		again, err := m.RESTMapping(gk, "v1alpha1")
		if err != nil {
			t.Fatal(err)
		}
		if again.Resource.Resource != "minionbindings" {
			t.Fatalf("remembered mapping changed through a caller's copy: %+v", again)
		}
	}
	if counting.calls != 1 {
		t.Fatalf("the mapper was asked %d times for one kind at one version, want 1", counting.calls)
	}

	// Another version list is another question.
	if _, err := m.RESTMapping(gk, "v1alpha1", "v1"); err != nil {
		t.Fatal(err)
	}
	if counting.calls != 2 {
		t.Fatalf("the mapper was asked %d times, want 2 (a second version list)", counting.calls)
	}

	// A kind not served yet is asked again each time, and found once its
	// CRD is served.
	template := schema.GroupVersionKind{Group: "minionvault.dev", Version: "v1alpha1", Kind: "MinionTemplate"}
	if _, err := m.RESTMapping(template.GroupKind(), "v1alpha1"); !meta.IsNoMatchError(err) {
		t.Fatalf("unknown kind: err %v, want a no-match error", err)
	}
	inner.Add(template, meta.RESTScopeRoot)
	got, err := m.RESTMapping(template.GroupKind(), "v1alpha1")
	if err != nil {
		t.Fatalf("the kind once served: %v (a no-match error was remembered)", err)
	}
	if got.Scope.Name() != meta.RESTScopeNameRoot {
		t.Fatalf("mapping %+v", got)
	}
}

func TestManagerOptionsUseTheMemoMapper(t *testing.T) {
	provider := (OperatorOptions{}).managerOptions(nil, cache.Options{}).MapperProvider
	if provider == nil {
		t.Fatal("the manager would build its own mapper, without the memo")
	}
	// The dynamic mapper asks the API server only when a kind is looked
	// up: building it needs no server.
	m, err := provider(&rest.Config{Host: "http://127.0.0.1:1"}, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.(*memoMapper); !ok {
		t.Fatalf("the manager's mapper is a %T, not the memo", m)
	}
}

// dynamicLike is a mapper shaped as controller-runtime's dynamic mapper
// answers: a priority mapper over one mapper per API group, the
// operator's group among about twenty.
func dynamicLike() meta.RESTMapper {
	var groups meta.MultiRESTMapper
	for i := range 20 {
		groups = append(groups, mapperWith(schema.GroupVersionKind{Group: fmt.Sprintf("group%d.example.com", i), Version: "v1", Kind: "Thing"}))
	}
	groups = append(groups, mapperWith(bindingGVK))
	return meta.PriorityRESTMapper{Delegate: groups}
}

// BenchmarkRESTMapping is one patch's lookup of the MinionBinding mapping,
// through a mapper shaped as the dynamic one, with and without the memo.
func BenchmarkRESTMapping(b *testing.B) {
	for _, bc := range []struct {
		name   string
		mapper meta.RESTMapper
	}{
		{"dynamic", dynamicLike()},
		{"memo", newMemoMapper(dynamicLike())},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.mapper.RESTMapping(bindingGVK.GroupKind(), bindingGVK.Version); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
