//go:build integration

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/cli"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// lostWindow is the restore window of the lost-minion tests: long enough
// to restore a binding in, short enough to wait out.
const lostWindow = 15 * time.Second

// lostFixture is a tenant's minion, its credentials from before it was
// lost, and its binding to restore.
type lostFixture struct {
	s            *suite
	ns, name, id string
	entity       string
	binding      *v1alpha1.MinionBinding
	roleID       string
	// secrets are secret IDs issued before the loss, unused: each check
	// of the credentials logs in with the next (a template may make them
	// single-use).
	secrets []string
	token   string
	uid     types.UID
}

// lostSuite is a suite whose operator keeps lost minions for lostWindow,
// with its connection and template (entities lm_<minion>, a policy per
// minion) and the tenants' namespaces.
func lostSuite(t *testing.T, sweep time.Duration) *suite {
	t.Helper()
	s := startWith(t, func(o *cli.SetupOptions) { o.LostWindow, o.LostSweep = lostWindow, sweep })
	ctx := context.Background()
	s.must(client.IgnoreAlreadyExists(s.c.Create(ctx, tokenConnection("lm-vault", s.env.Vault.Addr, "vault-token"))))
	s.waitConnectionReady("lm-vault")
	if err := s.c.Create(ctx, minionTemplate("lm-t", "lm-vault", "salt-minions", "lm")); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	retain := minionTemplate("lm-keep", "lm-vault", "salt-minions", "lmk")
	retain.Spec.DeletionPolicy = v1alpha1.DeletionPolicyRetain
	s.must(client.IgnoreAlreadyExists(s.c.Create(ctx, retain)))
	for _, ns := range []string{"lm-a", "lm-b"} {
		s.must(client.IgnoreAlreadyExists(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})))
	}
	return s
}

// bound creates a binding and waits for it Ready, then issues its minion
// a secret ID (unused) and logs in with another (a token of a login).
func (s *suite) bound(t *testing.T, c client.Client, ns, name, id, tpl, prefix string) *lostFixture {
	t.Helper()
	b := binding(ns, name, id, map[string]any{"roles": []string{"web"}})
	b.Spec.TemplateRef.Name = tpl
	s.must(c.Create(context.Background(), b.DeepCopy()))
	got := s.waitReady(ns, name)
	f := &lostFixture{s: s, ns: ns, name: name, id: strings.ToLower(id), entity: prefix + "_" + id, binding: b, uid: got.UID}
	f.roleID = got.Status.AppRole.RoleID
	for range 3 {
		f.secrets = append(f.secrets, s.secretID(t, "salt-minions", f.id))
	}
	login, err := s.anon(t).Logical().Write("auth/salt-minions/login", map[string]any{"role_id": f.roleID, "secret_id": s.secretID(t, "salt-minions", f.id)})
	s.must(err)
	f.token = login.Auth.ClientToken
	return f
}

// lose strips the binding's finalizer and deletes it, as its tenant can:
// its deletion never runs.
func (f *lostFixture) lose(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	b := &v1alpha1.MinionBinding{}
	f.s.must(c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: f.name}, b))
	patch := client.MergeFrom(b.DeepCopy())
	b.Finalizers = nil
	f.s.must(c.Patch(ctx, b, patch))
	f.s.must(c.Delete(ctx, b))
	f.s.waitGone(f.ns, f.name)
}

// credentials says whether the secret ID issued before still logs in and
// the token of the login before still works.
func (f *lostFixture) credentials(t *testing.T) (secretLogsIn, tokenWorks bool) {
	t.Helper()
	if len(f.secrets) == 0 {
		t.Fatal("no secret ID from before the loss left to try")
	}
	secret := f.secrets[0]
	f.secrets = f.secrets[1:]
	_, err := f.s.anon(t).Logical().Write("auth/salt-minions/login", map[string]any{"role_id": f.roleID, "secret_id": secret})
	secretLogsIn = err == nil
	tok, err := f.s.root.Clone()
	f.s.must(err)
	tok.SetToken(f.token)
	_, err = tok.Auth().Token().LookupSelf()
	return secretLogsIn, err == nil
}

