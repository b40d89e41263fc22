//go:build integration

package e2e

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// minionSnapshot is what an attack on a minion must not change: its role
// ID, entity ID, alias IDs and metadata, read as Vault's root.
type minionSnapshot struct {
	RoleID, EntityID string
	AliasIDs         []string
	Metadata         map[string]string
}

func (s *suite) snapshot(t *testing.T, mount, role, entity string) minionSnapshot {
	t.Helper()
	var snap minionSnapshot
	if r := s.vaultRead("auth/" + mount + "/role/" + role + "/role-id"); r != nil {
		snap.RoleID = fmt.Sprint(r["role_id"])
	}
	if e := s.vaultRead("identity/entity/name/" + entity); e != nil {
		snap.EntityID = fmt.Sprint(e["id"])
		snap.Metadata = rawMetadataOf(e)
		if as, ok := e["aliases"].([]any); ok {
			for _, a := range as {
				snap.AliasIDs = append(snap.AliasIDs, fmt.Sprint(a.(map[string]any)["id"]))
			}
		}
	}
	return snap
}

func (a minionSnapshot) equal(b minionSnapshot) bool {
	return a.RoleID == b.RoleID && a.EntityID == b.EntityID && strings.Join(a.AliasIDs, ",") == strings.Join(b.AliasIDs, ",") &&
		maps.Equal(a.Metadata, b.Metadata)
}

// tenantClient is a user with a client certificate who may do everything
// with MinionBindings in namespace ns, and nothing else: not their status,
// nothing cluster-wide.
func (s *suite) tenantClient(t *testing.T, user, ns string) client.Client {
	t.Helper()
	ctx := context.Background()
	u, err := s.env.Kubernetes.AddUser(envtest.User{Name: user}, nil)
	s.must(err)
	s.must(s.c.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "minionbindings"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"minionbindings"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}}))
	s.must(s.c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "minionbindings"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "minionbindings"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}))
	c, err := client.New(u.Config(), client.Options{Scheme: s.env.Scheme})
	s.must(err)
	// A just-made grant may take a moment to count in the authorizer.
	eventually(t, 20*time.Second, "the tenant's grant", func() error {
		return c.List(ctx, &v1alpha1.MinionBindingList{}, client.InNamespace(ns))
	})
	return c
}

