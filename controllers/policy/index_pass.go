package policy

import "time"

// A reconcile of a template is one pass over its part of the index:
// begin decides under the index's lock what is due, the pass does its work
// under the template's hold (hold: a full scan keeps deltas out, a retry
// keeps scans out) claiming and settling names as any sync does, and end
// takes under the lock what the status and the requeue need. The index's
// locks stay in the index: the reconciler asks twice, not once per
// decision, and no delta sees a pass half begun.

// templatePass is what begin decided for one reconcile of a template.
type templatePass struct {
	idx      *policyIndex
	template string
	interval time.Duration
	scan     scanKind
	why      []any // log values: why the scan is due
	// forget is the key of what was known of a Vault that is no longer
	// the template's ("" if none): the reconciler drops it (policyOwners).
	forget string
	// request is the reconcile request not yet reported handled ("" for
	// none): a scan presumes nothing for it, and reads every name anew.
	request string
}

// begin records the template's Vault and starts a pass: which full scan
// is due (scanDue), the names whose slot to be compared with Vault came
// (verifyDue), and, when no scan is due, the names found someone else's
// whose wait is over (recheckNotOwned; a scan compares them anyway).
func (idx *policyIndex) begin(template string, rq scanRequest, now time.Time) templatePass {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	tp := idx.templateLocked(template)
	p := templatePass{idx: idx, template: template, interval: rq.interval}
	p.scan, p.why, p.forget = tp.scanDue(rq, now)
	tp.verifyDue(now, rq.interval)
	if p.scan == noScan {
		tp.recheckNotOwned(now)
	}
	if rq.asked != rq.handled {
		p.request = rq.asked
	}
	return p
}

// hold keeps out what must not interleave with the pass's work until
// release: deltas and retries during a full scan, a full scan during a
// retry.
func (p templatePass) hold() (release func()) {
	if p.scan == noScan {
		return p.idx.holdForDelta(p.template)
	}
	return p.idx.holdForScan(p.template)
}

// passEnd is what a pass leaves for the template's status and requeue.
type passEnd struct {
	// written and deleted are what syncs did in Vault since the last
	// pass's end, deltas' syncs included: one event each.
	written, deleted []string
	summary          templateSummary
	times            passTimes
}

// end closes a pass: what syncs reported since the last end is taken
// (and cleared), and the status and the timing of the next pass are read.
func (idx *policyIndex) end(p templatePass, now time.Time) passEnd {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	tp := idx.templateLocked(p.template)
	var e passEnd
	e.written, e.deleted = tp.takeUnreported()
	e.summary = tp.summary()
	e.times = passTimes{scan: tp.untilScan(p.interval, now), slot: tp.untilSlot(now), recheck: tp.untilRecheck(now)}
	return e
}

// passTimes are the waits until what the index will have due next: the
// next full scan, the next verify slot and the next recheck of names
// found someone else's (0: none).
type passTimes struct {
	scan, slot, recheck time.Duration
}

// requeue is when the template is reconciled next, a Ready one
// included: its scan, jittered and at least a second away, or a slot or
// recheck that comes sooner.
func (t passTimes) requeue(jitter func(time.Duration) time.Duration) time.Duration {
	d := jitter(max(t.scan, time.Second))
	if t.slot > 0 {
		d = min(d, t.slot)
	}
	if t.recheck > 0 {
		d = min(d, t.recheck)
	}
	return d
}
