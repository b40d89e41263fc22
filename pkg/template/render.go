package template

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// MetaEntry is one configured metadata key and its value pattern. Keys are
// literal: only values are templates.
type MetaEntry struct {
	Key     string
	Pattern *Pattern
}

// KV is one rendered metadata pair.
type KV struct {
	Key   string
	Value string
}

// Places is a template's compiled patterns, one list per place (spec §1).
type Places struct {
	Policies    []*Pattern
	Entity      []MetaEntry
	Secret      []MetaEntry
	PillarPaths []*Pattern
}

// Output is what Places renders to. Warnings name the patterns whose
// errors were swallowed, as upstream logs them.
type Output struct {
	Policies    []string
	Entity      []KV
	Secret      []KV
	PillarPaths []string
	Warnings    []string
}

type span struct{ start, end int }

type kvSpan struct {
	key       string // the configured key, unless generated
	generated bool   // a key__N entry: kspan holds its key
	kspan     span
	val       span
}

// leafMode says what the expander does with each formatted result.
type leafMode uint8

const (
	leafList     leafMode = iota // policies, pillar paths: stop at an error
	leafLower                    // policies: lowercase too
	leafMetadata                 // metadata: drop items failing with Key/IndexError
)

// onLeaf handles one formatted result (or its formatting error) and says
// whether expansion stops.
func (e *expander) onLeaf(start int, err *Error) *Error {
	if err != nil {
		e.arena = e.arena[:start]
		if e.mode == leafMetadata && (err.Kind == KeyError || err.Kind == IndexError) {
			return nil
		}
		return err
	}
	if e.mode == leafLower {
		lowerInPlace(e, start)
	}
	e.spans = append(e.spans, span{start, len(e.arena)})
	if e.recordFields {
		e.leafFields = append(e.leafFields, len(e.fieldSpans))
	}
	return nil
}

var pool = sync.Pool{New: func() any { return &expander{arena: make([]byte, 0, 1024)} }}

func getExpander() *expander {
	e := pool.Get().(*expander)
	e.arena, e.spans, e.kvs, e.warnings = e.arena[:0], e.spans[:0], e.kvs[:0], nil
	e.recordFields, e.fieldSpans, e.leafFields = false, e.fieldSpans[:0], e.leafFields[:0]
	return e
}

// Render renders every place for one minion. All result strings share one
// backing allocation, and so do the lists.
func (pl *Places) Render(d *Data) (Output, error) {
	e := getExpander()
	defer pool.Put(e)

	policies, err := e.list(pl.Policies, d, PolicyVars, true, "policy")
	if err != nil {
		return Output{}, err
	}
	paths, err := e.list(pl.PillarPaths, d, PathVars, false, "pillar path")
	if err != nil {
		return Output{}, err
	}
	entity, err := e.metadata(pl.Entity, d, "entity metadata")
	if err != nil {
		return Output{}, err
	}
	secret, err := e.metadata(pl.Secret, d, "secret metadata")
	if err != nil {
		return Output{}, err
	}

	all := string(e.arena)
	lists := materialize(all, e.spans)
	kvs := materializeKV(all, e.kvs)
	return Output{
		Policies:    lists[policies.start:policies.end:policies.end],
		PillarPaths: lists[paths.start:paths.end:paths.end],
		Entity:      kvs[entity.start:entity.end:entity.end],
		Secret:      kvs[secret.start:secret.end:secret.end],
		Warnings:    e.warnings,
	}, nil
}

// Expand renders one pattern with the policy rules (a missing key yields
// nothing, with a warning), lowercasing when asked. Entity names and policy
// documents use it.
func Expand(p *Pattern, d *Data, vars Var, lower bool) ([]string, []string, error) {
	e := getExpander()
	defer pool.Put(e)
	if _, err := e.list([]*Pattern{p}, d, vars, lower, "pattern"); err != nil {
		return nil, nil, err
	}
	return materialize(string(e.arena), e.spans), e.warnings, nil
}

// Rendered is one result of ExpandFields: the text, and the text each
// field contributed to it, in order (substituted list elements included).
type Rendered struct {
	Text   string
	Fields []string
}

// ExpandFields is Expand that also reports what each field contributed, so
// callers can check substituted data (an ACL path must not be widened by a
// value holding '*'). It needs a regular pattern: in an irregular one a
// field's token also occurs outside the field, and substituted text cannot
// be attributed.
func ExpandFields(p *Pattern, d *Data, vars Var, lower bool) ([]Rendered, []string, error) {
	if !p.regular {
		return nil, nil, &PatternError{Pattern: p.src, Err: errf(ValueError, "a field's text also occurs outside the field (inside {{ }} or a format spec)")}
	}
	e := getExpander()
	defer pool.Put(e)
	e.recordFields = true
	// Lowercasing is done per text afterwards: in place it could move the
	// bytes the field spans point at.
	if _, err := e.list([]*Pattern{p}, d, vars, false, "pattern"); err != nil {
		return nil, nil, err
	}
	all := string(e.arena)
	out := make([]Rendered, len(e.spans))
	prev := 0
	for k, s := range e.spans {
		end := e.leafFields[k]
		fields := make([]string, 0, end-prev)
		for _, fs := range e.fieldSpans[prev:end] {
			fields = append(fields, lowerIf(all, fs, lower))
		}
		out[k] = Rendered{Text: lowerIf(all, s, lower), Fields: fields}
		prev = end
	}
	return out, e.warnings, nil
}

