package template

import (
	"unicode/utf8"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// Var is a bit set of the template variables a place may see.
type Var uint8

// Template variables.
const (
	VarMinion Var = 1 << iota
	VarGrains
	VarPillar
	VarMapdata
	VarJID
	VarUser
)

// The variables each place sees (templating spec §1, plus our mapdata).
const (
	PolicyVars   = VarMinion | VarGrains | VarPillar | VarMapdata
	MetadataVars = VarMinion | VarPillar | VarMapdata | VarJID | VarUser
	PathVars     = VarMinion | VarPillar | VarMapdata
)

// Defaults for jid and user when the caller supplies none, as upstream.
const (
	DefaultJID  = "<no jid set>"
	DefaultUser = "<no user set>"
)

// Data is what templates are rendered against.
type Data struct {
	Minion  string
	Grains  value.Value
	Pillar  value.Value
	Mapdata value.Value
	JID     string // empty: DefaultJID
	User    string // empty: DefaultUser
}

var varNames = map[string]Var{
	"minion": VarMinion, "grains": VarGrains, "pillar": VarPillar,
	"mapdata": VarMapdata, "jid": VarJID, "user": VarUser,
}

type scope struct {
	d       *Data
	visible Var
}

// top resolves the field's first name: string.Formatter.get_value with
// args=() upstream, so a numeric name is an IndexError and the empty name a
// KeyError.
func (sc *scope) top(f *field) (value.Value, *Error) {
	if f.firstErr != nil {
		return value.Value{}, f.firstErr
	}
	if f.firstIdx >= 0 {
		return value.Value{}, errf(IndexError, "tuple index out of range (positional field {%s})", f.first)
	}
	v := f.firstVar
	if v == 0 || sc.visible&v == 0 {
		return value.Value{}, errf(KeyError, "%q", f.first)
	}
	d := sc.d
	switch v {
	case VarMinion:
		return value.NewString(d.Minion), nil
	case VarGrains:
		return orEmptyMap(d.Grains), nil
	case VarPillar:
		return orEmptyMap(d.Pillar), nil
	case VarMapdata:
		return orEmptyMap(d.Mapdata), nil
	case VarJID:
		if d.JID == "" {
			return value.NewString(DefaultJID), nil
		}
		return value.NewString(d.JID), nil
	default:
		if d.User == "" {
			return value.NewString(DefaultUser), nil
		}
		return value.NewString(d.User), nil
	}
}

func orEmptyMap(v value.Value) value.Value {
	if v.IsNull() {
		return value.NewMap(nil)
	}
	return v
}

// resolve walks the whole field name. Attribute access is refused: it has
// no meaning for our data, and upstream would reach Python internals.
func (sc *scope) resolve(f *field) (value.Value, *Error) {
	obj, err := sc.top(f)
	if err != nil {
		return obj, err
	}
	for i := range f.accs {
		if obj, err = getItem(obj, &f.accs[i]); err != nil {
			return obj, err
		}
	}
	if f.accErr != nil {
		return obj, f.accErr
	}
	return obj, nil
}

// getItem is Python's obj[key] for the accessor.
func getItem(obj value.Value, a *accessor) (value.Value, *Error) {
	if a.attr {
		return value.Value{}, errf(AttributeError, "'.%s' on %s: attribute access is not supported, use [key]", a.name, obj.Kind().PyType())
	}
	switch obj.Kind() {
	case value.Map:
		var v value.Value
		var ok bool
		if a.idx >= 0 {
			v, ok = obj.Get(value.NewInt(int64(a.idx)))
		} else {
			v, ok = obj.GetString(a.name)
		}
		if !ok {
			return v, errf(KeyError, "%q", a.name)
		}
		return v, nil
	case value.List:
		if a.idx < 0 {
			return value.Value{}, errf(TypeError, "list indices must be integers, not str (%q)", a.name)
		}
		items := obj.Items()
		if a.idx >= len(items) {
			return value.Value{}, errf(IndexError, "list index %d out of range", a.idx)
		}
		return items[a.idx], nil
	case value.String:
		if a.idx < 0 {
			return value.Value{}, errf(TypeError, "string indices must be integers, not str (%q)", a.name)
		}
		s := obj.Str()
		for i, n := 0, 0; i < len(s); n++ {
			_, size := utf8.DecodeRuneInString(s[i:])
			if n == a.idx {
				return value.NewString(s[i : i+size]), nil
			}
			i += size
		}
		return value.Value{}, errf(IndexError, "string index %d out of range", a.idx)
	}
	return value.Value{}, errf(TypeError, "'%s' object is not subscriptable", obj.Kind().PyType())
}
