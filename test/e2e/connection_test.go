//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/localenv"
)

// TestConnections covers how the operator reaches Vault: kubernetes auth
// through a real TokenReview, a rotated token Secret, Vault down at start,
// the metrics endpoint, and that no credential leaks anywhere.
func TestConnections(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	s.must(client.IgnoreAlreadyExists(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "conn", Labels: map[string]string{"team": "conn"}}})))

	s.run("kubernetes auth: the operator's service account token, reviewed by the API server", func(t *testing.T) {
		s.setupKubernetesAuth(ctx)
		s.must(s.c.Create(ctx, &v1alpha1.VaultConnection{
			ObjectMeta: metav1.ObjectMeta{Name: "vault-k8s"},
			Spec: v1alpha1.VaultConnectionSpec{
				Address: s.env.Vault.Addr,
				Auth: v1alpha1.VaultAuth{Kubernetes: &v1alpha1.KubernetesAuth{
					Role: "minionvault-operator", Audiences: []string{"vault"}}},
			},
		}))
		s.waitConnectionReady("vault-k8s")
		s.must(s.c.Create(ctx, connTemplate("via-k8s", "vault-k8s")))
		s.must(s.c.Create(ctx, connBinding("conn-k8s01", "via-k8s")))
		s.waitReady("conn", "conn-k8s01")
		if role := s.vaultRead("auth/salt-minions/role/conn-k8s01"); role == nil {
			t.Fatal("role conn-k8s01 not written")
		}
		// Reconciles reuse the login: one kubernetes login for the
		// connection and its binding, however often they reconcile.
		s.requestReconcile("conn", "conn-k8s01")
		s.requestReconcile("conn", "conn-k8s01")
		if n := s.metric(`minionvault_vault_logins_total{method="kubernetes",result="success"}`); n != 1 {
			t.Errorf("kubernetes logins %v, want 1", n)
		}
	})

	s.run("a rotated token Secret is picked up without touching the binding", func(t *testing.T) {
		tokenA := s.operatorToken(ctx)
		s.must(s.c.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "rotating-token", Namespace: operatorNamespace},
			StringData: map[string]string{"token": tokenA},
		}))
		s.must(s.c.Create(ctx, tokenConnection("rotating", s.env.Vault.Addr, "rotating-token")))
		s.must(s.c.Create(ctx, connTemplate("via-rotating", "rotating")))
		s.must(s.c.Create(ctx, connBinding("conn-rotate01", "via-rotating")))
		s.waitReady("conn", "conn-rotate01")

		// Revoke the token in use: the next pass is refused by Vault.
		s.must(s.root.Auth().Token().RevokeTreeWithContext(ctx, tokenA))
		s.must(s.patchBinding("conn", "conn-rotate01", func(b *v1alpha1.MinionBinding) {
			b.Spec.Pillar = doc(map[string]any{"roles": []string{"web", "mail"}})
		}))
		eventually(t, 30*time.Second, "AccessDenied", func() error {
			c := apimeta.FindStatusCondition(s.binding("conn", "conn-rotate01").Status.Conditions, v1alpha1.ReadyCondition)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.AccessDeniedReason {
				return fmt.Errorf("Ready %+v", c)
			}
			return nil
		})
		// Told once, by the connection; its waiting binding says it in
		// its condition only (at fleet size an event each would be
		// thousands, past what client-go queues).
		s.event("rotating", v1alpha1.AccessDeniedReason)
		s.noEvent(t, "conn-rotate01", v1alpha1.AccessDeniedReason)

		// A new token in the Secret: the binding converges by itself.
		tokenB := s.operatorToken(ctx)
		sec := &corev1.Secret{}
		s.must(s.c.Get(ctx, types.NamespacedName{Namespace: operatorNamespace, Name: "rotating-token"}, sec))
		sec.Data = map[string][]byte{"token": []byte(tokenB)}
		s.must(s.c.Update(ctx, sec))
		s.waitReady("conn", "conn-rotate01")
		entity := s.vaultRead("identity/entity/name/salt_minion_conn-rotate01")
		if got := metadataOf(entity)["roles"]; got != "mail,web" {
			t.Errorf("roles metadata %q after rotation, want mail,web", got)
		}
		s.waitConnectionReady("rotating")
	})

	s.run("Vault down at start: backoff, not a hot loop; converges once it is up", func(t *testing.T) {
		port, err := localenv.FreePort()
		s.must(err)
		down := fmt.Sprintf("http://127.0.0.1:%d", port)
		s.must(s.c.Create(ctx, tokenConnection("unreachable", down, "vault-token")))
		s.must(s.c.Create(ctx, connTemplate("via-unreachable", "unreachable")))
		before := s.transportErrors()
		s.must(s.c.Create(ctx, connBinding("conn-down01", "via-unreachable")))
		eventually(t, 30*time.Second, "VaultUnavailable", func() error {
			b := s.binding("conn", "conn-down01")
			c := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition)
			rec := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReconcilingCondition)
			if c == nil || c.Reason != v1alpha1.VaultUnavailableReason || rec == nil || rec.Status != metav1.ConditionTrue {
				return fmt.Errorf("conditions %+v", b.Status.Conditions)
			}
			return nil
		})
		// Count the connection attempts to the closed port over a window.
		// Every reconcile of the binding or the connection tries at most
		// a few times (idempotent reads retry twice), and the work queue
		// backs off exponentially: a hot loop would make thousands.
		const window = 10 * time.Second
		start := s.transportErrors()
		time.Sleep(window)
		n := s.transportErrors() - start
		t.Logf("Vault down: %d failed requests in %s (%d before the window)", n, window, start-before)
		if n > 40 {
			t.Errorf("%d requests to an unreachable Vault in %s: not backing off", n, window)
		}

		// Vault comes up at that address: a proxy to the real server. That
		// the binding then converges shows the retries go on.
		stop := proxy(t, fmt.Sprintf("127.0.0.1:%d", port), strings.TrimPrefix(s.env.Vault.Addr, "http://"))
		defer stop()
		up := time.Now()
		eventually(t, 2*time.Minute, "conn-down01 Ready once Vault is up", func() error {
			if b := s.binding("conn", "conn-down01"); !isReady(b) {
				return fmt.Errorf("conditions %+v", b.Status.Conditions)
			}
			return nil
		})
		t.Logf("Ready %s after Vault came up", time.Since(up).Round(100*time.Millisecond))
		// Deleted while Vault is up, so the objects go with it.
		s.must(s.c.Delete(ctx, s.binding("conn", "conn-down01")))
		eventually(t, 30*time.Second, "conn-down01 deleted", func() error {
			if s.binding("conn", "conn-down01") != nil {
				return fmt.Errorf("still there")
			}
			return nil
		})
	})

	s.run("metrics: Vault requests, logins, drift and refusals on the endpoint", func(t *testing.T) {
		// A refused binding for the render-failure counter.
		bad := connBinding("conn-glob01", "via-rotating")
		bad.Spec.Pillar = doc(map[string]any{"roles": []string{"*"}})
		s.must(s.c.Create(ctx, bad))
		s.waitStalled("conn", "conn-glob01", v1alpha1.ValidationFailedReason, "contains '*'")
		body := s.scrape()
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`(?m)^minionvault_vault_requests_total\{code="200",operation="read"\} [1-9]`),
			regexp.MustCompile(`(?m)^minionvault_vault_requests_total\{code="204",operation="write"\} [1-9]`),
			regexp.MustCompile(`(?m)^minionvault_vault_requests_total\{code="0",operation="[a-z]+"\} [1-9]`),
			regexp.MustCompile(`(?m)^minionvault_vault_request_duration_seconds_count\{operation="write"\} [1-9]`),
			regexp.MustCompile(`(?m)^minionvault_vault_logins_total\{method="token",result="success"\} [1-9]`),
			regexp.MustCompile(`(?m)^minionvault_vault_logins_total\{method="kubernetes",result="success"\} 1$`),
			regexp.MustCompile(`(?m)^minionvault_render_failures_total\{reason="[A-Za-z]+"\} [1-9]`),
			regexp.MustCompile(`(?m)^controller_runtime_reconcile_total\{controller="minionbinding",result="success"\} [1-9]`),
			regexp.MustCompile(`(?m)^workqueue_depth\{[^}]*name="minionbinding"[^}]*\} `),
		} {
			if !want.MatchString(body) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})

	s.run("no credential appears in events, status or logs", func(t *testing.T) {
		secrets := []string{s.env.Vault.RootToken, s.token}
		list := &corev1.SecretList{}
		s.must(s.c.List(ctx, list, client.InNamespace(operatorNamespace)))
		for _, sec := range list.Items {
			for _, v := range sec.Data {
				if len(v) >= 8 {
					secrets = append(secrets, strings.TrimSpace(string(v)))
				}
			}
		}
		var dump strings.Builder
		for _, l := range []client.ObjectList{&eventsv1.EventList{}, &corev1.EventList{}, &v1alpha1.VaultConnectionList{},
			&v1alpha1.MinionTemplateList{}, &v1alpha1.MinionBindingList{}} {
			s.must(s.c.List(ctx, l))
			raw, err := json.Marshal(l)
			s.must(err)
			dump.Write(raw)
		}
		logs := operatorLog.String()
		if !strings.Contains(logs, "minionbinding") {
			t.Fatalf("the operator log is empty or not captured (%d bytes)", len(logs))
		}
		for i, sec := range secrets {
			if sec == "" {
				continue
			}
			if strings.Contains(dump.String(), sec) {
				t.Errorf("credential #%d appears in events or status", i)
			}
			if strings.Contains(logs, sec) {
				t.Errorf("credential #%d appears in the operator log", i)
			}
		}
		// The check can see: the Vault addresses are in status and logs.
		if !strings.Contains(dump.String(), s.env.Vault.Addr) {
			t.Error("status does not show the Vault address; is the dump empty?")
		}
		t.Logf("checked %d credentials against %d bytes of API objects and %d bytes of logs", len(secrets), dump.Len(), len(logs))
	})
}

