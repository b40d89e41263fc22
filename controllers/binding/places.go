package binding

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/connection"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/controllers/internal/patch"
	"github.com/minionvault/minion-vault-operator/controllers/internal/watch"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// stalePlace is one placement the binding no longer needs, on its way
// through observe, plan and execute.
type stalePlace struct {
	p  ownership.Placement
	vc vault.Client
	// gone: the record may forget it without touching Vault: retained
	// (deletionPolicy Retain), or in a Vault no connection reaches.
	gone bool
	err  error // reaching or reading it failed: it stays recorded
	// retain: left in Vault by deletionPolicy Retain; only its entity's
	// retained mark is written, when Vault can be reached.
	retain bool
	// index is its place in the plan (observed.places index plus one).
	index int
}

// observePlaces reads what the stale placements hold, each through a
// client that reaches its Vault. current is the current entity as
// observed (nil: the binding is being deleted). A place retained by the
// deletion policy is read too: its entity is marked retained, so that the
// objects are kept for this binding (see ownership.RetainedKey). Retaining
// never waits for Vault: a place whose Vault cannot be reached or read is
// forgotten unmarked, with a warning.
func (p *bindingPipeline) observePlaces(ctx context.Context, w bindingWork, current *vault.Entity, pr proof, sc *bindingScope) ([]stalePlace, []placeObserved) {
	var places []stalePlace
	var observed []placeObserved
	for _, pl := range w.stale {
		retain := w.policy(pl) == v1alpha1.DeletionPolicyRetain
		sp := stalePlace{p: pl, retain: retain}
		if retain {
			sc.retained = append(sc.retained, pl.String())
		}
		sp.vc, sp.err = p.reach(ctx, pl)
		sp.gone, sp.err = sc.unreached(ctx, sp)
		if sp.err == nil && !sp.gone {
			var po placeObserved
			po, sp.err = observePlace(ctx, sp.vc, pl, w.cur, current, strings.ToLower(w.obj.Spec.MinionID), pr, retain)
			switch {
			case sp.err != nil && retain:
				sp.gone, sp.err = true, sc.unmarked(pl, sp.err)
			case sp.err != nil:
				sp.gone, sp.err = unreachable(ctx, sp, sp.err, sc)
			default:
				observed = append(observed, po)
				sp.index = len(observed)
			}
		}
		places = append(places, sp)
	}
	return places, observed
}

// unreached sorts a placement whose Vault could not be reached: skipped
// by a plan, retained (forgotten unmarked), or in a Vault no connection
// reaches any more, it is forgotten; otherwise it waits (err).
func (sc *bindingScope) unreached(ctx context.Context, sp stalePlace) (gone bool, _ error) {
	var skipped errSkipped
	switch {
	case sp.err == nil:
		return false, nil
	case errors.As(sp.err, &skipped):
		sc.skipped = append(sc.skipped, skipped.msg)
		return true, nil
	case sp.retain:
		return true, sc.unmarked(sp.p, sp.err)
	case !isGone(sp.err):
		return false, sp.err
	}
	var g errConnectionGone
	if errors.As(sp.err, &g) && g.replaced {
		// Its connection reports another Vault now (initialised anew,
		// replaced): the old one, and its objects, are most likely gone,
		// and nothing can reach them to delete.
		ctrl.LoggerFrom(ctx).Info("Forgetting a place in a Vault no connection reports any more", "place", sp.p.String(), "why", g.msg)
		sc.forgotten = append(sc.forgotten, fmt.Sprintf("%s forgotten, not deleted: %v", sp.p, sp.err))
	} else {
		sc.unreachable = append(sc.unreachable, fmt.Sprintf("%s: %v", sp.p, sp.err))
	}
	return true, nil
}

// observePlace reads the old mount's accessor, the old entity, the old
// role's role ID and, when the entities read do not link the role, whose
// login it leads to; for a place retained, the old entity only.
func observePlace(ctx context.Context, vc vault.Client, p ownership.Placement, cur *ownership.Placement, current *vault.Entity, roleName string, pr proof, retain bool) (placeObserved, error) {
	po := placeObserved{place: p, roleName: roleName, retain: retain, roleStale: cur == nil || !p.SameRole(*cur), entityStale: cur == nil || !p.SameEntity(*cur)}
	if retain {
		po.at = time.Now()
		var err error
		if po.entityStale {
			if po.entity, err = vc.ReadEntityByName(ctx, p.Entity); err != nil {
				return po, fmt.Errorf("reading entity %s: %w", p.Entity, err)
			}
		}
		return po, nil
	}
	if cur != nil && p.Vault == cur.Vault && (p.Vault != "" || p.Connection == cur.Connection) {
		po.current = current
	}
	var err error
	if po.accessor, err = vc.MountAccessor(ctx, p.Mount); err != nil {
		return po, fmt.Errorf("reading the accessor of auth/%s: %w", p.Mount, err)
	}
	if po.entityStale {
		if po.entity, err = vc.ReadEntityByName(ctx, p.Entity); err != nil {
			return po, fmt.Errorf("reading entity %s: %w", p.Entity, err)
		}
	}
	if !po.roleStale || po.accessor == "" {
		return po, nil
	}
	if po.roleID, err = vc.ReadRoleID(ctx, p.Mount, roleName); err != nil {
		return po, fmt.Errorf("reading the role ID of AppRole %s/%s: %w", p.Mount, roleName, err)
	}
	po.roleProven = po.roleID != "" && pr.roleClaim(po.roleID, p.Mount, roleName, nil).Holder == ownership.HolderSelf
	if po.roleID != "" && !po.roleProven && !po.linked(pr, po.entity, po.current) {
		if po.roleHolder, err = vc.LookupEntityByAlias(ctx, po.roleID, po.accessor); err != nil {
			return po, fmt.Errorf("looking up the entity of AppRole %s/%s's role ID: %w", p.Mount, roleName, err)
		}
	}
	return po, nil
}

// unmarked notes a retained place whose entity could not be marked
// retained; the place is forgotten all the same (nil error).
func (sc *bindingScope) unmarked(p ownership.Placement, err error) error {
	sc.unmarkedRetain = append(sc.unmarkedRetain, fmt.Sprintf("%s: %v", p, err))
	return nil
}

// errConnectionGone: no VaultConnection reaches a placement's Vault any
// more; nothing can delete there.
type errConnectionGone struct {
	msg string
	// replaced: the connection that wrote there reports another Vault now
	// (that one was initialised anew, or replaced), and none reports it.
	replaced bool
}

func (e errConnectionGone) Error() string { return e.msg }

func isGone(err error) bool {
	var g errConnectionGone
	return errors.As(err, &g)
}

// placeRoute is what the connections' statuses say of reaching a
// placement's Vault: the connections to try, in order (the one it was
// written through first), and the Vault that one reports now when that is
// another (its Vault was initialised anew, or it was pointed elsewhere).
type placeRoute struct {
	candidates []string
	movedTo    string
}

// routeFor picks the connections that may reach p's Vault. A connection
// reports the Vault its last check found (status.clusterID, recorded even
// when the credentials fail, as long as Vault answered), so one that
// reports another Vault does not reach p's: a Vault initialised anew kills
// the tokens of its connections, and waiting on them would wait for ever
// on a place that went with the old Vault. A connection not checked yet
// (no cluster ID) may reach it: it is asked (connection.VaultKey). A record
// of the previous release (no Vault) is reached through its connection.
func routeFor(p ownership.Placement, conns []v1alpha1.VaultConnection) placeRoute {
	if p.Vault == "" {
		return placeRoute{candidates: []string{p.Connection}}
	}
	var rt placeRoute
	for _, c := range conns {
		key := ownership.VaultKey(c.Status.ClusterID, c.Spec.Namespace)
		switch {
		case c.Name == p.Connection && (c.Status.ClusterID == "" || key == p.Vault):
			rt.candidates = append([]string{c.Name}, rt.candidates...)
		case c.Name == p.Connection:
			rt.movedTo = key
		case c.Status.ClusterID != "" && key == p.Vault:
			rt.candidates = append(rt.candidates, c.Name)
		}
	}
	return rt
}

// gone is the error of a placement that no candidate reached: its
// connection reports another Vault now (replaced), or is gone.
func (rt placeRoute) gone(p ownership.Placement) errConnectionGone {
	if rt.movedTo == "" {
		return errConnectionGone{msg: fmt.Sprintf("no VaultConnection reaches Vault %s any more", p.Vault)}
	}
	return errConnectionGone{replaced: true, msg: fmt.Sprintf(
		"VaultConnection %q, which wrote there, reports Vault %s now, and no VaultConnection reports Vault %s: it was initialised anew or replaced",
		p.Connection, rt.movedTo, p.Vault)}
}

// clientFor returns a client of the Vault a placement lives in: through the
// connection it was written with while that still reaches the same Vault,
// else through any connection that does (a placement is the Vault's, not
// the connection's). The connection it was written with, failing while it
// reports the placement's Vault, is waited on: that Vault may well be there
// still, with a role that logs in.
func (r *Reconciler) clientFor(ctx context.Context, p ownership.Placement) (vault.Client, error) {
	var conns []v1alpha1.VaultConnection
	if p.Vault != "" {
		list := &v1alpha1.VaultConnectionList{}
		if err := r.List(ctx, list); err != nil {
			return nil, err
		}
		conns = list.Items
	}
	rt := routeFor(p, conns)
	var firstErr error
	for _, name := range rt.candidates {
		vc, conn, err := r.Connections.Get(ctx, name)
		if err != nil {
			if outcome.WaitingOn(err, outcome.WaitingForConnection) {
				continue // no such connection
			}
			if name == p.Connection {
				// The connection the objects were written through exists,
				// may reach their Vault, but fails: wait for it rather
				// than guess another.
				return nil, err
			}
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if p.Vault == "" {
			return vc, nil
		}
		key, err := connection.VaultKey(ctx, vc, conn)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if key == p.Vault {
			return vc, nil
		}
		if name == p.Connection {
			rt.movedTo = key // not checked before: Vault said
		}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return nil, rt.gone(p)
}

// record patches the binding's annotation to inv, if it differs.
func (r *Reconciler) record(ctx context.Context, obj *v1alpha1.MinionBinding, inv ownership.Inventory) error {
	err := patch.Metadata(ctx, r.Client, obj, func() bool {
		before := obj.Annotations[v1alpha1.VaultObjectsAnnotation]
		setInventory(obj, inv)
		return obj.Annotations[v1alpha1.VaultObjectsAnnotation] != before
	})
	if err = client.IgnoreNotFound(err); err != nil {
		return fmt.Errorf("updating annotation %s: %w", v1alpha1.VaultObjectsAnnotation, err)
	}
	return nil
}

// finalize removes the Vault objects of every recorded placement that
// Vault proves the binding's (unless the deletion policy says Retain), then
// the finalizer. A binding that never held its minion (a tenant's hand-set
// finalizer, a forged record) deletes nothing, and says why. It never
// wedges: objects never written or already gone, a broken record, and a
// connection that no longer exists let the deletion finish; only an
// unreachable Vault, or a connection that cannot log in yet (its Secret is
// missing), makes it wait and retry.
func (r *Reconciler) finalize(ctx context.Context, obj *v1alpha1.MinionBinding, sc *bindingScope) error {
	log := ctrl.LoggerFrom(ctx)
	if !controllerutil.ContainsFinalizer(obj, v1alpha1.Finalizer) {
		return nil
	}
	// The template's current policy; if the template is gone, the one
	// recorded with each placement (a Retain is not lost by deleting the
	// template first, nor by losing status).
	tpl := &v1alpha1.MinionTemplate{}
	if err := r.Get(ctx, watch.Named(obj.Spec.TemplateRef.Name), tpl); apierrors.IsNotFound(err) {
		tpl = nil
	} else if err != nil {
		return err
	}
	inv, err := r.inventory(ctx, obj)
	if err != nil {
		// Never wedge on a broken record: nothing it names is looked at.
		sc.brokenRecord = err.Error()
		inv = nil
	}
	w := deletionWork(obj, tpl, inv, func(conn string) string { return connectionVault(ctx, r.Client, conn) })
	// A connection that exists but cannot log in yet (its Secret is
	// missing): wait rather than leave an AppRole that still works.
	for _, p := range w.stale {
		if _, _, err := r.Connections.Get(ctx, p.Connection); outcome.WaitingOn(err, outcome.WaitingForCredential) && w.policy(p) != v1alpha1.DeletionPolicyRetain {
			sc.outcome = outcome.DeletionWaiting("waiting to delete the Vault objects", err)
			return nil
		}
	}
	if len(w.stale) == 0 {
		log.V(1).Info("Nothing was written to Vault; removing the finalizer")
	} else if gone, err := r.run(ctx, w, sc); err != nil {
		// Remember what is gone already; the finalizer stays.
		sc.outcome = outcome.DeletionBlocked("deleting Vault objects", err)
		return errors.Join(err, r.record(ctx, obj, ownership.Inventory(w.stale).Without(gone)))
	}
	if err := patch.RemoveFinalizer(ctx, r.Client, obj); err != nil {
		return err
	}
	// Its objects are deleted or retained: its disappearance is no loss.
	r.Lost.Finalized(obj.UID)
	sc.outcome = outcome.Outcome{Kind: outcome.OutcomeReady, Reason: v1alpha1.SucceededReason, Message: "deleted"}
	return nil
}
