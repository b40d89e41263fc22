package value

import (
	"fmt"
	"strings"
	"testing"
)

// Large objects take the indexed duplicate-key path; it must keep the
// semantics of the small one: the first position, the last value.
func TestDecodeJSONLargeObjectDuplicateKeys(t *testing.T) {
	for _, n := range []int{5, 31, 32, 33, 200} {
		var b strings.Builder
		b.WriteString("{")
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, `"k%d": %d, `, i, i)
		}
		b.WriteString(`"k0": "last", "k3": "again", "new": 1}`)
		v, err := DecodeJSON([]byte(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		pairs := v.Pairs()
		if len(pairs) != n+1 {
			t.Fatalf("n=%d: %d keys, want %d", n, len(pairs), n+1)
		}
		if k, val := pairs[0].Key.Str(), pairs[0].Val; k != "k0" || val.Str() != "last" {
			t.Errorf("n=%d: first pair %s=%s, want k0=last", n, k, val.PyRepr())
		}
		if val := pairs[3].Val; val.Str() != "again" {
			t.Errorf("n=%d: k3 = %s, want again", n, val.PyRepr())
		}
		if pairs[n].Key.Str() != "new" {
			t.Errorf("n=%d: last key %s", n, pairs[n].Key.Str())
		}
	}
}

func BenchmarkDecodeJSONWideObject(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("{")
	for i := 0; i < 20000; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `"minion-%05d": {"id": "minion-%05d"}`, i, i)
	}
	sb.WriteString("}")
	data := []byte(sb.String())
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := DecodeJSON(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeYAMLWideMapping(b *testing.B) {
	var sb strings.Builder
	for i := 0; i < 20000; i++ {
		fmt.Fprintf(&sb, "minion-%05d: {id: minion-%05d}\n", i, i)
	}
	data := []byte(sb.String())
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := DecodeYAML(data); err != nil {
			b.Fatal(err)
		}
	}
}
