//go:build integration

package vault

// Integration tests against a real Vault dev server (internal/testing/testenv,
// Vault only). They prove that config/vault/operator-policy.hcl is enough
// for every call of the client, that AppRole logins and re-logins work, and
// that a short-lived token is renewed.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	vaultpolicy "github.com/minionvault/minion-vault-operator/config/vault"
	"github.com/minionvault/minion-vault-operator/internal/testing/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{NoKubernetes: true})
}

const operatorPolicy = "minionvault-operator"

// setupOperatorPolicy writes config/vault/operator-policy.hcl as
// operatorPolicy and returns the root client.
func setupOperatorPolicy(t *testing.T) (*testenv.Vault, *vaultapi.Client) {
	t.Helper()
	env := testenv.Get(t)
	root := env.Vault.Client
	if err := root.Sys().PutPolicyWithContext(context.Background(), operatorPolicy, vaultpolicy.OperatorPolicy); err != nil {
		t.Fatal(err)
	}
	return env.Vault, root
}

// operatorToken creates a token with exactly the operator policy (no
// "default" policy).
func operatorToken(t *testing.T, root *vaultapi.Client, ttl, explicitMaxTTL string) string {
	t.Helper()
	s, err := root.Auth().Token().CreateWithContext(context.Background(), &vaultapi.TokenCreateRequest{
		Policies:        []string{operatorPolicy},
		NoDefaultPolicy: true,
		TTL:             ttl,
		ExplicitMaxTTL:  explicitMaxTTL,
		Renewable:       boolPtr(true),
		DisplayName:     "minionvault-operator-test",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Auth.Policies; len(got) != 1 || got[0] != operatorPolicy {
		t.Fatalf("token policies %v", got)
	}
	return s.Auth.ClientToken
}

func boolPtr(b bool) *bool { return &b }

// unique makes names that do not collide with earlier runs against the same
// Vault (-count=2, USE_EXISTING_VAULT).
func unique(prefix string) string { return prefix + randomHex(3) + "-" }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

func TestIntegrationOperatorPolicyIsSufficient(t *testing.T) {
	t.Parallel()
	v, root := setupOperatorPolicy(t)
	token := operatorToken(t, root, "1h", "")
	obs := &recorder{}
	c := mustNew(t, Config{Address: v.Addr, Auth: Auth{Token: token}, Timeout: 10 * time.Second}, obs)

	conformance(t, c, testenv.AppRoleMount, unique("it-token-"))

	// Every request was observed, none with a secret in it, and nothing
	// failed for want of a capability.
	if obs.count(OpWrite) == 0 || obs.count(OpRead) == 0 || obs.count(OpDelete) == 0 {
		t.Errorf("observed %d writes, %d reads, %d deletes", obs.count(OpWrite), obs.count(OpRead), obs.count(OpDelete))
	}
	for _, o := range obs.all() {
		if strings.Contains(o.Path, token) {
			t.Errorf("observed path %q holds the token", o.Path)
		}
		if o.Code == http.StatusForbidden {
			t.Errorf("the operator policy lacks a capability: %+v", o)
		}
	}

	// Least privilege: the policy does not let the operator issue secret
	// IDs, change role IDs, or touch other auth mounts and secrets.
	ctx := context.Background()
	least := unique("it-least-") + "role"
	if err := c.WriteRole(ctx, testenv.AppRoleMount, least, map[string]any{"token_ttl": 60}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.DeleteRole(ctx, testenv.AppRoleMount, least) }()
	op, err := v.ClientWithToken(token)
	if err != nil {
		t.Fatal(err)
	}
	denied := []struct{ method, path string }{
		{http.MethodPost, "auth/" + testenv.AppRoleMount + "/role/" + least + "/secret-id"},
		{http.MethodPost, "auth/" + testenv.AppRoleMount + "/role/" + least + "/role-id"},
		{http.MethodGet, "sys/policies/acl"}, // list
		{http.MethodPost, "auth/token/create"},
		{http.MethodGet, "secret/data/anything"},
		{http.MethodPost, "sys/auth/other"},
		{http.MethodGet, "identity/entity/id/00000000-0000-0000-0000-000000000000"},
	}
	for _, d := range denied {
		var err error
		switch d.method {
		case http.MethodGet:
			_, err = op.Logical().ReadWithContext(ctx, d.path)
		default:
			_, err = op.Logical().WriteWithContext(ctx, d.path, map[string]any{"type": "approle", "role_id": "x"})
		}
		var re *vaultapi.ResponseError
		if !errors.As(err, &re) || re.StatusCode != http.StatusForbidden {
			t.Errorf("%s %s: %v, want 403", d.method, d.path, err)
		}
	}
}

func TestIntegrationAppRoleLoginAndRelogin(t *testing.T) {
	t.Parallel()
	v, root := setupOperatorPolicy(t)
	ctx := context.Background()
	// The operator's own AppRole, on its own mount.
	mount := strings.TrimSuffix(unique("approle-operator-"), "-")
	if err := root.Sys().EnableAuthWithOptionsWithContext(ctx, mount, &vaultapi.EnableAuthOptions{Type: "approle"}); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Logical().WriteWithContext(ctx, "auth/"+mount+"/role/minionvault", map[string]any{
		"token_policies":          []string{operatorPolicy},
		"token_no_default_policy": true,
		"token_ttl":               "10m",
	}); err != nil {
		t.Fatal(err)
	}
	s, err := root.Logical().ReadWithContext(ctx, "auth/"+mount+"/role/minionvault/role-id")
	if err != nil {
		t.Fatal(err)
	}
	roleID := s.Data["role_id"].(string)
	s, err = root.Logical().WriteWithContext(ctx, "auth/"+mount+"/role/minionvault/secret-id", nil)
	if err != nil {
		t.Fatal(err)
	}
	secretID := s.Data["secret_id"].(string)

	obs := &recorder{}
	c := mustNew(t, Config{Address: v.Addr, Auth: Auth{AppRole: &AppRoleAuth{Mount: mount, RoleID: roleID, SecretID: secretID}}}, obs)
	conformance(t, c, testenv.AppRoleMount, unique("it-approle-"))
	if len(obs.loginList()) != 1 || obs.loginList()[0] != MethodAppRole {
		t.Errorf("logins %v, want exactly one", obs.loginList())
	}

	// Revoke the token behind the client's back: the next request is
	// refused, the client logs in once more and the request succeeds.
	c.mu.Lock()
	first := c.sess.token
	c.mu.Unlock()
	if err := root.Auth().Token().RevokeTreeWithContext(ctx, first); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.ReadPolicy(ctx, "default"); err != nil {
		t.Fatalf("after the revocation: %v", err)
	}
	c.mu.Lock()
	second := c.sess.token
	c.mu.Unlock()
	if second == first || len(obs.loginList()) != 2 {
		t.Errorf("logins %v; token replaced: %v", obs.loginList(), second != first)
	}

	// A path the policy denies is not a reason to log in again.
	_, err = c.ReadRole(ctx, "no-such-mount", "x")
	var denied *Error
	if !errors.As(err, &denied) || denied.StatusCode != http.StatusForbidden {
		t.Errorf("denied path: %v", err)
	}
	if len(obs.loginList()) != 2 {
		t.Errorf("logins %v after a denied path, want still 2", obs.loginList())
	}

	// A wrong secret ID: a 400 from Vault, not transient, no secret in it.
	_, err = New(ctx, Config{Address: v.Addr, Auth: Auth{AppRole: &AppRoleAuth{Mount: mount, RoleID: roleID, SecretID: "0f0f0f0f-wrong-secret-id"}}}, nil)
	var ve *Error
	if !errors.As(err, &ve) || ve.StatusCode != http.StatusBadRequest || Transient(err) {
		t.Errorf("wrong secret ID: %v", err)
	}
	if err != nil && (strings.Contains(err.Error(), "0f0f0f0f-wrong-secret-id") || strings.Contains(err.Error(), secretID)) {
		t.Errorf("the error holds the secret ID: %v", err)
	}
}

func TestIntegrationTokenRenewal(t *testing.T) {
	t.Parallel()
	v, root := setupOperatorPolicy(t)
	ctx := context.Background()
	// A 6 s token that may live 60 s: without renewals it dies at 6 s.
	token := operatorToken(t, root, "6s", "60s")
	obs := &recorder{}
	c := mustNew(t, Config{Address: v.Addr, Auth: Auth{Token: token}}, obs)

	start := time.Now()
	for time.Since(start) < 9*time.Second {
		// An authenticated read (sys/seal-status would need no token).
		if _, _, err := c.ReadPolicy(ctx, "default"); err != nil {
			t.Fatalf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	renewals := 0
	for _, o := range obs.all() {
		if o.Path == "auth/token/renew-self" {
			renewals++
			if o.Code != http.StatusOK {
				t.Errorf("renewal answered %d", o.Code)
			}
		}
	}
	if renewals < 1 || renewals > 3 {
		t.Errorf("%d renewals in 9 s of a 6 s token, want 1 to 3 (at 2/3 of the lease)", renewals)
	}
	s, err := root.Auth().Token().LookupWithContext(ctx, token)
	if err != nil {
		t.Fatalf("the token is gone: %v", err)
	}
	if ttl, _ := s.TokenTTL(); ttl <= 0 {
		t.Errorf("token TTL %v", ttl)
	}
}

func TestIntegrationStaticTokenRunsOutAtMaxTTL(t *testing.T) {
	t.Parallel()
	v, root := setupOperatorPolicy(t)
	ctx := context.Background()
	// Renewable, but capped at 5 s: the client renews while it can, then
	// reports the expiry instead of sending a dead token.
	token := operatorToken(t, root, "3s", "5s")
	obs := &recorder{}
	c := mustNew(t, Config{Address: v.Addr, Auth: Auth{Token: token}}, obs)
	start := time.Now()
	var err error
	for time.Since(start) < 8*time.Second {
		if _, _, err = c.ReadPolicy(ctx, "default"); err != nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	lived := time.Since(start)
	if err == nil {
		t.Fatal("a token with a 5 s max TTL still works after 8 s")
	}
	if !errors.Is(err, errTokenExpired) {
		t.Errorf("err = %v, want the client's own expiry error", err)
	}
	if lived < 3500*time.Millisecond || lived > 5500*time.Millisecond {
		t.Errorf("the token worked for %v, want past its 3 s TTL, up to its 5 s max TTL", lived)
	}
	renewals := 0
	for _, o := range obs.all() {
		if o.Path == "auth/token/renew-self" {
			renewals++
		}
		if o.Code == http.StatusForbidden {
			t.Errorf("a request was sent with a dead token: %+v", o)
		}
	}
	if renewals < 1 {
		t.Error("not renewed")
	}
	if strings.Contains(err.Error(), token) {
		t.Errorf("the error holds the token")
	}
}

func TestIntegrationVersionAndErrors(t *testing.T) {
	t.Parallel()
	v, root := setupOperatorPolicy(t)
	c := mustNew(t, Config{Address: v.Addr, Auth: Auth{Token: operatorToken(t, root, "1h", "")}}, nil)
	ctx := context.Background()
	want, err := root.Sys().SealStatusWithContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.ServerInfo(ctx); err != nil || got.Version != want.Version || got.ClusterID != want.ClusterID {
		t.Errorf("ServerInfo = %+v, %v; want %q %q", got, err, want.Version, want.ClusterID)
	}
	// A mount that does not exist: denied by the policy (403), not "absent".
	_, err = c.ReadRole(ctx, "no-such-mount", "x")
	var ve *Error
	if !errors.As(err, &ve) || ve.StatusCode != http.StatusForbidden || Transient(err) {
		t.Errorf("role on an unknown mount: %v", err)
	}
	// As root, Vault says 404 "no handler": an error too, not "absent".
	rc := mustNew(t, Config{Address: v.Addr, Auth: Auth{Token: v.RootToken}}, nil)
	_, err = rc.ReadRole(ctx, "no-such-mount", "x")
	if !errors.As(err, &ve) || ve.StatusCode != http.StatusNotFound || !strings.Contains(err.Error(), "no handler") {
		t.Errorf("root, role on an unknown mount: %v", err)
	}
	if strings.Contains(err.Error(), v.RootToken) {
		t.Error("the error holds the root token")
	}
}
