package outcome

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// Jitter spreads resyncs of many bindings over ±10% of the interval.
func Jitter(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()*0.2-0.1)*float64(d))
}

func TemplateInterval(tpl *v1alpha1.MinionTemplate, def time.Duration) time.Duration {
	if tpl != nil && tpl.Spec.Interval != nil && tpl.Spec.Interval.Duration > 0 {
		return tpl.Spec.Interval.Duration
	}
	if def > 0 {
		return def
	}
	return time.Hour
}

func FirstN(ss []string, n int) []string {
	if len(ss) <= n {
		return ss
	}
	return append(ss[:n:n], fmt.Sprintf("and %d more", len(ss)-n))
}
