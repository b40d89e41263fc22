package binding

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/render"
)

// checkSchedule is when each binding's next drift check is due: the
// process's memory of when it last compared the binding's objects with
// Vault. A binding that renders what it last applied and is not due is
// not read from Vault at all: events that change nothing the binding
// renders (a connection turning Ready again, a template's status, a new
// leader's first list of every binding) cost no Vault request.
//
// A new process (a restart, a new leader) knows nothing: it takes a
// binding that status says is in sync (the operator alone writes status)
// as checked at a random point of the last interval, so that the first
// checks of a fleet are spread over the interval, as the previous
// process's were, instead of all made at the start. Believing status
// costs at most one interval before drift made while no operator ran is
// corrected, as the previous process's memory would have.
type checkSchedule struct {
	mu  sync.Mutex
	due map[types.NamespacedName]scheduled
	// spread is a random duration in [0, interval) (math/rand).
	spread func(interval time.Duration) time.Duration
}

type scheduled struct {
	uid types.UID
	// identity is the connection's Vault identity (its cluster ID and
	// AppRole mount accessors) at the check: a mount enabled again since
	// makes the check due at once.
	identity string
	at       time.Time
	// role is the role as the last check found or wrote it.
	role knownRole
}

// knownRole is a role the process found or wrote as a rendering whose
// fingerprint is fp (roleFingerprint), under roleID. Until the binding's
// next check, a change of the binding's rendering that leaves its role as
// it was reads only the entity: a rollout of entity metadata costs one
// read and one write per minion, not four reads.
type knownRole struct {
	fp, roleID string
}

// roleFingerprint fingerprints what the binding renders for its role, in
// the Vault of vaultKey with the mounts of identity (the connection's Vault
// identity): a role found in another Vault, or in a mount since enabled
// again, is not the one the binding renders.
func roleFingerprint(vaultKey, identity string, res *render.Result) string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	_ = enc.Encode(vaultKey)
	_ = enc.Encode(identity)
	_ = enc.Encode(res.AppRole)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func newCheckSchedule() *checkSchedule {
	return &checkSchedule{due: map[types.NamespacedName]scheduled{}}
}

// next is when the binding's next check is due, chosen now when the
// process has not checked it yet; now when the connection's Vault
// identity changed since the check.
func (s *checkSchedule) next(key types.NamespacedName, uid types.UID, identity string, now time.Time, interval time.Duration) time.Time {
	if s == nil {
		return now
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.due[key]; ok && d.uid == uid {
		if d.identity != identity {
			return now
		}
		return d.at
	}
	spread := s.spread
	if spread == nil {
		spread = func(d time.Duration) time.Duration { return rand.N(d) }
	}
	at := now
	if interval > 0 {
		at = now.Add(spread(interval))
	}
	s.due[key] = scheduled{uid: uid, identity: identity, at: at}
	return at
}

// checked records that the binding was compared with Vault, when the
// next check is due, and the role as found or written (empty: unknown).
func (s *checkSchedule) checked(key types.NamespacedName, uid types.UID, identity string, next time.Time, role knownRole) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.due[key] = scheduled{uid: uid, identity: identity, at: next, role: role}
}

// knownRoleID is the role ID of the binding's role when the process knows
// the role is as rendered with fingerprint fp, its check not due yet;
// "" when it must be read.
func (s *checkSchedule) knownRoleID(key types.NamespacedName, uid types.UID, identity string, now time.Time, fp string) string {
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.due[key]
	if !ok || d.uid != uid || d.identity != identity || !now.Before(d.at) || d.role.fp != fp {
		return ""
	}
	return d.role.roleID
}

// entry is the binding's place in the schedule, as it stands.
func (s *checkSchedule) entry(key types.NamespacedName) (scheduled, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.due[key]
	return d, ok
}

// forget drops the binding: its next reconcile reads Vault (a failure,
// its deletion).
func (s *checkSchedule) forget(key types.NamespacedName) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.due, key)
}

// inSync reports whether status says Vault held what the binding renders
// now (hash) at cur when the operator last looked, with nothing asked of
// the operator since: the spec handled, Ready for it, no reconcile
// request pending, the placement recorded with the finalizer, no stale
// placement to clean up. Only such a binding may wait for its check.
func inSync(obj *v1alpha1.MinionBinding, hash string, inv ownership.Inventory, cur ownership.Placement) bool {
	f := statusFacts(obj)
	return f.settled && f.appliedHash == hash &&
		controllerutil.ContainsFinalizer(obj, v1alpha1.Finalizer) && inv.Has(cur) && len(inv.Stale(&cur)) == 0
}

