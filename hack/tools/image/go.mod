// Builds the operator's OCI image without a container engine (see
// hack/tools/image/main.go and `make image`).
module github.com/minionvault/minion-vault-operator/hack/tools/image

go 1.26.8

require (
	github.com/google/go-containerregistry v0.22.1
	golang.org/x/crypto/x509roots/fallback v0.0.0-20261030153154-30a33513ff6d
)

require (
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
