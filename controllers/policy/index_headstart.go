package policy

import (
	"maps"

	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/pkg/render"
)

// changing reports whether a scan with compiled is a change of a template
// whose index is built and whose Vault was listed: what it held before is
// known, so a head start (headStart) can tell a binding's own policies.
func (idx *policyIndex) changing(template string, compiled *render.Compiled) bool {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	tp := idx.templates[template]
	return tp != nil && tp.built && tp.discovered && tp.compiled != compiled
}

// headStart takes one binding's policies as rendered by a changed
// template ahead of the full scan: a name that this binding alone renders
// (a policy per minion) gets its new body and is dirty, for a sync while
// the scan renders the rest of the fleet. A name other bindings render
// too, or a new one, waits for the scan, the only one to see every
// binding that renders it (two bodies for a name are a conflict, which no
// binding alone can rule out). It returns how many names it made dirty.
func (idx *policyIndex) headStart(template string, key types.NamespacedName, docs map[string]string) int {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	tp := idx.templates[template]
	b, ok := idx.bindings[key]
	if tp == nil || !tp.built || !ok || b.template != template || !b.member {
		return 0
	}
	n := 0
	for name, body := range docs {
		old, had := b.docs[name]
		ref := tp.refs[name]
		if !had || old == body || ref == nil || len(ref.bodies) != 1 || ref.bodies[old] != 1 || ref.from[old] != key {
			continue
		}
		if n == 0 {
			b.docs = maps.Clone(b.docs) // the scan's map may be shared
		}
		b.docs[name] = body
		ref.bodies = map[string]int{body: 1}
		ref.from = map[string]types.NamespacedName{body: key}
		tp.recount(name)
		tp.dirty[name] = true
		n++
	}
	idx.bindings[key] = b
	return n
}
