# minion-vault-operator: the front door. Every target works from a clean clone
# with nothing but Go installed.

SHELL := /usr/bin/env bash -o pipefail
export PATH := /usr/local/go/bin:$(PATH)

BIN        ?= $(CURDIR)/bin
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS    := -s -w -X github.com/minionvault/minion-vault-operator/internal/version.Version=$(VERSION)
IMG        ?= ghcr.io/minionvault/minion-vault-operator:$(VERSION)
# Fuzzing budgets are execution counts (5 to 10 s each on the project's
# machine), not durations: with a duration, Go 1.26's fuzz coordinator can
# fail a run that found nothing at its deadline (go.dev/issue/75804).
# FUZZTIME=30s (or 1000000x) sets one budget for every target.
FUZZTIME   ?=
# Minimizing each new input for the default 60 s would use up a short
# budget on one input: 1 s keeps the run fuzzing.
FUZZFLAGS  ?= -fuzzminimizetime=1s
fuzz-target = go test -run='^$$' -fuzz='^$(1)$$' -fuzztime=$(or $(FUZZTIME),$(3)) $(FUZZFLAGS) $(2)
VECTOR_TOOL ?= ../shared/tools/run_vectors.py

# One way of compiling for everything but the race detector: no cgo,
# -trimpath and no DWARF, as hack/tools/build.sh builds the tools and `make
# image` the image. The packages the operator shares with kube-apiserver and
# the node components (785 of its 902) are then compiled once for `make
# run`, lint, the integration suites and the tools, not once per setting.
# No DWARF: the binaries link with -s -w, which drops it anyway, so the
# compiler need not write it: 8 to 15 % of a cold build's CPU (the standard
# library 8 %, kubectl 15 %, `make run` side by side with the old setting
# 8 %; docs/development.md), and the operator's functions disassemble the
# same either way. Test binaries lose
# only what a debugger reads: stack traces and the race detector use the
# runtime's own tables. For a debugger, build outside make.
export CGO_ENABLED ?= 0
GCFLAGS := -dwarf=false
export GOFLAGS := -trimpath -gcflags=all=$(GCFLAGS) $(GOFLAGS)

.DEFAULT_GOAL := all
include hack/tools.mk

.PHONY: all
all: build

##@ Build

.PHONY: build
build: ## Build bin/minionvault.
	go build -ldflags '$(LDFLAGS)' -o $(BIN)/minionvault ./cmd/minionvault

.PHONY: build-installer
build-installer: $(KUBECTL) ## Render dist/install.yaml (CRDs, RBAC, the manager) with the image IMG.
	@mkdir -p dist; tmp="$$(mktemp -d dist/.installer.XXXXXX)"; trap 'rm -rf "$$tmp"' EXIT; \
	img='$(IMG)'; ref=; \
	case "$$img" in *@*) ref="digest: \"$${img#*@}\""; img="$${img%%@*}";; esac; \
	case "$${img##*/}" in *:*) [ -n "$$ref" ] || ref="newTag: \"$${img##*:}\""; img="$${img%:*}";; esac; \
	printf 'resources:\n  - ../../config/default\nimages:\n  - name: ghcr.io/minionvault/minion-vault-operator\n    newName: "%s"\n    %s\n' \
	  "$$img" "$${ref:-newTag: \"latest\"}" > "$$tmp/kustomization.yaml"; \
	$(KUBECTL) kustomize "$$tmp" > "$$tmp/install.yaml" && mv "$$tmp/install.yaml" dist/install.yaml
	@echo ">> dist/install.yaml: image $(IMG)"

