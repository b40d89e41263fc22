package saltmaster

import (
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/minionvault/minion-vault-operator/internal/saltext"
	"github.com/minionvault/minion-vault-operator/pkg/template"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// What the master renders from Salt data, with the repository's port of
// saltext's templating (pkg/template: expand_pattern_lists, str.format,
// the metadata list rules), fed what the runner feeds it.

// policyVars are runners/vault.py:988 _get_policies' mappings: minion,
// grains, pillar. pkg/template's own extension, mapdata, is left out so
// that {mapdata...} fails with a KeyError as upstream.
const policyVars = template.VarMinion | template.VarGrains | template.VarPillar

// noSuchVariable replaces a metadata pattern that names mapdata: upstream
// has no such mapping, so the pattern fails with a KeyError and the key
// gets an empty value (runners/vault.py:1086-1097).
const noSuchVariable = "{__saltext_has_no_mapdata__}"

// minionData is _get_minion_data (runners/vault.py:1031-1068): the
// caller's grains and pillar, or {"id": minion} and {} when there are none.
func (m *Master) minionData(minion string, refreshPillar bool) (value.Value, value.Value, error) {
	if m.MinionData == nil {
		return omap("id", minion), value.NewMap(nil), nil
	}
	grains, pillar, err := m.MinionData(minion, refreshPillar)
	if err != nil {
		return value.Value{}, value.Value{}, &saltext.SaltError{Class: "SaltException", Msg: err.Error(), Err: err}
	}
	if grains.IsNull() {
		grains = omap("id", minion)
	}
	if pillar.IsNull() {
		pillar = value.NewMap(nil)
	}
	return grains, pillar, nil
}

// pyIter is `for x in v`: a list's items, a string's characters, a
// mapping's keys.
func pyIter(v value.Value) ([]value.Value, error) {
	switch v.Kind() {
	case value.List:
		return v.Items(), nil
	case value.String:
		out := make([]value.Value, 0, utf8.RuneCountInString(v.Str()))
		for _, r := range v.Str() {
			out = append(out, str(string(r)))
		}
		return out, nil
	case value.Map:
		out := make([]value.Value, 0, len(v.Pairs()))
		for _, p := range v.Pairs() {
			out = append(out, p.Key)
		}
		return out, nil
	}
	return nil, saltErr("TypeError", "'%s' object is not iterable", v.Kind().PyType())
}

// templateError turns a pkg/template failure into the Python exception
// upstream raises for it.
func templateError(err error) error {
	var te *template.Error
	if !errors.As(err, &te) {
		return err
	}
	class := map[template.ErrKind]string{
		template.KeyError:       "KeyError",
		template.IndexError:     "IndexError",
		template.ValueError:     "ValueError",
		template.TypeError:      "TypeError",
		template.AttributeError: "AttributeError",
		template.RecursionError: "RecursionError",
	}[te.Kind]
	if class == "" {
		class = "LimitError"
	}
	return &saltext.SaltError{Class: class, Msg: te.Msg, Err: err}
}

// policies is runners/vault.py:983-999 _get_policies: every
// policies:assign pattern expanded and formatted, lowercased; a pattern
// failing with a KeyError keeps what it produced before.
func (m *Master) policies(minion string, refreshPillar bool) (value.Value, error) {
	grains, pillar, err := m.minionData(minion, refreshPillar)
	if err != nil {
		return value.Value{}, err
	}
	assign, err := m.Config.ValueOf("policies:assign")
	if err != nil {
		return value.Value{}, err
	}
	patterns, err := pyIter(assign)
	if err != nil {
		return value.Value{}, err
	}
	d := &template.Data{Minion: minion, Grains: grains, Pillar: pillar}
	out := []value.Value{}
	for _, p := range patterns {
		if !p.IsString() {
			return value.Value{}, saltErr("TypeError", "expected str, got %s", p.Kind().PyType())
		}
		got, _, err := template.Expand(template.Compile(p.Str()), d, policyVars, true)
		if err != nil {
			return value.Value{}, templateError(err)
		}
		for _, s := range got {
			out = append(out, str(s))
		}
	}
	return value.NewList(out), nil
}

// metadata is runners/vault.py:1071-1138 _get_metadata: each pattern
// expanded and formatted, the values sorted and joined with commas, and
// key__N entries for values that came from a list. Keys keep their
// configured order.
func (m *Master) metadata(minion string, patterns value.Value, refreshPillar bool) (value.Value, error) {
	_, pillar, err := m.minionData(minion, refreshPillar)
	if err != nil {
		return value.Value{}, err
	}
	if !patterns.IsMap() {
		return value.Value{}, saltErr("AttributeError", "'%s' object has no attribute 'items'", patterns.Kind().PyType())
	}
	entries := make([]template.MetaEntry, 0, len(patterns.Pairs()))
	for _, p := range patterns.Pairs() {
		if !p.Val.IsString() {
			return value.Value{}, saltErr("TypeError", "expected str, got %s", p.Val.Kind().PyType())
		}
		src := p.Val.Str()
		pat := template.Compile(src)
		for _, f := range pat.Fields() {
			if top, _, _ := strings.Cut(strings.SplitN(f, ".", 2)[0], "["); top == "mapdata" {
				pat = template.Compile(noSuchVariable)
				break
			}
		}
		entries = append(entries, template.MetaEntry{Key: p.Key.PyStr(), Pattern: pat})
	}
	places := template.Places{Entity: entries}
	out, err := places.Render(&template.Data{Minion: minion, Pillar: pillar, JID: m.JID, User: m.User})
	if err != nil {
		return value.Value{}, templateError(err)
	}
	pairs := make([]value.Pair, len(out.Entity))
	for i, kv := range out.Entity {
		pairs[i] = value.Pair{Key: str(kv.Key), Val: str(kv.Value)}
	}
	return value.NewMap(pairs), nil
}
