package main

import (
	"bytes"
	"encoding/pem"
	"fmt"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The image's user: distroless' "nonroot", numeric so that Kubernetes'
// runAsNonRoot can check it without reading /etc/passwd.
const (
	nonrootUID = 65532
	nonrootGID = 65532
)

// passwd and group are distroless' (static-debian12), less the accounts no
// process of ours runs as. Go's os/user reads them; a process without an
// entry has no name and no home directory.
const passwd = `root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
`

const group = `root:x:0:
nobody:x:65534:
nonroot:x:65532:
`

// caBundle is the Mozilla (NSS) root store as the pinned module
// golang.org/x/crypto/x509roots/fallback carries it, in PEM: no network, and
// the same bytes for the same go.sum. Roots that NSS distrusts after a date
// are left out: a PEM file cannot carry that constraint, and trusting them
// without it would accept certificates NSS refuses.
func caBundle() ([]byte, int, error) {
	var buf bytes.Buffer
	n := 0
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		if err := pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate}); err != nil {
			return nil, 0, fmt.Errorf("encoding a root certificate: %w", err)
		}
		n++
	}
	if n == 0 {
		return nil, 0, fmt.Errorf("the fallback bundle has no unconstrained root")
	}
	return buf.Bytes(), n, nil
}

// rootfs is every entry of the image's one layer: the binary, the CA bundle,
// the accounts, and the directories that hold them. Nothing else: the
// operator writes nothing to disk (the Deployment mounts an emptyDir on /tmp
// for libraries that expect one; /tmp here serves `docker run`).
func rootfs(binary []byte) ([]entry, error) {
	ca, _, err := caBundle()
	if err != nil {
		return nil, err
	}
	return []entry{
		dir("etc/", 0o755),
		file("etc/group", 0o644, []byte(group)),
		file("etc/passwd", 0o644, []byte(passwd)),
		dir("etc/ssl/", 0o755),
		dir("etc/ssl/certs/", 0o755),
		file("etc/ssl/certs/ca-certificates.crt", 0o644, ca),
		dir("home/", 0o755),
		// The one entry not owned by root: nonroot's home, as in distroless.
		{name: "home/nonroot/", mode: 0o700, dir: true, uid: nonrootUID, gid: nonrootGID},
		file("minionvault", 0o755, binary),
		dir("tmp/", 0o1777),
	}, nil
}
