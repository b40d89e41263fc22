package clusterfacts

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// A full cache is swept for old entries only once one can be old: a burst
// of renders into a full cache of young entries (a start) does not scan
// the cache on each render.
func TestFullCacheIsSweptOnlyWhenAnEntryCanBeOld(t *testing.T) {
	now := time.Now()
	c := &Renders{Consumers: 2, entries: map[types.UID]*renderEntry{}}
	add := func(uid string, age time.Duration) {
		c.entries[types.UID(uid)] = &renderEntry{at: now.Add(-age)}
	}
	for i := range 3 {
		add(fmt.Sprint("old", i), 3*time.Minute)
	}
	add("young1", time.Minute)
	add("young2", 30*time.Second)
	c.dropOldLocked()
	if len(c.entries) != 2 {
		t.Fatalf("%d entries after the sweep, want the 2 young ones", len(c.entries))
	}
	if want := now.Add(-time.Minute).Add(renderTTL); !c.sweepAt.Equal(want) {
		t.Errorf("next sweep at %s, want %s (when young1 turns old)", c.sweepAt, want)
	}
	// Until then a sweep finds nothing and does not look.
	add("planted", time.Hour)
	c.dropOldLocked()
	if len(c.entries) != 3 {
		t.Errorf("swept before any entry could be old: %d entries", len(c.entries))
	}
	c.sweepAt = now.Add(-time.Second)
	c.dropOldLocked()
	if _, ok := c.entries["planted"]; ok || len(c.entries) != 2 {
		t.Errorf("the due sweep kept %d entries", len(c.entries))
	}
}
