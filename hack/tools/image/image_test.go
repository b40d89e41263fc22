package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const testRef = "ghcr.io/minionvault/minion-vault-operator:v0.1.0-3-gabcdef0"

func testOptions() Options {
	return Options{
		// Not a real binary: the builder copies bytes, and these say where
		// they went wrong if they do.
		Binary:   []byte("\x7fELF minionvault test binary\x00\x01\x02"),
		Arch:     "amd64",
		Version:  "v0.1.0-3-gabcdef0",
		Revision: "abcdef0123456789abcdef0123456789abcdef01",
		Source:   "https://github.com/minionvault/minion-vault-operator",
		Created:  time.Unix(1764700000, 0),
	}
}

// build writes the image of o into a fresh folder and returns the result,
// the layout folder and the tar's bytes.
func build(t *testing.T, o Options) (Result, string, []byte) {
	t.Helper()
	dir := t.TempDir()
	lay, tarPath := filepath.Join(dir, "oci"), filepath.Join(dir, "image.tar")
	res, err := Write(o, testRef, lay, tarPath)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	return res, lay, b
}

func TestReproducible(t *testing.T) {
	a, layA, tarA := build(t, testOptions())
	b, layB, tarB := build(t, testOptions())
	if a.Digest != b.Digest {
		t.Errorf("two builds of the same input: digests %s and %s", a.Digest, b.Digest)
	}
	if sha256.Sum256(tarA) != sha256.Sum256(tarB) {
		t.Error("two builds of the same input: the tars differ")
	}
	for _, f := range []string{"index.json", "oci-layout"} {
		x, errA := os.ReadFile(filepath.Join(layA, f))
		y, errB := os.ReadFile(filepath.Join(layB, f))
		if err := errors.Join(errA, errB); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two builds:\n%s\n%s", f, x, y)
		}
	}

	// Each input is part of the digest: a change to any gives another one.
	changes := map[string]func(*Options){
		"binary":   func(o *Options) { o.Binary = append(o.Binary, 'x') },
		"arch":     func(o *Options) { o.Arch = "arm64" },
		"version":  func(o *Options) { o.Version = "v0.2.0" },
		"revision": func(o *Options) { o.Revision = strings.Repeat("1", 40) },
		"created":  func(o *Options) { o.Created = o.Created.Add(time.Second) },
	}
	for what, change := range changes {
		o := testOptions()
		change(&o)
		c, _, _ := build(t, o)
		if c.Digest == a.Digest {
			t.Errorf("another %s, the same digest %s", what, a.Digest)
		}
	}
}

func TestImage(t *testing.T) {
	o := testOptions()
	res, lay, _ := build(t, o)

	idx, err := layout.ImageIndexFromPath(lay)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index.json: %d manifests, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	if desc.Digest != res.Digest || desc.MediaType != types.OCIManifestSchema1 {
		t.Errorf("index.json: manifest %s %s, want %s %s", desc.MediaType, desc.Digest, types.OCIManifestSchema1, res.Digest)
	}
	for _, k := range []string{annotationContainerdName, annotationRefName} {
		if got := desc.Annotations[k]; got != testRef {
			t.Errorf("index.json: annotation %s = %q, want %q", k, got, testRef)
		}
	}
	if desc.Platform == nil || desc.Platform.OS != "linux" || desc.Platform.Architecture != "amd64" {
		t.Errorf("index.json: platform %+v, want linux/amd64", desc.Platform)
	}

	img, err := idx.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", c.User)
	}
	if !slices.Equal(c.Entrypoint, []string{"/minionvault"}) || !slices.Equal(c.Cmd, []string{"operator"}) {
		t.Errorf("entrypoint %q cmd %q, want [/minionvault] [operator] as in the Dockerfile", c.Entrypoint, c.Cmd)
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.source":   o.Source,
		"org.opencontainers.image.revision": o.Revision,
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.title":    "minion-vault-operator",
		"org.opencontainers.image.created":  "2025-12-02T18:26:40Z",
	}
	for k, v := range wantLabels {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || !cf.Created.Time.Equal(o.Created) {
		t.Errorf("config: %s/%s created %s", cf.OS, cf.Architecture, cf.Created)
	}
	for _, h := range cf.History {
		if !h.Created.Time.Equal(o.Created) {
			t.Errorf("history entry created %s, want %s", h.Created, o.Created)
		}
	}
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s", mt)
	}

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("layer media type %s, want %s", mt, types.OCILayer)
	}
	files := readLayer(t, layers[0], o.Created)
	if !bytes.Equal(files["minionvault"].data, o.Binary) || files["minionvault"].mode != 0o755 {
		t.Errorf("/minionvault: mode %o, %d bytes, want the binary with 0755", files["minionvault"].mode, len(files["minionvault"].data))
	}
	if !strings.Contains(string(files["etc/passwd"].data), "\nnonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd has no nonroot 65532:\n%s", files["etc/passwd"].data)
	}
	if !strings.Contains(string(files["etc/group"].data), "\nnonroot:x:65532:") {
		t.Errorf("/etc/group has no nonroot 65532:\n%s", files["etc/group"].data)
	}
	checkCABundle(t, files["etc/ssl/certs/ca-certificates.crt"].data)
}

