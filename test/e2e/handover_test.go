//go:build integration

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// TestOwnershipNeverPassesByAccident: the moments when the proof of
// ownership could break or pass to whoever asks next, against the real
// servers, with the operator on the shipped policy (widened to every
// AppRole mount) and its Vault calls counted from Vault's audit log:
// hand edits right before a switch and before a deletion, a restore with
// a claimant that waited, a handover across namespaces, and a record that
// cannot be read.
func TestOwnershipNeverPassesByAccident(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	audit := s.vaultAudit(t)
	operator := s.accessorOf(t, s.token)
	s.enableMount(t, "salt-minions-b")
	s.must(s.root.Sys().PutPolicyWithContext(ctx, "minionvault-operator",
		strings.ReplaceAll(operatorPolicy(t), "auth/salt-minions/", "auth/+/")))
	s.must(client.IgnoreAlreadyExists(s.c.Create(ctx, tokenConnection("ho-vault", s.env.Vault.Addr, "vault-token"))))
	hoTemplate := func(name, mount, prefix string) *v1alpha1.MinionTemplate {
		return minionTemplate(name, "ho-vault", mount, prefix)
	}
	hoBinding := func(ns, name, minion, tpl string, roles ...string) *v1alpha1.MinionBinding {
		b := binding(ns, name, minion, map[string]any{"roles": roles})
		b.Spec.TemplateRef.Name = tpl
		return b
	}
	namespaces := func(names ...string) {
		for _, ns := range names {
			s.must(client.IgnoreAlreadyExists(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})))
		}
	}

	s.run("hand edits right before a switch and before a deletion leave nothing in Vault", func(t *testing.T) {
		namespaces("ho", "ho-next")
		edits := []struct {
			name string
			edit func(t *testing.T, entity string)
		}{
			{"an alias deleted by hand", func(t *testing.T, entity string) {
				e := s.vaultRead("identity/entity/name/" + entity)
				if e == nil || len(e["aliases"].([]any)) != 1 {
					t.Fatalf("entity %s: %v", entity, e)
				}
				_, err := s.root.Logical().DeleteWithContext(ctx, "identity/entity-alias/id/"+fmt.Sprint(e["aliases"].([]any)[0].(map[string]any)["id"]))
				s.must(err)
			}},
			{"the entity deleted by hand", func(t *testing.T, entity string) {
				_, err := s.root.Logical().DeleteWithContext(ctx, "identity/entity/name/"+entity)
				s.must(err)
			}},
			{"the metadata map replaced (a Salt master's entity write)", func(t *testing.T, entity string) {
				_, err := s.root.Logical().WriteWithContext(ctx, "identity/entity/name/"+entity, map[string]any{"metadata": map[string]string{"minion-id": "x"}})
				s.must(err)
			}},
		}
		for i, ed := range edits {
			minion := fmt.Sprintf("hand%02d", i)
			ta, tb := fmt.Sprintf("ho-a%d", i), fmt.Sprintf("ho-b%d", i)
			pa, pb := fmt.Sprintf("hoa%d", i), fmt.Sprintf("hob%d", i)
			s.must(s.c.Create(ctx, hoTemplate(ta, "salt-minions", pa)))
			s.must(s.c.Create(ctx, hoTemplate(tb, "salt-minions-b", pb)))
			s.must(s.c.Create(ctx, hoBinding("ho", minion, minion, ta, "web")))
			s.waitReady("ho", minion)
			oldRoleID := fmt.Sprint(s.vaultRead("auth/salt-minions/role/" + minion + "/role-id")["role_id"])
			oldSecret := s.secretID(t, "salt-minions", minion)

			mark := audit.mark(t)
			ed.edit(t, pa+"_"+minion)
			s.must(s.patchBinding("ho", minion, func(b *v1alpha1.MinionBinding) { b.Spec.TemplateRef.Name = tb }))
			s.waitReady("ho", minion)
			if s.vaultRead("auth/salt-minions/role/"+minion) != nil {
				t.Errorf("%s, then a switch: the old role is still in Vault", ed.name)
			}
			if e := s.vaultRead("identity/entity/name/" + pa + "_" + minion); e != nil {
				t.Errorf("%s, then a switch: the old entity is still in Vault: %v", ed.name, e["metadata"])
			}
			if _, err := s.anon(t).Logical().WriteWithContext(ctx, "auth/salt-minions/login", map[string]any{"role_id": oldRoleID, "secret_id": oldSecret}); err == nil {
				t.Errorf("%s, then a switch: a secret ID of the old role still logs in", ed.name)
			}
			newSecret := s.secretID(t, "salt-minions-b", minion)
			newRoleID := fmt.Sprint(s.vaultRead("auth/salt-minions-b/role/" + minion + "/role-id")["role_id"])

			ed.edit(t, pb+"_"+minion)
			s.must(s.c.Delete(ctx, s.binding("ho", minion)))
			s.waitGone("ho", minion)
			audit.settle(t)
			calls := audit.since(t, mark, operator)
			t.Logf("%s, a switch, the same edit, the deletion: %d Vault writes and deletes by the operator: %s", ed.name, calls.Writes, strings.Join(calls.Paths, ", "))
			for _, mount := range []string{"salt-minions", "salt-minions-b"} {
				if r := s.vaultRead("auth/" + mount + "/role/" + minion); r != nil {
					t.Errorf("%s, then the deletion: role %s/%s is left with token_policies %v", ed.name, mount, minion, r["token_policies"])
				}
			}
			if _, err := s.anon(t).Logical().WriteWithContext(ctx, "auth/salt-minions-b/login", map[string]any{"role_id": newRoleID, "secret_id": newSecret}); err == nil {
				t.Errorf("%s, then the deletion: a secret ID issued before still logs in", ed.name)
			}
			for _, e := range []string{pa + "_" + minion, pb + "_" + minion} {
				if got := s.vaultRead("identity/entity/name/" + e); got != nil {
					t.Errorf("%s: entity %s is left: %v", ed.name, e, got["metadata"])
				}
			}

			// The minion's next binding, elsewhere, is Ready; then the last
			// binding and the templates go, and nothing is left.
			s.must(s.c.Create(ctx, hoBinding("ho-next", minion, minion, ta, "db")))
			s.waitReady("ho-next", minion)
			s.must(s.c.Delete(ctx, s.binding("ho-next", minion)))
			s.waitGone("ho-next", minion)
			for _, tpl := range []string{ta, tb} {
				s.must(s.c.Delete(ctx, &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: tpl}}))
			}
			eventually(t, 30*time.Second, "nothing of "+minion+" in Vault", func() error {
				names, err := s.root.Sys().ListPoliciesWithContext(ctx)
				if err != nil {
					return err
				}
				for _, n := range names {
					if strings.HasPrefix(n, pa+"_") || strings.HasPrefix(n, pb+"_") {
						return fmt.Errorf("policy %s is left", n)
					}
				}
				for _, p := range []string{"auth/salt-minions/role/" + minion, "auth/salt-minions-b/role/" + minion,
					"identity/entity/name/" + pa + "_" + minion, "identity/entity/name/" + pb + "_" + minion} {
					if s.vaultRead(p) != nil {
						return fmt.Errorf("%s is left", p)
					}
				}
				return nil
			})
		}
	})

	s.run("a restore outranks the claimant that waited", func(t *testing.T) {
		namespaces("rs-victim", "rs-squat")
		retain := hoTemplate("rs-t", "salt-minions", "rs")
		retain.Spec.DeletionPolicy = v1alpha1.DeletionPolicyRetain
		s.must(s.c.Create(ctx, retain))
		squatterClient := s.tenantClient(t, "rs-squatter", "rs-squat")
		for i, how := range []string{"deleted with deletionPolicy Retain, restored later", "finalizer stripped, restored while the operator was down"} {
			minion := fmt.Sprintf("rst%02d", i)
			victim := hoBinding("rs-victim", minion, minion, "rs-t", "web")
			s.must(s.c.Create(ctx, victim.DeepCopy()))
			s.waitReady("rs-victim", minion)
			before := s.snapshot(t, "salt-minions", minion, "rs_"+minion)
			secret := s.secretID(t, "salt-minions", minion) // the Salt master's, not used yet
			// A tenant keeps a binding with the victim's minion ID.
			s.must(squatterClient.Create(ctx, hoBinding("rs-squat", minion, minion, "rs-t", "admin")))
			s.waitReason("rs-squat", minion, v1alpha1.DuplicateMinionIDReason)

			mark := audit.mark(t)
			if i == 0 {
				s.must(s.c.Delete(ctx, s.binding("rs-victim", minion)))
				s.waitGone("rs-victim", minion)
				// Woken by the release, the claimant is handed nothing.
				s.waitReason("rs-squat", minion, v1alpha1.MinionIDRetainedReason)
				s.must(s.c.Create(ctx, victim.DeepCopy()))
			} else {
				s.stopOperator()
				s.must(s.patchBinding("rs-victim", minion, func(b *v1alpha1.MinionBinding) { b.Finalizers = nil }))
				s.must(s.c.Delete(ctx, s.binding("rs-victim", minion)))
				s.waitGone("rs-victim", minion)
				s.must(s.c.Create(ctx, victim.DeepCopy()))
				s.runOperator(t)
			}
			if restored := s.waitReady("rs-victim", minion); restored.Status.AppRole == nil || restored.Status.AppRole.RoleID == "" {
				// Only a recorded role puts it ahead of the claimant in the claim order.
				t.Errorf("%s: the restored binding is Ready without its role in status: %+v", how, restored.Status.AppRole)
			}
			s.requestReconcile("rs-squat", minion)
			// On a failure, what both bindings' status said: the claim order is read from it.
			eventually(t, 30*time.Second, "the claimant refused with "+v1alpha1.DuplicateMinionIDReason, func() error {
				sq, vi := s.binding("rs-squat", minion), s.binding("rs-victim", minion)
				if r := apimeta.FindStatusCondition(sq.Status.Conditions, v1alpha1.ReadyCondition); r == nil || r.Reason != v1alpha1.DuplicateMinionIDReason {
					return fmt.Errorf("claimant's Ready %+v (last handled request %q); restored binding's appRole %+v, conditions %+v",
						r, sq.Status.LastHandledReconcileAt, vi.Status.AppRole, vi.Status.Conditions)
				}
				return nil
			})
			audit.settle(t)
			calls := audit.since(t, mark, operator)
			t.Logf("%s: %d Vault writes by the operator: %s", how, calls.Writes, strings.Join(calls.Paths, ", "))
			after := s.snapshot(t, "salt-minions", minion, "rs_"+minion)
			if after.RoleID != before.RoleID || after.EntityID != before.EntityID || after.Metadata["roles"] != "web" {
				t.Errorf("%s: the restored binding did not get its minion back: %+v -> %+v", how, before, after)
			}
			if _, err := s.anon(t).Logical().WriteWithContext(ctx, "auth/salt-minions/login", map[string]any{"role_id": after.RoleID, "secret_id": secret}); err != nil {
				t.Errorf("%s: the restored minion's secret ID no longer logs in: %v", how, err)
			}
			if sq := s.binding("rs-squat", minion); sq.Status.AppRole != nil || len(sq.Finalizers) != 0 {
				t.Errorf("%s: the claimant was recorded as a writer: %+v %v", how, sq.Status.AppRole, sq.Finalizers)
			}
			// The role and the entity are kept (the entity's marker is
			// rewritten); the template deletes the minion's policies when
			// the binding goes and writes them again when it is back.
			for _, p := range calls.Paths {
				if !strings.Contains(p, "sys/policies/acl/rs_") && p != "update identity/entity/name/rs_"+minion {
					t.Errorf("%s: the restore wrote %s", how, p)
				}
			}
		}
	})

	s.run("a lost minion goes to another namespace only once collected, and starts clean", func(t *testing.T) {
		namespaces("hx-a", "hx-b")
		s.must(s.c.Create(ctx, hoTemplate("hx-t", "salt-minions", "hx")))
		a, b := s.tenantClient(t, "hx-tenant-a", "hx-a"), s.tenantClient(t, "hx-tenant-b", "hx-b")
		s.must(a.Create(ctx, hoBinding("hx-a", "web", "hx01", "hx-t", "web")))
		s.waitReady("hx-a", "web")
		oldRoleID := fmt.Sprint(s.vaultRead("auth/salt-minions/role/hx01/role-id")["role_id"])
		unused := s.secretID(t, "salt-minions", "hx01")
		login, err := s.anon(t).Logical().WriteWithContext(ctx, "auth/salt-minions/login", map[string]any{"role_id": oldRoleID, "secret_id": s.secretID(t, "salt-minions", "hx01")})
		s.must(err)
		oldToken := login.Auth.ClientToken

		// tenant-a strips its own binding's finalizer and deletes it: the
		// operator removes nothing.
		held := &v1alpha1.MinionBinding{}
		s.must(a.Get(ctx, client.ObjectKey{Namespace: "hx-a", Name: "web"}, held))
		patch := client.MergeFrom(held.DeepCopy())
		held.Finalizers = nil
		s.must(a.Patch(ctx, held, patch))
		s.must(a.Delete(ctx, held))
		s.waitGone("hx-a", "web")

		// Lost, not released: the other tenant's binding waits and writes
		// nothing until the minion is collected (here an administrator
		// asks; otherwise the restore window's end).
		mark := audit.mark(t)
		s.must(b.Create(ctx, hoBinding("hx-b", "web", "hx01", "hx-t", "db")))
		s.waitReason("hx-b", "web", v1alpha1.MinionIDLostReason)
		audit.settle(t)
		if calls := audit.since(t, mark, operator); slices.ContainsFunc(calls.Paths, func(p string) bool {
			return strings.HasSuffix(p, "auth/salt-minions/role/hx01") || strings.HasPrefix(p, "create identity/entity-alias")
		}) {
			t.Fatalf("the claimant of a lost minion wrote: %v", calls.Paths)
		}
		s.must(s.patchConnection("ho-vault", func(c *v1alpha1.VaultConnection) {
			c.Annotations = map[string]string{v1alpha1.CollectAnnotation: string(held.UID)}
		}))
		nb := s.waitReady("hx-b", "web")
		s.connectionEvent(t, "ho-vault", "MinionCollected", string(held.UID))
		audit.settle(t)
		calls := audit.since(t, mark, operator)
		t.Logf("the loss, the collection, the new minion: %d Vault writes and deletes by the operator: %s", calls.Writes, strings.Join(calls.Paths, ", "))
		newRoleID := fmt.Sprint(s.vaultRead("auth/salt-minions/role/hx01/role-id")["role_id"])
		if newRoleID == oldRoleID || nb.Status.AppRole.RoleID != newRoleID {
			t.Errorf("role ID %s -> %s (status %s): kept across tenants", oldRoleID, newRoleID, nb.Status.AppRole.RoleID)
		}
		for _, roleID := range []string{oldRoleID, newRoleID} {
			if _, err := s.anon(t).Logical().WriteWithContext(ctx, "auth/salt-minions/login", map[string]any{"role_id": roleID, "secret_id": unused}); err == nil {
				t.Errorf("a secret ID issued under tenant-a still logs in (role ID %s), now with tenant-b's policies", roleID)
			}
		}
		tok, err := s.root.Clone()
		s.must(err)
		tok.SetToken(oldToken)
		if _, err := tok.Auth().Token().LookupSelfWithContext(ctx); err == nil {
			t.Error("a token of a login under tenant-a still works after the handover")
		}
		md := rawMetadataOf(s.vaultRead("identity/entity/name/hx_hx01"))
		if owner, _ := ownership.ParseMarker(md[ownership.MarkerKey]); owner.Namespace != "hx-b" || md["roles"] != "db" {
			t.Errorf("entity after the handover: %v", md)
		}
		if got := s.loginEntity(t, "salt-minions", "hx01"); got != nb.Status.Entity.ID {
			t.Errorf("a fresh login got entity %s, want tenant-b's %s", got, nb.Status.Entity.ID)
		}
	})

	s.run("a record that cannot be read stalls, wakes when removed, and never blocks deletion", func(t *testing.T) {
		namespaces("rec")
		s.must(s.c.Create(ctx, hoTemplate("rec-t", "salt-minions", "rec")))
		tenant := s.tenantClient(t, "rec-tenant", "rec")
		s.must(tenant.Create(ctx, hoBinding("rec", "web", "rec01", "rec-t", "web")))
		s.waitReady("rec", "web")
		broken := `[{"vault":"` + s.vaultKey(t, "ho-vault") + `","connection":"ho-vault","mount":"salt-minions","entity":".."}]`
		setRecord := func(raw string) {
			b := &v1alpha1.MinionBinding{}
			s.must(tenant.Get(ctx, client.ObjectKey{Namespace: "rec", Name: "web"}, b))
			patch := client.MergeFrom(b.DeepCopy())
			if raw == "" {
				delete(b.Annotations, v1alpha1.VaultObjectsAnnotation)
			} else {
				b.Annotations[v1alpha1.VaultObjectsAnnotation] = raw
			}
			s.must(tenant.Patch(ctx, b, patch))
		}
		setRecord(broken)
		s.waitStalled("rec", "web", v1alpha1.ValidationFailedReason, "cannot name an object")
		setRecord("") // no reconcile request: the change itself wakes it
		s.waitReady("rec", "web")

		setRecord(broken)
		s.waitStalled("rec", "web", v1alpha1.ValidationFailedReason, "cannot name an object")
		s.must(tenant.Delete(ctx, &v1alpha1.MinionBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "rec", Name: "web"}}))
		s.waitGone("rec", "web")
		if s.vaultRead("auth/salt-minions/role/rec01") != nil || s.vaultRead("identity/entity/name/rec_rec01") != nil {
			t.Error("the deletion left the minion's role or entity")
		}
	})
}

