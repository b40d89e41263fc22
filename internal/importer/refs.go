package importer

import (
	"slices"
	"strings"

	"github.com/minionvault/minion-vault-operator/pkg/template"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// refs are the top-level keys of one variable (grains or pillar) that a
// set of patterns reads.
type refs struct {
	all  bool // the whole mapping is used ({pillar} alone)
	keys []string
}

func (r *refs) add(key string) {
	for _, k := range r.keys {
		if k == key {
			return
		}
	}
	r.keys = append(r.keys, key)
}

// collect adds the keys of variable name read by the patterns: from
// "{pillar[roles][0]}" the key "roles", from "{pillar}" everything.
// Fields inside format specs count too.
func (r *refs) collect(name string, patterns ...string) {
	for _, p := range patterns {
		for _, f := range template.Compile(p).Fields() {
			rest, ok := strings.CutPrefix(f, name)
			if !ok {
				continue
			}
			switch {
			case rest == "":
				r.all = true
			case strings.HasPrefix(rest, "["):
				if end := strings.IndexByte(rest, ']'); end > 0 {
					r.add(rest[1:end])
				}
			}
		}
	}
}

// filter keeps the referenced top-level keys of m, in m's order.
func (r *refs) filter(m value.Value) value.Value {
	if r.all {
		return m
	}
	pairs := []value.Pair{}
	for _, p := range m.Pairs() {
		for _, k := range r.keys {
			if p.Key.IsString() && p.Key.Str() == k {
				pairs = append(pairs, p)
				break
			}
		}
	}
	return value.NewMap(pairs)
}

// grainRefs are the grains the template's patterns read: grains are
// visible only in policies (in Salt and in the operator).
func (c *Config) grainRefs() *refs {
	r := &refs{}
	r.collect("grains", c.effectivePolicies()...)
	return r
}

// pillarRefs are the pillar keys the template's patterns read: policies,
// metadata and pillar paths.
func (c *Config) pillarRefs() *refs {
	r := &refs{}
	r.collect("pillar", c.effectivePolicies()...)
	for _, kv := range append(append([]KV{}, c.EntityMetadata...), c.SecretMetadata...) {
		r.collect("pillar", kv.Pattern)
	}
	r.collect("pillar", c.PillarPaths...)
	return r
}

// untrustedGrains are the grain fields of policies the operator's guard
// rail refuses unless trustMinionGrains is set: all but {grains[id]}
// (pkg/render's rule).
func (c *Config) untrustedGrains() []string {
	var out []string
	for _, p := range c.effectivePolicies() {
		for _, f := range template.Compile(p).Fields() {
			if f != "grains[id]" && (f == "grains" || strings.HasPrefix(f, "grains[") || strings.HasPrefix(f, "grains.")) && !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

func (c *Config) effectivePolicies() []string {
	if c.Policies == nil {
		return []string{"saltstack/minions", "saltstack/{minion}"}
	}
	return c.Policies
}
