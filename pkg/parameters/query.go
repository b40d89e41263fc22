package parameters

import (
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// configMiss is config.get's internal "not found" marker: a stored value
// equal to it reads as missing, which we keep for fidelity.
const configMiss = "_|-"

// Query looks key up the way a source with that query method does:
// 'G' grains.get, 'I' pillar.get, 'C' config.get (the first hit among opts,
// grains, pillar and pillar["master"], or a lookup in their merge when
// `<Root>:strategy` is set, see configMerged). An empty delim means ":".
// ok is false on a miss, where Salt returns the caller's default.
func Query(method byte, in Input, key, delim string) (value.Value, bool) {
	return newQuerier(&in).get(method, key, delim)
}

// querier answers the lookups of one Stack call; it caches the merged
// config.get store, which upstream rebuilds for every single lookup.
type querier struct {
	in       *Input
	merging  bool     // config.get merges the stores instead of taking the first hit
	merge    strategy // with merging: stRecurse or stOverwrite
	merged   value.Value
	mergedOK bool
}

func newQuerier(in *Input) *querier {
	q := &querier{in: in}
	s, ok := q.configFirst(in.Root+":strategy", ":")
	if ok && s.Truthy() && cliAllowsMerge(in.Opts) {
		// config.get only knows recurse and overwrite; anything else falls back to recurse.
		q.merging = true
		q.merge = stRecurse
		if s.IsString() && s.Str() == "overwrite" {
			q.merge = stOverwrite
		}
	}
	return q
}

// get runs one lookup. Delimiters are honoured for every method, unlike
// upstream, which drops them for G and I lookups (template-formula #266).
func (q *querier) get(method byte, key, delim string) (value.Value, bool) {
	if delim == "" {
		delim = ":"
	}
	switch method {
	case 'G':
		return traverse(q.in.Grains, key, delim)
	case 'I':
		return traverse(q.in.Pillar, key, delim)
	case 'C':
		if q.merging {
			return q.configMerged(key, delim)
		}
		return q.configFirst(key, delim)
	}
	return value.Value{}, false
}

// configFirst is config.get without merge: the first store holding key.
func (q *querier) configFirst(key, delim string) (value.Value, bool) {
	master, _ := q.in.Pillar.GetString("master")
	for _, store := range [...]value.Value{q.in.Opts, q.in.Grains, q.in.Pillar, master} {
		if v, ok := traverse(store, key, delim); ok && !isConfigMiss(v) {
			return v, true
		}
	}
	return value.Value{}, false
}

// configMerged is config.get with merge: key looked up in
// pillar["master"] < pillar < grains < opts merged with the strategy.
func (q *querier) configMerged(key, delim string) (value.Value, bool) {
	if !q.mergedOK {
		q.merged = q.mergeStores()
		q.mergedOK = true
	}
	if v, ok := traverse(q.merged, key, delim); ok && !isConfigMiss(v) {
		return v, true
	}
	return value.Value{}, false
}

// mergeStores builds config.get's merged view. Salt raises a TypeError on a
// store that is not a mapping (say, a string pillar["master"]); a lookup
// cannot fail here, so such a store is skipped instead. Lists are replaced,
// as with the master's default pillar_merge_lists: False.
func (q *querier) mergeStores() value.Value {
	master, _ := q.in.Pillar.GetString("master")
	data := emptyMap
	for _, store := range [...]value.Value{master, q.in.Pillar, q.in.Grains, q.in.Opts} {
		if !store.IsMap() {
			continue
		}
		data = mergeMaps(data, store, q.merge, false)
	}
	return data
}

func isConfigMiss(v value.Value) bool {
	return v.IsString() && v.Str() == configMiss
}

// cliAllowsMerge mirrors libsaltcli.jinja + libmatchers.jinja, which pass
// config.get its merge option only when the Salt command is a minion or a
// local salt-call, never under salt-ssh.
//
// Deviation: upstream calls a missing opts["__cli"] "unknown" and skips the
// merge then too. Our opts come from a binding, not from a running Salt
// process, so a missing __cli says nothing about the command; we read it as
// a salt-call, which keeps `<tplroot>:strategy` working as specified and
// still honours the salt-ssh marker in opts["__master_opts"]["__cli"].
func cliAllowsMerge(opts value.Value) bool {
	masterCli, _ := traverse(opts, "__master_opts__:__cli", ":")
	ssh := masterCli.IsString() && masterCli.Str() == "salt-ssh"
	cli, ok := opts.GetString("__cli")
	if !ok {
		return !ssh
	}
	if !cli.IsString() {
		return false
	}
	switch cli.Str() {
	case "salt-minion":
		return true
	case "salt-call", "":
		return !ssh
	}
	return false
}
