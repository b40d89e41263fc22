package vault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestClassify(t *testing.T) {
	v400 := func(op string, msgs ...string) error { return &Error{Op: op, StatusCode: 400, Messages: msgs} }
	tests := []struct {
		name string
		err  error
		want Class
	}{
		// Vault 1.21's own messages (identity store and router).
		{"second alias on the mount", v400("write identity/entity-alias", "Alias already exists for requested entity and mount accessor"), ClassConflict},
		{"rename onto a taken name", v400("write identity/entity-alias/id/x", "alias with combination of mount accessor and name already exists"), ClassConflict},
		{"move to an entity with an alias", v400("write identity/entity-alias", "Alias cannot be updated as the given entity already has an alias for this mount "), ClassConflict},
		{"entity name in use", v400("write identity/entity", "entity name is already in use"), ClassConflict},
		{"mount disabled", v400("write identity/entity-alias", `invalid mount accessor "auth_approle_1234"`), ClassConflict},
		{"entity gone", v400("write identity/entity-alias/id/x", "given 'canonical_id' is not associated with an entity"), ClassConflict},
		{"alias gone", v400("write identity/entity-alias/id/x", "invalid alias ID provided"), ClassConflict},
		{"wrapped", fmt.Errorf("writing alias: %w", v400("write identity/entity-alias", "Alias already exists for requested entity and mount accessor")), ClassConflict},
		// OpenBao v2.6.2's policy store: a policy someone wrote with
		// cas_required refuses the operator's writes (no cas) until it
		// is cleared; the same write succeeds then.
		{"OpenBao policy with cas_required", v400("write sys/policies/acl/salt_role_web", "check-and-set parameter required for this call"), ClassConflict},
		// Vault's refusal of a built-in policy is the request's.
		{"Vault's immutable policy", v400("write sys/policies/acl/response-wrapping", `cannot update "response-wrapping" policy`), ClassInvalid},
		// The request itself.
		{"bad parameter", v400("write auth/salt-minions/role/web01", `invalid value for "token_type"`), ClassInvalid},
		{"bad CIDR", v400("write auth/salt-minions/role/web01", "failed to parse token_bound_cidrs: invalid CIDR"), ClassInvalid},
		{"checked before sending", invalid(OpWrite, "auth/x/role/a/b", fmt.Errorf("%w: role name", ErrInvalid)), ClassInvalid},
		{"mount not enabled", &Error{Op: "write auth/nope/role/a", StatusCode: 404, Messages: []string{`no handler for route "auth/nope/role/a". route entry not found.`}}, ClassConflict},
		{"unsupported path", &Error{Op: "read auth/salt-minions/role/a b", StatusCode: 404, Messages: []string{"1 error occurred:\n\t* unsupported path\n\n"}}, ClassInvalid},
		// The operator's credentials.
		{"403", &Error{Op: "write auth/salt-minions/role/a", StatusCode: 403, Messages: []string{"permission denied"}}, ClassDenied},
		{"wrong secret ID", v400("login auth/approle/login", "invalid role or secret ID"), ClassDenied},
		{"login 400 mentioning existence", v400("login auth/approle/login", "entity already exists"), ClassDenied},
		// Vault or the network.
		{"500", &Error{Op: "read sys/auth", StatusCode: 500}, ClassTransient},
		{"429", &Error{Op: "read sys/auth", StatusCode: 429}, ClassTransient},
		{"transport", &Error{Op: "read sys/auth", Err: errors.New("connection refused")}, ClassTransient},
		{"context", context.DeadlineExceeded, ClassTransient},
		{"answer cut short", &Error{Op: "read identity/entity/name/x", StatusCode: 200,
			Err: fmt.Errorf("decoding the response: %w: %w", ErrIncompleteResponse, io.ErrUnexpectedEOF)}, ClassTransient},
		{"cut answer wrapped", fmt.Errorf("reading entity: %w", &Error{Op: "write identity/entity-alias", StatusCode: 200,
			Err: fmt.Errorf("decoding the response: %w: %w", ErrIncompleteResponse, errors.New("invalid character '<'"))}), ClassTransient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v) = %s, want %s", tt.err, got, tt.want)
			}
			if got := Conflict(tt.err); got != (tt.want == ClassConflict) {
				t.Errorf("Conflict(%v) = %v", tt.err, got)
			}
		})
	}
}
