package main

import (
	"strings"
	"testing"
)

// A small kustomize output: the placeholders land where the values apply,
// the defaults come from it, and text that looks like a template action is
// escaped. test/chart renders the real chart with helm.
const kustomized = `apiVersion: v1
kind: Namespace
metadata:
  name: minion-vault-system
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  annotations:
    controller-gen.kubebuilder.io/version: v0.23.0
    helm.sh/resource-policy: keep
  name: things.example.com
spec:
  description: Vault's {{identity.entity.id}}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: minion-vault-controller-manager
  namespace: minion-vault-system
spec:
  replicas: 3
  template:
    metadata:
      annotations:
        a: b
      labels:
        c: d
    spec:
      containers:
      - args:
        - operator
        - --leader-elect
        image: registry.example/op:v9
        name: manager
        resources:
          limits:
            memory: 1Gi
      nodeSelector:
        kubernetes.io/os: linux
`

func TestGenerate(t *testing.T) {
	files, err := Generate([]byte(kustomized))
	if err != nil {
		t.Fatal(err)
	}
	dep := string(files["templates/generated-deployment.yaml"])
	for _, want := range []string{
		"namespace: {{ .Values.namespace.name }}\n",
		"replicas: {{ .Values.replicaCount }}\n",
		`image: {{ include "minion-vault-operator.image" . | quote }}` + "\n",
		"{{- with .Values.image.pullPolicy }}\n          imagePullPolicy: {{ . }}\n{{- end }}\n",
		"{{- if .Values.leaderElection.enabled }}\n            - --leader-elect\n",
		"{{- range .Values.extraArgs }}\n            - {{ . | quote }}\n{{- end }}\n",
		"          resources:\n{{- toYaml .Values.resources | nindent 12 }}\n",
		"      nodeSelector:\n{{- toYaml .Values.nodeSelector | nindent 8 }}\n",
	} {
		if !strings.Contains(dep, want) {
			t.Errorf("the Deployment's template lacks\n%s\nin\n%s", want, dep)
		}
	}
	if strings.Contains(dep, "1Gi") || strings.Contains(dep, "registry.example") || strings.Contains(dep, "minion-vault-system") {
		t.Errorf("a default left in the template instead of values.yaml:\n%s", dep)
	}
	crds := string(files["templates/generated-crds.yaml"])
	if !strings.Contains(crds, `Vault's {{ "{{" }}identity.entity.id}}`) || !strings.HasPrefix(strings.SplitN(crds, "---\n", 2)[1], "{{- if .Values.crds.install }}") {
		t.Errorf("CRDs:\n%s", crds)
	}
	values := string(files["values.yaml"])
	for _, want := range []string{
		"  name: minion-vault-system\n", "  repository: registry.example/op\n", "  tag: \"v9\"\n",
		"replicaCount: 3\n", "resources:\n  limits:\n    memory: 1Gi\n", "nodeSelector:\n  kubernetes.io/os: linux\n",
	} {
		if !strings.Contains(values, want) {
			t.Errorf("values.yaml lacks %q", want)
		}
	}
}

func TestGenerateRefuses(t *testing.T) {
	for name, c := range map[string]struct{ from, to, want string }{
		"no leader election": {"        - --leader-elect\n", "", "no --leader-elect"},
		"another namespace":  {"  name: minion-vault-system\n---", "  name: other\n---", `namespace is "other"`},
		"no manager":         {"name: manager", "name: other", "no container named manager"},
	} {
		_, err := Generate([]byte(strings.Replace(kustomized, c.from, c.to, 1)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
	}
}