# The image: built without a container engine by hack/tools/image from the
# same static binary as the Dockerfile's, reproducibly (the same commit gives
# the same digest): -buildvcs=false keeps the checkout's state out of the
# binary (the commit is in the image's labels), and every timestamp is
# SOURCE_DATE_EPOCH, by default the commit's time.
GOARCH        ?= amd64
IMAGE_DIR     ?= $(BIN)/image
IMAGE_TAR     ?= $(IMAGE_DIR)/minion-vault-operator.tar
IMAGE_EPOCH   ?= $(or $(SOURCE_DATE_EPOCH),$(shell git log -1 --format=%ct 2>/dev/null),0)
IMAGE_COMMIT  ?= $(or $(shell git rev-parse HEAD 2>/dev/null),unknown)

.PHONY: image
image: $(IMAGE_BUILDER) ## Build the operator's OCI image IMG for linux/GOARCH without Docker: bin/image/oci/ and bin/image/minion-vault-operator.tar (ctr images import).
	@rm -rf $(IMAGE_DIR); mkdir -p $(IMAGE_DIR)
	CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH) go build -trimpath -buildvcs=false -ldflags '$(LDFLAGS)' \
	  -o $(IMAGE_DIR)/minionvault-linux-$(GOARCH) ./cmd/minionvault
	$(IMAGE_BUILDER) --binary $(IMAGE_DIR)/minionvault-linux-$(GOARCH) --arch $(GOARCH) --ref '$(IMG)' \
	  --version '$(VERSION)' --revision '$(IMAGE_COMMIT)' --source-date-epoch '$(IMAGE_EPOCH)' \
	  --layout $(IMAGE_DIR)/oci --tar $(IMAGE_TAR) --digest-file $(IMAGE_DIR)/digest

# The tools `make run` needs: the servers. kubectl, to explore with, is
# `make kubectl`; controller-gen is only for `make generate`.
RUN_TOOLS := $(KUBE_APISERVER) $(ETCD) $(VAULT)
RUN_ARGS  ?=
# The first run builds kube-apiserver and etcd in one go build while Vault's
# source and modules download (network, little CPU), then Vault beside the
# operator: both share most of their packages with kube-apiserver (Vault's
# minimal build through hack/tools/vault/v1.21.4/minimal.mod), which are then in the
# build cache. Built side by side with kube-apiserver, they compiled them a
# second time. docs/development.md has the times.
RUN_JOBS  ?= 2

.PHONY: run
run: ## The main job, the local quickstart: kube-apiserver + etcd and Vault on loopback, the operator, the samples, until Ctrl-C (RUN_ARGS=--once to stop after printing).
	@$(call first-build-notice,$(RUN_TOOLS))
	@$(MAKE) --no-print-directory -j$(RUN_JOBS) k8s-servers vault-fetch
	@$(MAKE) --no-print-directory -j$(RUN_JOBS) $(VAULT) build
	$(BIN)/minionvault dev --tools-dir $(BIN) $(RUN_ARGS)

.PHONY: render-samples
render-samples: build ## Render the samples offline: what the operator would write to Vault for web01 (no servers).
	$(BIN)/minionvault render --template config/samples/miniontemplate.yaml --binding config/samples/minionbinding-web01.yaml

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate deep-copy code and CRDs from the API types.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths=./controllers/... output:rbac:artifacts:config=config/rbac

.PHONY: verify-generated
verify-generated: generate ## Fail when generated files differ from the API types.
	@git diff --exit-code -- api config/crd config/rbac || { echo "generated files are stale: run 'make generate' and commit"; exit 1; }

# The Helm chart's templates and values.yaml are generated from the
# kustomize output of config/default (hack/chart), so that config/ stays the
# one source of the installation: the chart renders, with default values,
# the objects of dist/install.yaml (test/chart compares them).
.PHONY: chart
chart: $(KUBECTL) ## Regenerate charts/minion-vault-operator's templates and values.yaml from config/.
	go run ./hack/chart -kubectl $(KUBECTL) -config config/default -out charts/minion-vault-operator

.PHONY: verify-chart
verify-chart: chart ## Fail when the chart is stale against config/.
	@git diff --exit-code -- charts && test -z "$$(git status --porcelain -- charts)" || { git status --short -- charts; echo "the chart is stale: run 'make chart' and commit"; exit 1; }

