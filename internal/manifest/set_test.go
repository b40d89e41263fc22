package manifest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/minionvault/minion-vault-operator/internal/testing/samples"
)

// A large manifest file parsed in pieces gives the documents of one parse.
func TestParseManifestPieces(t *testing.T) {
	dir := t.TempDir()
	samples.WriteFleet(t, dir, 3000, false)
	data, err := os.ReadFile(filepath.Join(dir, "bindings.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// A block scalar and a "---" that is not a marker, near every cut.
	data = bytes.ReplaceAll(data, []byte("    env: prod\n"), []byte("    env: prod\n    note: |\n      ---x\n      ----\n"))
	if pieces := splitDocuments(data, 4); len(pieces) < 2 {
		t.Fatalf("%d pieces", len(pieces))
	}
	for _, n := range []int{2, 3, 4} {
		pieces := splitDocuments(data, n)
		if !bytes.Equal(bytes.Join(pieces, nil), data) {
			t.Fatalf("%d: the pieces are not the file", n)
		}
		for _, p := range pieces[1:] {
			if !bytes.HasPrefix(p, []byte("---\n")) {
				t.Fatalf("%d: a piece starts with %q", n, p[:10])
			}
		}
	}
	whole, err := parseManifestPiece(data)
	if err != nil {
		t.Fatal(err)
	}
	split, err := parseManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(whole) != len(split) || len(whole) != 3000 {
		t.Fatalf("%d documents in one parse, %d in pieces", len(whole), len(split))
	}
	for i := range whole {
		a, b := whole[i], split[i]
		if a.Kind != b.Kind || a.meta.Name != b.meta.Name || string(a.Value.AppendJSON(nil)) != string(b.Value.AppendJSON(nil)) || a.binding.Spec.MinionID != b.binding.Spec.MinionID {
			t.Fatalf("document %d differs", i)
		}
	}
	// An error in a piece is the error of the whole file.
	bad := bytes.Replace(data, []byte("  pillar:\n"), []byte("  pillar: [\n"), 1)
	_, errWhole := parseManifestPiece(bad)
	_, errSplit := parseManifest(bad)
	if errWhole == nil || errSplit == nil || errWhole.Error() != errSplit.Error() {
		t.Fatalf("errors: %v; %v", errWhole, errSplit)
	}
	if !strings.Contains(errSplit.Error(), "line ") {
		t.Errorf("error without its line: %v", errSplit)
	}
}

// A binding's metadata is taken from its strict decoding: what the lenient
// decoding of any other document finds, and the same error first.
func TestParsedBindingMetadata(t *testing.T) {
	for _, text := range []string{
		"kind: MinionBinding\napiVersion: minionvault.dev/v1alpha1\nmetadata:\n  name: web01\n  labels: {a: b}\nspec:\n  minionID: web01\n  templateRef: {name: t}\n",
		"kind: MinionBinding\napiVersion: minionvault.dev/v1alpha1\nmetadata:\n  Name: web02\n  namespace: prod\nspec:\n  minionID: web02\n  templateRef: {name: t}\n",
		"kind: MinionBinding\nmetadata:\n  name: typo\nspec:\n  minionId: x\n",
		"kind: MinionBinding\nmetadata:\n  name: 5\n",
	} {
		got, err := parseManifestPiece([]byte(text))
		if err != nil || len(got) != 1 {
			t.Fatalf("%q: %v", text, err)
		}
		docs, err := Parse([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		var want struct{ Metadata docMeta }
		wantErr := json.Unmarshal(docs[0].Value.AppendJSON(nil), &want)
		pd := got[0]
		switch {
		case wantErr != nil:
			if pd.metaErr == nil || pd.metaErr.Error() != wantErr.Error() {
				t.Errorf("%q: metadata error %v, want %v", text, pd.metaErr, wantErr)
			}
		case pd.metaErr != nil || !reflect.DeepEqual(pd.meta, want.Metadata):
			t.Errorf("%q: metadata %+v (%v), want %+v", text, pd.meta, pd.metaErr, want.Metadata)
		case (pd.binding == nil) == (pd.decErr == nil):
			t.Errorf("%q: binding %v, error %v", text, pd.binding, pd.decErr)
		}
	}
}
