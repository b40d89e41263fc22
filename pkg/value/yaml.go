package value

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// maxNodes bounds how many nodes one document may expand to through
// aliases, so "billion laughs" input is an error instead of an OOM.
const maxNodes = 1 << 20

// ErrTooLarge reports a document that expands beyond maxNodes.
var ErrTooLarge = errors.New("document expands to too many nodes (alias bomb?)")

// DecodeYAML decodes the first YAML document in data. An empty document is null.
func DecodeYAML(data []byte) (Value, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Value{}, err
	}
	return FromYAMLNode(&doc)
}

// FromYAMLNode converts a decoded YAML node, resolving plain scalars the way
// PyYAML (YAML 1.1, Salt's loader) does: yes/no/on/off are booleans, a float
// needs a dot, a leading 0 means octal.
func FromYAMLNode(n *yaml.Node) (Value, error) {
	c := converter{}
	return c.node(n, 0)
}

type converter struct{ count int }

func (c *converter) node(n *yaml.Node, depth int) (Value, error) {
	c.count++
	if c.count > maxNodes {
		return Value{}, ErrTooLarge
	}
	if depth > 512 {
		return Value{}, fmt.Errorf("line %d: nesting deeper than 512 levels", n.Line)
	}
	switch n.Kind {
	case 0:
		return Value{}, nil
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return Value{}, nil
		}
		return c.node(n.Content[0], depth+1)
	case yaml.AliasNode:
		if n.Alias == nil {
			return Value{}, fmt.Errorf("line %d: unknown alias", n.Line)
		}
		return c.node(n.Alias, depth+1)
	case yaml.SequenceNode:
		items := make([]Value, 0, len(n.Content))
		for _, ch := range n.Content {
			v, err := c.node(ch, depth+1)
			if err != nil {
				return Value{}, err
			}
			items = append(items, v)
		}
		return NewList(items), nil
	case yaml.MappingNode:
		return c.mapping(n, depth)
	case yaml.ScalarNode:
		return c.scalar(n)
	}
	return Value{}, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}

func (c *converter) mapping(n *yaml.Node, depth int) (Value, error) {
	ps := pairSet{pairs: make([]Pair, 0, len(n.Content)/2)}
	var merged []Pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		if kn.Kind == yaml.ScalarNode && kn.Tag == "!!merge" {
			ms, err := c.mergeSources(vn, depth)
			if err != nil {
				return Value{}, err
			}
			merged = append(merged, ms...)
			continue
		}
		k, err := c.node(kn, depth+1)
		if err != nil {
			return Value{}, err
		}
		if k.IsComposite() {
			return Value{}, fmt.Errorf("line %d: unhashable mapping key (%s)", kn.Line, k.kind.PyType())
		}
		v, err := c.node(vn, depth+1)
		if err != nil {
			return Value{}, err
		}
		ps.set(k, v)
	}
	pairs := ps.pairs
	// Merge keys: explicit keys win; among merged maps, the first wins.
	if len(merged) > 0 {
		out := make([]Pair, 0, len(merged)+len(pairs))
		for _, p := range merged {
			if !hasKey(out, p.Key) {
				out = append(out, p)
			}
		}
		all := pairSet{pairs: out}
		for _, p := range pairs {
			all.set(p.Key, p.Val)
		}
		pairs = all.pairs
	}
	return NewMap(pairs), nil
}

