package policy

import (
	"context"
	"slices"
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/vault/vaulttest"
)

// A built-in policy (root, default, Vault 2's default-ceiling,
// response-wrapping, control-group) is nobody's: the template controller
// never deletes one, even when an administrator pasted the template's
// header into it; never writes or adopts one, even when a binding renders
// the name (admission refuses that first); and never reports one as
// someone else's.
func TestBuiltinPoliciesAreNobodys(t *testing.T) {
	ctx := context.Background()
	self := testPolicyOwner("t")
	v := vaulttest.NewFake()
	// default and Vault 2's default-ceiling, edited to carry the
	// template's header.
	for _, n := range []string{"default", "default-ceiling"} {
		if err := v.WritePolicy(ctx, n, self.Header()+testPolicyBody); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.WritePolicy(ctx, "t_mine", self.Header()+testPolicyBody); err != nil {
		t.Fatal(err)
	}
	var owners policyOwners
	found, err := discoverOwned(ctx, v, self, owners.reader("k"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(found, []string{"t_mine"}) {
		t.Errorf("discovered %q, want only t_mine", found)
	}

	tests := []struct {
		name    string
		desired map[string]string
		stale   []string
		adopt   bool
	}{
		{"stale built-ins with the template's header", nil, []string{"default", "default-ceiling", "root", "response-wrapping", "control-group"}, false},
		{"wanted built-ins, adopted", map[string]string{"default": testPolicyBody, "default-ceiling": testPolicyBody, "control-group": testPolicyBody}, nil, true},
		{"wanted built-ins, not adopted", map[string]string{"default-ceiling": testPolicyBody, "response-wrapping": testPolicyBody}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v.ResetCalls()
			var owners policyOwners
			pass, err := syncPolicies(ctx, v, self, tt.adopt, tt.desired, tt.stale, owners.reader("k"))
			if err != nil {
				t.Fatal(err)
			}
			if n := v.Calls("WritePolicy") + v.Calls("DeletePolicy"); n != 0 {
				t.Errorf("%d writes and deletes of built-in policies", n)
			}
			if len(pass.owned)+len(pass.written)+len(pass.deleted)+len(pass.notOwned) != 0 {
				t.Errorf("pass %+v: a built-in is owned, written, deleted or someone else's", pass)
			}
			for n := range tt.desired {
				if !slices.Contains(pass.absent, n) {
					t.Errorf("%s not settled: %+v", n, pass)
				}
			}
			for _, n := range tt.stale {
				if !slices.Contains(pass.absent, n) {
					t.Errorf("%s not settled: %+v", n, pass)
				}
			}
		})
	}
	for _, n := range []string{"default", "default-ceiling"} {
		if hcl, ok, _ := v.ReadPolicy(ctx, n); !ok || hcl != self.Header()+testPolicyBody {
			t.Errorf("%s changed: %q %v", n, hcl, ok)
		}
	}

	// The plan says so too: no change, nothing someone else's.
	observed := map[string]observedPolicy{"default-ceiling": {hcl: testPolicyBody, found: true}}
	for _, a := range planPolicies(policyWork{desired: map[string]string{"default-ceiling": testPolicyBody}}, observed, self, true) {
		if _, ok := a.change(); ok || a.kind != ownership.PolicyBuiltin {
			t.Errorf("plan: %s %s", a.name, a.kind)
		}
	}
}
