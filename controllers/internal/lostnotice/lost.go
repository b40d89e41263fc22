package lostnotice

import (
	"context"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/watch"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// Candidate is where a minion's objects may be lost (their binding
// gone without its deletion having run): the Vault they are in, a
// connection that reaches it, the role's mount and name, and the entity.
type Candidate struct {
	Vault, Connection string
	Mount, Role       string
	Entity            string
}

// Notices is what the binding controller and the lost-minion
// collector tell each other within one process: a claimant that found a
// lost holder asks the collector to look now (instead of at its next
// sweep); the collector wakes a minion ID's claimants when it marked or
// collected a lost minion of that ID; the binding controller says whose
// deletion it ran, so that a binding deleted the normal way costs the
// collector no Vault read. Each side may be absent (another process, a
// shard): the zero value and a nil *Notices do nothing.
type Notices struct {
	mu        sync.Mutex
	notice    func(Candidate)
	wakes     []func(minionIDKey string)
	finalized map[types.UID]struct{}
	locks     map[string]*entityLock
}

type entityLock struct {
	mu   sync.Mutex
	refs int
}

// Lock serializes, within this process, the binding controller's and the
// collector's work on one entity (its Vault and name, case-insensitive):
// a binding taking its lost objects back and the collector marking or
// deleting them never interleave their reads and writes.
func (n *Notices) Lock(vault, entity string) (unlock func()) {
	if n == nil || entity == "" {
		return func() {}
	}
	key := vault + "\x00" + strings.ToLower(entity)
	n.mu.Lock()
	if n.locks == nil {
		n.locks = map[string]*entityLock{}
	}
	l := n.locks[key]
	if l == nil {
		l = &entityLock{}
		n.locks[key] = l
	}
	l.refs++
	n.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		n.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(n.locks, key)
		}
		n.mu.Unlock()
	}
}

// Notice asks the collector to look at c now.
func (n *Notices) Notice(c Candidate) {
	if n == nil {
		return
	}
	n.mu.Lock()
	f := n.notice
	n.mu.Unlock()
	if f != nil {
		f(c)
	}
}

// OnNotice sets what Notice calls (the collector).
func (n *Notices) OnNotice(f func(Candidate)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.notice = f
}

// Wake enqueues the claimants of a minion ID (MinionIDKey).
func (n *Notices) Wake(minionIDKey string) {
	if n == nil {
		return
	}
	n.mu.Lock()
	wakes := n.wakes
	n.mu.Unlock()
	for _, f := range wakes {
		f(minionIDKey)
	}
}

// Claimants is a source for the binding controller: the bindings of a
// minion ID that Wake names.
func (n *Notices) Claimants(c client.Reader) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.wakes = append(n.wakes, func(key string) {
			list := &v1alpha1.MinionBindingList{}
			if err := c.List(ctx, list, client.MatchingFields{watch.MinionIDIndex: key}, client.UnsafeDisableDeepCopy); err != nil {
				return // the claimants' own retry (WaitAfter) still comes
			}
			for _, req := range watch.Requests(list) {
				q.Add(req)
			}
		})
		return nil
	})
}

// Finalized records that this process ran the deletion of the binding
// with uid (its objects deleted or retained): its disappearance is no loss.
func (n *Notices) Finalized(uid types.UID) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.notice == nil {
		return // no collector in this process asks
	}
	if n.finalized == nil {
		n.finalized = map[types.UID]struct{}{}
	}
	n.finalized[uid] = struct{}{}
}

// TakeFinalized reports whether this process ran the deletion of the
// binding with uid, and forgets it (the binding is gone: asked once).
func (n *Notices) TakeFinalized(uid types.UID) bool {
	if n == nil {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.finalized[uid]
	delete(n.finalized, uid)
	return ok
}

// HolderOf asks the API server (reader: past the cache, as a shard's cache
// does not hold the other shards' bindings) about the binding of this
// cluster an owner marker names: live, being deleted, or gone (no binding
// of that UID; then back is the binding created again under its namespace
// and name, if there is one). Not allowed to read it (a namespaced
// operator), the holder counts as live: nothing is taken over or
// collected on a guess.
func HolderOf(ctx context.Context, reader client.Reader, holder ownership.Owner) (state ownership.HolderState, back *v1alpha1.MinionBinding, err error) {
	b := &v1alpha1.MinionBinding{}
	err = reader.Get(ctx, types.NamespacedName{Namespace: holder.Namespace, Name: holder.Name}, b)
	switch {
	case apierrors.IsNotFound(err):
		return ownership.HolderGone, nil, nil
	case apierrors.IsForbidden(err):
		return ownership.HolderLive, nil, nil
	case err != nil:
		return 0, nil, fmt.Errorf("reading the holder of the minion, %s: %w", holder, err)
	case string(b.UID) != holder.UID:
		return ownership.HolderGone, b, nil
	case !b.DeletionTimestamp.IsZero():
		return ownership.HolderDeleting, nil, nil
	}
	return ownership.HolderLive, nil, nil
}
