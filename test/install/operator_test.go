//go:build integration

package install

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/cli"
	"github.com/minionvault/minion-vault-operator/internal/testing/testenv"
)

// TestOperatorRunsWithTheInstalledRBAC runs `minionvault operator` as the
// installed ServiceAccount (impersonated), with leader election on, and
// takes a binding through create, Ready and delete: the generated and
// hand-written RBAC is not only minimal (TestRBAC) but sufficient.
func TestOperatorRunsWithTheInstalledRBAC(t *testing.T) {
	env := testenv.Get(t)
	admin := env.Client
	installRBAC(t, admin)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	token, err := env.Vault.OperatorToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "rbac-vault-token"},
		StringData: map[string]string{"token": token}}))
	must(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-rbac"}}))
	must(admin.Create(ctx, &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "rbac-vault"}, Spec: v1alpha1.VaultConnectionSpec{
		Address: env.Vault.Addr,
		Auth: v1alpha1.VaultAuth{Token: &v1alpha1.TokenAuth{SecretRef: v1alpha1.TokenSecretReference{
			SecretReference: v1alpha1.SecretReference{Namespace: namespace, Name: "rbac-vault-token"}}}},
	}}))
	must(admin.Create(ctx, &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: "rbac"}, Spec: v1alpha1.MinionTemplateSpec{
		ConnectionRef: v1alpha1.VaultConnectionReference{Name: "rbac-vault"},
		Policies:      &v1alpha1.PoliciesSpec{Assign: []string{"rbac_role_{pillar[roles]}"}},
		Metadata:      &v1alpha1.MetadataSpec{Entity: map[string]string{"roles": "{pillar[roles]}"}},
		PolicyDocuments: []v1alpha1.PolicyDocument{{Name: "rbac_role_{pillar[roles]}", Rules: []v1alpha1.PolicyRule{
			{Path: "salt/data/roles/{pillar[roles]}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}}},
	}}))
	pillar := v1alpha1.NewDocument([]byte(`{"roles": ["web", "db"]}`))
	grains := v1alpha1.NewDocument([]byte(`{"id": "rbac01"}`))
	must(admin.Create(ctx, &v1alpha1.MinionBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-rbac", Name: "rbac01"},
		Spec: v1alpha1.MinionBindingSpec{MinionID: "rbac01", TemplateRef: v1alpha1.MinionTemplateReference{Name: "rbac"}, Grains: &grains, Pillar: &pillar}}))

	// The operator, as its ServiceAccount.
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + serviceAccount,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	opCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- cli.RunOperator(opCtx, cfg, cli.OperatorOptions{
			MetricsAddr: "0", ProbeAddr: "0", LeaderElection: true, LeaderNamespace: namespace,
			Concurrency: 2, Interval: time.Hour, ServiceAccount: namespace + "/" + serviceAccount,
			SecretNamespace: namespace,
		})
	}()
	defer func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("operator: %v", err)
		}
	}()

	eventually := func(what string, f func() error) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		var err error
		for time.Now().Before(deadline) {
			if err = f(); err == nil {
				return
			}
			select {
			case err := <-done:
				t.Fatalf("the operator stopped: %v", err)
			case <-time.After(200 * time.Millisecond):
			}
		}
		t.Fatalf("%s: %v", what, err)
	}
	eventually("binding Ready", func() error {
		b := &v1alpha1.MinionBinding{}
		if err := admin.Get(ctx, types.NamespacedName{Namespace: "tenant-rbac", Name: "rbac01"}, b); err != nil {
			return err
		}
		if !apimeta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.ReadyCondition) {
			return fmt.Errorf("conditions %+v", b.Status.Conditions)
		}
		return nil
	})
	eventually("template Ready with its policies", func() error {
		mt := &v1alpha1.MinionTemplate{}
		if err := admin.Get(ctx, types.NamespacedName{Name: "rbac"}, mt); err != nil {
			return err
		}
		if !apimeta.IsStatusConditionTrue(mt.Status.Conditions, v1alpha1.ReadyCondition) || mt.Status.Policies == nil || mt.Status.Policies.Count != 2 {
			return fmt.Errorf("status %+v", mt.Status)
		}
		return nil
	})
	eventually("the leader-election Lease", func() error {
		lease := &metav1.PartialObjectMetadata{}
		lease.SetGroupVersionKind(coordinationLease)
		return admin.Get(ctx, types.NamespacedName{Namespace: namespace, Name: "minion-vault-operator.minionvault.dev"}, lease)
	})
	if role, err := env.Vault.Client.Logical().Read("auth/salt-minions/role/rbac01"); err != nil || role == nil {
		t.Fatalf("role in Vault: %v, %v", role, err)
	}

	// Deletion: the finalizers come off, and Vault is cleaned.
	must(admin.Delete(ctx, &v1alpha1.MinionBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-rbac", Name: "rbac01"}}))
	must(admin.Delete(ctx, &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: "rbac"}}))
	eventually("binding and template gone", func() error {
		if err := admin.Get(ctx, types.NamespacedName{Namespace: "tenant-rbac", Name: "rbac01"}, &v1alpha1.MinionBinding{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("binding: %v", err)
		}
		if err := admin.Get(ctx, types.NamespacedName{Name: "rbac"}, &v1alpha1.MinionTemplate{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("template: %v", err)
		}
		return nil
	})
	if role, err := env.Vault.Client.Logical().Read("auth/salt-minions/role/rbac01"); err != nil || role != nil {
		t.Errorf("role still in Vault: %v, %v", role, err)
	}
}

var coordinationLease = schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}