// inVault says whether the minion's role and entity exist.
func (f *lostFixture) inVault() (role, entity bool) {
	return f.s.vaultRead("auth/salt-minions/role/"+f.id) != nil, f.s.vaultRead("identity/entity/name/"+f.entity) != nil
}

// lostSince is the entity's lost mark.
func (f *lostFixture) lostSince(t *testing.T) time.Time {
	t.Helper()
	var since time.Time
	eventually(t, 20*time.Second, "the lost mark on "+f.entity, func() error {
		e := f.s.vaultRead("identity/entity/name/" + f.entity)
		if e == nil {
			return fmt.Errorf("entity %s is gone", f.entity)
		}
		var ok bool
		if since, ok = ownership.LostSince(rawMetadataOf(e)); !ok {
			return fmt.Errorf("not marked lost: %v", rawMetadataOf(e))
		}
		return nil
	})
	return since
}

// waitCollected waits until the minion's role and entity are gone, and
// says when that was seen.
func (f *lostFixture) waitCollected(t *testing.T, within time.Duration) time.Time {
	t.Helper()
	eventually(t, within, "the lost minion "+f.id+" collected", func() error {
		if role, entity := f.inVault(); role || entity {
			return fmt.Errorf("role %v, entity %v still in Vault", role, entity)
		}
		return nil
	})
	return time.Now()
}

// connectionEvent waits for an event of reason on the connection whose
// note contains part.
func (s *suite) connectionEvent(t *testing.T, conn, reason, part string) string {
	t.Helper()
	var note string
	eventually(t, 20*time.Second, "event "+reason+" on "+conn+" naming "+part, func() error {
		list := &eventsv1.EventList{}
		if err := s.c.List(context.Background(), list); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == conn && e.Reason == reason && strings.Contains(e.Note, part) {
				note = e.Note
				return nil
			}
		}
		return fmt.Errorf("none among %d events", len(list.Items))
	})
	return note
}

// readyMessage is a binding's Ready condition's reason and message.
func (s *suite) readyOf(ns, name string) (reason, message string) {
	b := s.binding(ns, name)
	if b == nil {
		return "", ""
	}
	if c := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition); c != nil {
		return c.Reason, c.Message
	}
	return "", ""
}

// minionWrites are the operator's Vault writes and deletes to one
// minion's role, entity and aliases (by the role ID names) after mark, from
// the audit log: "operation path".
func minionWrites(calls vaultCalls, id, entity string) (writes, deletes []string) {
	for _, p := range calls.Paths {
		op, path, _ := strings.Cut(p, " ")
		if path != "auth/salt-minions/role/"+id && !strings.EqualFold(path, "identity/entity/name/"+entity) {
			continue
		}
		if op == "delete" {
			deletes = append(deletes, p)
		} else {
			writes = append(writes, p)
		}
	}
	return writes, deletes
}

