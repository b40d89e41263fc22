package acl

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// refACL is Vault's NewACL and AllowOperation written out the plain way
// (one ACL per token, every segment pattern scanned, sort.Slice on the
// candidates), to check the indexed, shared evaluator against.
type refACL struct {
	exact, prefix, segs map[string]Caps
}

func refBuild(policies []*Policy, in *renderInput) (*refACL, error) {
	a := &refACL{exact: map[string]Caps{}, prefix: map[string]Caps{}, segs: map[string]Caps{}}
	for _, p := range policies {
		for _, r := range p.Rules {
			key := r.Pattern
			if p.Templated {
				out, _, err := render(key, in)
				if err != nil {
					continue
				}
				key = out
			}
			if len(key) > 0 && key[0] == '/' {
				key = key[1:]
			}
			if strings.Contains(key, "+*") {
				return nil, ErrTemplatedPolicy
			}
			seg := key == "+" || strings.Count(key, "/+") > 0 || strings.HasPrefix(key, "+/")
			m := a.exact
			switch {
			case seg:
				m = a.segs
			case strings.HasSuffix(key, "*"):
				m = a.prefix
				key = strings.TrimSuffix(key, "*")
			}
			old, ok := m[key]
			switch {
			case !ok:
				m[key] = r.Caps
			case old&Deny != 0:
			case r.Caps&Deny != 0:
				m[key] = Deny
			default:
				m[key] = old | r.Caps
			}
		}
	}
	return a, nil
}

type refDescr struct {
	first, wildcards int
	isPrefix         bool
	wcPath           string
	caps             Caps
}

func (a *refACL) nonExact(path string) (Caps, bool) {
	var ds []refDescr
	best, found := "", false
	for k := range a.prefix {
		if strings.HasPrefix(path, k) && (!found || len(k) > len(best)) {
			best, found = k, true
		}
	}
	if found {
		if len(a.segs) == 0 {
			return a.prefix[best], true
		}
		ds = append(ds, refDescr{first: len(best), wcPath: best, isPrefix: true, caps: a.prefix[best]})
	}
	parts := strings.Split(path, "/")
outer:
	for full, caps := range a.segs {
		d := refDescr{first: strings.Index(full, "+"), caps: caps}
		cur := full
		if cur[len(cur)-1] == '*' {
			d.isPrefix = true
			cur = cur[:len(cur)-1]
		}
		d.wcPath = cur
		split := strings.Split(cur, "/")
		if len(parts) < len(split) || (!d.isPrefix && len(split) != len(parts)) {
			continue
		}
		for i, ap := range split {
			switch {
			case ap == "+":
				d.wildcards++
			case ap == parts[i]:
			case d.isPrefix && i == len(split)-1 && strings.HasPrefix(parts[i], ap):
			default:
				continue outer
			}
		}
		ds = append(ds, d)
	}
	if len(ds) == 0 {
		return 0, false
	}
	sort.Slice(ds, func(i, j int) bool {
		pi, pj := ds[i], ds[j]
		if pi.first != pj.first {
			return pi.first < pj.first
		}
		if pi.isPrefix != pj.isPrefix {
			return pi.isPrefix
		}
		if pi.wildcards != pj.wildcards {
			return pi.wildcards > pj.wildcards
		}
		if len(pi.wcPath) != len(pj.wcPath) {
			return len(pi.wcPath) < len(pj.wcPath)
		}
		return pi.wcPath < pj.wcPath
	})
	return ds[len(ds)-1].caps, true
}

func (a *refACL) capabilities(path string) []string {
	path = strings.TrimLeft(path, "/")
	if c, ok := a.exact[path]; ok {
		return c.Names()
	}
	if c, ok := a.exact[strings.TrimSuffix(path, "/")]; ok {
		return c.Names()
	}
	if strings.HasSuffix(path, "/") {
		if c, ok := a.nonExact(strings.TrimSuffix(path, "/")); ok {
			return c.Names()
		}
	}
	c, _ := a.nonExact(path)
	return c.Names()
}