// requested: a reconcile request (the annotation) is not handled yet; it
// asks for everything to be compared with Vault now.
func requested(obj *v1alpha1.MinionBinding) bool {
	v := obj.Annotations[v1alpha1.ReconcileRequestAnnotation]
	return v != "" && v != obj.Status.LastHandledReconcileAt
}

// scheduleKey is a binding's entry in the schedule, and what its check
// depends on.
type scheduleKey struct {
	key      types.NamespacedName
	uid      types.UID
	identity string // the connection's Vault identity
	interval time.Duration
	roleFP   string // roleFingerprint of what the binding renders now
}

// untilCheck is the wait until the binding's check, ok when the binding is
// in sync (inSync) and its check is not due yet.
func (r *Reconciler) untilCheck(obj *v1alpha1.MinionBinding, sk scheduleKey, hash string, inv ownership.Inventory, cur ownership.Placement) (time.Duration, bool) {
	if r.checks == nil || !inSync(obj, hash, inv, cur) {
		return 0, false
	}
	wait := r.checks.next(sk.key, sk.uid, sk.identity, r.now(), sk.interval).Sub(r.now())
	return wait, wait > 0
}

// whyCompare says why a binding that untilCheck let through is compared
// with Vault now, for the debug log.
func (r *Reconciler) whyCompare(obj *v1alpha1.MinionBinding, sk scheduleKey, hash string, inv ownership.Inventory, cur ownership.Placement) string {
	f := statusFacts(obj)
	switch {
	case r.checks == nil:
		return "no check schedule"
	case !f.settled:
		return "status is not Ready for the spec, or a reconcile request is open"
	case f.appliedHash != hash:
		return "the rendering differs from the one last applied"
	case !controllerutil.ContainsFinalizer(obj, v1alpha1.Finalizer) || !inv.Has(cur):
		return "the placement is not recorded"
	case len(inv.Stale(&cur)) > 0:
		return "stale placements to clean up"
	}
	d, ok := r.checks.entry(sk.key)
	switch {
	case !ok:
		return "not scheduled"
	case d.identity != sk.identity:
		return "the connection's Vault identity changed from " + d.identity + " to " + sk.identity
	}
	return "its drift check is due (" + d.at.Format(time.RFC3339) + ")"
}

// knownRoleID is the role ID of a role known to be as rendered until the
// binding's check is due (observeCurrent then reads only the entity): as
// this process found or wrote it, or, for a process that has not checked
// the binding yet, as status says the operator last did (its digest equal
// to what the binding renders now); "" when the role must be read, as a
// reconcile request asks for everything to be.
func (r *Reconciler) knownRoleID(obj *v1alpha1.MinionBinding, sk scheduleKey) string {
	if requested(obj) || r.checks == nil {
		return ""
	}
	if id := r.checks.knownRoleID(sk.key, sk.uid, sk.identity, r.now(), sk.roleFP); id != "" {
		return id
	}
	f := statusFacts(obj)
	if f.roleID == "" || f.roleDigest != sk.roleFP {
		return ""
	}
	// The check is where the process put it (spread over the interval
	// when it had none): status stands in for the process's memory only
	// until then.
	if !r.now().Before(r.checks.next(sk.key, sk.uid, sk.identity, r.now(), sk.interval)) {
		return ""
	}
	return f.roleID
}

// nextCheck records a successful apply and returns the wait until the
// binding's next check: an interval (jittered) after a run that read
// everything; where it was after one that took the role as known.
func (r *Reconciler) nextCheck(sk scheduleKey, knownRoleID string, sc *bindingScope) time.Duration {
	if knownRoleID != "" {
		sc.roleDigest = sk.roleFP
		at := r.checks.next(sk.key, sk.uid, sk.identity, r.now(), sk.interval)
		r.checks.checked(sk.key, sk.uid, sk.identity, at, knownRole{fp: sk.roleFP, roleID: knownRoleID})
		return at.Sub(r.now())
	}
	wait := outcome.Jitter(sk.interval)
	role := knownRole{}
	if sc.roleID != "" && !sc.held(objRole) {
		role = knownRole{fp: sk.roleFP, roleID: sc.roleID}
		sc.roleDigest = sk.roleFP
	}
	r.checks.checked(sk.key, sk.uid, sk.identity, r.now().Add(wait), role)
	return wait
}
