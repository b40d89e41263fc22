// Command pause-image writes the node's sandbox image: one layer holding a
// static pause binary as /pause, as an image tar that `ctr images import`
// reads. No registry is reachable from the project's machines, so
// internal/localenv imports this image into containerd and pins it as the
// CRI sandbox image. hack/tools/build.sh pause builds both.
//
//	pause-image --binary bin/.build/pause --ref localhost/minionvault/pause:v1 --tar bin/pause-image.tar
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "pause-image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("pause-image", flag.ContinueOnError)
	binary := fs.String("binary", "", "the static pause binary")
	ref := fs.String("ref", "", "the image reference, name:tag")
	out := fs.String("tar", "", "the image tar to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *binary == "" || *ref == "" || *out == "" {
		return fmt.Errorf("--binary, --ref and --tar are required")
	}
	tag, err := name.NewTag(*ref)
	if err != nil {
		return fmt.Errorf("--ref: %w", err)
	}
	bin, err := os.ReadFile(*binary)
	if err != nil {
		return err
	}
	img, err := build(bin)
	if err != nil {
		return err
	}
	tmp := *out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		return fmt.Errorf("writing %s: %w", *out, err)
	}
	if err := os.Rename(tmp, *out); err != nil {
		return err
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf(">> %s %s in %s\n", tag, d, *out)
	return nil
}

// build makes the image: /pause, run as the nobody user (65535, as
// Kubernetes' own pause image), every timestamp the epoch so that the
// same binary gives the same digest.
func build(bin []byte) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{
		Name: "pause", Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg,
		ModTime: time.Unix(0, 0), Format: tar.FormatPAX,
	}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = runtime.GOARCH, "linux"
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config.Entrypoint = []string{"/pause"}
	cf.Config.User = "65535:65535"
	return mutate.ConfigFile(img, cf)
}
