//go:build integration

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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

// TestOperator is the end-to-end story, in order.
func TestOperator(t *testing.T) {
	s := start(t)
	ctx := context.Background()

	s.must(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "salt", Labels: map[string]string{"team": "salt"}}}))
	s.must(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}))
	s.must(s.c.Create(ctx, &v1alpha1.VaultConnection{
		ObjectMeta: metav1.ObjectMeta{Name: "vault"},
		Spec: v1alpha1.VaultConnectionSpec{
			Address: s.env.Vault.Addr,
			Auth: v1alpha1.VaultAuth{Token: &v1alpha1.TokenAuth{SecretRef: v1alpha1.TokenSecretReference{
				SecretReference: v1alpha1.SecretReference{Name: "vault-token", Namespace: "minionvault-system"}}}},
		},
	}))
	tpl := &v1alpha1.MinionTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "salt-minions"},
		Spec: v1alpha1.MinionTemplateSpec{
			ConnectionRef: v1alpha1.VaultConnectionReference{Name: "vault"},
			Policies:      &v1alpha1.PoliciesSpec{Assign: []string{"saltstack/minions", "saltstack/{minion}", "salt_role_{pillar[roles]}"}},
			Metadata:      &v1alpha1.MetadataSpec{Entity: map[string]string{"roles": "{pillar[roles]}"}},
			PillarPaths:   []string{"salt/data/minions/{minion}"},
			PolicyDocuments: []v1alpha1.PolicyDocument{{
				Name:  "salt_role_{pillar[roles]}",
				Rules: []v1alpha1.PolicyRule{{Path: "salt/data/roles/{pillar[roles]}", Capabilities: []v1alpha1.PolicyCapability{"read", "list"}}},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "salt"}},
			AllowedPolicies:   []string{"saltstack/*", "salt_role_*"},
		},
	}
	s.must(s.c.Create(ctx, tpl))
	s.must(s.c.Create(ctx, binding("salt", "web01", "web01", map[string]any{"roles": []string{"web", "db"}})))
	s.must(s.c.Create(ctx, binding("salt", "db01", "db01", map[string]any{"roles": []string{"db"}})))

	s.run("apply: Vault holds exactly what the bindings render", func(t *testing.T) {
		b := s.waitReady("salt", "web01")
		s.waitReady("salt", "db01")
		role := s.vaultRead("auth/salt-minions/role/web01")
		if got := strs(role["token_policies"]); !slices.Equal(got, []string{"saltstack/minions", "saltstack/web01", "salt_role_web", "salt_role_db"}) {
			t.Errorf("token_policies %q", got)
		}
		if fmt.Sprint(role["secret_id_ttl"]) != "60" || fmt.Sprint(role["token_num_uses"]) != "10" {
			t.Errorf("role params %v", role)
		}
		entity := s.vaultRead("identity/entity/name/salt_minion_web01")
		want := map[string]string{"minion-id": "web01", "roles": "db,web", "roles__0": "db", "roles__1": "web"}
		if got := metadataOf(entity); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("metadata %v, want %v", got, want)
		}
		raw := rawMetadataOf(entity)
		if owner, ok := ownership.ParseMarker(raw[ownership.MarkerKey]); !ok || owner.Namespace != "salt" || owner.Name != "web01" ||
			owner.UID != string(s.binding("salt", "web01").UID) || raw[ownership.KeysKey] != "minion-id,roles" {
			t.Errorf("the operator's own metadata: %v", raw)
		}
		roleID := fmt.Sprint(s.vaultRead("auth/salt-minions/role/web01/role-id")["role_id"])
		aliases, _ := entity["aliases"].([]any)
		if len(aliases) != 1 || aliases[0].(map[string]any)["name"] != roleID {
			t.Errorf("aliases %v, want one named %s", aliases, roleID)
		}
		// Status matches Vault.
		if b.Status.Entity == nil || b.Status.Entity.ID != entity["id"] || b.Status.AppRole == nil || b.Status.AppRole.RoleID != roleID {
			t.Errorf("status %+v %+v", b.Status.Entity, b.Status.AppRole)
		}
		if !slices.Equal(b.Status.Policies, []string{"saltstack/minions", "saltstack/web01", "salt_role_web", "salt_role_db"}) {
			t.Errorf("status policies %q", b.Status.Policies)
		}
		// The template wrote each concrete policy once, with its header.
		eventually(t, 20*time.Second, "template policies", func() error {
			mt := &v1alpha1.MinionTemplate{}
			if err := s.c.Get(ctx, types.NamespacedName{Name: "salt-minions"}, mt); err != nil {
				return err
			}
			if mt.Status.Bindings != 2 || !managesExactly(mt, "salt_role_db", "salt_role_web") {
				return fmt.Errorf("status %+v", mt.Status)
			}
			return nil
		})
		pol := s.vaultRead("sys/policies/acl/salt_role_web")
		if p := fmt.Sprint(pol["policy"]); !strings.HasPrefix(p, "# Managed by minion-vault-operator") || !strings.Contains(p, `path "salt/data/roles/web"`) {
			t.Errorf("policy %s", p)
		}
		s.event("salt-minions", "PoliciesWritten") // the first write of a binding is no event; its policies are
		eventually(t, 20*time.Second, "connection Ready", func() error {
			vc := &v1alpha1.VaultConnection{}
			if err := s.c.Get(ctx, types.NamespacedName{Name: "vault"}, vc); err != nil {
				return err
			}
			if c := apimeta.FindStatusCondition(vc.Status.Conditions, v1alpha1.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue || vc.Status.VaultVersion == "" {
				return fmt.Errorf("status %+v", vc.Status)
			}
			return nil
		})
	})

	s.run("resync in sync writes nothing", func(t *testing.T) {
		time.Sleep(500 * time.Millisecond) // let the template reconciler settle
		before := s.writes.writes.Load()
		reads := s.writes.reads.Load()
		s.requestReconcile("salt", "web01")
		if got := s.writes.writes.Load() - before; got != 0 {
			t.Fatalf("%d write calls on a resync in sync", got)
		}
		if s.writes.reads.Load() == reads {
			t.Fatal("the resync did not read Vault")
		}
	})

	s.run("pillar change: Vault follows, stale keys and policies go", func(t *testing.T) {
		b := s.binding("salt", "web01")
		b.Spec.Pillar = doc(map[string]any{"roles": []string{"web"}})
		s.must(s.c.Update(ctx, b))
		eventually(t, 20*time.Second, "metadata follows", func() error {
			got := metadataOf(s.vaultRead("identity/entity/name/salt_minion_web01"))
			if fmt.Sprint(got) != fmt.Sprint(map[string]string{"minion-id": "web01", "roles": "web", "roles__0": "web"}) {
				return fmt.Errorf("metadata %v", got)
			}
			return nil
		})
		if got := strs(s.vaultRead("auth/salt-minions/role/web01")["token_policies"]); !slices.Equal(got, []string{"saltstack/minions", "saltstack/web01", "salt_role_web"}) {
			t.Errorf("token_policies %q", got)
		}
		s.event("web01", "Updated")
		// db01 still renders salt_role_db; moving it to cache frees it.
		d := s.binding("salt", "db01")
		d.Spec.Pillar = doc(map[string]any{"roles": []string{"cache"}})
		s.must(s.c.Update(ctx, d))
		eventually(t, 20*time.Second, "unused policy deleted", func() error {
			if s.vaultRead("sys/policies/acl/salt_role_db") != nil {
				return fmt.Errorf("salt_role_db still exists")
			}
			if s.vaultRead("sys/policies/acl/salt_role_cache") == nil {
				return fmt.Errorf("salt_role_cache missing")
			}
			return nil
		})
	})

	s.run("drift is corrected, or only reported in detect-only mode", func(t *testing.T) {
		s.waitReady("salt", "web01")
		_, err := s.root.Logical().Write("identity/entity/name/salt_minion_web01", map[string]any{"metadata": map[string]any{"roles": "hacked", "owner": "someone"}})
		s.must(err)
		_, err = s.root.Logical().Write("auth/salt-minions/role/web01", map[string]any{"token_policies": []string{"root-ish"}})
		s.must(err)
		s.requestReconcile("salt", "web01")
		got := metadataOf(s.vaultRead("identity/entity/name/salt_minion_web01"))
		if got["roles"] != "web" || got["roles__0"] != "web" || got["owner"] != "someone" {
			t.Errorf("metadata after correction %v (foreign keys must stay)", got)
		}
		if p := strs(s.vaultRead("auth/salt-minions/role/web01")["token_policies"]); !slices.Contains(p, "salt_role_web") {
			t.Errorf("token_policies after correction %q", p)
		}
		s.event("web01", "DriftCorrected")

		mt := &v1alpha1.MinionTemplate{}
		s.must(s.c.Get(ctx, types.NamespacedName{Name: "salt-minions"}, mt))
		mt.Spec.DriftDetection = v1alpha1.DriftDetectionDetectOnly
		s.must(s.c.Update(ctx, mt))
		time.Sleep(300 * time.Millisecond)
		_, err = s.root.Logical().Write("identity/entity/name/salt_minion_web01", map[string]any{"metadata": map[string]any{"roles": "hacked"}})
		s.must(err)
		s.requestReconcile("salt", "web01")
		if got := metadataOf(s.vaultRead("identity/entity/name/salt_minion_web01")); got["roles"] != "hacked" {
			t.Errorf("detect-only wrote to Vault: %v", got)
		}
		b := s.binding("salt", "web01")
		if c := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition); c == nil || c.Reason != "DriftDetected" {
			t.Errorf("conditions %+v", b.Status.Conditions)
		}
		s.event("web01", "DriftDetected")
		s.must(s.c.Get(ctx, types.NamespacedName{Name: "salt-minions"}, mt))
		mt.Spec.DriftDetection = v1alpha1.DriftDetectionCorrect
		s.must(s.c.Update(ctx, mt))
		s.requestReconcile("salt", "web01")
		if got := metadataOf(s.vaultRead("identity/entity/name/salt_minion_web01")); got["roles"] != "web" {
			t.Errorf("not corrected after leaving detect-only: %v", got)
		}
	})

	s.run("bad input is refused, nothing written, others unaffected", func(t *testing.T) {
		cases := []struct {
			name, ns, minion string
			pillar           map[string]any
			reason, msg      string
		}{
			{"glob", "salt", "glob01", map[string]any{"roles": []string{"*"}}, v1alpha1.ValidationFailedReason, "InvalidPolicyName"},
			{"too-long", "salt", "long01", map[string]any{"roles": []string{strings.Repeat("r", 600)}}, v1alpha1.ValidationFailedReason, "MetadataLimit"},
			{"dup", "salt", "WEB01", map[string]any{"roles": []string{"web"}}, v1alpha1.DuplicateMinionIDReason, "already bound by MinionBinding salt/web01"},
			{"elsewhere", "other", "other01", map[string]any{"roles": []string{"web"}}, v1alpha1.NamespaceNotAllowedReason, `namespace "other" is not selected`},
		}
		for _, c := range cases {
			s.must(s.c.Create(ctx, binding(c.ns, c.name, c.minion, c.pillar)))
		}
		for _, c := range cases {
			s.waitStalled(c.ns, c.name, c.reason, c.msg)
			if c.minion != "WEB01" && s.vaultRead("auth/salt-minions/role/"+strings.ToLower(c.minion)) != nil {
				t.Errorf("%s: a role was written", c.name)
			}
			s.event(c.name, c.reason)
		}
		// A template with an invalid pattern, an untrusted grain, and a
		// disallowed policy: each refused on its bindings.
		for _, bad := range []struct {
			name, pattern, reason, msg string
		}{
			{"bad-pattern", "salt_role_{pillar[roles]", v1alpha1.RenderFailedReason, `expected '}' before end of string`},
			{"bad-grain", "salt_os_{grains[os]}", v1alpha1.ValidationFailedReason, "UntrustedGrain"},
			{"bad-policy", "admin", v1alpha1.PolicyNotAllowedReason, `"admin" is not in allowedPolicies`},
		} {
			bt := &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: bad.name}, Spec: v1alpha1.MinionTemplateSpec{
				ConnectionRef:   v1alpha1.VaultConnectionReference{Name: "vault"},
				Policies:        &v1alpha1.PoliciesSpec{Assign: []string{bad.pattern}},
				AllowedPolicies: []string{"salt_*"},
			}}
			s.must(s.c.Create(ctx, bt))
			bb := binding("salt", bad.name, bad.name+"-m", map[string]any{"roles": []string{"web"}})
			bb.Spec.TemplateRef.Name = bad.name
			s.must(s.c.Create(ctx, bb))
			s.waitStalled("salt", bad.name, bad.reason, bad.msg)
			if s.vaultRead("auth/salt-minions/role/"+bad.name+"-m") != nil {
				t.Errorf("%s: a role was written", bad.name)
			}
		}
		s.waitReady("salt", "web01")
	})

	s.run("delete removes Vault objects, or retains them", func(t *testing.T) {
		d := s.waitReady("salt", "db01")
		roleID := d.Status.AppRole.RoleID
		s.must(s.c.Delete(ctx, d))
		eventually(t, 20*time.Second, "db01 gone", func() error {
			if err := s.c.Get(ctx, types.NamespacedName{Namespace: "salt", Name: "db01"}, &v1alpha1.MinionBinding{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there: %v", err)
			}
			return nil
		})
		if s.vaultRead("auth/salt-minions/role/db01") != nil || s.vaultRead("identity/entity/name/salt_minion_db01") != nil {
			t.Error("Vault objects of db01 remain")
		}
		sec, err := s.root.Logical().Write("identity/lookup/entity", map[string]any{"alias_name": roleID, "alias_mount_accessor": s.accessor()})
		if err != nil || sec != nil {
			t.Errorf("alias of db01 remains: %v %v", sec, err)
		}

		mt := &v1alpha1.MinionTemplate{}
		s.must(s.c.Get(ctx, types.NamespacedName{Name: "salt-minions"}, mt))
		mt.Spec.DeletionPolicy = v1alpha1.DeletionPolicyRetain
		s.must(s.c.Update(ctx, mt))
		time.Sleep(200 * time.Millisecond)
		s.must(s.c.Delete(ctx, s.binding("salt", "web01")))
		eventually(t, 20*time.Second, "web01 gone", func() error {
			if s.binding("salt", "web01") != nil {
				return fmt.Errorf("still there")
			}
			return nil
		})
		if s.vaultRead("auth/salt-minions/role/web01") == nil {
			t.Error("Retain deleted the role")
		}
	})

	s.run("objects retained for the owner are not handed to the duplicate; released by hand, they are, clean", func(t *testing.T) {
		b := s.waitReason("salt", "dup", v1alpha1.MinionIDRetainedReason)
		if c := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition); !strings.Contains(c.Message, "salt/web01") {
			t.Errorf("the refusal does not name the binding the objects are kept for: %q", c.Message)
		}
		oldRoleID := fmt.Sprint(s.vaultRead("auth/salt-minions/role/web01/role-id")["role_id"])
		// An administrator releases the minion ID: deletes role and entity.
		_, err := s.root.Logical().DeleteWithContext(ctx, "auth/salt-minions/role/web01")
		s.must(err)
		_, err = s.root.Logical().DeleteWithContext(ctx, "identity/entity/name/salt_minion_web01")
		s.must(err)
		s.requestReconcile("salt", "dup")
		s.waitReady("salt", "dup")
		if roleID := fmt.Sprint(s.vaultRead("auth/salt-minions/role/web01/role-id")["role_id"]); roleID == oldRoleID || roleID == "<nil>" {
			t.Errorf("the new owner's role ID %s (the old one %s)", roleID, oldRoleID)
		}
	})

	s.run("Vault unreachable: conditions say so, converges when it is back", func(t *testing.T) {
		s.must(s.c.Create(ctx, &v1alpha1.VaultConnection{
			ObjectMeta: metav1.ObjectMeta{Name: "down"},
			Spec: v1alpha1.VaultConnectionSpec{
				Address: "http://127.0.0.1:1", Timeout: &metav1.Duration{Duration: time.Second},
				Auth: v1alpha1.VaultAuth{Token: &v1alpha1.TokenAuth{SecretRef: v1alpha1.TokenSecretReference{
					SecretReference: v1alpha1.SecretReference{Name: "vault-token", Namespace: "minionvault-system"}}}},
			},
		}))
		mt := &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: "via-down"}, Spec: v1alpha1.MinionTemplateSpec{
			ConnectionRef: v1alpha1.VaultConnectionReference{Name: "down"},
		}}
		s.must(s.c.Create(ctx, mt))
		b := binding("salt", "late01", "late01", map[string]any{})
		b.Spec.TemplateRef.Name = "via-down"
		s.must(s.c.Create(ctx, b))
		eventually(t, 30*time.Second, "VaultUnavailable", func() error {
			b := s.binding("salt", "late01")
			ready := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition)
			rec := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReconcilingCondition)
			if ready == nil || ready.Reason != v1alpha1.VaultUnavailableReason || rec == nil || rec.Status != metav1.ConditionTrue {
				return fmt.Errorf("conditions %+v", b.Status.Conditions)
			}
			return nil
		})
		vc := &v1alpha1.VaultConnection{}
		s.must(s.c.Get(ctx, types.NamespacedName{Name: "down"}, vc))
		vc.Spec.Address = s.env.Vault.Addr
		s.must(s.c.Update(ctx, vc))
		s.waitReady("salt", "late01")
	})

	s.run("deletion with Vault unreachable completes once it is back", func(t *testing.T) {
		b := s.waitReady("salt", "late01")
		vc := &v1alpha1.VaultConnection{}
		s.must(s.c.Get(ctx, types.NamespacedName{Name: "down"}, vc))
		vc.Spec.Address = "http://127.0.0.1:1"
		s.must(s.c.Update(ctx, vc))
		s.must(s.c.Delete(ctx, b))
		eventually(t, 30*time.Second, "deletion blocked", func() error {
			b := s.binding("salt", "late01")
			if b == nil {
				return fmt.Errorf("deleted while Vault was unreachable")
			}
			if c := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition); c == nil || c.Reason != v1alpha1.DeletionBlockedReason {
				return fmt.Errorf("conditions %+v", b.Status.Conditions)
			}
			return nil
		})
		if s.vaultRead("auth/salt-minions/role/late01") == nil {
			t.Fatal("role gone although Vault was unreachable")
		}
		s.must(s.c.Get(ctx, types.NamespacedName{Name: "down"}, vc))
		vc.Spec.Address = s.env.Vault.Addr
		s.must(s.c.Update(ctx, vc))
		eventually(t, 60*time.Second, "late01 deleted", func() error {
			if s.binding("salt", "late01") != nil {
				return fmt.Errorf("still there")
			}
			return nil
		})
		if s.vaultRead("auth/salt-minions/role/late01") != nil {
			t.Error("role of late01 remains")
		}
	})

	s.run("a policy the operator does not own is not overwritten", func(t *testing.T) {
		_, err := s.root.Logical().Write("sys/policies/acl/salt_role_ops", map[string]any{"policy": `path "secret/*" { capabilities = ["read"] }`})
		s.must(err)
		s.must(s.c.Create(ctx, binding("salt", "ops01", "ops01", map[string]any{"roles": []string{"ops"}})))
		s.waitReady("salt", "ops01")
		eventually(t, 20*time.Second, "PolicyNotOwned", func() error {
			mt := &v1alpha1.MinionTemplate{}
			if err := s.c.Get(ctx, types.NamespacedName{Name: "salt-minions"}, mt); err != nil {
				return err
			}
			c := apimeta.FindStatusCondition(mt.Status.Conditions, v1alpha1.ReadyCondition)
			if c == nil || c.Reason != v1alpha1.PolicyNotOwnedReason || !strings.Contains(c.Message, "salt_role_ops") {
				return fmt.Errorf("conditions %+v", mt.Status.Conditions)
			}
			return nil
		})
		if p := fmt.Sprint(s.vaultRead("sys/policies/acl/salt_role_ops")["policy"]); strings.Contains(p, "minion-vault-operator") {
			t.Errorf("foreign policy overwritten: %s", p)
		}
		s.event("salt-minions", v1alpha1.PolicyNotOwnedReason)
	})

	s.run("deletion does not hang when the connection is gone", func(t *testing.T) {
		b := binding("salt", "late02", "late02", map[string]any{})
		b.Spec.TemplateRef.Name = "via-down"
		s.must(s.c.Create(ctx, b))
		s.waitReady("salt", "late02")
		s.must(s.c.Delete(ctx, &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "down"}}))
		s.must(s.c.Delete(ctx, s.binding("salt", "late02")))
		eventually(t, 30*time.Second, "late02 gone", func() error {
			if s.binding("salt", "late02") != nil {
				return fmt.Errorf("still there")
			}
			return nil
		})
		s.event("late02", v1alpha1.DeletionBlockedReason)
	})
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
