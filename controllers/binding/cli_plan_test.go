package binding

import (
	"context"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/clusterfacts"
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// writeLog records the Vault writes a reconcile makes, named as a plan
// names them (action and path).
type writeLog struct {
	vault.Client
	writes []string
}

func (l *writeLog) add(action, path string, err error) { l.writes = append(l.writes, action+" "+path) }

func (l *writeLog) WriteRole(ctx context.Context, mount, name string, params map[string]any) error {
	err := l.Client.WriteRole(ctx, mount, name, params)
	l.add("write", "auth/"+strings.Trim(mount, "/")+"/role/"+strings.ToLower(name), err)
	return err
}

func (l *writeLog) DeleteRole(ctx context.Context, mount, name string) error {
	err := l.Client.DeleteRole(ctx, mount, name)
	l.add("delete", "auth/"+strings.Trim(mount, "/")+"/role/"+strings.ToLower(name), err)
	return err
}

func (l *writeLog) WriteEntityByName(ctx context.Context, name string, md map[string]string) (string, error) {
	id, err := l.Client.WriteEntityByName(ctx, name, md)
	l.add("write", "identity/entity/name/"+name, err)
	return id, err
}

func (l *writeLog) DeleteEntityByName(ctx context.Context, name string) error {
	err := l.Client.DeleteEntityByName(ctx, name)
	l.add("delete", "identity/entity/name/"+name, err)
	return err
}

func (l *writeLog) CreateEntityAlias(ctx context.Context, name, acc, canonical string) (string, error) {
	id, err := l.Client.CreateEntityAlias(ctx, name, acc, canonical)
	l.add("write", "identity/entity-alias", err)
	return id, err
}

func (l *writeLog) UpdateEntityAlias(ctx context.Context, id, name, acc, canonical string) error {
	err := l.Client.UpdateEntityAlias(ctx, id, name, acc, canonical)
	l.add("write", "identity/entity-alias/id/"+id, err)
	return err
}

func (l *writeLog) DeleteEntityAlias(ctx context.Context, id string) error {
	err := l.Client.DeleteEntityAlias(ctx, id)
	l.add("delete", "identity/entity-alias/id/"+id, err)
	return err
}

// planned is what `minionvault plan` would print for salt/web01, as the
// same action-and-path lines, or its refusal.
func (h *harness) planned(ctx context.Context) (writes []string, refusal string) {
	h.t.Helper()
	obj := h.get("salt", "web01")
	var a *admission.Admitted
	if obj.DeletionTimestamp.IsZero() {
		var err error
		if a, err = clusterfacts.Admit(ctx, h.c, h.r.Templates, obj); err != nil {
			h.t.Fatalf("admission: %v", err)
		}
	} else {
		a = &admission.Admitted{Template: &v1alpha1.MinionTemplate{}}
		if err := h.c.Get(ctx, types.NamespacedName{Name: obj.Spec.TemplateRef.Name}, a.Template); apierrors.IsNotFound(err) {
			a.Template = nil
		}
	}
	bp, err := PlanBinding(ctx, h.v, "", obj, a)
	if err != nil {
		if reason, _, ok := Refusal(err); ok {
			return nil, reason
		}
		h.t.Fatalf("plan: %v", err)
	}
	for _, c := range bp.Changes {
		action := "write"
		if c.Action == string(actDelete) {
			action = "delete"
		}
		writes = append(writes, action+" "+c.Path)
	}
	return writes, ""
}

func (h *harness) editTemplate(edit func(*v1alpha1.MinionTemplate)) {
	h.t.Helper()
	tpl := &v1alpha1.MinionTemplate{}
	if err := h.c.Get(context.Background(), types.NamespacedName{Name: "t"}, tpl); err != nil {
		h.t.Fatal(err)
	}
	edit(tpl)
	tpl.Generation++
	if err := h.c.Update(context.Background(), tpl); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) editBinding(edit func(*v1alpha1.MinionBinding)) {
	h.t.Helper()
	b := h.get("salt", "web01")
	edit(b)
	b.Generation++
	if err := h.c.Update(context.Background(), b); err != nil {
		h.t.Fatal(err)
	}
}

// Reconcile and `minionvault plan` run one pipeline: over one table of
// scenarios, the writes a reconcile makes are the ones the plan printed
// just before, in order, and a plan's refusal is the reconcile's.
func TestReconcileWritesWhatThePlanSays(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// setup brings salt/web01 and Vault to the scenario, from one
		// binding reconciled once (applied) unless fresh.
		fresh     bool
		setup     func(h *harness)
		wantFirst string // the first write, "" for none
	}{
		{name: "new binding", fresh: true, wantFirst: "write identity/entity/name/salt_minion_web01"},
		{name: "in sync", setup: func(*harness) {}},
		{name: "pillar change", wantFirst: "write identity/entity/name/salt_minion_web01", setup: func(h *harness) {
			h.editBinding(func(b *v1alpha1.MinionBinding) { b.Spec.Pillar = rawDoc(map[string]any{"roles": []string{"db"}}) })
		}},
		{name: "role drift", wantFirst: "write auth/salt-minions/role/web01", setup: func(h *harness) {
			_ = h.v.WriteRole(ctx, "salt-minions", "web01", map[string]any{"token_policies": []string{"root"}})
		}},
		{name: "marker wiped", wantFirst: "write identity/entity/name/salt_minion_web01", setup: func(h *harness) {
			_, _ = h.v.WriteEntityByName(ctx, "salt_minion_web01", map[string]string{"roles": "web"})
		}},
		{name: "role deleted by hand", wantFirst: "write identity/entity-alias/id/", setup: func(h *harness) {
			_ = h.v.DeleteRole(ctx, "salt-minions", "web01")
		}},
		{name: "mount switch", wantFirst: "write identity/entity-alias", setup: func(h *harness) {
			h.v.EnableAuth("salt-minions-b")
			h.editTemplate(func(t *v1alpha1.MinionTemplate) {
				t.Spec.AppRole = &v1alpha1.MinionAppRoleSpec{Mount: "salt-minions-b"}
			})
		}},
		{name: "entity rename", wantFirst: "write identity/entity/name/minion_web01", setup: func(h *harness) {
			h.editTemplate(func(t *v1alpha1.MinionTemplate) { t.Spec.EntityName = "minion_{minion}" })
		}},
		{name: "deletion", wantFirst: "delete auth/salt-minions/role/web01", setup: func(h *harness) {
			_ = h.c.Delete(ctx, h.get("salt", "web01"))
		}},
		{name: "deletion, Retain", wantFirst: "write identity/entity/name/salt_minion_web01", setup: func(h *harness) {
			h.editTemplate(func(t *v1alpha1.MinionTemplate) { t.Spec.DeletionPolicy = v1alpha1.DeletionPolicyRetain })
			h.reconcile("salt", "web01")
			_ = h.c.Delete(ctx, h.get("salt", "web01"))
		}},
		{name: "deletion, template gone first", wantFirst: "delete auth/salt-minions/role/web01", setup: func(h *harness) {
			tpl := &v1alpha1.MinionTemplate{}
			_ = h.c.Get(ctx, types.NamespacedName{Name: "t"}, tpl)
			_ = h.c.Delete(ctx, tpl)
			_ = h.c.Delete(ctx, h.get("salt", "web01"))
		}},
		{name: "refused: the entity is someone else's", fresh: true, setup: func(h *harness) {
			other := ownership.Owner{Cluster: "other-cluster", Namespace: "tenant-b", Name: "web01", UID: "uid-other"}
			_, _ = h.v.WriteEntityByName(ctx, "salt_minion_web01", map[string]string{ownership.MarkerKey: other.Marker()})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, fixtures(map[string]any{"roles": []string{"web"}})...)
			// The connection's status names the Vault the plan reads.
			info, _ := h.v.ServerInfo(ctx)
			conn := &v1alpha1.VaultConnection{}
			_ = h.c.Get(ctx, types.NamespacedName{Name: "vault"}, conn)
			conn.Status.ClusterID = info.ClusterID
			if err := h.c.Status().Update(ctx, conn); err != nil {
				t.Fatal(err)
			}
			if !tc.fresh {
				h.reconcile("salt", "web01")
			}
			if tc.setup != nil {
				tc.setup(h)
			}
			plan, refusal := h.planned(ctx)
			log := &writeLog{Client: h.v}
			h.r.Connections.NewClient = func(context.Context, *v1alpha1.VaultConnection) (vault.Client, error) { return log, nil }
			h.reconcile("salt", "web01")
			if !slices.Equal(plan, log.writes) {
				t.Errorf("plan:\n  %s\nreconcile wrote:\n  %s", strings.Join(plan, "\n  "), strings.Join(log.writes, "\n  "))
			}
			if first := append(plan, "")[0]; !strings.HasPrefix(first, tc.wantFirst) || (first == "") != (tc.wantFirst == "") {
				t.Errorf("first write %q, want %q", first, tc.wantFirst)
			}
			if b := h.get("salt", "web01"); refusal != "" && (b == nil || reason(b) != refusal) {
				t.Errorf("the plan refused (%s), the reconcile said %v", refusal, b)
			}
		})
	}
}
