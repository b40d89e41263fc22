package policy

import (
	"encoding/hex"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// presumption is what a template's status says its last pass confirmed in
// Vault: written by the operator alone.
type presumption struct {
	count           int64
	digest, content string
}

// presumptionOf reads it from a template that is Ready for its spec.
func presumptionOf(tpl *v1alpha1.MinionTemplate) (presumption, bool) {
	ready := meta.FindStatusCondition(tpl.Status.Conditions, v1alpha1.ReadyCondition)
	p := tpl.Status.Policies
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.Reason != v1alpha1.SucceededReason ||
		ready.ObservedGeneration != tpl.Generation || tpl.Status.ObservedGeneration != tpl.Generation || p == nil || p.ContentDigest == "" {
		return presumption{}, false
	}
	return presumption{count: p.Count, digest: p.Digest, content: p.ContentDigest}, true
}

// presume takes the template's wanted policies as confirmed in Vault
// without reading them, when a new process finds exactly what status says
// the last one confirmed: the same names and bodies rendered now (so an
// operator that renders differently reads and writes them), each in
// Vault's list, and nothing else owned. They are then compared with Vault
// over the interval, slot by slot. Believing status costs at most one
// interval before a policy changed in Vault while no operator ran is put
// back, as the last process would have put it back at its next slot.
func (idx *policyIndex) presume(template string, p presumption, listed []string, now time.Time, interval time.Duration) bool {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	tp := idx.templateLocked(template)
	if len(tp.owned) > 0 || len(tp.notOwned) > 0 {
		return false
	}
	wanted := map[string]string{}
	for name, ref := range tp.refs {
		body, ok, conflict := ref.desired()
		if conflict {
			return false
		}
		if ok {
			wanted[name] = body
		}
	}
	inVault := make(map[string]bool, len(listed))
	for _, n := range listed {
		inVault[strings.ToLower(n)] = true
	}
	var content [16]byte
	names := make([]string, 0, len(wanted))
	for name, body := range wanted {
		if !inVault[name] {
			return false
		}
		flipContent(&content, name, body)
		names = append(names, name)
	}
	if int64(len(wanted)) != p.count || policySetDigest(names) != p.digest || hex.EncodeToString(content[:]) != p.content {
		return false
	}
	for name, body := range wanted {
		tp.own(name, body)
		delete(tp.dirty, name)
	}
	slotLen, _ := slotsOf(interval)
	tp.verifiedTick, tp.slotLen = now.UnixNano()/int64(slotLen), slotLen
	return true
}
