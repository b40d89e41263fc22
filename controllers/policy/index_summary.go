package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
)

// templateSummary is what a template's status shows of the index.
type templateSummary struct {
	built     bool
	members   int
	owned     int
	digest    string
	content   string
	conflicts []string // messages
	notOwned  []string
	// missing: wanted and not confirmed in Vault with that body; stale:
	// owned and no longer wanted; unchecked: dirty, whatever Vault has.
	missing, stale, unchecked int
	// compared is the reconcile request whose full compare began.
	compared string
}

// pending reports whether Vault is not yet known to be as wanted.
func (s templateSummary) pending() bool { return s.missing+s.stale+s.unchecked > 0 }

// summary is what the template's status shows now (empty before its
// first pass).
func (idx *policyIndex) summary(template string) templateSummary {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	tp := idx.templates[template]
	if tp == nil {
		return templateSummary{}
	}
	return tp.summary()
}

func (tp *templatePolicies) summary() templateSummary {
	// Nothing here walks every name: a status refresh of a template with a
	// policy per minion costs the same at 10 names as at 50,000.
	s := templateSummary{built: tp.built, members: tp.members, owned: len(tp.owned), notOwned: slices.Sorted(maps.Keys(tp.notOwned)),
		unchecked: len(tp.dirty), missing: tp.tallies.missing, stale: tp.tallies.stale, conflicts: tp.conflictMessages(), compared: tp.compared}
	if len(tp.owned) > 0 {
		s.digest = hex.EncodeToString(tp.digest[:])
		s.content = hex.EncodeToString(tp.content[:])
	}
	return s
}

func (s templateSummary) writeTo(tpl *v1alpha1.MinionTemplate) {
	tpl.Status.Bindings = int32(s.members)
	tpl.Status.Policies = &v1alpha1.PolicySummary{Count: int64(s.owned), Digest: s.digest, ContentDigest: s.content}
}

// outcome is the template's condition from the index: Ready only when
// every wanted policy is confirmed in Vault and no stale one is left.
func (s templateSummary) outcome() outcome.Outcome {
	switch {
	case len(s.conflicts) > 0:
		return outcome.Outcome{Kind: outcome.OutcomeStalled, Reason: v1alpha1.ValidationFailedReason, Message: strings.Join(outcome.FirstN(s.conflicts, 10), "; ")}
	case len(s.notOwned) > 0:
		// Vault's state, not the template's: the owner may delete them (a
		// handover between two clusters on one Vault), so they are looked
		// at again (recheckNotOwned).
		return outcome.Outcome{Kind: outcome.OutcomeWaiting, Reason: v1alpha1.PolicyNotOwnedReason,
			Message: fmt.Sprintf("%d ACL policies exist in Vault and were not written by this template (set adoptPolicies to take them over): %s",
				len(s.notOwned), strings.Join(outcome.FirstN(s.notOwned, 20), ", "))}
	case s.pending():
		return outcome.Outcome{Kind: outcome.OutcomeWaiting, Reason: v1alpha1.ProgressingReason,
			Message: fmt.Sprintf("ACL policies in progress: %d to write, %d to delete, %d to compare with Vault", s.missing, s.stale, s.unchecked)}
	}
	return outcome.Outcome{Kind: outcome.OutcomeReady, Reason: v1alpha1.SucceededReason, Message: fmt.Sprintf("%d bindings, %d ACL policies", s.members, s.owned)}
}

// beginCompare records that the full compare of a reconcile request
// began, right after a verifying rebuild marked every name dirty, and
// returns those names: their reads must ask Vault (readAgain).
func (idx *policyIndex) beginCompare(template, request string) []string {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	tp := idx.templateLocked(template)
	tp.compared = request
	return slices.Collect(maps.Keys(tp.dirty))
}

// handledRequest is the reconcile request a pass of the template may
// report handled (status.lastHandledReconcileAt), "" for none yet: the
// one asked once its full compare began (compared) and nothing of it is
// left, no name still to compare, write or delete (pending, which counts
// the names another sync holds) and no failure in this pass. A refusal
// (Stalled: the template's own problem, or a write Vault refuses) is
// handled too: only a change of the template clears it, and the
// condition says which. A failure that a retry may clear is not: the
// request stays open, and its compare goes on at the retry.
func handledRequest(asked, compared string, pending bool, kind outcome.OutcomeKind, err error) string {
	switch {
	case asked == "":
		return ""
	case err != nil:
		if kind == outcome.OutcomeStalled {
			return asked
		}
		return ""
	case pending || compared != asked:
		return ""
	}
	return asked
}

// takeUnreported returns and clears what syncs wrote and deleted since
// the last call.
func (tp *templatePolicies) takeUnreported() (written, deleted []string) {
	written, deleted = tp.unreported.written, tp.unreported.deleted
	tp.unreported = policyPass{}
	return written, deleted
}

// appendCounted appends names to a report list, keeping at most
// reportNames of them and "and N more" for the rest.
func appendCounted(list, names []string) []string {
	if len(names) == 0 {
		return list
	}
	more := 0
	if n := len(list); n > 0 {
		if _, err := fmt.Sscanf(list[n-1], "and %d more", &more); err == nil {
			list = list[:n-1]
		}
	}
	for _, n := range names {
		if len(list) < reportNames {
			list = append(list, n)
		} else {
			more++
		}
	}
	if more > 0 {
		list = append(list, fmt.Sprintf("and %d more", more))
	}
	return list
}

// reportNames is how many policy names one event names.
const reportNames = 20

// flipDigest adds a name to the digest of the owned names, or removes it.
func (tp *templatePolicies) flipDigest(name string) {
	sum := sha256.Sum256([]byte(name))
	for i := range tp.digest {
		tp.digest[i] ^= sum[i]
	}
}

// flipContent adds a name and body to a content digest, or removes them.
func flipContent(d *[16]byte, name, body string) {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(body))
	sum := h.Sum(nil)
	for i := range d {
		d[i] ^= sum[i]
	}
}

// policySetDigest is status.policies.digest of a set of policy names: the
// XOR of the first 16 bytes of each name's SHA-256, in hex ("" for none).
// The index keeps it up to date one name at a time.
func policySetDigest(names []string) string {
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
