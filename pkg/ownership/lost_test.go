package ownership

import (
	"testing"
	"time"
)

func TestDecideLost(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	hour := time.Hour
	tests := []struct {
		name  string
		f     LostFacts
		want  LostDecision
		until time.Time
	}{
		{name: "its binding exists", f: LostFacts{Holder: HolderLive, Lost: now.Add(-2 * hour), Window: hour, Now: now}, want: LostNone},
		{name: "its binding is being deleted: its finalizer acts", f: LostFacts{Holder: HolderDeleting, Window: hour, Now: now}, want: LostNone},
		{name: "nobody can say (another cluster)", f: LostFacts{Holder: HolderUnknown, Release: true, Window: hour, Now: now}, want: LostNone},
		{name: "an administrator's release of a live binding's minion does nothing", f: LostFacts{Holder: HolderLive, Release: true, Now: now}, want: LostNone},
		{name: "gone, not marked: the window starts now", f: LostFacts{Holder: HolderGone, Window: hour, Now: now}, want: LostMark, until: now.Add(hour)},
		{name: "gone, marked: kept until the window ends", f: LostFacts{Holder: HolderGone, Lost: now.Add(-time.Minute), Window: hour, Now: now}, want: LostKeep, until: now.Add(59 * time.Minute)},
		{name: "gone, the window ended: collected", f: LostFacts{Holder: HolderGone, Lost: now.Add(-hour), Window: hour, Now: now}, want: LostCollect, until: now},
		{name: "a window of zero collects at once, once marked", f: LostFacts{Holder: HolderGone, Lost: now, Now: now}, want: LostCollect, until: now},
		{name: "gone, marked, released by an administrator", f: LostFacts{Holder: HolderGone, Lost: now, Window: hour, Now: now, Release: true}, want: LostCollect},
		{name: "retained: kept for its binding, whatever the window", f: LostFacts{Holder: HolderGone, Retained: true, Lost: now.Add(-48 * hour), Window: hour, Now: now}, want: LostKeep},
		{name: "retained, released by an administrator", f: LostFacts{Holder: HolderGone, Retained: true, Now: now, Release: true}, want: LostCollect},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DecideLost(tt.f)
			if got.Decision != tt.want || !got.Until.Equal(tt.until) {
				t.Errorf("DecideLost = %s until %s, want %s until %s", got.Decision, got.Until, tt.want, tt.until)
			}
		})
	}
}

func TestLostMark(t *testing.T) {
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.FixedZone("x", 3600))
	md := map[string]string{MarkerKey: sibling.Marker(), LostKey: LostValue(at)}
	if md[LostKey] != "2026-12-07T09:00:00Z" {
		t.Errorf("LostValue = %q, want UTC", md[LostKey])
	}
	c := ClaimOf(true, md, squatter)
	if c.Holder != HolderOther || !c.Lost.Equal(at) {
		t.Errorf("ClaimOf = %+v, want another's, lost at %s", c, at)
	}
	if v := DecideEntity(EntityFacts{Name: "e", Claim: c, Holder: HolderGone, Window: time.Hour}); v.Reason != ReasonLost || !v.Until.Equal(at.Add(time.Hour)) {
		t.Errorf("a claimant's verdict = %+v, want a wait until %s", v, at.Add(time.Hour))
	}
	for _, raw := range []string{"", "yesterday", "2026-12-07"} {
		md[LostKey] = raw
		if _, ok := LostSince(md); ok {
			t.Errorf("LostSince(%q) ok, want an unreadable mark", raw)
		}
		if c := ClaimOf(true, md, squatter); !c.Lost.IsZero() {
			t.Errorf("ClaimOf with LostKey %q: lost at %s, want unmarked", raw, c.Lost)
		}
	}
	// The binding coming back under its name takes it: the mark goes
	// with the rest of the operator's keys.
	md[LostKey] = LostValue(at)
	out, err := Metadata(md, nil, back)
	if err != nil || out[LostKey] != "" || out[MarkerKey] != back.Marker() {
		t.Errorf("Metadata for the binding coming back = %v, %v: want the marker rewritten and no lost mark", out, err)
	}
}
