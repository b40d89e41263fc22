package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one file or directory of a layer.
type entry struct {
	name     string // relative, directories end in "/"
	mode     int64
	dir      bool
	uid, gid int
	data     []byte
}

func dir(name string, mode int64) entry { return entry{name: name, mode: mode, dir: true} }

func file(name string, mode int64, data []byte) entry {
	return entry{name: name, mode: mode, data: data}
}

// layerTar writes the entries as a tar that depends on nothing but them and
// mtime: sorted by name (so parents come before children), USTAR headers
// with no user or group names, the given mode, owner and mtime, and no
// access or change times.
func layerTar(w io.Writer, entries []entry, mtime time.Time) error {
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	tw := tar.NewWriter(w)
	for i, e := range sorted {
		if i > 0 && sorted[i-1].name == e.name {
			return fmt.Errorf("layer: %s twice", e.name)
		}
		h := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: mtime,
			Format:  tar.FormatUSTAR,
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("layer: header of %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return fmt.Errorf("layer: %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("layer: %w", err)
	}
	return nil
}

// gzipBytes compresses with the standard library at a fixed level and with
// an empty gzip header (no name, no mtime), so the same input gives the same
// bytes with the same Go toolchain (the tool module's go.mod pins it).
func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return buf.Bytes(), nil
}

// newLayer builds the layer in memory and compresses it here rather than
// letting go-containerregistry do it, so that the compressed bytes (and so
// the layer digest) are ours to keep stable.
func newLayer(entries []entry, mtime time.Time) (v1.Layer, error) {
	var raw bytes.Buffer
	if err := layerTar(&raw, entries, mtime); err != nil {
		return nil, err
	}
	gz, err := gzipBytes(raw.Bytes())
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return layer, nil
}
