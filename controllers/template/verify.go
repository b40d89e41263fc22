package template

import (
	"encoding/hex"
	"hash/fnv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// A template's policies are compared with Vault once per interval each,
// spread over it: the names are cut into verifySlots slots by a hash of
// the name, and every interval/verifySlots the next slot's names are
// marked dirty and read. A template with a policy per minion thus costs
// Vault a steady trickle (10,000 policies, one hour: 167 reads a minute),
// not 10,000 reads at once every hour; and a new operator process that
// status lets presume the policies (presume) continues the trickle
// instead of reading every policy at its start.

// verifySlots is how many slots an interval is cut into (slotsOf).
const verifySlots = 60

// slotOf is the slot of slots a policy name is compared with Vault in.
func slotOf(name string, slots int64) int64 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int64(h.Sum32()) % slots
}

// slotsOf cuts an interval into slots: verifySlots of them, each at least
// a second long (an interval under a minute has fewer).
func slotsOf(interval time.Duration) (length time.Duration, slots int64) {
	length = max(interval/verifySlots, time.Second)
	return length, max(int64(interval/length), 1)
}

// verifyDue marks dirty the template's names whose slot came since the
// last call (at most one interval's worth), and returns how many. The
// first call only starts the clock: a full comparison (the first scan)
// or a presumption covers the time before.
func (tp *templatePolicies) verifyDue(now time.Time, interval time.Duration) int {
	slotLen, slots := slotsOf(interval)
	tick := now.UnixNano() / int64(slotLen)
	if tp.verifiedTick == 0 || tp.slotLen != slotLen {
		tp.verifiedTick, tp.slotLen = tick, slotLen
		return 0
	}
	due := map[int64]bool{}
	for t := tp.verifiedTick + 1; t <= tick && int64(len(due)) < slots; t++ {
		due[t%slots] = true
	}
	tp.verifiedTick = tick
	if len(due) == 0 {
		return 0
	}
	marked := 0
	mark := func(name string) {
		if !tp.dirty[name] && due[slotOf(name, slots)] {
			tp.dirty[name] = true
			marked++
		}
	}
	for name := range tp.refs {
		mark(name)
	}
	for name := range tp.owned {
		mark(name)
	}
	return marked
}

// untilSlot is the time until the template's next slot is due (0: the
// template has no policy to compare, or its clock has not started).
func (tp *templatePolicies) untilSlot(now time.Time) time.Duration {
	if tp.verifiedTick == 0 || len(tp.refs)+len(tp.owned) == 0 {
		return 0
	}
	next := time.Unix(0, (tp.verifiedTick+1)*int64(tp.slotLen))
	return max(next.Sub(now), time.Millisecond)
}

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
	if int64(len(wanted)) != p.count || PolicySetDigest(names) != p.digest || hex.EncodeToString(content[:]) != p.content {
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
