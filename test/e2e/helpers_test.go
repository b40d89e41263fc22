//go:build integration

package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

func doc(v any) *v1alpha1.Document {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	d := v1alpha1.NewDocument(raw)
	return &d
}

func binding(ns, name, minion string, pillar map[string]any) *v1alpha1.MinionBinding {
	return &v1alpha1.MinionBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.MinionBindingSpec{
			MinionID: minion, TemplateRef: v1alpha1.MinionTemplateReference{Name: "salt-minions"},
			Grains: doc(map[string]any{"id": minion, "os": "Debian"}), Pillar: doc(pillar),
		},
	}
}

func (s *suite) vaultRead(path string) map[string]any {
	s.t.Helper()
	sec, err := s.root.Logical().Read(path)
	if err != nil {
		s.t.Fatalf("reading %s: %v", path, err)
	}
	if sec == nil {
		return nil
	}
	return sec.Data
}

func strs(v any) []string {
	l, _ := v.([]any)
	out := []string{}
	for _, it := range l {
		out = append(out, fmt.Sprint(it))
	}
	return out
}

// nameSetDigest is status.policies.digest as the API documents it, worked
// out here rather than taken from the operator: the XOR of the first 16
// bytes of each name's SHA-256, in hex ("" for none).
func nameSetDigest(names []string) string {
	if len(names) == 0 {
		return ""
	}
	var d [16]byte
	for _, n := range names {
		sum := sha256.Sum256([]byte(n))
		for i := range d {
			d[i] ^= sum[i]
		}
	}
	return hex.EncodeToString(d[:])
}

// managesExactly: the template's status counts exactly these policies.
func managesExactly(mt *v1alpha1.MinionTemplate, names ...string) bool {
	p := mt.Status.Policies
	return p != nil && p.Count == int64(len(names)) && p.Digest == nameSetDigest(names)
}

// metadataOf is an entity's rendered metadata: without the operator's
// own keys (the owner marker, the list of rendered keys).
func metadataOf(data map[string]any) map[string]string {
	out := rawMetadataOf(data)
	for k := range out {
		if strings.HasPrefix(k, ownership.ReservedKeyPrefix) {
			delete(out, k)
		}
	}
	return out
}

// rawMetadataOf is an entity's metadata as Vault holds it.
func rawMetadataOf(data map[string]any) map[string]string {
	out := map[string]string{}
	m, _ := data["metadata"].(map[string]any)
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// run is t.Run with the suite's helpers failing the subtest, not the parent.
func (s *suite) run(name string, f func(t *testing.T)) {
	parent := s.t
	parent.Run(name, func(t *testing.T) {
		s.t = t
		defer func() { s.t = parent }()
		f(t)
	})
}

func (s *suite) accessor() string {
	s.t.Helper()
	auths, err := s.root.Sys().ListAuth()
	s.must(err)
	return auths["salt-minions/"].Accessor
}
