package parameters

import (
	"fmt"
	"slices"
	"strings"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// Input is everything the stack reads.
type Input struct {
	// Root is the formula's tplroot: its files live under <Root>/parameters.
	Root string
	// Files maps fileserver paths (parameters/map_jinja.yaml,
	// <Root>/parameters/os/Debian.yaml, ...) to their decoded YAML
	// documents. A missing path is simply absent.
	Files map[string]value.Value
	// Grains, Pillar and Opts (the minion configuration) are mappings; null
	// reads as empty.
	Grains, Pillar, Opts value.Value
}

// Result is the outcome of one Stack call.
type Result struct {
	// Mapdata is the merged parameters with map_jinja set to the merged
	// map.jinja settings. Every mapping is key-sorted, as Salt's YAML
	// round trips leave it (see sortKeys).
	Mapdata value.Value
	// Sources is the effective source list, after map_jinja.yaml files.
	Sources []string
	// FilesTried lists every path looked up, in order, found or not.
	// Upstream also tries a `.yaml.jinja` twin of each name; we render no
	// Jinja, so those are neither tried nor listed.
	FilesTried []string
}

var (
	emptyMap  = value.NewMap([]value.Pair{})
	emptyList = value.NewList([]value.Value{})

	// The fixed first sources of the two stacks map.jinja runs.
	mapJinjaSource = Source{Type: 'Y', Query: 'C', Delim: ":", Key: "map_jinja.yaml", Raw: "map_jinja.yaml"}
	defaultsSource = Source{Type: 'Y', Query: 'C', Delim: ":", Key: "defaults.yaml", Raw: "defaults.yaml"}
)

// DefaultSources is map.jinja's built-in source list for a formula.
func DefaultSources(root string) []string {
	return []string{
		"Y:G@osarch",
		"Y:G@os_family",
		"Y:G@os",
		"Y:G@osfinger",
		"C@" + root + ":lookup",
		"C@" + root,
		"Y:G@id",
	}
}

// Stack computes mapdata as template-formula's map.jinja does. Two stacks
// run: the map.jinja settings (the built-in sources overridden by
// parameters/map_jinja.yaml, then <Root>/parameters/map_jinja.yaml), then the
// formula's parameters: defaults.yaml and each source, all under
// <Root>/parameters. On error the Result still holds the files tried so far
// (and Sources once known).
func Stack(in Input) (Result, error) {
	s := stacker{q: newQuerier(&in), files: in.Files}
	mapdata, err := s.stack(in.Root)
	res := Result{Sources: s.sources, FilesTried: s.tried}
	if err != nil {
		return res, err
	}
	res.Mapdata = mapdata
	return res, nil
}

// stacker runs map.jinja and, for each of its two stacks, libmapstack.jinja's
// mapstack macro.
type stacker struct {
	q       *querier
	files   map[string]value.Value
	sources []string
	tried   []string
}

// parsedSources runs the map.jinja settings' stack and returns the
// settings and their sources (recorded in s.sources) parsed, defaults.yaml
// first: every source is parsed before anything is merged, as upstream does.
func (s *stacker) parsedSources(root string) ([]Source, value.Value, error) {
	builtin := DefaultSources(root)
	items := make([]value.Value, len(builtin))
	for i, src := range builtin {
		items[i] = value.NewString(src)
	}
	settings := value.NewMap([]value.Pair{{Key: value.NewString("sources"), Val: value.NewList(items)}})
	settings, err := s.run([]Source{mapJinjaSource}, []string{"parameters/", root + "/parameters"}, settings, value.NewBool(false))
	if err != nil {
		return nil, value.Value{}, err
	}
	sources, err := sourceList(settings)
	if err != nil {
		return nil, value.Value{}, err
	}
	s.sources = sources
	srcs := make([]Source, 0, len(sources)+1)
	srcs = append(srcs, defaultsSource)
	for _, raw := range sources {
		src, err := ParseSource(raw)
		if err != nil {
			return nil, value.Value{}, fmt.Errorf("parameters: %w", err)
		}
		srcs = append(srcs, src)
	}
	return srcs, settings, nil
}

func (s *stacker) stack(root string) (value.Value, error) {
	srcs, settings, err := s.parsedSources(root)
	if err != nil {
		return value.Value{}, err
	}
	mergeLists, ok := s.q.configFirst(root+":merge_lists", ":")
	if !ok {
		mergeLists = value.NewBool(false)
	}
	values, err := s.run(srcs, []string{root + "/parameters"}, emptyMap, mergeLists)
	if err != nil {
		return value.Value{}, err
	}

	// Set last, so no parameter or pillar can hide the settings used.
	values = values.Set(value.NewString("map_jinja"), settings)
	return sortKeys(values), nil
}

// sourceList reads the merged map.jinja settings' `sources`, which upstream
// prepends "defaults.yaml" to: anything but a list of strings fails there.
func sourceList(settings value.Value) ([]string, error) {
	v, ok := settings.GetString("sources")
	if !ok {
		return nil, fmt.Errorf("parameters: map_jinja settings have no sources")
	}
	if !v.IsList() {
		return nil, fmt.Errorf("parameters: map_jinja sources is %s, not a list", kindName(v))
	}
	out := make([]string, len(v.Items()))
	for i, it := range v.Items() {
		if !it.IsString() {
			return nil, fmt.Errorf("parameters: map_jinja source %d is %s (%s), not a string", i, kindName(it), it.PyRepr())
		}
		out[i] = it.Str()
	}
	return out, nil
}

// run is one mapstack: it merges the layers of srcs, for each directory in turn, onto values.
// defaultLists is the merge_lists of layers that do not set their own.
func (s *stacker) run(srcs []Source, dirs []string, values, defaultLists value.Value) (value.Value, error) {
	// Upstream looks every source up once, before merging anything.
	found := make([]value.Value, len(srcs))
	for i, src := range srcs {
		v, ok := s.q.get(src.Query, src.Key, src.Delim)
		if !ok {
			v = emptyList // the lookups' default=[]
		}
		found[i] = v
	}
	for _, dir := range dirs {
		for i, src := range srcs {
			var err error
			if src.Type == 'Y' {
				values, err = s.yamlLayer(src, found[i], dir, values, defaultLists)
			} else {
				values, err = valueLayer(src, found[i], values, defaultLists)
			}
			if err != nil {
				return value.Value{}, err
			}
		}
	}
	return values, nil
}

// valueLayer merges a C/G/I source's value. A falsy value is {}; with SUB it
// goes under its key. The value's own strategy/merge_lists keys choose the
// merge and stay in the output.
func valueLayer(src Source, found, values, defaultLists value.Value) (value.Value, error) {
	st, lists := mergeOptions(found, defaultLists)
	v := found
	if !v.Truthy() {
		v = emptyMap
	}
	if src.Sub {
		v = value.NewMap([]value.Pair{{Key: value.NewString(src.subKey()), Val: v}})
	}
	out, err := merge(values, v, st, lists)
	if err != nil {
		return value.Value{}, fmt.Errorf("parameters: layer %q: %w", src.Raw, err)
	}
	return out, nil
}

// yamlLayer merges the files a Y source names under dir. A missing or empty
// lookup makes KEY itself the path; otherwise KEY is the directory and the
// value names the files.
func (s *stacker) yamlLayer(src Source, found value.Value, dir string, values, defaultLists value.Value) (value.Value, error) {
	for _, path := range layerPaths(src, found, dir) {
		s.tried = append(s.tried, path)
		doc, ok := s.files[path]
		if !ok || !doc.Truthy() {
			continue
		}
		st, lists := mergeOptions(doc, defaultLists)
		vals, ok := traverse(doc, "values", ":")
		if !ok {
			vals = emptyMap
		}
		if vals.IsNull() {
			return value.Value{}, fmt.Errorf("parameters: layer %q file %q: values is null", src.Raw, path)
		}
		out, err := merge(values, vals, st, lists)
		if err != nil {
			return value.Value{}, fmt.Errorf("parameters: layer %q file %q: values: %w", src.Raw, path, err)
		}
		values = out
	}
	return values, nil
}

// layerPaths are the paths a Y source names under dir, in order, whether
// the files exist or not.
func layerPaths(src Source, found value.Value, dir string) []string {
	dirname := src.Key
	var names []string
	if isEmptySequence(found) {
		name := src.Key
		dirname = ""
		if i := strings.LastIndexByte(src.Key, '/'); i >= 0 {
			dirname, name = src.Key[:i], src.Key[i+1:]
		}
		names = []string{name}
	} else {
		names = fileNames(found)
	}
	base := strings.TrimRight(joinNonEmpty(dir, dirname), "/")
	paths := make([]string, 0, len(names))
	for _, name := range names {
		file, ok := yamlFile(name)
		if !ok {
			continue
		}
		paths = append(paths, joinNonEmpty(base, file))
	}
	return paths
}

// mergeOptions reads a layer's `strategy` (default smart) and `merge_lists`
// (default defaultLists), through Salt's traverse like upstream, so even a
// list holding a mapping with those keys sets them.
func mergeOptions(layer, defaultLists value.Value) (strategy, bool) {
	st := stRecurse
	if v, ok := traverse(layer, "strategy", ":"); ok {
		st = parseStrategy(v)
	}
	lists := defaultLists
	if v, ok := traverse(layer, "merge_lists", ":"); ok {
		lists = v
	}
	return st, toBool(lists)
}

// isEmptySequence is Jinja's `is sequence and length == 0`: an empty
// string, list or mapping. Numbers, booleans and None are no sequences.
func isEmptySequence(v value.Value) bool {
	switch v.Kind() {
	case value.String, value.List, value.Map:
		return v.Len() == 0
	}
	return false
}

// fileNames is str() of the looked-up value, of each item of a list, or of
// each key of a mapping (in sorted order: the lookup went through YAML).
func fileNames(v value.Value) []string {
	switch v.Kind() {
	case value.String:
		return []string{v.Str()}
	case value.List:
		names := make([]string, len(v.Items()))
		for i, it := range v.Items() {
			names[i] = sortKeys(it).PyStr()
		}
		return names
	case value.Map:
		pairs := v.Pairs()
		if cmpFn := keyOrder(pairs); cmpFn != nil {
			pairs = slices.SortedStableFunc(slices.Values(pairs), cmpFn)
		}
		names := make([]string, len(pairs))
		for i, p := range pairs {
			names[i] = p.Key.PyStr()
		}
		return names
	}
	return []string{v.PyStr()}
}

// yamlFile is the file a name stands for: itself when its extension (the
// text after the last dot, or the whole name without one) is "yaml",
// <name>.yaml otherwise. A ".jinja" name is a template, which we cannot
// render, so it names nothing.
func yamlFile(name string) (string, bool) {
	ext := name[strings.LastIndexByte(name, '.')+1:]
	switch ext {
	case "yaml":
		return name, true
	case "jinja":
		return "", false
	}
	return name + ".yaml", true
}

// joinNonEmpty is Jinja's `[a, b] | select | join("/")`.
func joinNonEmpty(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "/" + b
}