// setupKubernetesAuth enables Vault's kubernetes auth method against the
// test API server: Vault reviews the operator's token with a TokenReview,
// using a reviewer service account bound to system:auth-delegator.
func (s *suite) setupKubernetesAuth(ctx context.Context) {
	s.t.Helper()
	reviewer := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "vault-token-reviewer", Namespace: operatorNamespace}}
	s.must(s.c.Create(ctx, reviewer))
	s.must(s.c.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "vault-token-reviewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:auth-delegator"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: reviewer.Name, Namespace: reviewer.Namespace}},
	}))
	expiry := int64(3600)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}
	s.must(s.c.SubResource("token").Create(ctx, reviewer, tr))

	s.must(s.root.Sys().EnableAuthWithOptionsWithContext(ctx, "kubernetes", &vaultapi.EnableAuthOptions{Type: "kubernetes"}))
	host := s.env.Config.Host
	if !strings.HasPrefix(host, "https://") && !strings.HasPrefix(host, "http://") {
		host = "https://" + host
	}
	_, err := s.root.Logical().WriteWithContext(ctx, "auth/kubernetes/config", map[string]any{
		"kubernetes_host":      host,
		"kubernetes_ca_cert":   string(s.env.Config.CAData),
		"token_reviewer_jwt":   tr.Status.Token,
		"disable_local_ca_jwt": true,
	})
	s.must(err)
	_, err = s.root.Logical().WriteWithContext(ctx, "auth/kubernetes/role/minionvault-operator", map[string]any{
		"bound_service_account_names":      []string{operatorServiceAccount},
		"bound_service_account_namespaces": []string{operatorNamespace},
		"audience":                         "vault",
		"token_policies":                   []string{"minionvault-operator"},
		"token_no_default_policy":          true,
		"token_ttl":                        "1h",
	})
	s.must(err)
}

// operatorToken is a new token with exactly the operator policy.
func (s *suite) operatorToken(ctx context.Context) string {
	s.t.Helper()
	tok, err := s.env.Vault.OperatorToken(ctx)
	s.must(err)
	return tok
}

func tokenConnection(name, addr, secret string) *v1alpha1.VaultConnection {
	return &v1alpha1.VaultConnection{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.VaultConnectionSpec{
			Address: addr,
			Auth: v1alpha1.VaultAuth{Token: &v1alpha1.TokenAuth{SecretRef: v1alpha1.TokenSecretReference{
				SecretReference: v1alpha1.SecretReference{Name: secret, Namespace: operatorNamespace}}}},
		},
	}
}

func connTemplate(name, conn string) *v1alpha1.MinionTemplate {
	return &v1alpha1.MinionTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.MinionTemplateSpec{
			ConnectionRef:     v1alpha1.VaultConnectionReference{Name: conn},
			Policies:          &v1alpha1.PoliciesSpec{Assign: []string{"saltstack/{minion}", "salt_role_{pillar[roles]}"}},
			Metadata:          &v1alpha1.MetadataSpec{Entity: map[string]string{"roles": "{pillar[roles]}"}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "conn"}},
			AllowedPolicies:   []string{"saltstack/*", "salt_role_*"},
		},
	}
}

