package devenv

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/manifest"
)

// Object is one manifest to apply, with the file it came from.
type Object struct {
	*unstructured.Unstructured
	File string
}

// Ref names an object the way kubectl does: Kind namespace/name, or Kind
// name for a cluster-scoped one.
func (o Object) Ref() string {
	return ref(o.Unstructured)
}

func ref(u *unstructured.Unstructured) string {
	if u.GetNamespace() != "" {
		return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
	}
	return u.GetKind() + " " + u.GetName()
}

// LoadManifests reads the manifests of a folder: the files that its
// kustomization.yaml lists under resources, in that order, or else every
// *.yaml and *.yml file in name order. Kustomization documents are skipped,
// and so is any document without apiVersion and kind. Objects of this
// project's API are returned in the order VaultConnections, MinionTemplates,
// MinionBindings (others first), each kind in file order.
func LoadManifests(fsys fs.FS) ([]Object, error) {
	files, err := manifestFiles(fsys)
	if err != nil {
		return nil, err
	}
	var objs []Object
	for _, f := range files {
		data, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		docs, err := manifest.Parse(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for i, d := range docs {
			if d.APIVersion == "" || d.Kind == "" || d.Kind == "Kustomization" {
				continue
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(d.Value.AppendJSON(nil)); err != nil {
				return nil, fmt.Errorf("%s: document %d: %w", f, i+1, err)
			}
			if u.GetName() == "" {
				return nil, fmt.Errorf("%s: document %d (%s) has no metadata.name", f, i+1, d.Kind)
			}
			if u.GetKind() == "MinionBinding" && u.GetNamespace() == "" {
				u.SetNamespace("default") // as kubectl apply would
			}
			objs = append(objs, Object{Unstructured: u, File: f})
		}
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("no manifests in %s", strings.Join(files, ", "))
	}
	sort.SliceStable(objs, func(i, j int) bool { return kindRank(objs[i].Unstructured) < kindRank(objs[j].Unstructured) })
	return objs, nil
}

func kindRank(u *unstructured.Unstructured) int {
	if u.GroupVersionKind().Group != v1alpha1.GroupVersion.Group {
		return 0
	}
	switch u.GetKind() {
	case "VaultConnection":
		return 1
	case "MinionTemplate":
		return 2
	case "MinionBinding":
		return 3
	}
	return 4
}

func manifestFiles(fsys fs.FS) ([]string, error) {
	if data, err := fs.ReadFile(fsys, "kustomization.yaml"); err == nil {
		var k struct {
			Resources []string `json:"resources"`
		}
		if err := yaml.Unmarshal(data, &k); err != nil {
			return nil, fmt.Errorf("kustomization.yaml: %w", err)
		}
		var files []string
		for _, r := range k.Resources {
			r = path.Clean(strings.TrimPrefix(r, "./"))
			st, err := fs.Stat(fsys, r)
			if err != nil || st.IsDir() {
				return nil, fmt.Errorf("kustomization.yaml: resource %q: only files in the same folder are supported here (use kubectl apply -k for the rest)", r)
			}
			files = append(files, r)
		}
		if len(files) > 0 {
			return files, nil
		}
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || n == "kustomization.yaml" || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			continue
		}
		files = append(files, n)
	}
	slices.Sort(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.yaml files")
	}
	return files, nil
}

// RewriteVaultAddress points every VaultConnection at addr (its
// spec.address) and returns the names of those it changed.
func RewriteVaultAddress(objs []Object, addr string) ([]string, error) {
	var changed []string
	for _, o := range objs {
		if !isKind(o.Unstructured, "VaultConnection") {
			continue
		}
		if err := unstructured.SetNestedField(o.Object, addr, "spec", "address"); err != nil {
			return nil, fmt.Errorf("%s: %w", o.Ref(), err)
		}
		changed = append(changed, o.GetName())
	}
	return changed, nil
}

// TokenSecret is the Secret a VaultConnection's token auth reads.
type TokenSecret struct{ Namespace, Name, Key string }

// TokenSecrets returns the token Secrets the VaultConnections refer to
// (spec.auth.token.secretRef), and the names of VaultConnections that log in
// some other way.
func TokenSecrets(objs []Object) (secrets []TokenSecret, other []string) {
	for _, o := range objs {
		if !isKind(o.Unstructured, "VaultConnection") {
			continue
		}
		ref, ok, _ := unstructured.NestedStringMap(o.Object, "spec", "auth", "token", "secretRef")
		if !ok || ref["name"] == "" {
			other = append(other, o.GetName())
			continue
		}
		s := TokenSecret{Namespace: ref["namespace"], Name: ref["name"], Key: ref["key"]}
		if s.Namespace == "" {
			s.Namespace = "minion-vault-system"
		}
		if s.Key == "" {
			s.Key = v1alpha1.DefaultTokenSecretKey
		}
		if !slices.Contains(secrets, s) {
			secrets = append(secrets, s)
		}
	}
	return secrets, other
}

func isKind(u *unstructured.Unstructured, kind string) bool {
	return u.GroupVersionKind().Group == v1alpha1.GroupVersion.Group && u.GetKind() == kind
}