// TestLostMinions: a binding gone without its deletion (its tenant
// stripped the finalizer) is lost, not released. Its objects are kept for
// it for the restore window: a claimant of its minion ID in another
// namespace waits and writes nothing, the binding restored under its name
// takes them back with their credentials; after the window the operator
// deletes them (the secret IDs and tokens from before stop working) and
// the first claimant creates the minion afresh. An administrator collects
// one earlier, or releases a retained one, through its VaultConnection.
// Vault's audit log counts the operator's writes and deletes.
func TestLostMinions(t *testing.T) {
	s := lostSuite(t, time.Hour)
	ctx := context.Background()
	audit := s.vaultAudit(t)
	operator := s.accessorOf(t, s.token)
	tenantA := s.tenantClient(t, "lm-tenant-a", "lm-a")
	tenantB := s.tenantClient(t, "lm-tenant-b", "lm-b")

	s.run("restored within the window: it takes its minion back, the claimant waits and writes nothing", func(t *testing.T) {
		f := s.bound(t, tenantA, "lm-a", "web", "lm01", "lm-t", "lm")
		claimant := binding("lm-b", "web", "LM01", map[string]any{"roles": []string{"admin"}}) // the same minion ID but for its case
		claimant.Spec.TemplateRef.Name = "lm-t"
		s.must(tenantB.Create(ctx, claimant))
		s.waitReason("lm-b", "web", v1alpha1.DuplicateMinionIDReason)

		mark := audit.mark(t)
		f.lose(t, tenantA)
		s.waitReason("lm-b", "web", v1alpha1.MinionIDLostReason)
		since := f.lostSince(t)
		eventually(t, 20*time.Second, "the claimant told whose minion it is and until when", func() error {
			if _, msg := s.readyOf("lm-b", "web"); !strings.Contains(msg, "lm-a/web") || !strings.Contains(msg, ownership.LostValue(since.Add(lostWindow))) {
				return fmt.Errorf("message %q", msg)
			}
			return nil
		})
		s.connectionEvent(t, "lm-vault", "MinionLost", string(f.uid))
		if secret, token := f.credentials(t); !secret || !token {
			t.Fatalf("within the window, the lost minion's secret ID logs in %v, its token works %v", secret, token)
		}

		s.must(tenantA.Create(ctx, f.binding.DeepCopy()))
		restored := s.waitReady("lm-a", "web")
		if restored.Status.AppRole == nil || restored.Status.AppRole.RoleID != f.roleID {
			t.Fatalf("the restored binding's role ID: %+v, want %s", restored.Status.AppRole, f.roleID)
		}
		if secret, token := f.credentials(t); !secret || !token {
			t.Errorf("restored: the secret ID issued before the loss logs in %v, the token of a login before works %v", secret, token)
		}
		s.requestReconcile("lm-b", "web")
		s.waitReason("lm-b", "web", v1alpha1.DuplicateMinionIDReason)
		if md := rawMetadataOf(s.vaultRead("identity/entity/name/" + f.entity)); md[ownership.LostKey] != "" || md["roles"] != "web" {
			t.Errorf("restored entity metadata: %v", md)
		}
		audit.settle(t)
		writes, deletes := minionWrites(audit.since(t, mark, operator), f.id, f.entity)
		t.Logf("the loss, the claimant's wait and the restore: %d Vault writes and %d deletes to the minion's role and entity by the operator: %v",
			len(writes), len(deletes), append(writes, deletes...))
		// The lost mark, then the restored binding's marker: nothing by the claimant.
		if len(writes) != 2 || len(deletes) != 0 {
			t.Errorf("writes %v, deletes %v: want the lost mark and the restore's marker only", writes, deletes)
		}
		if sq := s.binding("lm-b", "web"); sq.Status.AppRole != nil || len(sq.Finalizers) != 0 {
			t.Errorf("the claimant was recorded as a writer: %+v %v", sq.Status.AppRole, sq.Finalizers)
		}
	})

	s.run("after the window: collected, the first claimant creates the minion afresh", func(t *testing.T) {
		f := s.bound(t, tenantA, "lm-a", "db", "lm02", "lm-t", "lm")
		claimant := binding("lm-b", "db", "lm02", map[string]any{"roles": []string{"db"}})
		claimant.Spec.TemplateRef.Name = "lm-t"
		s.must(tenantB.Create(ctx, claimant))
		s.waitReason("lm-b", "db", v1alpha1.DuplicateMinionIDReason)
		mark := audit.mark(t)
		f.lose(t, tenantA)
		since := f.lostSince(t)
		fresh := s.waitReadyWithin("lm-b", "db", lostWindow+30*time.Second)
		collected := time.Now()
		if d := collected.Sub(since); d < lostWindow {
			t.Fatalf("the claimant held the minion %s after the loss, before the window of %s ended", d, lostWindow)
		}
		s.connectionEvent(t, "lm-vault", "MinionCollected", string(f.uid))
		if secret, token := f.credentials(t); secret || token {
			t.Errorf("collected: the secret ID from before logs in %v, the token from before works %v", secret, token)
		}
		if fresh.Status.AppRole.RoleID == f.roleID {
			t.Errorf("the claimant got the lost minion's role ID %s", f.roleID)
		}
		md := rawMetadataOf(s.vaultRead("identity/entity/name/" + f.entity))
		if owner, _ := ownership.ParseMarker(md[ownership.MarkerKey]); owner.Namespace != "lm-b" || md["roles"] != "db" || md[ownership.LostKey] != "" {
			t.Errorf("the minion created afresh: %v", md)
		}
		// The binding restored now is too late: the claimant holds the minion.
		s.must(tenantA.Create(ctx, f.binding.DeepCopy()))
		s.waitReason("lm-a", "db", v1alpha1.DuplicateMinionIDReason)
		audit.settle(t)
		writes, deletes := minionWrites(audit.since(t, mark, operator), f.id, f.entity)
		t.Logf("the loss, the window, the collection and the fresh minion: %d writes, %d deletes: %v", len(writes), len(deletes), append(writes, deletes...))
		// The mark; the role and the entity deleted; the entity and the role created.
		if len(deletes) != 2 || len(writes) != 3 || !strings.HasPrefix(deletes[0], "delete auth/salt-minions/role/") {
			t.Errorf("writes %v, deletes %v: want the lost mark, the role then the entity deleted, the entity and role created afresh", writes, deletes)
		}
	})

	s.run("no claimant: collected when the window ends", func(t *testing.T) {
		f := s.bound(t, tenantA, "lm-a", "mail", "lm03", "lm-t", "lm")
		before := s.metric(`minionvault_lost_minions_collected_total{connection="lm-vault",reason="window"}`)
		f.lose(t, tenantA)
		since := f.lostSince(t)
		at := f.waitCollected(t, lostWindow+30*time.Second)
		t.Logf("lost at %s, collected %s later (window %s)", since.Format(time.RFC3339), at.Sub(since).Round(time.Second), lostWindow)
		if at.Sub(since) < lostWindow {
			t.Errorf("collected %s after the loss, before the window ended", at.Sub(since))
		}
		if secret, token := f.credentials(t); secret || token {
			t.Errorf("collected: the secret ID from before logs in %v, the token from before works %v", secret, token)
		}
		if after := s.metric(`minionvault_lost_minions_collected_total{connection="lm-vault",reason="window"}`); after != before+1 {
			t.Errorf("collected counter %v -> %v", before, after)
		}
		if names, _ := s.root.Sys().ListPolicies(); containsPolicy(names, "lm_minion_lm03") {
			t.Error("the lost minion's own policy is left")
		}
	})

	s.run("an administrator collects a lost minion early and releases a retained one", func(t *testing.T) {
		lostOne := s.bound(t, tenantA, "lm-a", "ops", "lm04", "lm-t", "lm")
		kept := s.bound(t, tenantA, "lm-a", "keep", "lm05", "lm-keep", "lmk")
		lostOne.lose(t, tenantA)
		since := lostOne.lostSince(t)
		s.must(tenantA.Delete(ctx, s.binding("lm-a", "keep")))
		s.waitGone("lm-a", "keep")
		if role, entity := kept.inVault(); !role || !entity {
			t.Fatalf("retained: role %v, entity %v", role, entity)
		}
		// A tenant cannot ask: it has no rights on VaultConnections.
		conn := &v1alpha1.VaultConnection{}
		if err := tenantA.Get(ctx, client.ObjectKey{Name: "lm-vault"}, conn); err == nil {
			t.Fatal("a tenant may read VaultConnections")
		}
		s.must(s.patchConnection("lm-vault", func(c *v1alpha1.VaultConnection) {
			c.Annotations = map[string]string{v1alpha1.CollectAnnotation: string(lostOne.uid) + "," + string(kept.uid)}
		}))
		at := lostOne.waitCollected(t, 20*time.Second)
		kept.waitCollected(t, 20*time.Second)
		if at.Sub(since) >= lostWindow {
			t.Errorf("asked for at once, collected %s after the loss: the window's end, not the request", at.Sub(since))
		}
		note := s.connectionEvent(t, "lm-vault", "MinionCollected", string(kept.uid))
		if !strings.Contains(note, "administrator asked") {
			t.Errorf("event: %q", note)
		}
		for _, f := range []*lostFixture{lostOne, kept} {
			if secret, token := f.credentials(t); secret || token {
				t.Errorf("%s collected: the secret ID from before logs in %v, the token from before works %v", f.id, secret, token)
			}
		}
		s.must(s.patchConnection("lm-vault", func(c *v1alpha1.VaultConnection) { delete(c.Annotations, v1alpha1.CollectAnnotation) }))
	})
}