func connBinding(minion, tpl string) *v1alpha1.MinionBinding {
	b := binding("conn", minion, minion, map[string]any{"roles": []string{"web"}})
	b.Spec.TemplateRef.Name = tpl
	return b
}

func isReady(b *v1alpha1.MinionBinding) bool {
	if b == nil {
		return false
	}
	c := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition)
	return c != nil && c.Status == metav1.ConditionTrue && b.Status.ObservedGeneration == b.Generation
}

func (s *suite) patchBinding(ns, name string, f func(*v1alpha1.MinionBinding)) error {
	b := s.binding(ns, name)
	if b == nil {
		return fmt.Errorf("binding %s/%s not found", ns, name)
	}
	patch := client.MergeFrom(b.DeepCopy())
	f(b)
	return s.c.Patch(context.Background(), b, patch)
}

func (s *suite) waitConnectionReady(name string) {
	s.t.Helper()
	eventually(s.t, 30*time.Second, "VaultConnection "+name+" Ready", func() error {
		c := &v1alpha1.VaultConnection{}
		if err := s.c.Get(context.Background(), types.NamespacedName{Name: name}, c); err != nil {
			return err
		}
		r := apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ReadyCondition)
		if r == nil || r.Status != metav1.ConditionTrue || c.Status.VaultVersion == "" {
			return fmt.Errorf("status %+v", c.Status)
		}
		return nil
	})
}

// transportErrors is how many Vault requests failed without an answer
// (code 0), as the operator's metrics count them.
func (s *suite) transportErrors() int64 {
	var n float64
	for _, op := range []string{"read", "write", "delete", "list", "login"} {
		n += s.metric(`minionvault_vault_requests_total{code="0",operation="` + op + `"}`)
	}
	return int64(n)
}

func (s *suite) scrape() string {
	s.t.Helper()
	resp, err := http.Get(s.metricsURL)
	s.must(err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	s.must(err)
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("metrics: %s: %s", resp.Status, body)
	}
	return string(body)
}

// metric is the value of one series on the metrics endpoint (0 if absent).
func (s *suite) metric(series string) float64 {
	s.t.Helper()
	for _, line := range strings.Split(s.scrape(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			s.must(err)
			return f
		}
	}
	return 0
}

// proxy forwards TCP connections from listen to target until stopped: a
// Vault that appears at an address where there was none.
func proxy(t *testing.T, listen, target string) (stop func()) {
	t.Helper()
	l, err := netListen(listen)
	if err != nil {
		t.Fatal(err)
	}
	var closed atomic.Bool
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				if closed.Load() {
					return
				}
				continue
			}
			go pipe(c, target)
		}
	}()
	return func() { closed.Store(true); l.Close() }
}

func netListen(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }

func pipe(c net.Conn, target string) {
	defer c.Close()
	u, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
	<-done
}
