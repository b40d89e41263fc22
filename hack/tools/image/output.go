package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// Annotations of index.json that name the image. containerd's importer
// (client/import.go, imageName) takes io.containerd.image.name as it is and
// otherwise org.opencontainers.image.ref.name, which `ctr images import`
// prefixes with "import-<date>" unless it holds a full reference; both
// carry the full, normalized reference, so the image keeps its name.
const (
	annotationContainerdName = "io.containerd.image.name"
	annotationRefName        = "org.opencontainers.image.ref.name"
)

// normalizeRef spells a reference the way containerd's CRI stores images
// (github.com/distribution/reference's ParseNormalizedNamed): Docker Hub
// names in full, docker.io/library/ for official images. Kubelet asks for
// them that way, so an imported image must carry that name to be found.
func normalizeRef(ref string) (string, error) {
	// go-containerregistry fills in a missing tag with "latest"; an image
	// built from a commit must say which version it is.
	if !strings.Contains(ref[strings.LastIndex(ref, "/")+1:], ":") {
		return "", fmt.Errorf("image reference %q: a tag is required (name:tag)", ref)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return "", fmt.Errorf("image reference %q: %w", ref, err)
	}
	// Name spells Docker Hub index.docker.io and adds library/; containerd
	// says docker.io.
	s := tag.Name()
	if rest, ok := strings.CutPrefix(s, name.DefaultRegistry+"/"); ok {
		s = "docker.io/" + rest
	}
	return s, nil
}

// writeLayout writes an OCI image layout holding the image under ref,
// replacing whatever dir held.
func writeLayout(dir string, img v1.Image, ref string, p v1.Platform) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("layout: %w", err)
	}
	idx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{
		Add: img,
		Descriptor: v1.Descriptor{
			Platform: &p,
			Annotations: map[string]string{
				annotationContainerdName: ref,
				annotationRefName:        ref,
			},
		},
	})
	if _, err := layout.Write(dir, idx); err != nil {
		return fmt.Errorf("layout %s: %w", dir, err)
	}
	return nil
}

// dockerManifest is the manifest.json of `docker save`: with it the same
// tar also loads with `docker load` (Docker 25 and later read index.json;
// older ones only this). containerd prefers the OCI layout when both exist.
func dockerManifest(img v1.Image, ref string) ([]byte, error) {
	cfg, err := img.ConfigName()
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	type item struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	it := item{Config: blobPath(cfg), RepoTags: []string{ref}}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return nil, err
		}
		it.Layers = append(it.Layers, blobPath(d))
	}
	return json.Marshal([]item{it})
}

func blobPath(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

// writeTar writes the layout folder as one tar (plus manifest.json), the
// form `ctr images import` and `docker load` take, with the same rules as
// the layer: sorted names, owner 0:0, fixed modes, mtime.
func writeTar(out, layoutDir string, manifest []byte, mtime time.Time) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(out), ".image-*.tar")
	if err != nil {
		return fmt.Errorf("tar: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	var entries []entry
	err = filepath.WalkDir(layoutDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == layoutDir {
			return err
		}
		rel, err := filepath.Rel(layoutDir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			entries = append(entries, dir(rel+"/", 0o755))
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		entries = append(entries, file(rel, 0o644, b))
		return nil
	})
	if err != nil {
		return fmt.Errorf("tar: reading %s: %w", layoutDir, err)
	}
	entries = append(entries, file("manifest.json", 0o644, manifest))
	if err := layerTar(tmp, entries, mtime); err != nil {
		return fmt.Errorf("tar %s: %w", out, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("tar: %w", err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("tar: %w", err)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return fmt.Errorf("tar: %w", err)
	}
	return nil
}

// Result is what Write made.
type Result struct {
	Ref    string  // the normalized reference the image is named by
	Digest v1.Hash // the manifest's digest: what ref@digest pins
}

// Write builds the image from o and writes it as an OCI layout to
// layoutDir and, when tarPath is set, as a tar of that layout.
func Write(o Options, ref, layoutDir, tarPath string) (Result, error) {
	nref, err := normalizeRef(ref)
	if err != nil {
		return Result{}, err
	}
	img, err := Build(o)
	if err != nil {
		return Result{}, err
	}
	d, err := img.Digest()
	if err != nil {
		return Result{}, fmt.Errorf("image digest: %w", err)
	}
	if err := writeLayout(layoutDir, img, nref, o.platform()); err != nil {
		return Result{}, err
	}
	if tarPath != "" {
		m, err := dockerManifest(img, nref)
		if err != nil {
			return Result{}, fmt.Errorf("manifest.json: %w", err)
		}
		if err := writeTar(tarPath, layoutDir, m, o.Created.UTC()); err != nil {
			return Result{}, err
		}
	}
	return Result{Ref: nref, Digest: d}, nil
}