.PHONY: fmt
fmt: ## gofmt every file.
	gofmt -w $$(git ls-files '*.go')

.PHONY: lint
lint: ## go vet, and gofmt must have nothing to say.
	@# One go vet, with the integration tag: it sees every file the untagged
	@# build has and the integration suites' too, as long as no file is
	@# excluded by the tag (checked here). An untagged one before it, which
	@# checked no file this one does not, took 88 s of a first make test.
	@if files=$$(git grep -l -E '^//go:build.*!$(INTEGRATION_TAGS)\b' -- '*.go'); then \
	  echo "lint: vet runs with -tags $(INTEGRATION_TAGS) only, so these files would go unvetted: $$files" >&2; exit 1; fi
	go vet -tags $(INTEGRATION_TAGS) ./...
	cd hack/tools/image && GOWORK=off GOFLAGS="$$GOFLAGS -mod=readonly" go vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi

##@ Test

.PHONY: test
test: host-packages lint verify-generated verify-chart unit fuzz vectors integration compat ## Everything CI runs (builds the test tools first).

.PHONY: host-packages
host-packages: ## The node's two host packages (libseccomp headers, nft): installed as root with apt, otherwise named.
	@hack/host-packages.sh

# The race detector's build shares no compiled package with any other (every
# package, the standard library too, is instrumented), so on a first run it
# is a whole second compile of the operator's dependencies. Without inlining
# (-l) its compile took 7.5 % less CPU, side by side with one that inlines
# (docs/development.md), and the tests check the same code; no test here
# counts allocations, which inlining would change. The -gcflags here
# replaces GOFLAGS' (the last one wins), so it repeats GCFLAGS.
RACE_FLAGS ?= -race '-gcflags=all=$(GCFLAGS) -l'

# PROMTOOL: internal/testing/alerting's TestPromtool checks and unit-tests the
# alerting rules with it, and fails when it is named but missing (a bare
# `go test ./...` without it skips that test).
.PHONY: unit
unit: $(PROMTOOL) ## Unit tests, with the race detector (which needs cgo).
	PROMTOOL=$(PROMTOOL) CGO_ENABLED=1 go test $(RACE_FLAGS) -count=1 ./...
	cd hack/tools/image && CGO_ENABLED=1 GOWORK=off GOFLAGS="$$GOFLAGS -mod=readonly" go test $(RACE_FLAGS) -count=1 ./...

.PHONY: alerts
alerts: $(PROMTOOL) ## promtool check rules and promtool test rules on config/prometheus (a test per alert), and the dashboard's queries.
	PROMTOOL=$(PROMTOOL) go test -count=1 -v -run 'TestPromtool|TestEveryAlert|TestDashboard|TestMetricNames' ./internal/testing/alerting

.PHONY: fuzz
fuzz: ## Run every fuzz target briefly (a count each, or FUZZTIME).
	$(call fuzz-target,FuzzExpand,./pkg/template,300000x)
	$(call fuzz-target,FuzzMetadata,./pkg/template,300000x)
	$(call fuzz-target,FuzzAppendFormat,./pkg/template,400000x)
	$(call fuzz-target,FuzzParseSource,./pkg/parameters,300000x)
	$(call fuzz-target,FuzzStack,./pkg/parameters,100000x)
	$(call fuzz-target,FuzzDecodeYAML,./pkg/value,200000x)
	$(call fuzz-target,FuzzImportConfig,./internal/importer,15000x)
	$(call fuzz-target,FuzzRender,./internal/rendercmd,2000x)
	$(call fuzz-target,FuzzParseAndCheck,./pkg/acl,200000x)
	$(call fuzz-target,FuzzParseMarker,./pkg/ownership,200000x)
	$(call fuzz-target,FuzzDecode,./pkg/ownership,100000x)
	$(call fuzz-target,FuzzProveRoleID,./pkg/ownership,100000x)
	$(call fuzz-target,FuzzParseHeader,./pkg/ownership,100000x)
	$(call fuzz-target,FuzzParseIssueParams,./internal/saltext,50000x)
	$(call fuzz-target,FuzzMasterCheck,./internal/mastercheck,20000x)