// minionTemplate is a template of its own names, every namespace may bind:
// entities <prefix>_<minion> on mount, a policy per minion
// (<prefix>_minion_<minion>) and one per role (<prefix>_role_<role>).
func minionTemplate(name, conn, mount, prefix string) *v1alpha1.MinionTemplate {
	tpl := connTemplate(name, conn)
	tpl.Spec.NamespaceSelector = nil
	tpl.Spec.AppRole = &v1alpha1.MinionAppRoleSpec{Mount: mount}
	tpl.Spec.EntityName = prefix + "_{minion}"
	tpl.Spec.Policies.Assign = []string{prefix + "_minion_{minion}", prefix + "_role_{pillar[roles]}"}
	tpl.Spec.AllowedPolicies = []string{prefix + "_*"}
	tpl.Spec.PolicyDocuments = []v1alpha1.PolicyDocument{
		{Name: prefix + "_minion_{minion}", Rules: []v1alpha1.PolicyRule{{Path: "salt/data/minions/{minion}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}},
		{Name: prefix + "_role_{pillar[roles]}", Rules: []v1alpha1.PolicyRule{{Path: "salt/data/roles/{pillar[roles]}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}},
	}
	return tpl
}

// enableMount enables an AppRole mount, unless it is there already (the
// suites share one Vault).
func (s *suite) enableMount(t *testing.T, mount string) {
	t.Helper()
	mounts, err := s.root.Sys().ListAuthWithContext(context.Background())
	s.must(err)
	if _, ok := mounts[mount+"/"]; ok {
		return
	}
	s.must(s.root.Sys().EnableAuthWithOptionsWithContext(context.Background(), mount, &vaultapi.EnableAuthOptions{Type: "approle"}))
}
