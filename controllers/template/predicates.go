package template

import (
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// holdingChanged passes a binding that starts or stops holding its minion
// in Vault (holdsInVault): its policies count from then on, or no more.
var holdingChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(ev event.UpdateEvent) bool {
		o, ok1 := ev.ObjectOld.(*v1alpha1.MinionBinding)
		n, ok2 := ev.ObjectNew.(*v1alpha1.MinionBinding)
		return ok1 && ok2 && holdsInVault(o) != holdsInVault(n)
	},
}
