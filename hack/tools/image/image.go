package main

import (
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Options is everything an image is made of: the same Options give the same
// digest.
type Options struct {
	Binary   []byte    // the static linux binary, installed as /minionvault
	Arch     string    // GOARCH of the binary
	Version  string    // the version stamped into the binary
	Revision string    // the git commit
	Source   string    // the repository's URL
	Created  time.Time // SOURCE_DATE_EPOCH: every timestamp in the image
}

// The image's process, as in the Dockerfile: keep them the same.
var (
	entrypoint = []string{"/minionvault"}
	cmd        = []string{"operator"}
	user       = fmt.Sprintf("%d:%d", nonrootUID, nonrootGID)
	env        = []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		// Go finds this file by itself; other TLS stacks look here.
		"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
	}
)

const title = "minion-vault-operator"

// labels are the OCI annotations the Dockerfile sets too.
func (o Options) labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    title,
		"org.opencontainers.image.source":   o.Source,
		"org.opencontainers.image.revision": o.Revision,
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.created":  o.Created.UTC().Format(time.RFC3339),
	}
}

func (o Options) platform() v1.Platform {
	return v1.Platform{OS: "linux", Architecture: o.Arch}
}

// Build returns the image: one layer (see rootfs), an OCI manifest and
// config, every time set to o.Created.
func Build(o Options) (v1.Image, error) {
	if len(o.Binary) == 0 {
		return nil, fmt.Errorf("image: no binary")
	}
	if o.Arch == "" || o.Version == "" || o.Revision == "" || o.Source == "" {
		return nil, fmt.Errorf("image: arch, version, revision and source are required")
	}
	created := o.Created.UTC()
	entries, err := rootfs(o.Binary)
	if err != nil {
		return nil, err
	}
	layer, err := newLayer(entries, created)
	if err != nil {
		return nil, err
	}
	p := o.platform()
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Architecture: p.Architecture,
		OS:           p.OS,
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			User:       user,
			Entrypoint: entrypoint,
			Cmd:        cmd,
			Env:        env,
			WorkingDir: "/",
			Labels:     o.labels(),
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, fmt.Errorf("image: config: %w", err)
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "make image (hack/tools/image)",
			Comment:   "minionvault, CA certificates, passwd and group",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	// empty.Image is a Docker schema 2 image; the layout and containerd
	// take either, OCI is the standard.
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	return img, nil
}
