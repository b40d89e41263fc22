package clusterfacts

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/controllers/internal/testkit"
	"github.com/minionvault/minion-vault-operator/internal/admission"
)

// A missing parameter ConfigMap is the one template problem that waits:
// the gate says so itself, so the outcome table needs no case of its own.
// Both reads are tried: the ConfigMap's data, and the metadata cache.
func TestMissingConfigMapWaitsThroughTheGate(t *testing.T) {
	tpl := &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t", UID: "uid-t", Generation: 1}, Spec: v1alpha1.MinionTemplateSpec{
		Parameters: &v1alpha1.ParametersSpec{ConfigMapRefs: []v1alpha1.ParameterConfigMapReference{
			{ConfigMapReference: v1alpha1.ConfigMapReference{Namespace: "salt", Name: "params"}},
		}},
	}}
	c := testkit.Builder().Build()
	const msg = "ConfigMap salt/params of the parameter stack does not exist"
	for name, templates := range map[string]*Templates{
		"data":     {Client: c},
		"metadata": {Client: c, Metadata: c},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(c, templates).Compile(context.Background(), tpl)
			var v *admission.Verdict
			if !errors.As(err, &v) || v.Kind != admission.Waiting || v.Reason != v1alpha1.RenderFailedReason || v.Message != msg {
				t.Fatalf("got %#v, want a Waiting verdict, RenderFailed, %q", err, msg)
			}
			if o := outcome.For(err); o.Kind != outcome.OutcomeWaiting || o.Reason != v1alpha1.RenderFailedReason || o.OfConnection {
				t.Errorf("outcome %+v, want waiting for RenderFailed, not on the connection", o)
			}
		})
	}
}