func (c *converter) mergeSources(vn *yaml.Node, depth int) ([]Pair, error) {
	v, err := c.node(vn, depth+1)
	if err != nil {
		return nil, err
	}
	switch v.kind {
	case Map:
		return v.Pairs(), nil
	case List:
		var out []Pair
		for _, it := range v.Items() {
			if it.kind != Map {
				return nil, fmt.Errorf("line %d: merge key needs mappings", vn.Line)
			}
			for _, p := range it.Pairs() {
				if !hasKey(out, p.Key) {
					out = append(out, p)
				}
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("line %d: merge key needs a mapping", vn.Line)
}

func hasKey(pairs []Pair, k Value) bool {
	for _, p := range pairs {
		if Equal(p.Key, k) {
			return true
		}
	}
	return false
}

// setPair replaces an existing key in place (later duplicates win, as in
// PyYAML) or appends.
func setPair(pairs []Pair, k, v Value) []Pair {
	for i := range pairs {
		if Equal(pairs[i].Key, k) {
			pairs[i].Val = v
			return pairs
		}
	}
	return append(pairs, Pair{Key: k, Val: v})
}

func (c *converter) scalar(n *yaml.Node) (Value, error) {
	explicit := n.Style&yaml.TaggedStyle != 0
	if !explicit {
		if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
			return NewString(n.Value), nil
		}
		return ResolvePlain(n.Value), nil
	}
	switch n.ShortTag() {
	case "!!str", "!!binary", "!!timestamp":
		return NewString(n.Value), nil
	case "!!null":
		return Value{}, nil
	case "!!bool":
		if b, ok := resolveBool(n.Value); ok {
			return NewBool(b), nil
		}
	case "!!int":
		if v, ok := resolveInt(n.Value); ok {
			return v, nil
		}
	case "!!float":
		if v, ok := resolveFloat(n.Value); ok {
			return v, nil
		}
		if v, ok := resolveInt(n.Value); ok {
			return NewFloat(float64(v.Int())), nil
		}
	default:
		// Unknown local tags (!foo): keep the text, like a string.
		return NewString(n.Value), nil
	}
	return Value{}, fmt.Errorf("line %d: cannot decode %q as %s", n.Line, n.Value, n.ShortTag())
}

var (
	reInt   = regexp.MustCompile(`^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$`)
	reFloat = regexp.MustCompile(`^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$`)
)

// ResolvePlain gives a plain (unquoted, untagged) scalar its YAML 1.1 type.
func ResolvePlain(s string) Value {
	switch s {
	case "", "~", "null", "Null", "NULL":
		return Value{}
	}
	if b, ok := resolveBool(s); ok {
		return NewBool(b)
	}
	if c := s[0]; c == '-' || c == '+' || c == '.' || ('0' <= c && c <= '9') {
		if v, ok := resolveInt(s); ok {
			return v
		}
		if v, ok := resolveFloat(s); ok {
			return v
		}
	}
	return NewString(s)
}

func resolveBool(s string) (bool, bool) {
	switch s {
	case "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON":
		return true, true
	case "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF":
		return false, true
	}
	return false, false
}

func resolveInt(s string) (Value, bool) {
	if !reInt.MatchString(s) {
		return Value{}, false
	}
	t := strings.ReplaceAll(s, "_", "")
	neg := false
	switch t[0] {
	case '-':
		neg = true
		t = t[1:]
	case '+':
		t = t[1:]
	}
	var n big.Int
	var ok bool
	switch {
	case t == "0":
		ok = true
	case strings.HasPrefix(t, "0b"):
		_, ok = n.SetString(t[2:], 2)
	case strings.HasPrefix(t, "0x"):
		_, ok = n.SetString(t[2:], 16)
	case strings.Contains(t, ":"):
		ok = true
		for _, part := range strings.Split(t, ":") {
			d, _ := strconv.Atoi(part)
			n.Mul(&n, big.NewInt(60))
			n.Add(&n, big.NewInt(int64(d)))
		}
	case t[0] == '0':
		_, ok = n.SetString(t[1:], 8)
	default:
		_, ok = n.SetString(t, 10)
	}
	if !ok {
		return Value{}, false
	}
	if neg {
		n.Neg(&n)
	}
	if !n.IsInt64() {
		// Python ints are unbounded; ours are not. Keep the digits as text
		// rather than silently wrapping.
		return NewString(s), true
	}
	return NewInt(n.Int64()), true
}

func resolveFloat(s string) (Value, bool) {
	if !reFloat.MatchString(s) {
		return Value{}, false
	}
	t := strings.ReplaceAll(s, "_", "")
	switch strings.ToLower(strings.TrimLeft(t, "+-")) {
	case ".inf":
		if t[0] == '-' {
			return NewFloat(math.Inf(-1)), true
		}
		return NewFloat(math.Inf(1)), true
	case ".nan":
		return NewFloat(math.NaN()), true
	}
	if strings.Contains(t, ":") {
		neg := t[0] == '-'
		t = strings.TrimLeft(t, "+-")
		var f float64
		for _, part := range strings.Split(t, ":") {
			d, _ := strconv.ParseFloat(part, 64)
			f = f*60 + d
		}
		if neg {
			f = -f
		}
		return NewFloat(f), true
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return Value{}, false
	}
	return NewFloat(f), true
}

// ToYAMLNode converts v to a YAML node that keeps key order and types.
func (v Value) ToYAMLNode() *yaml.Node {
	switch v.kind {
	case Null:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	case Bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v.Bool())}
	case Int:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(v.Int(), 10)}
	case Float:
		s := FormatFloatRepr(v.Float())
		switch s {
		case "inf":
			s = ".inf"
		case "-inf":
			s = "-.inf"
		case "nan":
			s = ".nan"
		default:
			if strings.Contains(s, "e") && !strings.Contains(s, ".") {
				s = strings.Replace(s, "e", ".0e", 1)
			}
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: s}
	case String:
		n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v.s}
		if r := ResolvePlain(v.s); r.kind != String {
			n.Style = yaml.DoubleQuotedStyle
		}
		return n
	case List:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, it := range v.Items() {
			n.Content = append(n.Content, it.ToYAMLNode())
		}
		return n
	default:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for _, p := range v.Pairs() {
			n.Content = append(n.Content, p.Key.ToYAMLNode(), p.Val.ToYAMLNode())
		}
		return n
	}
}
