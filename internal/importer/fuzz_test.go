package importer

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzImportConfig: no input makes the import panic, and whatever it
// writes reads back as manifests the renderer accepts as input.
//
//	go test -run='^$' -fuzz='^FuzzImportConfig$' -fuzztime=30s ./internal/importer
func FuzzImportConfig(f *testing.F) {
	dir := filepath.Join("testdata", "roundtrip")
	master, _ := os.ReadFile(filepath.Join(dir, "master.yaml"))
	grains, _ := os.ReadFile(filepath.Join(dir, "grains.json"))
	pillar, _ := os.ReadFile(filepath.Join(dir, "pillar.json"))
	f.Add(master, grains, pillar)
	f.Add([]byte(modernConfig), []byte(`{"Web_01": {"id": "Web_01", "os": "x"}}`), []byte(`{"Web_01": {"roles": ["a", 1, 1.5, null, {"k": []}]}}`))
	f.Add([]byte(legacyCoreConfig), []byte(`{"a": false} {"b": {}}`), []byte(`{}`))
	f.Add([]byte("url: http://v\npolicies: ['{grains}', '{pillar}']\n"), []byte(`{"m": {"id": "m", "yes": "no"}}`), []byte(`{"m": {"on": 010, "f": 1e16}}`))
	f.Add([]byte("vault: {issue: {approle: {params: {token_ttl: '1.5h', token_bound_cidrs: 'a,,a'}}}}"), []byte{}, []byte{})
	f.Add([]byte("vault: &a {policies: *a}"), []byte(`[]`), []byte(`{"x": {"y": "\u0000"}}`))
	f.Fuzz(func(t *testing.T, config, grains, pillar []byte) {
		in := Input{Config: []File{{Name: "config", Data: config}}}
		if len(grains) > 0 {
			in.Grains = &File{Name: "grains", Data: grains}
		}
		if len(pillar) > 0 {
			in.Pillar = &File{Name: "pillar", Data: pillar}
		}
		out, err := Import(in, Options{})
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := out.WriteYAML(&buf); err != nil {
			t.Fatalf("writing: %v", err)
		}
		rendered, err := Check(buf.Bytes())
		if err != nil {
			t.Fatalf("the output does not read back: %v\n%s", err, buf.Bytes())
		}
		_ = Problems(rendered)
	})
}