// waitReadyWithin is waitReady with its own timeout.
func (s *suite) waitReadyWithin(ns, name string, timeout time.Duration) *v1alpha1.MinionBinding {
	s.t.Helper()
	var b *v1alpha1.MinionBinding
	eventually(s.t, timeout, "binding "+name+" Ready", func() error {
		b = s.binding(ns, name)
		if b == nil {
			return fmt.Errorf("not found")
		}
		if r, msg := s.readyOf(ns, name); r != v1alpha1.SucceededReason || b.Status.ObservedGeneration != b.Generation {
			return fmt.Errorf("%s: %s", r, msg)
		}
		return nil
	})
	return b
}

// patchConnection changes a VaultConnection as its administrator does.
func (s *suite) patchConnection(name string, f func(*v1alpha1.VaultConnection)) error {
	conn := &v1alpha1.VaultConnection{}
	if err := s.c.Get(context.Background(), client.ObjectKey{Name: name}, conn); err != nil {
		return err
	}
	patch := client.MergeFrom(conn.DeepCopy())
	f(conn)
	return s.c.Patch(context.Background(), conn, patch)
}

func containsPolicy(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

var _ = vaultapi.Config{}

// TestLostWhileNoOperatorRan: a binding lost while no operator ran (its
// finalizer stripped and the binding deleted meanwhile) has no event and
// no claimant to report it: the sweep finds it, marks it, and collects it
// when its window ends. Objects the operator did not write (an
// administrator's entity and role beside it) and the minions of live
// bindings are read, never written.
func TestLostWhileNoOperatorRan(t *testing.T) {
	s := lostSuite(t, 5*time.Second)
	ctx := context.Background()
	audit := s.vaultAudit(t)
	operator := s.accessorOf(t, s.token)
	f := s.bound(t, s.c, "lm-a", "sw", "lm06", "lm-t", "lm")
	live := s.bound(t, s.c, "lm-a", "sw-live", "lm07", "lm-t", "lm")
	_, err := s.root.Logical().Write("identity/entity/name/lm-admin-made", map[string]any{"metadata": map[string]string{"owner": "admin"}})
	s.must(err)
	_, err = s.root.Logical().Write("auth/salt-minions/role/lm-by-hand", map[string]any{"token_policies": []string{"default"}})
	s.must(err)

	s.stopOperator()
	f.lose(t, s.c)
	mark := audit.mark(t)
	s.runOperator(t)
	since := f.lostSince(t)
	at := f.waitCollected(t, lostWindow+30*time.Second)
	t.Logf("lost while no operator ran: marked by the sweep at %s, collected %s later", since.Format(time.RFC3339), at.Sub(since).Round(time.Second))
	if secret, token := f.credentials(t); secret || token {
		t.Errorf("collected: the secret ID from before logs in %v, the token from before works %v", secret, token)
	}
	audit.settle(t)
	calls := audit.since(t, mark, operator)
	for _, p := range calls.Paths {
		_, path, _ := strings.Cut(p, " ")
		if minionObject(path) && (strings.Contains(p, "lm-admin-made") || strings.Contains(p, "lm-by-hand") || strings.Contains(p, "lm07")) {
			t.Errorf("the sweep wrote %s", p)
		}
	}
	if s.vaultRead("identity/entity/name/lm-admin-made") == nil || s.vaultRead("auth/salt-minions/role/lm-by-hand") == nil {
		t.Error("an administrator's object is gone")
	}
	if role, entity := live.inVault(); !role || !entity {
		t.Errorf("a live binding's minion: role %v, entity %v", role, entity)
	}
	writes, deletes := minionWrites(calls, f.id, f.entity)
	t.Logf("the sweep's reads %d (lists included), the lost minion's writes %v and deletes %v", calls.Reads, writes, deletes)
	if len(writes) != 1 || len(deletes) != 2 {
		t.Errorf("writes %v, deletes %v: want the mark, then the role and the entity deleted", writes, deletes)
	}
	_, _ = s.root.Logical().Delete("identity/entity/name/lm-admin-made")
	_, _ = s.root.Logical().Delete("auth/salt-minions/role/lm-by-hand")
	_ = ctx
}

// TestLostMinionsAgainstATenant plays a tenant with rights on
// MinionBindings in its own namespace against another tenant's minions,
// one live and one lost: a binding named like the victim's, records naming
// the victim's objects, the collect annotation on its own bindings,
// finalizers set and stripped. None of it makes the operator collect the
// live minion, collect the lost one before its window ends, or hand the
// lost one to the tenant.
func TestLostMinionsAgainstATenant(t *testing.T) {
	s := lostSuite(t, time.Hour)
	ctx := context.Background()
	audit := s.vaultAudit(t)
	operator := s.accessorOf(t, s.token)
	for _, ns := range []string{"lt-a", "lt-b"} {
		s.must(client.IgnoreAlreadyExists(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})))
	}
	victimClient := s.tenantClient(t, "lt-victim", "lt-a")
	attacker := s.tenantClient(t, "lt-attacker", "lt-b")
	live := s.bound(t, victimClient, "lt-a", "hv-live", "lm08", "lm-t", "lm")
	lost := s.bound(t, victimClient, "lt-a", "hv-lost", "lm09", "lm-t", "lm")
	liveBefore := s.snapshot(t, "salt-minions", live.id, live.entity)
	lost.lose(t, victimClient)
	since := lost.lostSince(t)
	// The template's writes for the victims (their policies, and the lost
	// one's deleted) are done before the attacker starts.
	s.waitTemplateReady(t, "lm-t")
	audit.settle(t)
	mark := audit.mark(t)

	record := func(f *lostFixture) string {
		return `[{"vault":"` + s.vaultKey(t, "lm-vault") + `","connection":"lm-vault","mount":"salt-minions","entity":"` + f.entity + `"}]`
	}
	forge := func(name, id string, f *lostFixture) {
		b := binding("lt-b", name, id, map[string]any{"roles": []string{"admin"}})
		b.Spec.TemplateRef.Name = "lm-t"
		b.Finalizers = []string{v1alpha1.Finalizer}
		b.Annotations = map[string]string{
			v1alpha1.CollectAnnotation:      string(live.uid) + "," + string(lost.uid),
			v1alpha1.VaultObjectsAnnotation: record(f),
		}
		s.must(attacker.Create(ctx, b))
	}
	// Named like the victims' bindings, with their minion IDs.
	forge("hv-live", "lm08", live)
	forge("hv-lost", "LM09", lost)
	s.waitReason("lt-b", "hv-live", v1alpha1.DuplicateMinionIDReason)
	s.waitReason("lt-b", "hv-lost", v1alpha1.MinionIDLostReason)
	// The forgeries deleted, their finalizers stripped first: lost too?
	for _, name := range []string{"hv-live", "hv-lost"} {
		b := &v1alpha1.MinionBinding{}
		s.must(attacker.Get(ctx, client.ObjectKey{Namespace: "lt-b", Name: name}, b))
		patch := client.MergeFrom(b.DeepCopy())
		b.Finalizers = nil
		s.must(attacker.Patch(ctx, b, patch))
		s.must(attacker.Delete(ctx, b))
		s.waitGone("lt-b", name)
	}
	forge("hv-lost", "lm09", lost)
	s.waitReason("lt-b", "hv-lost", v1alpha1.MinionIDLostReason)
	// Half the window on: nothing collected early, nothing handed over.
	time.Sleep(time.Until(since.Add(lostWindow / 2)))
	if role, entity := lost.inVault(); !role || !entity {
		t.Fatalf("the lost minion was collected before its window ended: role %v, entity %v", role, entity)
	}
	if r, _ := s.readyOf("lt-b", "hv-lost"); r != v1alpha1.MinionIDLostReason {
		t.Fatalf("the attacker's binding: %s", r)
	}
	if after := s.snapshot(t, "salt-minions", live.id, live.entity); !liveBefore.equal(after) {
		t.Errorf("the live minion changed: %+v -> %+v", liveBefore, after)
	}
	audit.settle(t)
	for _, p := range audit.since(t, mark, operator).Paths {
		if strings.Contains(p, "lm08") || strings.Contains(p, "lm09") {
			t.Errorf("the operator wrote %s for the attacker", p)
		}
	}
	// When the window ends the lost minion is collected, and the attacker's
	// binding, the first claimant left, creates it afresh: a new role ID,
	// no credential of the victim's.
	got := s.waitReadyWithin("lt-b", "hv-lost", lostWindow+30*time.Second)
	s.connectionEvent(t, "lm-vault", "MinionCollected", string(lost.uid))
	if d := time.Since(since); d < lostWindow {
		t.Errorf("the attacker's binding holds the minion %s after the loss, within the window", d)
	}
	if got.Status.AppRole.RoleID == lost.roleID {
		t.Error("the attacker got the victim's role ID")
	}
	if secret, token := lost.credentials(t); secret || token {
		t.Errorf("the victim's secret ID logs in %v, its token works %v: now with the attacker's policies", secret, token)
	}
	if after := s.snapshot(t, "salt-minions", live.id, live.entity); !liveBefore.equal(after) {
		t.Errorf("the live minion changed: %+v -> %+v", liveBefore, after)
	}
}

