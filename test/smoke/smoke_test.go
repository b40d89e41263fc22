//go:build integration

// Package smoke checks the test environment end to end: the project's CRDs in
// a real API server (structural schema, defaults, CEL rules) and the Vault
// features the operator relies on (identity entities with metadata, ACL
// policies templated on that metadata, AppRole logins tied to an entity).
//
// Run it with `make integration`, or alone:
//
//	go test -tags integration -count=1 ./test/smoke
package smoke

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/minionvault/minion-vault-operator/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }

// suffix keeps names apart when the suites share a cluster or a Vault
// (USE_EXISTING_CLUSTER, USE_EXISTING_VAULT).
var suffix = func() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// sample reads a manifest from config/samples as an unstructured object.
func sample(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "config", "samples", name))
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return u
}

func set(t *testing.T, u *unstructured.Unstructured, value any, fields ...string) {
	t.Helper()
	if err := unstructured.SetNestedField(u.Object, value, fields...); err != nil {
		t.Fatalf("setting %s: %v", strings.Join(fields, "."), err)
	}
}

// create creates u and deletes it when the test ends.
func create(ctx context.Context, t *testing.T, c client.Client, u *unstructured.Unstructured) error {
	t.Helper()
	err := c.Create(ctx, u)
	if err == nil {
		t.Cleanup(func() { _ = c.Delete(context.Background(), u) })
	}
	return err
}

// wantRejected checks that err is the API server's rejection carrying message.
func wantRejected(t *testing.T, err error, message string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want rejection with %q", message)
	}
	if !strings.Contains(err.Error(), message) {
		t.Fatalf("rejected with %v\nwant the message %q", err, message)
	}
}

func TestMinionBindingRoundTripAndImmutableMinionID(t *testing.T) {
	env := testenv.Get(t)
	ctx := testContext(t)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "smoke-" + suffix}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })

	mb := sample(t, "minionbinding-web01.yaml")
	mb.SetNamespace(ns.Name)
	if err := create(ctx, t, env.Client, mb); err != nil {
		t.Fatalf("creating the sample MinionBinding: %v", err)
	}

	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(mb.GroupVersionKind())
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mb), got); err != nil {
		t.Fatal(err)
	}
	if id, _, _ := unstructured.NestedString(got.Object, "spec", "minionID"); id != "web01" {
		t.Errorf("spec.minionID = %q, want web01", id)
	}
	if os, _, _ := unstructured.NestedString(got.Object, "spec", "grains", "os_family"); os != "Debian" {
		t.Errorf("spec.grains.os_family = %q, want Debian (grains are kept as written)", os)
	}
	roles, _, _ := unstructured.NestedSlice(got.Object, "spec", "pillar", "roles")
	if !reflect.DeepEqual(roles, []any{"web", "db"}) {
		t.Errorf("spec.pillar.roles = %v, want [web db] in order", roles)
	}

	set(t, got, "web02", "spec", "minionID")
	wantRejected(t, env.Client.Update(ctx, got), "minionID is immutable")

	bad := sample(t, "minionbinding-web01.yaml")
	bad.SetNamespace(ns.Name)
	bad.SetName("dotdot")
	set(t, bad, "..", "spec", "minionID")
	wantRejected(t, create(ctx, t, env.Client, bad), "minionID must not be . or ..")
}

func TestVaultConnectionNeedsExactlyOneAuthMethod(t *testing.T) {
	env := testenv.Get(t)
	ctx := testContext(t)

	good := sample(t, "vaultconnection.yaml")
	good.SetName("smoke-good-" + suffix)
	if err := create(ctx, t, env.Client, good); err != nil {
		t.Fatalf("creating the sample VaultConnection: %v", err)
	}

	bad := sample(t, "vaultconnection.yaml")
	bad.SetName("smoke-two-auth-" + suffix)
	set(t, bad, map[string]any{
		"roleID":            "1234",
		"secretIDSecretRef": map[string]any{"name": "approle", "namespace": "minion-vault-system"},
	}, "spec", "auth", "appRole")
	wantRejected(t, create(ctx, t, env.Client, bad), "exactly one of auth.kubernetes, auth.appRole or auth.token must be set")
}

func TestMinionTemplateDurations(t *testing.T) {
	env := testenv.Get(t)
	ctx := testContext(t)

	good := sample(t, "miniontemplate.yaml")
	good.SetName("smoke-good-" + suffix)
	set(t, good, "1h", "spec", "appRole", "tokenTTL")
	if err := create(ctx, t, env.Client, good); err != nil {
		t.Fatalf("creating the sample MinionTemplate: %v", err)
	}

	bad := sample(t, "miniontemplate.yaml")
	bad.SetName("smoke-bad-ttl-" + suffix)
	set(t, bad, "1h30m", "spec", "appRole", "tokenTTL")
	wantRejected(t, create(ctx, t, env.Client, bad),
		"a duration is a number of seconds or a number with unit s, m, h or d, such as 90s or 1h")
}

