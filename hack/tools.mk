# hack/tools.mk: the tools the tests and code generation need, built from Go
# modules into $(BIN) (see docs/development.md). Included by the main
# Makefile after BIN is set. Each tool is pinned by its module under
# hack/tools/ and by the version below; a stamp file per tool
# ($(BIN)/.stamp-<tool>-<version>) records what was built, so `make tools`
# rebuilds only what is missing or of another version.

TOOLS_MODULES := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))/tools

KUBERNETES_VERSION     ?= v1.37.2
ETCD_VERSION           ?= v3.7.0
VAULT_VERSION          ?= v1.21.4
# Every Vault line the project builds and tests (pkg/vault/tested-versions.txt,
# oldest first, the last the default: VAULT_VERSION, bin/vault). The others
# are built into bin/vault-<version> by `make vaults`.
VAULT_VERSIONS := $(shell grep -v '^[[:space:]]*\#' $(dir $(lastword $(MAKEFILE_LIST)))../pkg/vault/tested-versions.txt)
VAULT_LINES    := $(filter-out $(VAULT_VERSION),$(VAULT_VERSIONS))
CONTROLLER_GEN_VERSION := v0.23.0
# github.com/prometheus/prometheus's module version (Prometheus 3.x's Go
# module tag): promtool, for the alerting rules of config/prometheus.
PROMTOOL_VERSION       := v0.316.0
GGCR_VERSION           := v0.22.1
HELM_VERSION           := v4.3.2
CONTAINERD_VERSION     ?= v2.4.2
RUNC_VERSION           ?= v1.5.3
CNI_PLUGINS_VERSION    ?= v1.10.0
# Our own pause binary and image (hack/tools/pause).
PAUSE_VERSION          := v1

KUBE_APISERVER := $(BIN)/kube-apiserver
ETCD           := $(BIN)/etcd
KUBECTL        := $(BIN)/kubectl
VAULT          := $(BIN)/vault
VAULT_LINE_BINS := $(addprefix $(BIN)/vault-,$(VAULT_LINES))
CONTROLLER_GEN := $(BIN)/controller-gen
# The chart's tests (charts/minion-vault-operator) and `make chart`'s check.
HELM           := $(BIN)/helm
PROMTOOL       := $(BIN)/promtool
# Not a test tool: `make image` builds the operator's image with it.
IMAGE_BUILDER  := $(BIN)/image-builder

# The single-node cluster of internal/localenv (test/node): the node
# components from the same k8s.io/kubernetes as kube-apiserver, containerd,
# runc, the CNI plugins and the sandbox image.
KUBELET                 := $(BIN)/kubelet
KUBE_CONTROLLER_MANAGER := $(BIN)/kube-controller-manager
KUBE_SCHEDULER          := $(BIN)/kube-scheduler
KUBE_PROXY              := $(BIN)/kube-proxy
CONTAINERD              := $(BIN)/containerd
RUNC                    := $(BIN)/runc
CNI_PLUGINS             := $(BIN)/cni/bridge
PAUSE_IMAGE             := $(BIN)/pause-image.tar
NODE_TOOLS := $(KUBELET) $(KUBE_CONTROLLER_MANAGER) $(KUBE_SCHEDULER) $(KUBE_PROXY) $(CONTAINERD) $(RUNC) $(CNI_PLUGINS) $(PAUSE_IMAGE)

TOOLS := $(KUBE_APISERVER) $(ETCD) $(KUBECTL) $(VAULT) $(CONTROLLER_GEN) $(HELM) $(PROMTOOL) $(NODE_TOOLS)

# Integration suites: test packages with a file tagged `integration`.
INTEGRATION_TAGS  ?= integration
INTEGRATION_FLAGS ?= -count=1 -p 2 -timeout 20m
INTEGRATION_PKGS  ?= $(shell go list -tags $(INTEGRATION_TAGS) -f '{{$$d := .Dir}}{{range .TestGoFiles}}{{$$d}}/{{.}} {{end}}{{range .XTestGoFiles}}{{$$d}}/{{.}} {{end}}' ./... 2>/dev/null | xargs -r grep -l '^//go:build.*\b$(INTEGRATION_TAGS)\b' | xargs -r -n1 dirname | sort -u | sed 's|^$(CURDIR)|.|')

