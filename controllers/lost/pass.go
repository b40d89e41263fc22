package lost

import (
	"context"
	"fmt"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/lostnotice"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// readsPerPass bounds the sweep's reads in one reconcile when it fell
// behind its pace (a slow Vault): the rest follow at once, in the next.
const readsPerPass = 64

// pass is one reconcile of one Vault.
type pass struct {
	c   *Collector
	ctx context.Context
	vc  vault.Client
	// conn is the connection the pass works through, here every
	// connection that reports this Vault.
	conn *v1alpha1.VaultConnection
	here map[string]*v1alpha1.VaultConnection
	key  string
	st   *vaultState
	now  time.Time
	// release are the UIDs an administrator asked to collect, not
	// handled yet; asker the connection whose annotation asked each.
	release map[string]bool
	asker   map[string]string
	// mounts is sys/auth, read once per pass when an alias needs a path.
	mounts map[string]vault.AuthMount
}

// run does what is due: the collections asked for, the candidates
// noticed, a sweep's start and its reads that are due, and the
// collections whose window ended. asked are the UIDs the connections to
// this Vault ask to collect.
func (w *pass) run(asked map[string]string) error {
	w.release = map[string]bool{}
	w.asker = asked
	for uid := range w.st.asked {
		if _, still := asked[uid]; !still {
			delete(w.st.asked, uid) // the annotation let go of it
		}
	}
	urgent := false
	for uid := range asked {
		if w.st.asked[uid] {
			continue
		}
		w.release[uid] = true
		if w.st.lost["uid:"+uid] == nil {
			urgent = true // not known yet: sweep now, unpaced
		}
	}
	pending := w.st.takePending()
	for i, cand := range pending {
		if err := w.look(cand); err != nil {
			for _, c := range pending[i:] {
				w.st.add(c) // looked at again at the retry
			}
			return err
		}
	}
	if urgent || !w.now.Before(w.st.nextSweep) {
		if err := w.startSweep(urgent); err != nil {
			return err
		}
	}
	if err := w.sweepReads(urgent); err != nil {
		return err
	}
	if err := w.due(); err != nil {
		return err
	}
	if urgent {
		w.unfound()
	}
	return nil
}

// sweepReads makes the sweep's reads that are due (all of them when
// urgent).
func (w *pass) sweepReads(urgent bool) error {
	for n := 0; len(w.st.queue) > 0 && (urgent || (!w.now.Before(w.st.nextRead) && n < readsPerPass)); n++ {
		cand := w.st.queue[0]
		w.st.queue = w.st.queue[1:]
		w.st.nextRead = w.st.nextRead.Add(w.st.spacing)
		if err := w.lookSwept(cand); err != nil {
			// Looked at again at the next sweep.
			ctrl.LoggerFrom(w.ctx).Info("Reading an object for the sweep of lost minions failed", "object", describe(cand), "error", err.Error())
			if outcome.Classify(err) == vault.ClassTransient {
				return err
			}
		}
	}
	if w.st.nextRead.Before(w.now.Add(-w.st.spacing)) {
		// Fallen behind (a slow Vault): no burst to catch up.
		w.st.nextRead = w.now
	}
	return nil
}

// due looks again at each lost minion whose window ended or whose
// collection was asked for: the look reads it afresh, and collects it
// when Vault and the API server still say it is lost.
func (w *pass) due() error {
	var due []*lostMinion
	for _, m := range w.st.lost {
		if (!m.until.IsZero() && !w.now.Before(m.until)) || (m.owner.UID != "" && w.release[m.owner.UID]) {
			due = append(due, m)
		}
	}
	for _, m := range due {
		if err := w.lookAgain(m); err != nil {
			return err
		}
	}
	return nil
}

// unfound says, once, that an administrator asked to collect what no
// sweep found: its binding exists, or nothing of it is in this Vault.
func (w *pass) unfound() {
	for uid := range w.release {
		if w.st.asked[uid] {
			continue
		}
		w.st.asked[uid] = true
		conn := w.conn
		if c := w.here[w.asker[uid]]; c != nil {
			conn = c
		}
		gone := &lostMinion{owner: ownership.Owner{UID: uid}}
		outcome.EmitRelated(w.c.Recorder, conn, gone.related(), "Warning", "CollectNothing", "Collect",
			"%s asks to collect the minion of MinionBinding uid %s: nothing lost or retained of it is in Vault %s (its binding exists, or its objects are gone)",
			v1alpha1.CollectAnnotation, uid, w.key)
	}
}

// connOf is the connection a lost minion's events and series are told
// on: the one it was written through while that reports this Vault, else
// the one the pass works through.
func (w *pass) connOf(m *lostMinion) *v1alpha1.VaultConnection {
	if c := w.here[m.conn]; c != nil {
		return c
	}
	return w.conn
}

// describe names a candidate for logs.
func describe(c lostnotice.Candidate) string {
	var parts []string
	if c.Role != "" {
		parts = append(parts, "AppRole "+c.Mount+"/"+c.Role)
	}
	if c.Entity != "" {
		parts = append(parts, "entity "+c.Entity)
	}
	return strings.Join(parts, ", ")
}

func (w *pass) mountPath(accessor string) (string, error) {
	if w.mounts == nil {
		m, err := w.vc.AuthMounts(w.ctx)
		if err != nil {
			return "", fmt.Errorf("reading sys/auth: %w", err)
		}
		w.mounts = m
	}
	for path, m := range w.mounts {
		if m.Accessor == accessor && m.Type == "approle" {
			return path, nil
		}
	}
	return "", nil
}
