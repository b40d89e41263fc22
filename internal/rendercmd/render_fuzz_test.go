package rendercmd

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/minionvault/minion-vault-operator/internal/manifest"
)

// FuzzRender drives the whole offline render (manifests → API types →
// template compile → render → guard rails → output) with arbitrary
// template and binding manifests: no input may panic, and whatever renders
// must be printable.
//
//	go test -run='^$' -fuzz='^FuzzRender$' -fuzztime=30s ./internal/rendercmd
func FuzzRender(f *testing.F) {
	samples := filepath.Join("..", "..", "config", "samples")
	tpl, _ := os.ReadFile(filepath.Join(samples, "miniontemplate.yaml"))
	for _, b := range []string{"minionbinding-web01.yaml", "minionbinding-db01.yaml", "minionbinding-build01.yaml"} {
		bnd, _ := os.ReadFile(filepath.Join(samples, b))
		f.Add(tpl, bnd)
	}
	f.Add([]byte("kind: MinionTemplate\nmetadata: {name: t}\nspec:\n  policies: {assign: ['{pillar[a]!r:>{pillar[w]}}', 'x_{grains[id]}']}\n  metadata: {entity: {k: '{pillar[a]}'}}\n"),
		[]byte("kind: MinionBinding\nmetadata: {name: b}\nspec: {minionID: m, templateRef: {name: t}, grains: {id: m}, pillar: {a: [1, 2.5, '*'], w: 3}}\n"))
	f.Add([]byte("kind: MinionTemplate\nmetadata: {name: t}\nspec:\n  parameters: {root: f, files: {f/parameters/defaults.yaml: {values: {a: 1}}}}\n  policies: {assign: ['p_{mapdata[a]}']}\n"),
		[]byte("kind: MinionBinding\nmetadata: {name: b}\nspec: {minionID: m, templateRef: {name: t}, config: {f: {map_jinja: {sources: ['Y:G@os']}}}}\n"))
	f.Fuzz(func(t *testing.T, template, binding []byte) {
		tdoc, err := manifest.FindIn(template, "template", "MinionTemplate")
		if err != nil {
			return
		}
		bdoc, err := manifest.FindIn(binding, "binding", "MinionBinding")
		if err != nil {
			return
		}
		res, violations, err := Render(Options{Template: "template", Binding: "binding"}, tdoc, bdoc, nil)
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := Write(&out, Output(res, violations), "json"); err != nil {
			t.Fatalf("rendered but cannot print: %v", err)
		}
	})
}
