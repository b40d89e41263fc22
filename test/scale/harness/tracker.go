//go:build integration

package harness

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// tracker follows the bindings of one namespace through a watch (an
// informer), and keeps count of those that satisfy the current predicate,
// updated per event: waiting for 10,000 bindings costs neither a list per
// poll (load on the API server the measure would include) nor a pass over
// all of them per event.
type tracker struct {
	mu      sync.Mutex
	objs    map[string]*v1alpha1.MinionBinding
	pred    func(*v1alpha1.MinionBinding) bool
	ok      map[string]bool
	changed chan struct{}
	// low is the fewest bindings that satisfied the predicate at once
	// since it was set.
	low int
	// observe, when set, sees every binding as it comes (under mu): the
	// HA runs watch every condition a binding goes through.
	observe func(*v1alpha1.MinionBinding)
}

// setObserver makes f see every binding the watch delivers from now on.
func (t *tracker) setObserver(f func(*v1alpha1.MinionBinding)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.observe = f
}

// startTracker starts an informer on the MinionBindings of ns; it runs
// until ctx ends.
func startTracker(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, ns string) (*tracker, error) {
	t := &tracker{
		objs: map[string]*v1alpha1.MinionBinding{}, ok: map[string]bool{},
		pred: func(*v1alpha1.MinionBinding) bool { return false }, changed: make(chan struct{}, 1),
	}
	c, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		return nil, fmt.Errorf("tracker cache: %w", err)
	}
	inf, err := c.GetInformer(ctx, &v1alpha1.MinionBinding{})
	if err != nil {
		return nil, fmt.Errorf("tracker informer: %w", err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { t.upsert(o) },
		UpdateFunc: func(_, o any) { t.upsert(o) },
		DeleteFunc: func(o any) { t.remove(o) },
	}); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("tracker: cache did not sync")
	}
	return t, nil
}

func (t *tracker) upsert(o any) {
	b, ok := o.(*v1alpha1.MinionBinding)
	if !ok {
		return
	}
	t.mu.Lock()
	t.objs[b.Name] = b
	if t.observe != nil {
		t.observe(b)
	}
	if t.pred(b) {
		t.ok[b.Name] = true
	} else {
		delete(t.ok, b.Name)
	}
	t.low = min(t.low, len(t.ok))
	t.mu.Unlock()
	t.signal()
}

func (t *tracker) remove(o any) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	b, ok := o.(*v1alpha1.MinionBinding)
	if !ok {
		return
	}
	t.mu.Lock()
	delete(t.objs, b.Name)
	delete(t.ok, b.Name)
	t.low = min(t.low, len(t.ok))
	t.mu.Unlock()
	t.signal()
}

func (t *tracker) signal() {
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// setPredicate sets what wait counts, and evaluates it once for every
// binding known.
func (t *tracker) setPredicate(pred func(*v1alpha1.MinionBinding) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pred = pred
	t.ok = map[string]bool{}
	for name, b := range t.objs {
		if pred(b) {
			t.ok[name] = true
		}
	}
	t.low = len(t.ok)
}

// lowest is the fewest bindings that satisfied the predicate at once
// since it was set.
func (t *tracker) lowest() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.low
}

// counts returns how many bindings exist and how many satisfy the predicate.
func (t *tracker) counts() (total, ok int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.objs), len(t.ok)
}

// get returns the binding as last seen.
func (t *tracker) get(name string) *v1alpha1.MinionBinding {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.objs[name]
}

func (t *tracker) names() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.objs))
	for n := range t.objs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// failing returns up to max bindings that do not satisfy the predicate,
// with their Ready condition, for error messages.
func (t *tracker) failing(max int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for name, b := range t.objs {
		if t.ok[name] {
			continue
		}
		out = append(out, fmt.Sprintf("%s (%s)", name, readySummary(b)))
		if len(out) == max {
			break
		}
	}
	sort.Strings(out)
	return out
}

// wait blocks until done(total, ok) holds, ctx ends, or check (called
// every second, for example to notice that the operator died) fails.
func (t *tracker) wait(ctx context.Context, done func(total, ok int) bool, check func() error) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if done(t.counts()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.changed:
		case <-tick.C:
			if check != nil {
				if err := check(); err != nil {
					return err
				}
			}
		}
	}
}

// readyCurrent: Ready is True for the binding's current generation.
func readyCurrent(b *v1alpha1.MinionBinding) bool {
	c := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition)
	return c != nil && c.Status == metav1.ConditionTrue && b.Status.ObservedGeneration == b.Generation
}

func readySummary(b *v1alpha1.MinionBinding) string {
	c := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition)
	if c == nil {
		return fmt.Sprintf("no Ready condition, generation %d observed %d", b.Generation, b.Status.ObservedGeneration)
	}
	return fmt.Sprintf("Ready=%s %s: %.120s, generation %d observed %d", c.Status, c.Reason, c.Message, b.Generation, b.Status.ObservedGeneration)
}
