package clusterfacts

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/pkg/render"
)

// Renders lets the controllers of one process that render a binding on
// each change (the binding controller for its role and entity, the
// template controllers for its policy documents) render it once between
// them: the second render of a binding generation with the same compiled
// template is a lookup. A compiled template is immutable and replaced on
// any change of the template or its ConfigMaps (Templates), so its pointer
// is its identity; a binding's spec changes its generation.
//
// An entry is dropped once every consumer took it, or when it is older
// than renderTTL; at most renderEntries are kept. A process that runs one
// of the two controllers (a sharded operator, --controllers=templates)
// keeps nothing and renders every time, as it must.
type Renders struct {
	// Consumers is how many controllers of this process render each
	// binding (below 2: nothing is kept).
	Consumers int

	mu      sync.Mutex
	entries map[types.UID]*renderEntry
	// sweepAt is the earliest time an entry can be older than renderTTL:
	// a full cache is swept no sooner, so that a burst of renders (a
	// start renders every binding twice) does not scan the whole cache
	// on each render to find nothing to drop.
	sweepAt time.Time
	// rendered and reused count renders and lookups (for tests).
	rendered, reused int
}

// Counts are how many renders were made and reused, and how many entries
// are kept (tests check that both controllers share one render).
func (c *Renders) Counts() (rendered, reused, kept int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rendered, c.reused, len(c.entries)
}

type renderEntry struct {
	generation int64
	compiled   *render.Compiled
	out        renderedBinding
	taken      int
	at         time.Time
}

// renderedBinding is one binding rendered with one compiled template
// (admission.Render's answer). The result is shared: read it, never
// change it.
type renderedBinding struct {
	res        *render.Result
	violations []render.Violation
	err        error
}

const (
	renderTTL     = 2 * time.Minute
	renderEntries = 2048
)

// Render renders the binding with compiled, or returns what another
// controller rendered for the same generation and compiled template.
func (c *Renders) Render(compiled *render.Compiled, b *v1alpha1.MinionBinding) (*render.Result, []render.Violation, error) {
	out := c.render(compiled, b)
	return out.res, out.violations, out.err
}

func (c *Renders) render(compiled *render.Compiled, b *v1alpha1.MinionBinding) renderedBinding {
	if c == nil {
		return renderBinding(compiled, b)
	}
	if c.Consumers < 2 || b.UID == "" {
		c.mu.Lock()
		c.rendered++
		c.mu.Unlock()
		return renderBinding(compiled, b)
	}
	c.mu.Lock()
	if e := c.entries[b.UID]; e != nil && e.generation == b.Generation && e.compiled == compiled {
		c.reused++
		if e.taken++; e.taken >= c.Consumers {
			delete(c.entries, b.UID)
		}
		c.mu.Unlock()
		return e.out
	}
	c.mu.Unlock()
	out := renderBinding(compiled, b)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rendered++
	if c.entries == nil {
		c.entries = map[types.UID]*renderEntry{}
	}
	if len(c.entries) >= renderEntries {
		c.dropOldLocked()
	}
	if len(c.entries) < renderEntries {
		now := time.Now()
		c.entries[b.UID] = &renderEntry{generation: b.Generation, compiled: compiled, out: out, taken: 1, at: now}
		if c.sweepAt.IsZero() {
			c.sweepAt = now.Add(renderTTL)
		}
	}
	return out
}

// dropOldLocked drops the entries older than renderTTL (a consumer that
// has not come by then renders again), once one can be.
func (c *Renders) dropOldLocked() {
	now := time.Now()
	if now.Before(c.sweepAt) {
		return
	}
	c.sweepAt = time.Time{}
	for uid, e := range c.entries {
		switch expires := e.at.Add(renderTTL); {
		case !now.Before(expires):
			delete(c.entries, uid)
		case c.sweepAt.IsZero() || expires.Before(c.sweepAt):
			c.sweepAt = expires
		}
	}
}

func renderBinding(compiled *render.Compiled, b *v1alpha1.MinionBinding) renderedBinding {
	res, vs, err := admission.Render(compiled, b)
	return renderedBinding{res: res, violations: vs, err: err}
}
