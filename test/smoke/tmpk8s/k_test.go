package tmpk8s

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/minionvault/minion-vault-operator/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{NoVault: true, CRDDirectoryPaths: []string{"/tmp/crdfix"}}) }

func TestNS(t *testing.T) {
	env := testenv.Get(t)
	var l corev1.NamespaceList
	if err := env.Client.List(context.Background(), &l); err != nil {
		t.Fatal(err)
	}
	t.Log(len(l.Items), env.Dir)
	v, _ := env.Kubernetes.ControlPlane.APIServer.Configure(), 0
	_ = v
}
