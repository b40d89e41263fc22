// The node's sandbox (pause) image for internal/localenv (see main.go).
module github.com/minionvault/minion-vault-operator/hack/tools/pause

go 1.26.8

require github.com/google/go-containerregistry v0.22.1

require (
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
)
