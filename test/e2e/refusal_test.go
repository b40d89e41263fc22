//go:build integration

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// TestBadInputIsRefused: a binding with bad input (a glob policy, metadata
// over Vault's limit, a minion ID already bound, a namespace the template
// does not select) and one on a template with an invalid pattern, an
// untrusted grain or a disallowed policy is Stalled with the reason and
// an event; nothing is written, and the other bindings stay Ready.
func TestBadInputIsRefused(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	f := newSaltMinions(s, "refuse")
	other := f.id("other") // a namespace the template does not select
	s.createNamespace(other)
	f.bind("web01", "web")
	web := f.id("web01")
	dup := strings.ToUpper(web)
	f.waitReady("web01")

	cases := []struct {
		name, ns, minion string
		pillar           map[string]any
		reason, msg      string
	}{
		{f.id("glob"), f.ns, f.id("glob01"), map[string]any{"roles": []string{"*"}}, v1alpha1.ValidationFailedReason, "InvalidPolicyName"},
		{f.id("too-long"), f.ns, f.id("long01"), map[string]any{"roles": []string{strings.Repeat("r", 600)}}, v1alpha1.ValidationFailedReason, "MetadataLimit"},
		{f.id("dup"), f.ns, dup, map[string]any{"roles": []string{"web"}}, v1alpha1.DuplicateMinionIDReason, "already bound by MinionBinding " + f.ns + "/" + web},
		{f.id("elsewhere"), other, f.id("other01"), map[string]any{"roles": []string{"web"}}, v1alpha1.NamespaceNotAllowedReason, fmt.Sprintf("namespace %q is not selected", other)},
	}
	for _, c := range cases {
		b := binding(c.ns, c.name, c.minion, c.pillar)
		b.Spec.TemplateRef.Name = f.tpl
		s.must(s.c.Create(ctx, b))
	}
	for _, c := range cases {
		s.waitStalled(c.ns, c.name, c.reason, c.msg)
		if c.minion != dup && s.vaultRead("auth/salt-minions/role/"+strings.ToLower(c.minion)) != nil {
			t.Errorf("%s: a role was written", c.name)
		}
		s.event(c.name, c.reason)
	}
	// A template with an invalid pattern, an untrusted grain, and a
	// disallowed policy: each refused on its bindings.
	for _, bad := range []struct {
		name, pattern, reason, msg string
	}{
		{f.id("bad-pattern"), "salt_role_{pillar[roles]", v1alpha1.RenderFailedReason, `expected '}' before end of string`},
		{f.id("bad-grain"), "salt_os_{grains[os]}", v1alpha1.ValidationFailedReason, "UntrustedGrain"},
		{f.id("bad-policy"), "admin", v1alpha1.PolicyNotAllowedReason, `"admin" is not in allowedPolicies`},
	} {
		bt := &v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: bad.name}, Spec: v1alpha1.MinionTemplateSpec{
			ConnectionRef:   v1alpha1.VaultConnectionReference{Name: f.conn},
			Policies:        &v1alpha1.PoliciesSpec{Assign: []string{bad.pattern}},
			AllowedPolicies: []string{"salt_*"},
		}}
		s.must(s.c.Create(ctx, bt))
		bb := binding(f.ns, bad.name, bad.name+"-m", map[string]any{"roles": []string{"web"}})
		bb.Spec.TemplateRef.Name = bad.name
		s.must(s.c.Create(ctx, bb))
		s.waitStalled(f.ns, bad.name, bad.reason, bad.msg)
		if s.vaultRead("auth/salt-minions/role/"+bad.name+"-m") != nil {
			t.Errorf("%s: a role was written", bad.name)
		}
	}
	f.waitReady("web01")
}
