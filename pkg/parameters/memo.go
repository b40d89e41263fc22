package parameters

import (
	"math"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// Memo computes Stack's Mapdata for many bindings of one formula (one Root
// and one set of Files), sharing the work between bindings whose stacks
// read the same things: every minion with the same os_family and no
// parameters of its own gets the same mapdata, which is merged once.
//
// The stack is a function of the files and of its lookups' results; a YAML
// source's result matters only through the files it names that exist. Memo
// keys each stack on exactly that, so Mapdata always equals Stack(...).Mapdata
// (and its error). A config.get that merges the stores (<Root>:strategy)
// reads everything: such stacks are not shared. Memo is safe for concurrent
// use and keeps at most maxMemo stacks.
type Memo struct {
	root  string
	files map[string]value.Value
	m     sync.Map // key -> memoEntry
	n     atomic.Int64
	// sources: the map_jinja files found (their part of the key) -> the
	// parsed sources, nil when the settings fail.
	sources  sync.Map
	nSources atomic.Int64
}

type memoEntry struct {
	mapdata value.Value
	err     error
}

const maxMemo = 1024

// NewMemo returns a Memo for the formula at root with files (which it reads
// but never changes, and which must not change afterwards).
func NewMemo(root string, files map[string]value.Value) *Memo {
	return &Memo{root: root, files: files}
}

// Mapdata is Stack(Input{Root, Files, grains, pillar, opts}).Mapdata and its error.
func (m *Memo) Mapdata(grains, pillar, opts value.Value) (value.Value, error) {
	in := Input{Root: m.root, Files: m.files, Grains: grains, Pillar: pillar, Opts: opts}
	key, ok := m.key(&in)
	if !ok {
		res, err := Stack(in)
		return res.Mapdata, err
	}
	if e, ok := m.m.Load(key); ok {
		e := e.(memoEntry)
		return e.mapdata, e.err
	}
	res, err := Stack(in)
	if m.n.Load() < maxMemo {
		if _, loaded := m.m.LoadOrStore(key, memoEntry{res.Mapdata, err}); !loaded {
			m.n.Add(1)
		}
	}
	return res.Mapdata, err
}

// key runs the stack's lookups as stack does, without merging the
// parameters, and writes down everything the result depends on. ok is false
// when the stack cannot be keyed (merging config.get, or an error before
// the parameters, which Stack then reports).
func (m *Memo) key(in *Input) (string, bool) {
	s := stacker{q: newQuerier(in), files: in.Files}
	if s.q.merging {
		return "", false
	}
	root := in.Root
	// The map.jinja settings, and so the sources, are a function of the
	// map_jinja files found.
	found, ok := s.q.get(mapJinjaSource.Query, mapJinjaSource.Key, mapJinjaSource.Delim)
	if !ok {
		found = emptyList
	}
	var b []byte
	b = m.appendFiles(b, mapJinjaSource, found, "parameters/")
	b = m.appendFiles(b, mapJinjaSource, found, root+"/parameters")
	var srcs []Source
	if v, ok := m.sources.Load(string(b)); ok {
		srcs = v.([]Source)
	} else {
		srcs = m.parseSources(&s, root)
		if m.nSources.Load() < maxMemo {
			if _, loaded := m.sources.LoadOrStore(string(b), srcs); !loaded {
				m.nSources.Add(1)
			}
		}
	}
	if srcs == nil {
		return "", false
	}
	mergeLists, ok := s.q.configFirst(root+":merge_lists", ":")
	if !ok {
		mergeLists = value.NewBool(false)
	}
	// Only its truth is used (mergeOptions).
	b = strconv.AppendBool(b, toBool(mergeLists))
	b = append(b, '|')
	dir := root + "/parameters"
	for _, src := range srcs {
		b = appendLen(b, src.Raw)
		found, ok := s.q.get(src.Query, src.Key, src.Delim)
		if !ok {
			found = emptyList
		}
		if src.Type == 'Y' {
			b = m.appendFiles(b, src, found, dir)
		} else if b, ok = appendValue(b, found); !ok {
			return "", false
		}
	}
	return string(b), true
}

// parseSources is the stacker's parsedSources; nil on an error (Stack
// reports it).
func (m *Memo) parseSources(s *stacker, root string) []Source {
	srcs, _, err := s.parsedSources(root)
	if err != nil {
		return nil
	}
	return srcs
}

// appendFiles writes the paths of the files yamlLayer merges for src under
// dir: those that exist and are not empty, in order.
func (m *Memo) appendFiles(b []byte, src Source, found value.Value, dir string) []byte {
	b = append(b, '[')
	for _, path := range layerPaths(src, found, dir) {
		if doc, ok := m.files[path]; ok && doc.Truthy() {
			b = appendLen(b, path)
		}
	}
	return append(b, ']')
}

func appendLen(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

// appendValue writes v exactly: kind, contents and order. ok is false for
// a kind it does not know.
func appendValue(b []byte, v value.Value) (_ []byte, ok bool) {
	switch v.Kind() {
	case value.Null:
		return append(b, 'N'), true
	case value.Bool:
		if v.Bool() {
			return append(b, 'T'), true
		}
		return append(b, 'F'), true
	case value.Int:
		b = append(b, 'i')
		b = strconv.AppendInt(b, v.Int(), 10)
		return append(b, ';'), true
	case value.Float:
		b = append(b, 'f')
		b = strconv.AppendUint(b, math.Float64bits(v.Float()), 16)
		return append(b, ';'), true
	case value.String:
		return appendLen(append(b, 's'), v.Str()), true
	case value.List:
		items := v.Items()
		b = append(b, 'l')
		b = strconv.AppendInt(b, int64(len(items)), 10)
		b = append(b, ':')
		for _, it := range items {
			if b, ok = appendValue(b, it); !ok {
				return b, false
			}
		}
		return b, true
	case value.Map:
		pairs := v.Pairs()
		b = append(b, 'm')
		b = strconv.AppendInt(b, int64(len(pairs)), 10)
		b = append(b, ':')
		for _, p := range pairs {
			if b, ok = appendValue(b, p.Key); !ok {
				return b, false
			}
			if b, ok = appendValue(b, p.Val); !ok {
				return b, false
			}
		}
		return b, true
	}
	return b, false
}