func lowerIf(all string, s span, lower bool) string {
	if !lower {
		return all[s.start:s.end]
	}
	return value.Lower(all[s.start:s.end])
}

func (e *expander) warn(what string, p *Pattern, err *Error) {
	if what != "pattern" {
		what += " pattern"
	}
	// A policy document's name and rules are one pattern joined by NUL
	// bytes (see pkg/render): show them as the user wrote them.
	src := strings.ReplaceAll(p.src, "\x00", " | ")
	e.warnings = append(e.warnings, fmt.Sprintf("%s %q: %v", what, src, err))
}

// list renders policies or pillar paths into e.spans and returns their
// range: results in order, duplicates kept; a KeyError ends the pattern but
// keeps what it produced so far, as upstream appends inside its try block.
func (e *expander) list(pats []*Pattern, d *Data, vars Var, lower bool, what string) (span, error) {
	e.sc = scope{d: d, visible: vars}
	e.mode = leafList
	if lower {
		e.mode = leafLower
	}
	from := len(e.spans)
	for _, p := range pats {
		if err := e.run(p); err != nil {
			if err.Kind == KeyError {
				e.warn(what, p, err)
				continue
			}
			return span{}, &PatternError{Pattern: p.src, Err: err}
		}
	}
	return span{from, len(e.spans)}, nil
}

func lowerInPlace(e *expander, start int) {
	b := e.arena[start:]
	for i, c := range b {
		if c >= utf8.RuneSelf {
			s := value.Lower(string(b))
			e.arena = append(e.arena[:start], s...)
			return
		}
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
}

// metadata renders one metadata scope with the composite algorithm (§4)
// into e.kvs and returns its range.
func (e *expander) metadata(entries []MetaEntry, d *Data, what string) (span, error) {
	e.sc = scope{d: d, visible: MetadataVars}
	e.mode = leafMetadata
	from := len(e.kvs)
	for _, me := range entries {
		items := len(e.spans)
		if err := e.run(me.Pattern); err != nil {
			if err.Kind != KeyError && err.Kind != IndexError {
				return span{}, &PatternError{Pattern: me.Pattern.src, Err: err}
			}
			e.warn(what, me.Pattern, err)
			e.spans = e.spans[:items]
			e.composite = false
		}
		sorted := e.spans[items:]
		arena := e.arena
		slices.SortStableFunc(sorted, func(a, b span) int {
			return bytes.Compare(arena[a.start:a.end], arena[b.start:b.end])
		})
		start := len(e.arena)
		for i, it := range sorted {
			if i > 0 {
				e.arena = append(e.arena, ',')
			}
			e.arena = append(e.arena, e.arena[it.start:it.end]...)
		}
		e.setKV(from, kvSpan{key: me.Key, val: span{start, len(e.arena)}})
		if e.composite && !hasPrefixedKey(entries, me.Key+"__") {
			for i, it := range sorted {
				ks := len(e.arena)
				e.arena = append(e.arena, me.Key...)
				e.arena = append(e.arena, "__"...)
				e.arena = strconv.AppendInt(e.arena, int64(i), 10)
				e.kvs = append(e.kvs, kvSpan{generated: true, kspan: span{ks, len(e.arena)}, val: it})
			}
		}
		// The item spans served their purpose; the list ranges before them stay.
		e.spans = e.spans[:items]
	}
	return span{from, len(e.kvs)}, nil
}

// setKV appends, or replaces in place a configured key already present
// (a Python dict assignment keeps the first position).
func (e *expander) setKV(from int, kv kvSpan) {
	for i := from; i < len(e.kvs); i++ {
		if !e.kvs[i].generated && e.kvs[i].key == kv.key {
			e.kvs[i] = kv
			return
		}
	}
	e.kvs = append(e.kvs, kv)
}

// hasPrefixedKey is the conflict rule: no key__N entries for key when any
// configured key of the scope starts with key__.
func hasPrefixedKey(entries []MetaEntry, prefix string) bool {
	for _, me := range entries {
		if strings.HasPrefix(me.Key, prefix) {
			return true
		}
	}
	return false
}

func materialize(all string, spans []span) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = all[s.start:s.end]
	}
	return out
}

func materializeKV(all string, spans []kvSpan) []KV {
	out := make([]KV, len(spans))
	for i, s := range spans {
		k := s.key
		if s.generated {
			k = all[s.kspan.start:s.kspan.end]
		}
		out[i] = KV{Key: k, Value: all[s.val.start:s.val.end]}
	}
	return out
}
