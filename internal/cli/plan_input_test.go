package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A large manifest file parsed in pieces gives the documents of one parse.
func TestParseManifestPieces(t *testing.T) {
	dir := t.TempDir()
	writeBenchManifests(t, dir, 3000, false)
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