# The compatibility suite: the same tests against every Vault line the
# project supports (pkg/vault/tested-versions.txt, built by `make vaults`),
# one server at a time, with a table of each line's result and time in
# bin/compat/report.md (docs/compatibility.md).
.PHONY: compat
compat: integration-tools ## The compatibility suite against every tested Vault line; COMPAT_LINES="v1.19.5 v1.20.4" for some.
	@BIN=$(BIN) hack/compat.sh

.PHONY: vectors
vectors: build ## Also run the vectors through the project's reference runner, when ../shared has it.
	@if [ -f $(VECTOR_TOOL) ]; then \
	  python3 $(VECTOR_TOOL) $(BIN)/minionvault templating pkg/template/testdata/templating.json && \
	  python3 $(VECTOR_TOOL) $(BIN)/minionvault parameters pkg/parameters/testdata/parameters.json; \
	else echo "vectors: $(VECTOR_TOOL) not found; the Go test ./cmd/minionvault runs the same vectors through the binary"; fi

.PHONY: bench
bench: ## Benchmarks of the templating core, the parameter stack and the ACL evaluator.
	go test -run='^$$' -bench=. -benchmem ./pkg/template ./pkg/parameters ./pkg/render ./pkg/acl

.PHONY: bench-fleet
bench-fleet: $(KUBE_APISERVER) $(ETCD) $(VAULT) ## A fleet of bindings converged and resynced against the real servers.
	go test -tags integration -run='^$$' -bench=BenchmarkFleet -benchtime=1x ./test/e2e

# make bench-scale: BENCH_N is one size or several in one session
# ("1000 3000 10000"), BENCH_SHAPES shared, perminion or both. Fresh servers
# per size and shape; the report (markdown) goes to stdout and bin/scale/,
# the operator's CPU profiles to bin/scale/profiles-<time>/.
# BENCH_PHASES, when set, runs only those of the operator's phases
# ("converge,restart"; the converge always) and the floors they need.
BENCH_N      ?= 200
BENCH_SHAPES ?= shared perminion
BENCH_PHASES ?=
# BENCH_FLOORS=no skips the floors (no ratios): a quicker look at the
# operator's own phases.
BENCH_FLOORS ?= yes
# BENCH_ROUNDS=3 measures each size and shape three times, floors and
# operator in alternating order, and reports each round and the median
# ratio: one round's ratio can be off by a tenth on a noisy machine.
BENCH_ROUNDS ?= 1

# BENCH_BASELINE=<git revision> (e.g. HEAD~1) also runs that revision's
# operator beside this tree's, in the same session, order alternating.
BENCH_BASELINE ?=

