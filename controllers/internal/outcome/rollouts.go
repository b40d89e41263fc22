package outcome

import "sync"

// Rollouts counts, per template, the bindings whose Vault objects were
// updated although their own spec did not change: what they render
// changed with the template, its parameters or their namespace. The
// template reports them as one event per pass, not one per binding: a
// template edit rolled out to ten thousand minions is ten thousand Vault
// writes (Vault's audit log records each), not ten thousand more API
// server writes. A binding controller running without the template
// controller (a shard) has none and reports each binding's update itself.
type Rollouts struct {
	mu      sync.Mutex
	updated map[string]int
}

// Add counts one binding of template updated.
func (r *Rollouts) Add(template string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.updated == nil {
		r.updated = map[string]int{}
	}
	r.updated[template]++
}

// Take returns the bindings of template updated since the last Take.
func (r *Rollouts) Take(template string) int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.updated[template]
	delete(r.updated, template)
	return n
}