##@ Test tools

.PHONY: tools
tools: $(TOOLS) ## Build what is missing or stale of kube-apiserver, etcd, kubectl, vault, controller-gen, helm, promtool and the node tools into bin/ (first time 30 to 60 min).
	@echo ">> tools up to date in $(BIN): kube-apiserver, kubectl and the node components $(KUBERNETES_VERSION), etcd $(ETCD_VERSION), vault $(VAULT_VERSION), controller-gen $(CONTROLLER_GEN_VERSION), helm $(HELM_VERSION), promtool $(PROMTOOL_VERSION), containerd $(CONTAINERD_VERSION), runc $(RUNC_VERSION), CNI plugins $(CNI_PLUGINS_VERSION), pause image $(PAUSE_VERSION)"

# kubectl is not needed by `make run` (the quickstart talks to the API
# server itself): `make kubectl` builds it to explore with.
.PHONY: kubectl
kubectl: $(KUBECTL) ## Build bin/kubectl (to explore what `make run` starts).

# `make vault VAULT_LINE=v1.19.5`: one Vault line (bin/vault-v1.19.5; the
# default line, VAULT_VERSION, is bin/vault). `make vaults`: every line of
# pkg/vault/tested-versions.txt, one after the other (each build uses both
# cores; two at once would only share them and double the memory).
VAULT_LINE ?= $(VAULT_VERSION)
.PHONY: vault vaults
vault: ## Build one Vault line: bin/vault (VAULT_VERSION, the default) or, with VAULT_LINE=vX.Y.Z, bin/vault-vX.Y.Z.
	@case " $(VAULT_VERSIONS) " in *" $(VAULT_LINE) "*) ;; *) echo "make vault: VAULT_LINE=$(VAULT_LINE) is not a line of pkg/vault/tested-versions.txt ($(VAULT_VERSIONS))" >&2; exit 2;; esac
	@$(MAKE) --no-print-directory $(if $(filter $(VAULT_VERSION),$(VAULT_LINE)),$(VAULT),$(BIN)/vault-$(VAULT_LINE))
vaults: ## Build every Vault line of pkg/vault/tested-versions.txt: bin/vault and bin/vault-<version> (first time: about a minute each after bin/vault).
	@$(MAKE) --no-print-directory -s -j1 $(VAULT) $(VAULT_LINE_BINS)

.PHONY: node-tools
node-tools: host-packages ## Build only the single-node cluster's tools (kubelet, kube-controller-manager, kube-scheduler, kube-proxy, containerd, runc, CNI plugins, pause image).
	@$(call k8s-batch,kubelet kube-controller-manager kube-scheduler kube-proxy)
	@$(MAKE) --no-print-directory -j2 $(CONTAINERD) $(RUNC) $(CNI_PLUGINS) $(PAUSE_IMAGE)

# test/node installs `make image`'s image with `make build-installer`'s
# dist/install.yaml on the node. First kube-apiserver and etcd (one go build)
# while Vault's modules download, as `make run` does; then two at a time:
# every Vault line one after the other (`make vaults`, for the compatibility
# suite), and the Kubernetes node components and kubectl in one go build (they
# share most of their packages with kube-apiserver and each other), then the
# tools of other modules (helm among them: test/chart and test/node test
# the chart with it).
.PHONY: integration-tools
integration-tools: host-packages ## Build what the integration suites need: the tools, the image and dist/install.yaml.
	@$(MAKE) --no-print-directory -j2 k8s-servers vault-fetch
	@$(MAKE) --no-print-directory -j2 vaults k8s-node-tools $(CONTAINERD) $(RUNC) $(CNI_PLUGINS) $(PAUSE_IMAGE) $(HELM) image
	@$(MAKE) --no-print-directory build-installer
	@$(TOOLS_MODULES)/vault/align.sh --check
	@$(TOOLS_MODULES)/vault/line.sh --check
	@$(TOOLS_MODULES)/tool-only.sh --check

