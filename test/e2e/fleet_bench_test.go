//go:build integration

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// fleetSize is the number of bindings BenchmarkFleet converges.
const fleetSize = 300

// BenchmarkFleet measures a fleet against the real servers: how long
// fleetSize new bindings (two roles each, one policy document) take to be
// Ready with the template's policies written, the Vault calls per binding,
// and a forced resync of all of them with Vault in sync (no writes).
//
//	go test -tags integration -run '^$' -bench BenchmarkFleet -benchtime 1x ./test/e2e
func BenchmarkFleet(b *testing.B) {
	s := start(b)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		ns := fmt.Sprintf("fleet-%d", i)
		tplName := ns
		if err := s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
		if err := client.IgnoreAlreadyExists(s.c.Create(ctx, tokenConnection("fleet-vault", s.env.Vault.Addr, "vault-token"))); err != nil {
			b.Fatal(err)
		}
		tpl := &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: tplName}, Spec: v1alpha1.MinionTemplateSpec{
			ConnectionRef: v1alpha1.VaultConnectionReference{Name: "fleet-vault"},
			Policies:      &v1alpha1.PoliciesSpec{Assign: []string{"saltstack/{minion}", ns + "_role_{pillar[roles]}"}},
			Metadata:      &v1alpha1.MetadataSpec{Entity: map[string]string{"roles": "{pillar[roles]}"}},
			PolicyDocuments: []v1alpha1.PolicyDocument{{Name: ns + "_role_{pillar[roles]}", Rules: []v1alpha1.PolicyRule{
				{Path: "salt/data/roles/{pillar[roles]}", Capabilities: []v1alpha1.PolicyCapability{"read"}}}}},
		}}
		if err := s.c.Create(ctx, tpl); err != nil {
			b.Fatal(err)
		}
		reads, writes := s.writes.reads.Load(), s.writes.writes.Load()
		b.ResetTimer()
		begin := time.Now()
		for j := 0; j < fleetSize; j++ {
			minion := fmt.Sprintf("%s-m%04d", ns, j)
			bd := binding(ns, minion, minion, map[string]any{"roles": []string{fmt.Sprintf("r%d", j%10), "web"}})
			bd.Spec.TemplateRef.Name = tplName
			if err := s.c.Create(ctx, bd); err != nil {
				b.Fatal(err)
			}
		}
		created := time.Since(begin)
		waitFleet(b, s, ns, tplName, 11)
		converged := time.Since(begin)
		b.StopTimer()
		b.ReportMetric(converged.Seconds(), "s/converge")
		b.ReportMetric(created.Seconds(), "s/create")
		b.ReportMetric(float64(s.writes.writes.Load()-writes)/fleetSize, "vault-writes/binding")
		b.ReportMetric(float64(s.writes.reads.Load()-reads)/fleetSize, "vault-reads/binding")

		// A resync of the whole fleet, forced through the annotation.
		writes = s.writes.writes.Load()
		list := &v1alpha1.MinionBindingList{}
		if err := s.c.List(ctx, list, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		stamp := time.Now().Format(time.RFC3339Nano)
		begin = time.Now()
		for k := range list.Items {
			bd := &list.Items[k]
			patch := client.MergeFrom(bd.DeepCopy())
			bd.Annotations = map[string]string{v1alpha1.ReconcileRequestAnnotation: stamp}
			if err := s.c.Patch(ctx, bd, patch); err != nil {
				b.Fatal(err)
			}
		}
		deadline := time.Now().Add(5 * time.Minute)
		for {
			if err := s.c.List(ctx, list, client.InNamespace(ns)); err != nil {
				b.Fatal(err)
			}
			done := 0
			for _, bd := range list.Items {
				if bd.Status.LastHandledReconcileAt == stamp {
					done++
				}
			}
			if done == len(list.Items) {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("resync: %d of %d handled", done, len(list.Items))
			}
			time.Sleep(100 * time.Millisecond)
		}
		b.ReportMetric(time.Since(begin).Seconds(), "s/resync")
		if n := s.writes.writes.Load() - writes; n != 0 {
			b.Errorf("a resync in sync made %d Vault writes", n)
		}
	}
}

// waitFleet waits until every binding of ns is Ready and the template
// manages the policies.
func waitFleet(b *testing.B, s *suite, ns, tpl string, policies int) {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		list := &v1alpha1.MinionBindingList{}
		if err := s.c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		ready := 0
		for _, bd := range list.Items {
			if apimeta.IsStatusConditionTrue(bd.Status.Conditions, v1alpha1.ReadyCondition) {
				ready++
			}
		}
		mt := &v1alpha1.MinionTemplate{}
		if err := s.c.Get(context.Background(), types.NamespacedName{Name: tpl}, mt); err != nil {
			b.Fatal(err)
		}
		if ready == fleetSize && mt.Status.Policies != nil && mt.Status.Policies.Count == int64(policies) && apimeta.IsStatusConditionTrue(mt.Status.Conditions, v1alpha1.ReadyCondition) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d bindings Ready, template %+v", ready, fleetSize, mt.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