// TestRestoredEvidenceIsSaid: a Salt master replaces a minion's entity
// metadata whole (its sync_entities), wiping the owner marker: the
// operator writes it back at the next reconcile, and says so as it says
// any correction (a DriftCorrected event, minionvault_drift_total), not
// silently.
func TestRestoredEvidenceIsSaid(t *testing.T) {
	s := lostSuite(t, time.Hour)
	ctx := context.Background()
	f := s.bound(t, s.c, "lm-a", "ev", "lm10", "lm-t", "lm")
	before := s.metric(`minionvault_drift_total{action="corrected"}`)
	_, err := s.root.Logical().WriteWithContext(ctx, "identity/entity/name/"+f.entity, map[string]any{"metadata": map[string]string{"minion-id": f.id}})
	s.must(err)
	s.requestReconcile("lm-a", "ev")
	s.event("ev", "DriftCorrected")
	md := rawMetadataOf(s.vaultRead("identity/entity/name/" + f.entity))
	if owner, ok := ownership.ParseMarker(md[ownership.MarkerKey]); !ok || owner.UID != string(f.uid) || md["minion-id"] != f.id || md["roles"] != "web" {
		t.Errorf("metadata after the correction: %v", md)
	}
	if after := s.metric(`minionvault_drift_total{action="corrected"}`); after != before+1 {
		t.Errorf("minionvault_drift_total{action=\"corrected\"} %v -> %v, want one more", before, after)
	}
	if b := s.binding("lm-a", "ev"); b.Status.DriftCorrections == nil || b.Status.DriftCorrections.Count != 1 {
		t.Errorf("status.driftCorrections %+v", b.Status.DriftCorrections)
	}
}

// waitTemplateReady waits until the template is Ready for its generation:
// its policies are as its bindings render them.
func (s *suite) waitTemplateReady(t *testing.T, name string) {
	t.Helper()
	eventually(t, 30*time.Second, "template "+name+" Ready", func() error {
		mt := &v1alpha1.MinionTemplate{}
		if err := s.c.Get(context.Background(), client.ObjectKey{Name: name}, mt); err != nil {
			return err
		}
		if c := apimeta.FindStatusCondition(mt.Status.Conditions, v1alpha1.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != mt.Generation {
			return fmt.Errorf("conditions %+v", mt.Status.Conditions)
		}
		return nil
	})
}