# tool-built,TOOL: a shell test, true when bin/TOOL is built and up to date.
tool-built = $(MAKE) -q --no-print-directory $(BIN)/$(1) >/dev/null 2>&1

# k8s-batch,TOOLS: one go build of those of TOOLS (tools of hack/tools/k8s)
# that are missing or stale: the packages they share compile once, and one
# binary links while the next compiles. Built one by one, or side by side,
# they compiled them once per tool.
k8s-batch = stale=; \
	for t in $(1); do $(call tool-built,$$t) || stale="$$stale $$t"; done; \
	if [ -n "$$stale" ]; then \
	  BIN=$(BIN) KUBERNETES_VERSION=$(KUBERNETES_VERSION) ETCD_VERSION=$(ETCD_VERSION) $(TOOLS_MODULES)/build.sh $$stale; \
	fi

.PHONY: k8s-servers k8s-node-tools vault-fetch
k8s-servers:
	@$(call k8s-batch,kube-apiserver etcd)
k8s-node-tools:
	@$(call k8s-batch,kubelet kube-controller-manager kube-scheduler kube-proxy kubectl)
# Vault's source and the modules of its build, while something else compiles.
vault-fetch:
	@$(call tool-built,vault) || \
	  BIN=$(BIN) VAULT_VERSION=$(VAULT_VERSION) $(TOOLS_MODULES)/build.sh vault-fetch

.PHONY: integration
integration: integration-tools ## Integration suites against a real API server, etcd and Vault, and a real node.
	@pkgs="$(strip $(INTEGRATION_PKGS))"; \
	if [ -z "$$pkgs" ]; then echo "integration: no test package has a //go:build $(INTEGRATION_TAGS) file" >&2; exit 1; fi; \
	echo ">> integration suites: $$pkgs"; \
	set -x; \
	go vet -tags $(INTEGRATION_TAGS) $$pkgs && \
	MINIONVAULT_TOOLS_DIR=$(BIN) go test -tags $(INTEGRATION_TAGS) $(INTEGRATION_FLAGS) $$pkgs

.PHONY: tools-clean
tools-clean: ## Remove the built tools, their stamps and the Vault build folder.
	rm -rf $(TOOLS) $(VAULT_LINE_BINS) $(IMAGE_BUILDER) $(BIN)/.stamp-* $(BIN)/.build $(BIN)/containerd-shim-runc-v2 $(BIN)/ctr $(BIN)/cni

