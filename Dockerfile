# syntax=docker/dockerfile:1
# The operator image: one static binary on a distroless, non-root base.
# (No container engine runs on the project's build machines; `make build`
# builds the same binary, and CI tests it.)

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
COPY pkg/ pkg/
ARG VERSION=dev
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath \
      -ldflags "-s -w -X github.com/minionvault/minion-vault-operator/internal/version.Version=${VERSION}" \
      -o /out/minionvault ./cmd/minionvault

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/minionvault /minionvault
USER 65532:65532
ENTRYPOINT ["/minionvault"]