// TestTenantForgeries plays a tenant who may create, edit and delete
// MinionBindings in its own namespace (a namespaced Role, a client
// certificate user) against another tenant's minion and an administrator's
// entity: a binding with the victim's minion ID and a hand-set finalizer,
// with its template or none, records naming the victim's objects, an
// administrator's entity and a mount outside the operator's policy,
// garbage, and a record of 200 KB. Nothing of the victim or the
// administrator changes; the operator deletes nothing of theirs (Vault's
// audit log).
func TestTenantForgeries(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	audit := s.vaultAudit(t)
	operator := s.accessorOf(t, s.token)
	for _, ns := range []string{"tn-victim", "tn-evil"} {
		s.must(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	s.must(s.c.Create(ctx, tokenConnection("tn-vault", s.env.Vault.Addr, "vault-token")))
	tpl := connTemplate("tn-t", "tn-vault")
	tpl.Spec.NamespaceSelector = nil
	s.must(s.c.Create(ctx, tpl))
	s.waitConnectionReady("tn-vault")
	victim := binding("tn-victim", "v1", "tn-v1", map[string]any{"roles": []string{"web"}})
	victim.Spec.TemplateRef.Name = "tn-t"
	s.must(s.c.Create(ctx, victim))
	s.waitReady("tn-victim", "v1")
	// An administrator's entity (no alias, no marker), and an AppRole
	// mount the operator's policy does not reach.
	_, err := s.root.Logical().WriteWithContext(ctx, "identity/entity/name/tn-admin", map[string]any{"metadata": map[string]string{"team": "ops"}})
	s.must(err)
	s.must(s.root.Sys().EnableAuthWithOptionsWithContext(ctx, "tn-other", &vaultapi.EnableAuthOptions{Type: "approle"}))
	_, err = s.root.Logical().WriteWithContext(ctx, "auth/tn-other/role/tn-v1", map[string]any{"token_policies": []string{"default"}})
	s.must(err)

	before := s.snapshot(t, "salt-minions", "tn-v1", "salt_minion_tn-v1")
	admin := s.snapshot(t, "tn-other", "tn-v1", "tn-admin")
	if before.RoleID == "" || before.EntityID == "" || len(before.AliasIDs) != 1 || before.Metadata[ownership.MarkerKey] == "" {
		t.Fatalf("the victim's minion %+v", before)
	}
	conn := &v1alpha1.VaultConnection{}
	s.must(s.c.Get(ctx, client.ObjectKey{Name: "tn-vault"}, conn))
	vaultID := ownership.VaultKey(conn.Status.ClusterID, "")
	place := func(mount, entity string) string {
		return fmt.Sprintf(`{"vault":%q,"connection":"tn-vault","mount":%q,"entity":%q}`, vaultID, mount, entity)
	}
	tenant := s.tenantClient(t, "tenant-evil", "tn-evil")
	mark := audit.mark(t)

	s.run("the tenant cannot write status", func(t *testing.T) {
		b := binding("tn-evil", "probe", "tn-probe", nil)
		b.Spec.TemplateRef.Name = "nope"
		s.must(tenant.Create(ctx, b))
		b.Status.AppRole = &v1alpha1.AppRoleStatus{Mount: "salt-minions", Name: "tn-v1", RoleID: before.RoleID}
		if err := tenant.Status().Update(ctx, b); !apierrors.IsForbidden(err) {
			t.Fatalf("a status update by the tenant: %v, want Forbidden", err)
		}
		s.must(tenant.Delete(ctx, b))
		s.waitGone("tn-evil", "probe")
	})

	forgeries := []struct {
		name, minion, template, record string
		finalizer                      bool
		reason                         string
		stalled                        bool
		forgeAfterReady                string // a record set once the binding is Ready
	}{
		{name: "the victim's minion ID and a hand-set finalizer", minion: "tn-v1", template: "tn-t", finalizer: true,
			reason: v1alpha1.DuplicateMinionIDReason, stalled: true},
		{name: "and a record naming the victim's objects", minion: "TN-V1", template: "tn-t", finalizer: true,
			record: "[" + place("salt-minions", "salt_minion_tn-v1") + "]", reason: v1alpha1.DuplicateMinionIDReason, stalled: true},
		{name: "and a missing template", minion: "tn-v1", template: "nope", finalizer: true,
			record: "[" + place("salt-minions", "salt_minion_tn-v1") + "]", reason: v1alpha1.TemplateNotFoundReason},
		{name: "a minion of its own, then a record naming the victim, the administrator's entity and a mount outside the policy",
			minion: "tn-e1", template: "tn-t",
			forgeAfterReady: "[" + place("salt-minions", "salt_minion_tn-v1") + "," + place("salt-minions", "tn-admin") + "," + place("tn-other", "tn-admin") + "]"},
		{name: "garbage", minion: "tn-e2", template: "tn-t", finalizer: true, record: "{{{ not json",
			reason: v1alpha1.ValidationFailedReason, stalled: true},
		{name: "a record of 200 KB", minion: "tn-e3", template: "tn-t", finalizer: true,
			record: "[" + place("salt-minions", strings.Repeat("x", 200<<10)) + "]", reason: v1alpha1.ValidationFailedReason, stalled: true},
	}
	for i, f := range forgeries {
		s.run(f.name, func(t *testing.T) {
			name := fmt.Sprintf("f%d", i)
			b := binding("tn-evil", name, f.minion, map[string]any{"roles": []string{"web"}})
			b.Spec.TemplateRef.Name = f.template
			if f.finalizer {
				b.Finalizers = []string{v1alpha1.Finalizer}
			}
			if f.record != "" {
				b.Annotations = map[string]string{v1alpha1.VaultObjectsAnnotation: f.record}
			}
			s.must(tenant.Create(ctx, b))
			switch {
			case f.forgeAfterReady != "":
				s.waitReady("tn-evil", name)
				cur := s.binding("tn-evil", name)
				patch := client.MergeFrom(cur.DeepCopy())
				cur.Annotations[v1alpha1.VaultObjectsAnnotation] = f.forgeAfterReady
				s.must(tenant.Patch(ctx, cur, patch))
			case f.stalled:
				s.waitStalled("tn-evil", name, f.reason, "")
			default:
				s.waitReason("tn-evil", name, f.reason)
			}
			s.must(tenant.Delete(ctx, s.binding("tn-evil", name)))
			s.waitGone("tn-evil", name)
			if after := s.snapshot(t, "salt-minions", "tn-v1", "salt_minion_tn-v1"); !after.equal(before) {
				t.Fatalf("the victim's minion changed:\n%+v\n%+v", before, after)
			}
			if after := s.snapshot(t, "tn-other", "tn-v1", "tn-admin"); !after.equal(admin) {
				t.Fatalf("the administrator's objects changed:\n%+v\n%+v", admin, after)
			}
			if f.forgeAfterReady != "" {
				// The tenant's own minion is deleted although its forged
				// record no longer names it (status says where it was).
				if s.vaultRead("identity/entity/name/salt_minion_"+f.minion) != nil || s.vaultRead("auth/salt-minions/role/"+f.minion) != nil {
					t.Errorf("the tenant's own minion %s was left in Vault", f.minion)
				}
			}
		})
	}

	audit.settle(t)
	calls := audit.since(t, mark, operator)
	for _, p := range calls.Paths {
		if strings.Contains(p, "tn-v1") || strings.Contains(p, "tn-admin") || strings.Contains(p, before.EntityID) ||
			(strings.HasPrefix(p, "delete identity/entity-alias/id/") && strings.Contains(strings.Join(before.AliasIDs, ","), strings.TrimPrefix(p, "delete identity/entity-alias/id/"))) {
			t.Errorf("the operator wrote to the victim's or the administrator's objects: %s", p)
		}
	}
	t.Logf("operator during the forgeries: %d reads, %d writes (%s)", calls.Reads, calls.Writes, strings.Join(calls.Paths, ", "))
}

// TestSwitchBetweenTwoConnectionsToOneVault: a binding's templateRef, and a
// template's connectionRef, switched both ways between two connections to
// one Vault, move nothing and delete nothing (Vault's audit log); the
// binding is never Ready while its role or entity is missing.
func TestSwitchBetweenTwoConnectionsToOneVault(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	audit := s.vaultAudit(t)
	operator := s.accessorOf(t, s.token)
	s.must(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tw"}}))
	for _, c := range []string{"tw-a", "tw-b"} {
		s.must(s.c.Create(ctx, tokenConnection(c, s.env.Vault.Addr, "vault-token")))
		tpl := connTemplate("tw-t-"+c, c)
		tpl.Spec.NamespaceSelector = nil
		s.must(s.c.Create(ctx, tpl))
		s.waitConnectionReady(c)
	}
	b := binding("tw", "tw1", "tw1", map[string]any{"roles": []string{"web"}})
	b.Spec.TemplateRef.Name = "tw-t-tw-a"
	s.must(s.c.Create(ctx, b))
	s.waitReady("tw", "tw1")
	before := s.snapshot(t, "salt-minions", "tw1", "salt_minion_tw1")
	mark := audit.mark(t)

	// Watch for Ready=True while an object is missing, all along.
	stop := make(chan struct{})
	bad := make(chan string, 1)
	go func() {
		for {
			select {
			case <-stop:
				close(bad)
				return
			case <-time.After(20 * time.Millisecond):
			}
			cur := s.binding("tw", "tw1")
			if !isReady(cur) {
				continue
			}
			if s.vaultRead("auth/salt-minions/role/tw1") == nil || s.vaultRead("identity/entity/name/salt_minion_tw1") == nil {
				select {
				case bad <- fmt.Sprintf("Ready=True (generation %d) while the role or entity is missing", cur.Generation):
				default:
				}
			}
		}
	}()
	switches := []struct {
		what string
		do   func() error
		conn string
	}{
		{"binding to the template of tw-b", func() error {
			return s.patchBinding("tw", "tw1", func(b *v1alpha1.MinionBinding) { b.Spec.TemplateRef.Name = "tw-t-tw-b" })
		}, "tw-b"},
		{"that template to tw-a", func() error {
			return s.patchTemplate("tw-t-tw-b", func(t *v1alpha1.MinionTemplate) { t.Spec.ConnectionRef.Name = "tw-a" })
		}, "tw-a"},
		{"that template back to tw-b", func() error {
			return s.patchTemplate("tw-t-tw-b", func(t *v1alpha1.MinionTemplate) { t.Spec.ConnectionRef.Name = "tw-b" })
		}, "tw-b"},
		{"binding back to the template of tw-a", func() error {
			return s.patchBinding("tw", "tw1", func(b *v1alpha1.MinionBinding) { b.Spec.TemplateRef.Name = "tw-t-tw-a" })
		}, "tw-a"},
	}
	for _, sw := range switches {
		s.must(sw.do())
		eventually(t, 30*time.Second, "switch of the "+sw.what, func() error {
			cur := s.binding("tw", "tw1")
			if !isReady(cur) || cur.Status.Connection != sw.conn {
				return fmt.Errorf("connection %q, conditions %+v", cur.Status.Connection, cur.Status.Conditions)
			}
			inv, err := ownership.Decode(cur.Annotations[v1alpha1.VaultObjectsAnnotation])
			if err != nil || len(inv) != 1 || inv[0].Connection != sw.conn {
				return fmt.Errorf("record %+v %v", inv, err)
			}
			return nil
		})
		if got := s.loginEntity(t, "salt-minions", "tw1"); got != before.EntityID {
			t.Errorf("after the switch of the %s a login got entity %s, want %s", sw.what, got, before.EntityID)
		}
	}
	close(stop)
	if msg, ok := <-bad; ok && msg != "" {
		t.Error(msg)
	}
	audit.settle(t)
	calls := audit.since(t, mark, operator)
	for _, p := range calls.Paths {
		if strings.HasPrefix(p, "delete ") {
			t.Errorf("a switch within one Vault deleted %s", p)
		}
	}
	after := s.snapshot(t, "salt-minions", "tw1", "salt_minion_tw1")
	if after.RoleID != before.RoleID || after.EntityID != before.EntityID || strings.Join(after.AliasIDs, ",") != strings.Join(before.AliasIDs, ",") {
		t.Errorf("the minion moved: %+v -> %+v", before, after)
	}
	t.Logf("operator over 4 switches: %d reads, %d writes (%s)", calls.Reads, calls.Writes, strings.Join(calls.Paths, ", "))
}

// TestOneMinionOneOwner: two operator processes (the built binary) as
// shards of one cluster (--controllers=bindings --watch-label-selector),
// and two clusters (--cluster-id) on one Vault, each with a binding of the
// same minion ID: exactly one owner, the other refused (MinionIDConflict,
// naming the holder and its cluster), no writes in steady state over
// several resyncs; deleting the refused binding deletes nothing.
func TestOneMinionOneOwner(t *testing.T) {
	s := start(t)
	s.stopOperator() // only the shards below run
	bin := buildCurrent(t)
	ctx := context.Background()
	audit := s.vaultAudit(t)
	s.must(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sh"}}))
	s.must(s.c.Create(ctx, tokenConnection("sh-vault", s.env.Vault.Addr, "vault-token")))
	tpl := connTemplate("sh-t", "sh-vault")
	tpl.Spec.NamespaceSelector = nil
	s.must(s.c.Create(ctx, tpl))
	kubeSystem := &corev1.Namespace{}
	s.must(s.c.Get(ctx, client.ObjectKey{Name: "kube-system"}, kubeSystem))

	for _, tc := range []struct {
		name, clusterB, minion string
	}{
		{"two shards of one cluster", "", "sh1"},
		{"two clusters on one Vault", "cluster-b", "sh2"},
	} {
		s.run(tc.name, func(t *testing.T) {
			shard := func(label, cluster string) func() {
				args := []string{"--controllers=bindings", "--watch-label-selector=shard=" + label, "--default-interval=1h"}
				if cluster != "" {
					args = append(args, "--cluster-id="+cluster)
				}
				return s.runProcess(t, bin, tc.minion+"-shard-"+label, args...)
			}
			stopA := shard("a", "")
			stopB := shard("b", tc.clusterB)
			defer stopA()
			defer stopB()
			a := binding("sh", tc.minion+"-a", tc.minion, map[string]any{"roles": []string{"web"}})
			a.Spec.TemplateRef.Name, a.Labels = "sh-t", map[string]string{"shard": "a"}
			s.must(s.c.Create(ctx, a))
			s.waitReady("sh", a.Name)
			b := binding("sh", tc.minion+"-b", tc.minion, map[string]any{"roles": []string{"web"}})
			b.Spec.TemplateRef.Name, b.Labels = "sh-t", map[string]string{"shard": "b"}
			// Ordered after a: within one cache the index would refuse it
			// first; the shards cannot see each other's bindings.
			time.Sleep(1100 * time.Millisecond)
			s.must(s.c.Create(ctx, b))
			got := s.waitReason("sh", b.Name, v1alpha1.MinionIDConflictReason)
			msg := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ReadyCondition).Message
			if !strings.Contains(msg, "sh/"+a.Name) || !strings.Contains(msg, string(kubeSystem.UID)) {
				t.Errorf("the refusal does not name the holder and its cluster: %q", msg)
			}
			before := s.snapshot(t, "salt-minions", tc.minion, "salt_minion_"+tc.minion)
			mark := audit.mark(t)
			// Steady state: three resyncs of each, forced.
			for range 3 {
				s.requestReconcile("sh", a.Name)
				s.requestReconcile("sh", b.Name)
			}
			audit.settle(t)
			calls := audit.sinceExcept(t, mark, s.accessorOf(t, s.env.Vault.RootToken))
			if calls.Writes != 0 {
				t.Errorf("%d writes in three resyncs of both claimants: %s", calls.Writes, strings.Join(calls.Paths, ", "))
			}
			t.Logf("steady state, three resyncs of both: %d reads, %d writes", calls.Reads, calls.Writes)
			if !isReady(s.binding("sh", a.Name)) {
				t.Errorf("the holder is not Ready: %+v", s.binding("sh", a.Name).Status.Conditions)
			}
			// The refused binding got no finalizer and no record; set both
			// by hand, naming the holder's objects: its deletion still
			// deletes nothing.
			refused := s.binding("sh", b.Name)
			if len(refused.Finalizers) != 0 {
				t.Errorf("a refused binding was given finalizers %v", refused.Finalizers)
			}
			patch := client.MergeFrom(refused.DeepCopy())
			refused.Finalizers = []string{v1alpha1.Finalizer}
			refused.Annotations = map[string]string{v1alpha1.VaultObjectsAnnotation: fmt.Sprintf(
				`[{"vault":%q,"connection":"sh-vault","mount":"salt-minions","entity":"salt_minion_%s"}]`, s.vaultKey(t, "sh-vault"), tc.minion)}
			s.must(s.c.Patch(ctx, refused, patch))
			s.must(s.c.Delete(ctx, s.binding("sh", b.Name)))
			s.waitGone("sh", b.Name)
			if after := s.snapshot(t, "salt-minions", tc.minion, "salt_minion_"+tc.minion); !after.equal(before) {
				t.Fatalf("deleting the refused binding changed the minion:\n%+v\n%+v", before, after)
			}
		})
	}
}

// TestStatusIsOutputOnly: the status of every binding and template
// deleted (a restore without status), and the operator restarted: nothing
// is written to Vault, every binding is Ready again; and a Retain still
// retains when the template went first.
func TestStatusIsOutputOnly(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	audit := s.vaultAudit(t)
	operator := s.accessorOf(t, s.token)
	s.must(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "so"}}))
	s.must(s.c.Create(ctx, tokenConnection("so-vault", s.env.Vault.Addr, "vault-token")))
	tpl := connTemplate("so-t", "so-vault")
	tpl.Spec.NamespaceSelector = nil
	tpl.Spec.DeletionPolicy = v1alpha1.DeletionPolicyRetain
	s.must(s.c.Create(ctx, tpl))
	const n = 5
	for i := range n {
		b := binding("so", fmt.Sprintf("so%d", i), fmt.Sprintf("so%d", i), map[string]any{"roles": []string{"web"}})
		b.Spec.TemplateRef.Name = "so-t"
		s.must(s.c.Create(ctx, b))
	}
	for i := range n {
		s.waitReady("so", fmt.Sprintf("so%d", i))
	}
	before := s.snapshot(t, "salt-minions", "so0", "salt_minion_so0")

	s.stopOperator()
	audit.settle(t)
	mark := audit.mark(t)
	strip := func() {
		for i := range n {
			b := s.binding("so", fmt.Sprintf("so%d", i))
			b.Status = v1alpha1.MinionBindingStatus{}
			s.must(s.c.Status().Update(ctx, b))
		}
		mt := &v1alpha1.MinionTemplate{}
		if err := s.c.Get(ctx, client.ObjectKey{Name: "so-t"}, mt); err == nil {
			mt.Status = v1alpha1.MinionTemplateStatus{}
			s.must(s.c.Status().Update(ctx, mt))
		}
	}
	strip()
	s.runOperator(t)
	for i := range n {
		s.waitReady("so", fmt.Sprintf("so%d", i))
	}
	audit.settle(t)
	if calls := audit.since(t, mark, operator); calls.Writes != 0 {
		t.Errorf("%d Vault writes after status was lost: %s", calls.Writes, strings.Join(calls.Paths, ", "))
	} else {
		t.Logf("after status was lost and a restart: %d reads, 0 writes", calls.Reads)
	}

	// The template goes first, status is lost again, then a binding is
	// deleted: Retain (recorded with its place) still retains.
	mt := &v1alpha1.MinionTemplate{}
	s.must(s.c.Get(ctx, client.ObjectKey{Name: "so-t"}, mt))
	s.must(s.c.Delete(ctx, mt))
	eventually(t, 30*time.Second, "template gone", func() error {
		if err := s.c.Get(ctx, client.ObjectKey{Name: "so-t"}, &v1alpha1.MinionTemplate{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	s.stopOperator()
	strip()
	s.runOperator(t)
	s.must(s.c.Delete(ctx, s.binding("so", "so0")))
	s.waitGone("so", "so0")
	if after := s.snapshot(t, "salt-minions", "so0", "salt_minion_so0"); after.RoleID != before.RoleID || after.EntityID != before.EntityID {
		t.Errorf("Retain did not retain after status was lost: %+v -> %+v", before, after)
	}
}
