//go:build integration

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/testing/alerting"
)

// alertRulesFile is the PrometheusRule the test reads; ALERT_RULES_FILE
// names another (to see the test fail on a rule that names a metric the
// operator does not export).
func alertRulesFile() string {
	if f := os.Getenv("ALERT_RULES_FILE"); f != "" {
		return f
	}
	return filepath.Join("..", "..", alerting.RulesFile)
}

// TestAlertMetricsExist: every metric that config/prometheus/rules.yaml
// and config/grafana/minion-vault-operator.json name is on the operator's
// /metrics, the operator's own and controller-runtime's alike. A rule on a
// metric that does not exist never fires, whatever happens. The run
// first makes the operator count what it counts only when it happens: a
// binding Ready, a binding refused (render failures), a template whose
// policy Vault already holds under another owner (template policy
// failures), a connection with an expiring token.
func TestAlertMetricsExist(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	pr, err := alerting.LoadRules(alertRulesFile())
	s.must(err)
	exprs, err := alerting.DashboardExprs(filepath.Join("..", "..", alerting.DashboardFile))
	s.must(err)
	named := alerting.NamedMetrics(pr.Spec, exprs)
	if len(named) < 15 {
		t.Fatalf("only %d metrics named by the rules and the dashboard: %v", len(named), slices.Sorted(maps.Keys(named)))
	}

	s.must(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "alerts", Labels: map[string]string{"team": "alerts"}}}))
	s.must(s.c.Create(ctx, &v1alpha1.VaultConnection{
		ObjectMeta: metav1.ObjectMeta{Name: "alerts-vault"},
		Spec: v1alpha1.VaultConnectionSpec{
			Address: s.env.Vault.Addr,
			Auth: v1alpha1.VaultAuth{Token: &v1alpha1.TokenAuth{SecretRef: v1alpha1.TokenSecretReference{
				SecretReference: v1alpha1.SecretReference{Name: "vault-token", Namespace: operatorNamespace}}}},
		},
	}))
	// A policy the template renders, already in Vault without its header.
	_, err = s.root.Logical().Write("sys/policies/acl/salt_role_alertsforeign", map[string]any{"policy": `path "secret/*" { capabilities = ["read"] }`})
	s.must(err)
	s.must(s.c.Create(ctx, &v1alpha1.MinionTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "alerts"},
		Spec: v1alpha1.MinionTemplateSpec{
			ConnectionRef: v1alpha1.VaultConnectionReference{Name: "alerts-vault"},
			Policies:      &v1alpha1.PoliciesSpec{Assign: []string{"saltstack/{minion}", "salt_role_{pillar[roles]}"}},
			Metadata:      &v1alpha1.MetadataSpec{Entity: map[string]string{"roles": "{pillar[roles]}"}},
			PolicyDocuments: []v1alpha1.PolicyDocument{{
				Name:  "salt_role_{pillar[roles]}",
				Rules: []v1alpha1.PolicyRule{{Path: "salt/data/roles/{pillar[roles]}", Capabilities: []v1alpha1.PolicyCapability{"read"}}},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "alerts"}},
			AllowedPolicies:   []string{"saltstack/*", "salt_role_*"},
		},
	}))
	ok := binding("alerts", "alerts01", "alerts01", map[string]any{"roles": []string{"alertsforeign"}})
	ok.Spec.TemplateRef.Name = "alerts"
	s.must(s.c.Create(ctx, ok))
	bad := binding("alerts", "alerts-glob01", "alerts-glob01", map[string]any{"roles": []string{"*"}})
	bad.Spec.TemplateRef.Name = "alerts"
	s.must(s.c.Create(ctx, bad))

	s.waitConnectionReady("alerts-vault")
	s.waitReady("alerts", "alerts01")
	s.waitStalled("alerts", "alerts-glob01", v1alpha1.ValidationFailedReason, "contains '*'")
	eventually(t, 30*time.Second, "template alerts PolicyNotOwned", func() error {
		mt := &v1alpha1.MinionTemplate{}
		if err := s.c.Get(ctx, types.NamespacedName{Name: "alerts"}, mt); err != nil {
			return err
		}
		if c := apimeta.FindStatusCondition(mt.Status.Conditions, v1alpha1.ReadyCondition); c == nil || c.Reason != v1alpha1.PolicyNotOwnedReason {
			return fmt.Errorf("conditions %+v", mt.Status.Conditions)
		}
		return nil
	})

	// The gauges say what the objects' conditions say.
	body := s.scrape()
	for _, want := range []string{
		`minionvault_bindings{namespace="alerts",ready="true",reason="Succeeded",template="alerts"} 1`,
		`minionvault_bindings{namespace="alerts",ready="false",reason="ValidationFailed",template="alerts"} 1`,
		`minionvault_connection_ready{connection="alerts-vault"} 1`,
		`minionvault_template_ready{reason="PolicyNotOwned",template="alerts"} 0`,
	} {
		if !strings.Contains(body, "\n"+want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if !strings.Contains(body, `minionvault_connection_token_expiry_timestamp_seconds{connection="alerts-vault"} `) {
		t.Errorf("/metrics has no token expiry for connection alerts-vault (its token has a TTL of an hour)")
	}

	exposed := alerting.ExposedNames(body)
	missing := alerting.Missing(slices.Sorted(maps.Keys(named)), exposed)
	for _, m := range missing {
		t.Errorf("%s is named by %s but is not on the operator's /metrics", m, strings.Join(named[m], ", "))
	}
	if len(missing) == 0 {
		t.Logf("all %d metrics named by %d alerts and %d dashboard queries are on /metrics: %s",
			len(named), len(pr.Spec.Alerts()), len(exprs), strings.Join(slices.Sorted(maps.Keys(named)), " "))
	}

	// Deleted objects leave no series (and nothing for the other tests of
	// this Vault: the template would recheck its foreign policy forever).
	for _, b := range []string{"alerts01", "alerts-glob01"} {
		s.must(s.c.Delete(ctx, s.binding("alerts", b)))
	}
	s.waitGone("alerts", "alerts01")
	s.waitGone("alerts", "alerts-glob01")
	s.must(s.c.Delete(ctx, &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: "alerts"}}))
	eventually(t, 30*time.Second, "template alerts gone", func() error {
		if err := s.c.Get(ctx, types.NamespacedName{Name: "alerts"}, &v1alpha1.MinionTemplate{}); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
	s.must(s.c.Delete(ctx, &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "alerts-vault"}}))
	_, err = s.root.Logical().Delete("sys/policies/acl/salt_role_alertsforeign")
	s.must(err)
	eventually(t, 30*time.Second, "no series of the deleted objects", func() error {
		for _, line := range strings.Split(s.scrape(), "\n") {
			if strings.HasPrefix(line, "minionvault_") && (strings.Contains(line, `namespace="alerts"`) ||
				strings.Contains(line, `connection="alerts-vault"`) || strings.Contains(line, `template="alerts"`)) {
				return fmt.Errorf("left: %s", line)
			}
		}
		return nil
	})
}