# first-build-notice,TOOLS: before a build, name the tools of TOOLS that
# will be built and about how long that takes the first time, so that a
# newcomer knows what is happening and for how long. The figures are CPU
# minutes of each build from empty Go caches, module downloads included;
# the builds share a quiet 2-core machine's two cores, so the wall time is
# about half their sum on the faster machines of the class and three
# quarters on the slower. Measured (hack/bench/first_run.py;
# docs/development.md has the history): the cold `make run` took 990 to
# 1,124 CPU-s and 8 min 41 s to 9 min 47 s in four runs over three hours
# on one 2-core machine (2026-12-04 and 05), kube-apiserver and etcd
# about 780 CPU-s of the 990, then Vault beside the operator about 220:
# the wall time a little over half the CPU time. Vault's figure is what it
# compiles then.
TOOL_MINUTES_kube-apiserver := 10
TOOL_MINUTES_etcd           := 1
TOOL_MINUTES_kubectl        := 2
TOOL_MINUTES_vault          := 5
TOOL_MINUTES_helm           := 3
first-build-notice = list=; total=0; \
	for tm in $(foreach t,$(notdir $(1)),$(t):$(or $(TOOL_MINUTES_$(t)),1)); do \
	  t=$${tm%:*}; m=$${tm\#*:}; \
	  $(call tool-built,$$t) && continue; \
	  list="$$list$${list:+, }$$t"; total=$$((total + m)); \
	done; \
	if [ -n "$$list" ]; then \
	  echo ">> first run: building $$list from the Go module proxy into $(BIN) (later runs reuse them)."; \
	  echo "   About $$(( (total + 1) / 2 )) to $$(( (total * 3 + 3) / 4 )) min on a quiet 2-core machine with empty Go caches (the builds share both cores), longer on a loaded one; each build reports every minute."; \
	fi

# A tool is rebuilt when its stamp for the pinned version is missing, when
# its module's go.mod or go.sum changed, or when the binary is gone.
# The Kubernetes tools and etcd: any file of their module folder, which
# holds the patch of k8s.io/apiserver they build with.
K8S_INPUTS := $(wildcard $(TOOLS_MODULES)/k8s/*)
tool-stamp = $(BIN)/.stamp-$(1)-$(2)
tool-force = $(if $(wildcard $(1)),,FORCE)

$(KUBE_APISERVER): $(call tool-stamp,kube-apiserver,$(KUBERNETES_VERSION)) ;
$(call tool-stamp,kube-apiserver,$(KUBERNETES_VERSION)): $(K8S_INPUTS) $(call tool-force,$(KUBE_APISERVER))
	@BIN=$(BIN) KUBERNETES_VERSION=$(KUBERNETES_VERSION) $(TOOLS_MODULES)/build.sh kube-apiserver

$(KUBECTL): $(call tool-stamp,kubectl,$(KUBERNETES_VERSION)) ;
$(call tool-stamp,kubectl,$(KUBERNETES_VERSION)): $(K8S_INPUTS) $(call tool-force,$(KUBECTL))
	@BIN=$(BIN) KUBERNETES_VERSION=$(KUBERNETES_VERSION) $(TOOLS_MODULES)/build.sh kubectl

# etcd after kube-apiserver, also under make -j: it is mostly packages that
# kube-apiserver's build has just compiled, which two builds at once would
# each compile.
$(ETCD): $(call tool-stamp,etcd,$(ETCD_VERSION)) ;
$(call tool-stamp,etcd,$(ETCD_VERSION)): $(K8S_INPUTS) $(call tool-force,$(ETCD)) | $(KUBE_APISERVER)
	@BIN=$(BIN) ETCD_VERSION=$(ETCD_VERSION) $(TOOLS_MODULES)/build.sh etcd

# A Vault line's inputs: the scripts that build it, go-discover's patch and the
# version's folder (go.mod, go.sum, vault.patch).
vault-inputs = $(wildcard $(TOOLS_MODULES)/source.sh $(TOOLS_MODULES)/vault/build.sh $(TOOLS_MODULES)/vault/go-discover-minimal.patch $(TOOLS_MODULES)/vault/$(1)/*)

$(VAULT): $(call tool-stamp,vault,$(VAULT_VERSION)) ;
$(call tool-stamp,vault,$(VAULT_VERSION)): $(call vault-inputs,$(VAULT_VERSION)) $(call tool-force,$(VAULT))
	@BIN=$(BIN) VAULT_VERSION=$(VAULT_VERSION) $(TOOLS_MODULES)/build.sh vault

# The other Vault lines: bin/vault-<version>, each with its own stamp
# (.stamp-vault-<version>-line), rebuilt when its inputs change.
define vault-line
$$(BIN)/vault-$(1): $$(call tool-stamp,vault-$(1),line) ;
$$(call tool-stamp,vault-$(1),line): $$(call vault-inputs,$(1)) $$(call tool-force,$$(BIN)/vault-$(1))
	@BIN=$$(BIN) $$(TOOLS_MODULES)/build.sh vault-$(1)
endef
$(foreach v,$(VAULT_LINES),$(eval $(call vault-line,$(v))))

$(CONTROLLER_GEN): $(call tool-stamp,controller-gen,$(CONTROLLER_GEN_VERSION)) ;
$(call tool-stamp,controller-gen,$(CONTROLLER_GEN_VERSION)): $(TOOLS_MODULES)/controller-gen/go.mod $(TOOLS_MODULES)/controller-gen/go.sum $(call tool-force,$(CONTROLLER_GEN))
	@BIN=$(BIN) CONTROLLER_GEN_VERSION=$(CONTROLLER_GEN_VERSION) $(TOOLS_MODULES)/build.sh controller-gen

$(HELM): $(call tool-stamp,helm,$(HELM_VERSION)) ;
$(call tool-stamp,helm,$(HELM_VERSION)): $(TOOLS_MODULES)/helm/go.mod $(TOOLS_MODULES)/helm/go.sum $(call tool-force,$(HELM))
	@BIN=$(BIN) HELM_VERSION=$(HELM_VERSION) $(TOOLS_MODULES)/build.sh helm

# promtool checks and unit-tests the alerting rules (make unit, make alerts).
$(PROMTOOL): $(call tool-stamp,promtool,$(PROMTOOL_VERSION)) ;
$(call tool-stamp,promtool,$(PROMTOOL_VERSION)): $(TOOLS_MODULES)/promtool/go.mod $(TOOLS_MODULES)/promtool/go.sum $(call tool-force,$(PROMTOOL))
	@BIN=$(BIN) PROMTOOL_VERSION=$(PROMTOOL_VERSION) $(TOOLS_MODULES)/build.sh promtool

# The image builder is our own code: its sources are prerequisites too.
$(IMAGE_BUILDER): $(call tool-stamp,image-builder,$(GGCR_VERSION)) ;
$(call tool-stamp,image-builder,$(GGCR_VERSION)): $(wildcard $(TOOLS_MODULES)/image/*) $(call tool-force,$(IMAGE_BUILDER))
	@BIN=$(BIN) GGCR_VERSION=$(GGCR_VERSION) $(TOOLS_MODULES)/build.sh image-builder

# The node components: kube-apiserver's module, one build each.
define k8s-node-tool
$$(BIN)/$(1): $$(call tool-stamp,$(1),$$(KUBERNETES_VERSION)) ;
$$(call tool-stamp,$(1),$$(KUBERNETES_VERSION)): $$(K8S_INPUTS) $$(call tool-force,$$(BIN)/$(1))
	@BIN=$$(BIN) KUBERNETES_VERSION=$$(KUBERNETES_VERSION) $$(TOOLS_MODULES)/build.sh $(1)
endef
$(foreach t,kubelet kube-controller-manager kube-scheduler kube-proxy,$(eval $(call k8s-node-tool,$(t))))

# containerd's stamp covers containerd-shim-runc-v2 and ctr too.
$(CONTAINERD): $(call tool-stamp,containerd,$(CONTAINERD_VERSION)) ;
$(call tool-stamp,containerd,$(CONTAINERD_VERSION)): $(TOOLS_MODULES)/containerd/go.mod $(TOOLS_MODULES)/containerd/go.sum $(call tool-force,$(CONTAINERD))
	@BIN=$(BIN) CONTAINERD_VERSION=$(CONTAINERD_VERSION) $(TOOLS_MODULES)/build.sh containerd

$(RUNC): $(call tool-stamp,runc,$(RUNC_VERSION)) ;
$(call tool-stamp,runc,$(RUNC_VERSION)): $(TOOLS_MODULES)/runc/go.mod $(TOOLS_MODULES)/runc/go.sum $(call tool-force,$(RUNC))
	@BIN=$(BIN) RUNC_VERSION=$(RUNC_VERSION) $(TOOLS_MODULES)/build.sh runc

$(CNI_PLUGINS): $(call tool-stamp,cni,$(CNI_PLUGINS_VERSION)) ;
$(call tool-stamp,cni,$(CNI_PLUGINS_VERSION)): $(TOOLS_MODULES)/cni/go.mod $(TOOLS_MODULES)/cni/go.sum $(call tool-force,$(CNI_PLUGINS))
	@BIN=$(BIN) CNI_PLUGINS_VERSION=$(CNI_PLUGINS_VERSION) $(TOOLS_MODULES)/build.sh cni

# Our own code: its sources are prerequisites too.
$(PAUSE_IMAGE): $(call tool-stamp,pause,$(PAUSE_VERSION)) ;
$(call tool-stamp,pause,$(PAUSE_VERSION)): $(wildcard $(TOOLS_MODULES)/pause/* $(TOOLS_MODULES)/pause/pause/*) $(call tool-force,$(PAUSE_IMAGE))
	@BIN=$(BIN) GGCR_VERSION=$(GGCR_VERSION) PAUSE_VERSION=$(PAUSE_VERSION) $(TOOLS_MODULES)/build.sh pause

.PHONY: FORCE
FORCE:
