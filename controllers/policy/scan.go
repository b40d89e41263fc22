package policy

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/controllers/internal/watch"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// syncRounds bounds how often one sync claims the template's dirty names
// again: names dirtied while it was writing (a binding changed meanwhile)
// are taken in the next round, and whatever is left after the last is the
// next sync's (the status refresh every delta asks for).
const syncRounds = 4

// converge brings the template's policies to its bindings' (a full scan
// when one is due, otherwise a retry of the dirty names) and records in
// sc the outcome and requeue the index says.
func (r *Reconciler) converge(ctx context.Context, tpl *v1alpha1.MinionTemplate, compiled *render.Compiled, handled string, sc *templateScope) error {
	identity, key := r.templateVault(ctx, tpl.Spec.ConnectionRef.Name)
	pass := r.index.begin(tpl.Name, scanRequest{compiled: compiled, identity: identity, vaultKey: key,
		asked: tpl.Annotations[v1alpha1.ReconcileRequestAnnotation], handled: handled,
		interval: outcome.TemplateInterval(tpl, r.DefaultInterval)}, time.Now())
	if pass.forget != "" {
		r.owners.forget(pass.forget)
	}
	err := r.work(ctx, tpl, compiled, pass)
	sc.ended(tpl, r.index.end(pass, time.Now()), err)
	return err
}

// ended records what a pass left: what syncs did in Vault, and unless
// the pass failed (finishStatus derives the outcome from the error), the
// index's counts in the template's status, its outcome and the next pass.
func (sc *templateScope) ended(tpl *v1alpha1.MinionTemplate, e passEnd, err error) {
	sc.written, sc.deleted = e.written, e.deleted
	if err != nil {
		return
	}
	e.summary.writeTo(tpl)
	sc.outcome, sc.pending, sc.compared = e.summary.outcome(), e.summary.pending(), e.summary.compared
	sc.requeue = e.times.requeue(outcome.Jitter)
}

// work is the pass's work, under its hold: the full scan begin found
// due, or a retry of what earlier syncs left dirty.
func (r *Reconciler) work(ctx context.Context, tpl *v1alpha1.MinionTemplate, compiled *render.Compiled, pass templatePass) error {
	if pass.scan != noScan {
		// Said before the hold, which may wait for a delta's sync.
		ctrl.LoggerFrom(ctx).V(1).Info("Full scan of the template's bindings and policies", append(pass.why, "verify", pass.scan == verifyScan)...)
	}
	defer pass.hold()()
	if pass.scan == noScan {
		return r.syncDirty(ctx, tpl)
	}
	return r.fullScan(ctx, tpl, compiled, pass.scan == verifyScan, pass.request)
}

// fullScan renders every binding of the template, rebuilds its part of the
// index, lists Vault's policies once after a start (and at a request) to
// find the template's own, and brings every wanted policy to its body
// (verify: each compared with Vault, unless status lets the index presume
// them after a start; else those whose wanted state changed), with deltas
// held off. request is the reconcile request not yet reported handled
// ("" for none): nothing is presumed for it, and every name is read from
// Vault as it is now. The caller holds the template for the scan.
func (r *Reconciler) fullScan(ctx context.Context, tpl *v1alpha1.MinionTemplate, compiled *render.Compiled, verify bool, request string) error {
	// The cache's own objects, not copies: a scan reads every binding of
	// the template (10,000 with a policy per minion), and copying them all
	// would make a scan's garbage as large as the cache. Nothing here
	// changes them (policiesOfBinding and the admission gate only read).
	list := &v1alpha1.MinionBindingList{}
	if err := r.List(ctx, list, client.MatchingFields{watch.TemplateRefIndex: tpl.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing the bindings of template %q: %w", tpl.Name, err)
	}
	rendered, head := r.renderFirstAndSync(ctx, tpl, compiled, list.Items)
	scanned, err := r.renderAll(ctx, tpl.Name, list.Items, rendered, runtime.GOMAXPROCS(0))
	if head != nil {
		// Its names left dirty if it failed: the sync below retries them.
		if herr := <-head; herr != nil {
			ctrl.LoggerFrom(ctx).V(1).Info("The head start of a template change failed; the scan's sync retries it", "template", tpl.Name, "error", herr.Error())
		}
	}
	if err != nil {
		return err
	}
	r.index.rebuild(tpl.Name, compiled, scanned, verify)
	if verify && request != "" {
		r.reader(tpl.Name).readAgain(r.index.beginCompare(tpl.Name, request))
	}
	if !r.index.discovered(tpl.Name) {
		vc, _, err := r.Connections.Get(ctx, tpl.Spec.ConnectionRef.Name)
		if err != nil {
			return err
		}
		listed, err := listPolicies(ctx, vc)
		if err != nil {
			return err
		}
		if p, ok := presumptionOf(tpl); request == "" && ok && r.index.presume(tpl.Name, p, listed, time.Now(), outcome.TemplateInterval(tpl, r.DefaultInterval)) {
			ctrl.LoggerFrom(ctx).V(1).Info("ACL policies taken as status says, to be compared with Vault over the interval", "template", tpl.Name, "policies", p.count)
		}
		self := r.policyOwner(tpl)
		found, err := headersIn(ctx, vc, self.Owns, r.reader(tpl.Name), listed, r.index.wanted(tpl.Name))
		if err != nil {
			return err
		}
		r.index.discoveredOwned(tpl.Name, found)
	}
	return r.syncDirty(ctx, tpl)
}

// headStartBindings is how many bindings a template change renders before
// the rest, to sync their own policies at once: one round of the sync's
// reads.
const headStartBindings = policyWorkers

// renderFirstAndSync, when the template changed, renders its first few bindings
// and syncs the policies that are theirs alone (policyIndex.headStart)
// while the scan renders the others: a change of a policy per minion
// reaches Vault for its first minions after a few renders, not after
// rendering the whole fleet (10,000 bindings: 1.26 s before the first
// write, beside the bindings' own reconciles). It returns what it
// rendered, the policies of items[:len(rendered)], for the scan not to
// render them again, and a channel, nil when no sync was started, that
// gives the sync's error.
func (r *Reconciler) renderFirstAndSync(ctx context.Context, tpl *v1alpha1.MinionTemplate, compiled *render.Compiled, items []v1alpha1.MinionBinding) ([]map[string]string, <-chan error) {
	if !r.index.changing(tpl.Name, compiled) {
		return nil, nil
	}
	var rendered []map[string]string
	dirty := 0
	for i := range items[:min(len(items), headStartBindings)] {
		docs, err := r.policiesOfBinding(ctx, &items[i])
		if err != nil {
			break // the scan meets it too, and reports it
		}
		rendered = append(rendered, docs)
		dirty += r.index.headStart(tpl.Name, client.ObjectKeyFromObject(&items[i]), docs)
	}
	if dirty == 0 {
		return rendered, nil
	}
	done := make(chan error, 1)
	go func() { done <- r.syncDirty(ctx, tpl) }()
	return rendered, done
}

// renderAll renders the policies of every binding, on workers
// goroutines: a template change renders each binding anew (10,000 with a
// policy per minion: 1.45 s on one core before the first write of a
// policy rollout), and rendering is pure CPU work, the cache's objects
// only read. rendered are the policies of items[:len(rendered)], already
// rendered (renderFirstAndSync).
func (r *Reconciler) renderAll(ctx context.Context, template string, items []v1alpha1.MinionBinding, rendered []map[string]string, workers int) (map[types.NamespacedName]bindingPolicies, error) {
	docs := make([]map[string]string, len(items))
	copy(docs, rendered)
	g, gctx := errgroup.WithContext(ctx)
	per := (len(items) - len(rendered) + max(workers, 1) - 1) / max(workers, 1)
	for from := len(rendered); from < len(items); from += per {
		to := min(from+per, len(items))
		g.Go(func() error {
			for i := from; i < to; i++ {
				d, err := r.policiesOfBinding(gctx, &items[i])
				if err != nil {
					return err
				}
				docs[i] = d
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	scanned := make(map[types.NamespacedName]bindingPolicies, len(items))
	for i := range items {
		b := &items[i]
		scanned[client.ObjectKeyFromObject(b)] = bindingPolicies{template: template, member: b.DeletionTimestamp.IsZero(), docs: docs[i]}
	}
	return scanned, nil
}

// retryDirty syncs what earlier syncs left dirty (a failed write, a
// connection that was not ready), with full scans held off.
func (r *Reconciler) retryDirty(ctx context.Context, tpl *v1alpha1.MinionTemplate) error {
	defer r.index.holdForDelta(tpl.Name)()
	return r.syncDirty(ctx, tpl)
}

// syncDirty brings the template's dirty names to what the index wants,
// and records in the index what Vault answered. The caller holds the
// template (for a scan or a delta). A connection is got only when there is
// something to sync: a template whose bindings render no policy needs none.
func (r *Reconciler) syncDirty(ctx context.Context, tpl *v1alpha1.MinionTemplate) error {
	reader := r.reader(tpl.Name)
	defer reader.prune()
	var vc vault.Client
	for range syncRounds {
		work := r.index.claim(tpl.Name)
		if work.empty() {
			return nil
		}
		if vc == nil {
			var err error
			if vc, _, err = r.Connections.Get(ctx, tpl.Spec.ConnectionRef.Name); err != nil {
				r.index.settle(tpl.Name, work, policyPass{})
				return err
			}
		}
		ctrl.LoggerFrom(ctx).V(1).Info("Syncing ACL policies", "template", tpl.Name, "wanted", len(work.desired), "stale", len(work.stale))
		sent := time.Now()
		pass, err := syncPolicies(ctx, vc, r.policyOwner(tpl), tpl.Spec.AdoptPolicies, work.desired, work.stale, reader)
		err = r.Connections.Verify(ctx, tpl.Spec.ConnectionRef.Name, sent, err)
		for _, n := range pass.written {
			// Other templates' first scans need not read these.
			reader.set(n, r.policyOwner(tpl))
		}
		r.index.settle(tpl.Name, work, pass)
		if err != nil {
			return err
		}
	}
	return nil
}
