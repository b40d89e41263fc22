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
CONTROLLER_GEN_VERSION := v0.23.0

KUBE_APISERVER := $(BIN)/kube-apiserver
ETCD           := $(BIN)/etcd
KUBECTL        := $(BIN)/kubectl
VAULT          := $(BIN)/vault
CONTROLLER_GEN := $(BIN)/controller-gen

TOOLS := $(KUBE_APISERVER) $(ETCD) $(KUBECTL) $(VAULT) $(CONTROLLER_GEN)

# Integration suites: test packages with a file tagged `integration`.
INTEGRATION_TAGS  ?= integration
INTEGRATION_FLAGS ?= -count=1 -p 2 -timeout 20m
INTEGRATION_PKGS  ?= $(shell go list -tags $(INTEGRATION_TAGS) -f '{{$$d := .Dir}}{{range .TestGoFiles}}{{$$d}}/{{.}} {{end}}{{range .XTestGoFiles}}{{$$d}}/{{.}} {{end}}' ./... 2>/dev/null | xargs -r grep -l '^//go:build.*\b$(INTEGRATION_TAGS)\b' | xargs -r -n1 dirname | sort -u | sed 's|^$(CURDIR)|.|')

##@ Test tools

.PHONY: tools
tools: $(TOOLS) ## Build what is missing or stale of kube-apiserver, etcd, kubectl, vault, controller-gen into bin/ (first time 20 to 40 min).
	@echo ">> tools up to date in $(BIN): kube-apiserver and kubectl $(KUBERNETES_VERSION), etcd $(ETCD_VERSION), vault $(VAULT_VERSION), controller-gen $(CONTROLLER_GEN_VERSION)"

.PHONY: integration
integration: $(KUBE_APISERVER) $(ETCD) $(KUBECTL) $(VAULT) ## Integration suites against a real API server, etcd and Vault.
	@pkgs="$(strip $(INTEGRATION_PKGS))"; \
	if [ -z "$$pkgs" ]; then echo "integration: no test package has a //go:build $(INTEGRATION_TAGS) file" >&2; exit 1; fi; \
	echo ">> integration suites: $$pkgs"; \
	set -x; \
	go vet -tags $(INTEGRATION_TAGS) $$pkgs && \
	MINIONVAULT_TOOLS_DIR=$(BIN) go test -tags $(INTEGRATION_TAGS) $(INTEGRATION_FLAGS) $$pkgs

.PHONY: tools-clean
tools-clean: ## Remove the built tools, their stamps and the Vault build folder.
	rm -rf $(TOOLS) $(BIN)/.stamp-* $(BIN)/.build

# A tool is rebuilt when its stamp for the pinned version is missing, when
# its module's go.mod or go.sum changed, or when the binary is gone.
tool-stamp = $(BIN)/.stamp-$(1)-$(2)
tool-force = $(if $(wildcard $(1)),,FORCE)

$(KUBE_APISERVER): $(call tool-stamp,kube-apiserver,$(KUBERNETES_VERSION)) ;
$(call tool-stamp,kube-apiserver,$(KUBERNETES_VERSION)): $(TOOLS_MODULES)/k8s/go.mod $(TOOLS_MODULES)/k8s/go.sum $(call tool-force,$(KUBE_APISERVER))
	@BIN=$(BIN) KUBERNETES_VERSION=$(KUBERNETES_VERSION) $(TOOLS_MODULES)/build.sh kube-apiserver

$(KUBECTL): $(call tool-stamp,kubectl,$(KUBERNETES_VERSION)) ;
$(call tool-stamp,kubectl,$(KUBERNETES_VERSION)): $(TOOLS_MODULES)/k8s/go.mod $(TOOLS_MODULES)/k8s/go.sum $(call tool-force,$(KUBECTL))
	@BIN=$(BIN) KUBERNETES_VERSION=$(KUBERNETES_VERSION) $(TOOLS_MODULES)/build.sh kubectl

$(ETCD): $(call tool-stamp,etcd,$(ETCD_VERSION)) ;
$(call tool-stamp,etcd,$(ETCD_VERSION)): $(TOOLS_MODULES)/k8s/go.mod $(TOOLS_MODULES)/k8s/go.sum $(call tool-force,$(ETCD))
	@BIN=$(BIN) ETCD_VERSION=$(ETCD_VERSION) $(TOOLS_MODULES)/build.sh etcd

$(VAULT): $(call tool-stamp,vault,$(VAULT_VERSION)) ;
$(call tool-stamp,vault,$(VAULT_VERSION)): $(wildcard $(TOOLS_MODULES)/vault/*) $(call tool-force,$(VAULT))
	@BIN=$(BIN) VAULT_VERSION=$(VAULT_VERSION) $(TOOLS_MODULES)/build.sh vault

$(CONTROLLER_GEN): $(call tool-stamp,controller-gen,$(CONTROLLER_GEN_VERSION)) ;
$(call tool-stamp,controller-gen,$(CONTROLLER_GEN_VERSION)): $(TOOLS_MODULES)/controller-gen/go.mod $(TOOLS_MODULES)/controller-gen/go.sum $(call tool-force,$(CONTROLLER_GEN))
	@BIN=$(BIN) CONTROLLER_GEN_VERSION=$(CONTROLLER_GEN_VERSION) $(TOOLS_MODULES)/build.sh controller-gen

.PHONY: FORCE
FORCE:
