package outcome

import (
	"errors"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ResultFor is what controller-runtime is told after a reconcile that
// ended in o with err: Stalled is terminal (logged, never retried until
// something changes); Waiting looks again after waitAfter, or after next
// when that is sooner (a template rechecking policies someone else holds);
// Failed returns the error for backoff; otherwise the next resync is after
// next.
func ResultFor(o Outcome, err error, next time.Duration) (ctrl.Result, error) {
	switch o.Kind {
	case OutcomeStalled:
		if err == nil {
			err = errors.New(o.Message)
		}
		return ctrl.Result{}, reconcile.TerminalError(err)
	case OutcomeWaiting:
		if next > 0 && next < WaitAfter {
			return ctrl.Result{RequeueAfter: next}, nil
		}
		return ctrl.Result{RequeueAfter: WaitAfter}, nil
	case OutcomeFailed:
		if err == nil {
			err = errors.New(o.Message)
		}
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: next}, err
}
