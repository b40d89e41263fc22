# syntax=docker/dockerfile:1
# The operator image: one static binary on a distroless, non-root base.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) --build-arg REVISION=$(git rev-parse HEAD) \
#     -t ghcr.io/minionvault/minion-vault-operator:<version> .
#
# No container engine runs on the project's build machines or in its CI, so
# this file is not built there; `make image` builds the same image without
# one (hack/tools/image: same binary flags, user, entrypoint, command and
# labels). See docs/operations.md.

# The build runs on the builder's platform and cross-compiles (no CGO), so a
# multi-platform build (--platform linux/amd64,linux/arm64) needs no emulation.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
# .dockerignore lets in only the Go sources of the binary (no tests, no bin/).
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -gcflags=all=-dwarf=false \
      -ldflags "-s -w -X github.com/minionvault/minion-vault-operator/internal/version.Version=${VERSION}" \
      -o /out/minionvault ./cmd/minionvault

# static: no libc, no shell, no package manager; nonroot: UID/GID 65532.
FROM gcr.io/distroless/static-debian12:nonroot
# The same labels as `make image` (hack/tools/image) sets.
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="minion-vault-operator" \
      org.opencontainers.image.source="https://github.com/minionvault/minion-vault-operator" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/minionvault /minionvault
# Numeric, so that Kubernetes' runAsNonRoot can verify it.
USER 65532:65532
ENTRYPOINT ["/minionvault"]
CMD ["operator"]