.PHONY: bench-scale
bench-scale: build $(KUBE_APISERVER) $(ETCD) $(VAULT) ## The operator (its own process) against the floor at fleet size, BENCH_N bindings per BENCH_SHAPES: time, calls, CPU, RSS (BENCH_PHASES=converge,restart: those phases only; BENCH_BASELINE=rev: beside that revision's operator).
	@if [ -n "$(BENCH_BASELINE)" ]; then \
	  rm -rf $(BIN)/scale/baseline-src && mkdir -p $(BIN)/scale/baseline-src && \
	  git archive '$(BENCH_BASELINE)' | tar -x -C $(BIN)/scale/baseline-src && \
	  (cd $(BIN)/scale/baseline-src && go build -trimpath -o $(BIN)/scale/baseline-minionvault ./cmd/minionvault) && \
	  echo ">> baseline operator: $(BENCH_BASELINE) ($$(git rev-parse --short '$(BENCH_BASELINE)'))"; fi
	SCALE_N='$(BENCH_N)' SCALE_SHAPES='$(BENCH_SHAPES)' SCALE_PHASES='$(BENCH_PHASES)' SCALE_NO_FLOORS='$(filter no,$(BENCH_FLOORS))' SCALE_ROUNDS='$(BENCH_ROUNDS)' SCALE_OUT=$(BIN)/scale MINIONVAULT_BIN=$(BIN)/minionvault MINIONVAULT_TOOLS_DIR=$(BIN) \
	SCALE_BASELINE='$(if $(BENCH_BASELINE),$(BIN)/scale/baseline-minionvault)' SCALE_BASELINE_NAME='$(BENCH_BASELINE)' \
	SCALE_COMMAND="make bench-scale BENCH_N='$(BENCH_N)' BENCH_SHAPES='$(BENCH_SHAPES)'$(if $(BENCH_PHASES), BENCH_PHASES='$(BENCH_PHASES)')$(if $(filter-out 1,$(BENCH_ROUNDS)), BENCH_ROUNDS='$(BENCH_ROUNDS)')$(if $(BENCH_BASELINE), BENCH_BASELINE='$(BENCH_BASELINE)')" \
	go test -tags integration -run='^$$' -bench='^BenchmarkScale$$' -benchtime=1x -timeout=0 -v ./test/scale

# make bench-ha: the operator against a three-node Vault HA cluster on raft
# (localenv.Cluster), pointed at its active-following proxy and at a
# standby node: a converge and three template rollouts, undisturbed and
# with the active node SIGKILLed, a node restarted sealed, a step-down;
# the report goes to stdout and bin/scale/ha.md. BENCH_HA_N bindings per
# fleet; BENCH_HA_MODES active, standby or both; BENCH_HA_SEALED how long
# the restarted node stays sealed; BENCH_HA_PERF raft's
# performance_multiplier (default Vault's, 5).
BENCH_HA_N      ?= 1000
BENCH_HA_MODES  ?= both
BENCH_HA_SEALED ?= 20s
BENCH_HA_PERF   ?=

.PHONY: bench-ha
bench-ha: build $(KUBE_APISERVER) $(ETCD) $(VAULT) ## The operator through Vault HA failovers (SIGKILL, sealed restart, step-down) at BENCH_HA_N bindings: time to Ready, calls, duplicates, lost writes.
	SCALE_HA_N='$(BENCH_HA_N)' SCALE_HA_MODES='$(BENCH_HA_MODES)' SCALE_HA_SEALED='$(BENCH_HA_SEALED)' SCALE_HA_PERF='$(BENCH_HA_PERF)' \
	SCALE_OUT=$(BIN)/scale MINIONVAULT_BIN=$(BIN)/minionvault MINIONVAULT_TOOLS_DIR=$(BIN) \
	SCALE_COMMAND="make bench-ha BENCH_HA_N='$(BENCH_HA_N)' BENCH_HA_MODES='$(BENCH_HA_MODES)' BENCH_HA_SEALED='$(BENCH_HA_SEALED)'$(if $(BENCH_HA_PERF), BENCH_HA_PERF='$(BENCH_HA_PERF)')" \
	go test -tags integration -run='^$$' -bench='^BenchmarkHA$$' -benchtime=1x -timeout=0 -v ./test/scale

##@ Help

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

.PHONY: oracle
oracle: ## Compare the format-spec implementation with CPython 3.11 (python3) on random inputs.
	go test -tags oracle -run TestFormatAgainstPython -count=1 ./pkg/template

.PHONY: bench-compare
bench-compare: ## The typical binding in Go and in the Python algorithm, side by side in one run.
	go test -run='^$$' -bench='^BenchmarkTypicalBinding$$' -benchmem -count=5 ./pkg/template | grep Benchmark
	python3 hack/bench/saltext_reference.py
