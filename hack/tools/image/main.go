// Command image-builder builds the operator's OCI image without a container
// engine, reproducibly: the same binary and flags give the same digest.
// `make image` builds the static binary and runs it:
//
//	image-builder --binary bin/image/minionvault-linux-amd64 --arch amd64 \
//	  --ref ghcr.io/minionvault/minion-vault-operator:v0.1.0 --version v0.1.0 \
//	  --revision $(git rev-parse HEAD) --source-date-epoch $(git log -1 --format=%ct) \
//	  --layout bin/image/oci --tar bin/image/minion-vault-operator.tar
//
// The image is what the Dockerfile builds on distroless static:nonroot,
// less what the operator does not use: one layer with /minionvault, the
// Mozilla CA bundle, /etc/passwd and /etc/group with nonroot (65532).
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image-builder:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image-builder", flag.ContinueOnError)
	var (
		binary    = fs.String("binary", "", "the static linux binary to install as /minionvault")
		arch      = fs.String("arch", "amd64", "its GOARCH")
		ref       = fs.String("ref", "", "the image reference, name:tag")
		version   = fs.String("version", "", "the version stamped into the binary (org.opencontainers.image.version)")
		revision  = fs.String("revision", "", "the git commit (org.opencontainers.image.revision)")
		source    = fs.String("source", "https://github.com/minionvault/minion-vault-operator", "the repository (org.opencontainers.image.source)")
		epoch     = fs.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "every timestamp in the image, in seconds since 1970 (default $SOURCE_DATE_EPOCH)")
		layoutDir = fs.String("layout", "", "the OCI image layout folder to write (replaced)")
		tarPath   = fs.String("tar", "", "the tar of that layout to write, for `ctr images import` and `docker load`")
		digestOut = fs.String("digest-file", "", "also write the manifest digest to this file")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *binary == "" || *ref == "" || *layoutDir == "" {
		return fmt.Errorf("--binary, --ref and --layout are required")
	}
	// A missing epoch would be a silent "now" in other tools; here it is an
	// error, since it decides the digest.
	secs, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("--source-date-epoch %q: %w", *epoch, err)
	}
	bin, err := os.ReadFile(*binary)
	if err != nil {
		return fmt.Errorf("binary: %w", err)
	}
	o := Options{
		Binary: bin, Arch: *arch, Version: *version, Revision: *revision, Source: *source,
		Created: time.Unix(secs, 0),
	}
	res, err := Write(o, *ref, *layoutDir, *tarPath)
	if err != nil {
		return err
	}
	if *digestOut != "" {
		if err := os.WriteFile(*digestOut, []byte(res.Digest.String()+"\n"), 0o644); err != nil {
			return fmt.Errorf("digest file: %w", err)
		}
	}
	fmt.Printf(">> image %s (linux/%s, %s)\n", res.Ref, o.Arch, o.Created.UTC().Format(time.RFC3339))
	fmt.Printf(">> digest %s\n", res.Digest)
	fmt.Printf(">> OCI layout %s\n", *layoutDir)
	if *tarPath != "" {
		fmt.Printf(">> tar %s (ctr -n k8s.io images import %s)\n", *tarPath, *tarPath)
	}
	return nil
}
