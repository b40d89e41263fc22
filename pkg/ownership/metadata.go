package ownership

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/minionvault/minion-vault-operator/pkg/template"
)

var indexSuffix = regexp.MustCompile(`__[0-9]+$`)

// RecordedKeys reads the metadata keys the operator rendered into an entity
// last time (KeysKey).
func RecordedKeys(md map[string]string) []string {
	raw := md[KeysKey]
	if raw == "" {
		return nil
	}
	return strings.Split(raw, ",")
}

// KeysValue is the KeysKey value for a rendering: its keys without their
// key__N companions, sorted. It fails when the list does not fit in a
// metadata value.
func KeysValue(rendered []template.KV) (string, error) {
	var keys []string
	for _, kv := range rendered {
		if !indexSuffix.MatchString(kv.Key) && !slices.Contains(keys, kv.Key) {
			keys = append(keys, kv.Key)
		}
	}
	slices.Sort(keys)
	v := strings.Join(keys, ",")
	if len(v) > MaxKeysLen {
		return "", fmt.Errorf("the entity metadata keys (%d characters joined) do not fit in %s (at most %d characters)", len(v), KeysKey, MaxKeysLen)
	}
	return v, nil
}

// Metadata is the entity metadata to write for self: the rendered keys,
// the marker and the key list. The operator owns the keys it renders now,
// their key__N companions, and the keys it rendered before (KeysKey in
// actual): those no longer rendered are dropped. Every other key in Vault
// is someone else's and is kept.
func Metadata(actual map[string]string, rendered []template.KV, self Owner) (map[string]string, error) {
	keys, err := KeysValue(rendered)
	if err != nil {
		return nil, err
	}
	configured := map[string]bool{}
	for _, kv := range rendered {
		if !indexSuffix.MatchString(kv.Key) {
			configured[kv.Key] = true
		}
	}
	for _, k := range RecordedKeys(actual) {
		configured[k] = true
	}
	owned := func(k string) bool {
		if configured[k] || strings.HasPrefix(k, ReservedKeyPrefix) {
			return true
		}
		if loc := indexSuffix.FindStringIndex(k); loc != nil {
			return configured[k[:loc[0]]]
		}
		return false
	}
	out := make(map[string]string, len(actual)+len(rendered)+2)
	for k, v := range actual {
		if !owned(k) {
			out[k] = v
		}
	}
	for _, kv := range rendered {
		out[kv.Key] = kv.Value
	}
	out[MarkerKey] = self.Marker()
	if keys != "" {
		out[KeysKey] = keys
	}
	return out, nil
}