// readLayer returns the layer's entries by name and checks what every entry
// must be: owned by root (but nonroot's home), with the build's mtime, in
// name order, and nothing but the expected files.
func readLayer(t *testing.T, l v1.Layer, mtime time.Time) map[string]entry {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]entry{}
	var names []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		files[h.Name] = entry{name: h.Name, mode: h.Mode, uid: h.Uid, gid: h.Gid, data: data, dir: h.Typeflag == tar.TypeDir}
		owner := [2]int{h.Uid, h.Gid}
		want := [2]int{0, 0}
		if h.Name == "home/nonroot/" {
			want = [2]int{65532, 65532}
		}
		if owner != want || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: owner %v %q:%q, want %v", h.Name, owner, h.Uname, h.Gname, want)
		}
		if !h.ModTime.Equal(mtime) {
			t.Errorf("%s: mtime %s, want %s", h.Name, h.ModTime, mtime)
		}
	}
	want := []string{
		"etc/", "etc/group", "etc/passwd", "etc/ssl/", "etc/ssl/certs/", "etc/ssl/certs/ca-certificates.crt",
		"home/", "home/nonroot/", "minionvault", "tmp/",
	}
	if !slices.Equal(names, want) {
		t.Errorf("layer entries\n%q\nwant\n%q", names, want)
	}
	return files
}

func checkCABundle(t *testing.T, b []byte) {
	t.Helper()
	n := 0
	for rest := b; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			if len(bytes.TrimSpace(rest)) != 0 {
				t.Errorf("CA bundle: %d bytes that are no PEM block", len(rest))
			}
			break
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			t.Errorf("CA bundle: certificate %d: %v", n, err)
		}
		n++
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Error("CA bundle: crypto/x509 takes no certificate from it")
	}
	// The Mozilla store has about 150 roots; far fewer means a broken bundle.
	if n < 100 {
		t.Errorf("CA bundle: %d certificates, want more than 100", n)
	}
}

// TestTar checks the tar that `ctr images import` reads: an OCI layout
// (oci-layout, index.json with the name, the blobs) with the same rules as
// the layer, and a manifest.json for `docker load`.
func TestTar(t *testing.T) {
	o := testOptions()
	res, lay, b := build(t, o)
	tr := tar.NewReader(bytes.NewReader(b))
	got := map[string][]byte{}
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(o.Created) {
			t.Errorf("%s: owner %d:%d mtime %s", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		got[h.Name] = data
	}
	if !slices.IsSorted(names) {
		t.Errorf("tar entries not sorted: %q", names)
	}
	for _, f := range []string{"oci-layout", "index.json"} {
		want, err := os.ReadFile(filepath.Join(lay, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[f], want) {
			t.Errorf("tar %s differs from the layout's", f)
		}
	}
	if _, ok := got[blobPath(res.Digest)]; !ok {
		t.Errorf("tar has no manifest blob %s", blobPath(res.Digest))
	}
	var m []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(got["manifest.json"], &m); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	if len(m) != 1 || !slices.Equal(m[0].RepoTags, []string{testRef}) || len(m[0].Layers) != 1 {
		t.Fatalf("manifest.json: %+v", m)
	}
	for _, p := range append([]string{m[0].Config}, m[0].Layers...) {
		if _, ok := got[p]; !ok {
			t.Errorf("manifest.json names %s, which the tar lacks", p)
		}
	}
}

func TestNormalizeRef(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{testRef, testRef},
		{"registry.example.com:5000/team/op:v1", "registry.example.com:5000/team/op:v1"},
		{"localhost/op:dev", "localhost/op:dev"},
		{"op:v1", "docker.io/library/op:v1"},
		{"team/op:v1", "docker.io/team/op:v1"},
		{"docker.io/team/op:v1", "docker.io/team/op:v1"},
		{"ghcr.io/minionvault/minion-vault-operator", ""},         // no tag
		{"localhost:5000/op", ""},                                 // a port is no tag
		{"ghcr.io/x/op:v1@sha256:" + strings.Repeat("a", 64), ""}, // a digest cannot be built
		{"Upper/op:v1", ""},
	} {
		got, err := normalizeRef(tc.in)
		if tc.want == "" {
			if err == nil {
				t.Errorf("normalizeRef(%q) = %q, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("normalizeRef(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// TestMatchesDockerfile keeps the two ways to build the image in step: the
// Dockerfile's USER, ENTRYPOINT and CMD are the builder's.
func TestMatchesDockerfile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && (k == "USER" || k == "ENTRYPOINT" || k == "CMD") {
			got[k] = strings.TrimSpace(v)
		}
	}
	jsonList := func(l []string) string {
		b, _ := json.Marshal(l)
		return strings.ReplaceAll(string(b), ",", ", ")
	}
	want := map[string]string{"USER": user, "ENTRYPOINT": jsonList(entrypoint), "CMD": jsonList(cmd)}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("Dockerfile %s %s, the builder has %s", k, got[k], v)
		}
	}
}