func TestVaultEntityPolicyAndAppRole(t *testing.T) {
	env := testenv.Get(t)
	ctx := testContext(t)
	vc := env.Vault.Client
	logical := vc.Logical()

	// The KV v2 engine the pillar lives in, with one secret per role.
	mount := "salt-" + suffix
	if err := vc.Sys().MountWithContext(ctx, mount, &vaultapi.MountInput{Type: "kv", Options: map[string]string{"version": "2"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vc.Sys().Unmount(mount) })
	for _, role := range []string{"db", "web", "build"} {
		if _, err := vc.KVv2(mount).Put(ctx, "roles/"+role, map[string]any{"role": role}); err != nil {
			t.Fatalf("writing %s/data/roles/%s: %v", mount, role, err)
		}
	}

	// The entity, with saltext-vault's metadata for roles [web, db].
	entityName := "salt_minion_web01_" + suffix
	metadata := map[string]any{"roles": "db,web", "roles__0": "db", "roles__1": "web", "minion-id": "web01"}
	if _, err := logical.WriteWithContext(ctx, "identity/entity/name/"+entityName, map[string]any{"metadata": metadata}); err != nil {
		t.Fatalf("writing the entity: %v", err)
	}
	t.Cleanup(func() { _, _ = logical.Delete("identity/entity/name/" + entityName) })
	entity, err := logical.ReadWithContext(ctx, "identity/entity/name/"+entityName)
	if err != nil || entity == nil {
		t.Fatalf("reading the entity: %v", err)
	}
	if got := entity.Data["metadata"]; !reflect.DeepEqual(got, metadata) {
		t.Errorf("entity metadata = %v, want %v", got, metadata)
	}
	entityID, _ := entity.Data["id"].(string)

	// The shared policy, resolved per token from the entity metadata.
	policyName := "saltstack/minions-" + suffix
	policy := `path "` + mount + `/data/roles/{{identity.entity.metadata.roles__0}}" {
  capabilities = ["read"]
}
path "` + mount + `/data/roles/{{identity.entity.metadata.roles__1}}" {
  capabilities = ["read"]
}
`
	if err := vc.Sys().PutPolicyWithContext(ctx, policyName, policy); err != nil {
		t.Fatalf("writing the policy: %v", err)
	}
	t.Cleanup(func() { _ = vc.Sys().DeletePolicy(policyName) })
	if got, err := vc.Sys().GetPolicyWithContext(ctx, policyName); err != nil || got != policy {
		t.Fatalf("reading the policy back: %q, %v\nwant %q", got, err, policy)
	}

	// A minion's AppRole at salt-minions, its login aliased to the entity.
	role := "auth/" + testenv.AppRoleMount + "/role/web01-" + suffix
	if _, err := logical.WriteWithContext(ctx, role, map[string]any{
		"token_policies": []string{policyName},
		"token_ttl":      "10m",
	}); err != nil {
		t.Fatalf("writing the AppRole: %v", err)
	}
	t.Cleanup(func() { _, _ = logical.Delete(role) })
	rid, err := logical.ReadWithContext(ctx, role+"/role-id")
	if err != nil {
		t.Fatal(err)
	}
	roleID, _ := rid.Data["role_id"].(string)
	sid, err := logical.WriteWithContext(ctx, role+"/secret-id", nil)
	if err != nil {
		t.Fatal(err)
	}
	secretID, _ := sid.Data["secret_id"].(string)
	auths, err := vc.Sys().ListAuthWithContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := logical.WriteWithContext(ctx, "identity/entity-alias", map[string]any{
		"name":           roleID, // AppRole aliases are named by role ID
		"canonical_id":   entityID,
		"mount_accessor": auths[testenv.AppRoleMount+"/"].Accessor,
	}); err != nil {
		t.Fatalf("writing the entity alias: %v", err)
	}

	minion, err := env.Vault.ClientWithToken("")
	if err != nil {
		t.Fatal(err)
	}
	login, err := minion.Logical().WriteWithContext(ctx, "auth/"+testenv.AppRoleMount+"/login", map[string]any{
		"role_id": roleID, "secret_id": secretID,
	})
	if err != nil {
		t.Fatalf("AppRole login: %v", err)
	}
	if login.Auth.EntityID != entityID {
		t.Errorf("login entity = %q, want %q", login.Auth.EntityID, entityID)
	}
	minion.SetToken(login.Auth.ClientToken)
	wantRead(ctx, t, minion, mount+"/data/roles/db", true)
	wantRead(ctx, t, minion, mount+"/data/roles/web", true)
	wantRead(ctx, t, minion, mount+"/data/roles/build", false)

	// TokenWithPolicy: exactly what the policy allows.
	token, err := env.Vault.TokenWithPolicy(ctx, "smoke-read-db-"+suffix, `path "`+mount+`/data/roles/db" { capabilities = ["read"] }`)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vc.Sys().DeletePolicy("smoke-read-db-" + suffix) })
	limited, err := env.Vault.ClientWithToken(token)
	if err != nil {
		t.Fatal(err)
	}
	wantRead(ctx, t, limited, mount+"/data/roles/db", true)
	wantRead(ctx, t, limited, mount+"/data/roles/web", false)
	if _, err := limited.Logical().WriteWithContext(ctx, mount+"/data/roles/db", map[string]any{"data": map[string]any{"x": "y"}}); !isForbidden(err) {
		t.Errorf("writing with a read-only token: %v, want 403", err)
	}
}

func wantRead(ctx context.Context, t *testing.T, c *vaultapi.Client, path string, allowed bool) {
	t.Helper()
	s, err := c.Logical().ReadWithContext(ctx, path)
	switch {
	case allowed && err != nil:
		t.Errorf("reading %s: %v, want allowed", path, err)
	case allowed && (s == nil || s.Data["data"] == nil):
		t.Errorf("reading %s: no data", path)
	case !allowed && !isForbidden(err):
		t.Errorf("reading %s: %v, want 403 permission denied", path, err)
	}
}

func isForbidden(err error) bool {
	var re *vaultapi.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusForbidden
}