// randomPolicy writes a policy from a small alphabet so that patterns
// overlap: globs, "+", deny, empty capabilities, templated segments.
func randomPolicy(r *rand.Rand) string {
	segs := []string{"a", "b", "ab", "+", "", "+a", "{{identity.entity.metadata.k1}}", "{{identity.entity.metadata.k2}}", "{{identity.entity.name}}", "data"}
	capsets := [][]string{{"read"}, {"list"}, {"deny"}, {}, {"create", "update"}, {"read", "list"}, {"sudo"}, {"patch", "read"}}
	var b strings.Builder
	for range 1 + r.IntN(5) {
		n := 1 + r.IntN(4)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = segs[r.IntN(len(segs))]
		}
		p := strings.Join(parts, "/")
		if r.IntN(3) == 0 {
			p += "*"
		}
		if r.IntN(10) == 0 {
			p = "/" + p
		}
		if strings.Contains(p, "+*") {
			p = strings.ReplaceAll(p, "+*", "+/*")
		}
		b.WriteString(rule(p, capsets[r.IntN(len(capsets))]...))
	}
	return b.String()
}

func randomPath(r *rand.Rand) string {
	segs := []string{"a", "b", "ab", "abc", "", "+a", "data", "web01", "x", "y"}
	n := 1 + r.IntN(4)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = segs[r.IntN(len(segs))]
	}
	p := strings.Join(parts, "/")
	if r.IntN(4) == 0 {
		p += "/"
	}
	if r.IntN(10) == 0 {
		p = "/" + p
	}
	if p == "" {
		p = "a"
	}
	return p
}

func randomEntity(r *rand.Rand) *Entity {
	if r.IntN(8) == 0 {
		return nil
	}
	vals := []string{"a", "b", "ab", "a*", "+", "x/y", "ab+", "", "data"}
	md := map[string]string{}
	for _, k := range []string{"k1", "k2"} {
		if r.IntN(4) > 0 {
			md[k] = vals[r.IntN(len(vals))]
		}
	}
	return &Entity{ID: "e", Name: []string{"web01", "a", "ab"}[r.IntN(3)], Metadata: md}
}

// TestDifferentialAgainstReference compares the evaluator with the plain
// transcription of Vault's code on random policies, subjects and paths,
// in both modes.
func TestDifferentialAgainstReference(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	for iter := range 3000 {
		docs := map[string]string{}
		names := []string{"p0", "p1", "p2", "p3"}
		for _, n := range names[:1+r.IntN(4)] {
			docs[n] = randomPolicy(r)
		}
		mode := Mode{RejectTemplatedGlobs: r.IntN(2) == 0}
		ev, err := New(docs, Options{Mode: mode})
		if err != nil {
			t.Fatalf("seed %d iter %d: %v\n%v", seed, iter, err, docs)
		}
		for range 3 {
			ent := randomEntity(r)
			var tok []string
			for n := range docs {
				if r.IntN(4) > 0 {
					tok = append(tok, n)
				}
			}
			prep := ev.Prepare(Subject{TokenPolicies: tok, Entity: ent})
			var pols []*Policy
			for _, n := range (&Subject{TokenPolicies: tok}).PolicyNames() {
				pols = append(pols, ev.Policy(n))
			}
			ref, refErr := refBuild(pols, &renderInput{entity: ent, mode: mode})
			for range 10 {
				path := randomPath(r)
				d := prep.Check(path)
				if refErr != nil || d.Err != nil {
					if (refErr != nil) != (d.Err != nil) {
						t.Fatalf("seed %d iter %d: error %v, reference %v\npolicies %v\nentity %+v", seed, iter, d.Err, refErr, docs, ent)
					}
					continue
				}
				want := []string{"deny"}
				if len(tok) > 0 {
					want = ref.capabilities(path)
				}
				if got := d.Capabilities(); !reflect.DeepEqual(got, want) {
					t.Fatalf("seed %d iter %d: %q gives %v, reference %v\ntoken %v entity %+v\n%s", seed, iter, path, got, want, tok, ent, fmtDocs(docs))
				}
				// Explain must agree with Check and not panic.
				if x := prep.Explain(path); !reflect.DeepEqual(x.Capabilities, want) {
					t.Fatalf("seed %d iter %d: explain %v, want %v", seed, iter, x.Capabilities, want)
				}
			}
		}
	}
}

func fmtDocs(docs map[string]string) string {
	var b strings.Builder
	for n, d := range docs {
		fmt.Fprintf(&b, "# %s\n%s\n", n, d)
	}
	return b.String()
}
