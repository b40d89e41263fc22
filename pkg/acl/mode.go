package acl

import (
	"github.com/minionvault/minion-vault-operator/pkg/vaultversion"
)

// Mode holds the Vault behaviours that changed between releases and that
// change an answer, or what the audit says beside an answer. The zero Mode
// is Vault v1.21.4's (the release shared/spec/acl.md was read from);
// ModeForVersion gives the mode of any release.
//
// Read from the spec (shared/spec/acl.md) and from hashicorp/vault's
// source of the releases the project tests (v1.15.6, v1.16.3, v1.17.6,
// v1.18.5, v1.19.5, v1.20.0, v1.20.4, v1.21.4; sdk v0.10.2 to v0.21.0).
// Unchanged across them, and so not here: the matching and priority of
// vault/acl.go (AllowOperation, CheckAllowedFromNonExactPaths), the
// templating of sdk/helper/identitytpl/templating.go, the text of the
// default policy (vault/policy_store.go defaultPolicy) and
// vault/capabilities.go's pipeline.
type Mode struct {
	// Version is the release the mode was chosen for ("1.21.4"); "" for a
	// Mode made by hand (the zero Mode is v1.21.4's).
	Version string
	// RejectTemplatedGlobs drops a templated rule whose rendered value
	// contains '*' or '+' (ErrTemplatedWildcard). Vault 1.19.17, 1.20.11,
	// 1.21.6 and 2.0.1 and later; before, the value is spliced into the path
	// and can turn it into a prefix or segment rule, or into "+*" (spec
	// 1.4, rows 32-34).
	RejectTemplatedGlobs bool
	// DenySlash drops a templated rule whose rendered value contains '/'
	// (server option deny_slash_in_templated_paths, fixed releases only:
	// never chosen by version, spec 1.4 row 35).
	DenySlash bool
	// RefuseUncleanedPaths: real requests with "//", "/./" or "/../" are
	// refused, since 1.21.5 (web-unified-docs breaking change
	// cleaned-paths, spec 1.5). sys/capabilities still evaluates such a path
	// as it is: no answer changes, the audit's caveat does. The spec names
	// the 1.21 line only; a later line (1.22, 2.x) is taken to keep it.
	RefuseUncleanedPaths bool
	// WholeListParameters: allowed_parameters and denied_parameters
	// compare a list value as a whole, as Vault did before 1.21.0; since
	// 1.21.0 each element is checked (spec 1.6, breaking change
	// allowed-parameters-list; vault/acl.go v1.21.4
	// valueInAllowedParameterList and valueInDeniedParameterList, absent
	// from v1.20.4; the old behaviour with
	// VAULT_LEGACY_EXACT_MATCHING_ON_LIST). sys/capabilities never checks
	// parameters: only the "parameter constraints" caveat says it.
	WholeListParameters bool
	// NoRecover: "recover" is not a capability, as before Vault 1.20.0: a
	// policy naming it is refused ("invalid capability"). vault/policy.go
	// v1.19.5 parsePaths has no RecoverCapability; v1.20.0 adds it
	// (policy.go:466) and reports it (acl.go:337,
	// CapabilitiesAndSubscribeEventTypes).
	NoRecover bool
	// AllowDuplicateAttributes: an HCL attribute set twice in one object
	// ("capabilities" twice in a path stanza) is accepted, as before Vault
	// 1.21.0. Up to v1.19.5 the parser (hashicorp/hcl v1.0.1-vault-5) did
	// not check; v1.20.x accepts it with a warning
	// (helper/random/parser.go ParseAndCheckForDuplicateHclAttributes,
	// hcl v1.0.1-vault-7 ParseDontErrorOnDuplicateKeys); v1.21.x refuses
	// it ("Each argument can only be defined once") unless
	// VAULT_ALLOW_PENDING_REMOVAL_DUPLICATE_HCL_ATTRIBUTES is set.
	AllowDuplicateAttributes bool
}

// ModeForVersion returns the mode of a Vault version such as "1.21.4",
// "v1.21.6" or "1.21.4+ent" (a pre-release suffix "-rc1" is dropped).
func ModeForVersion(version string) (Mode, error) {
	v, err := vaultversion.Parse(version)
	if err != nil {
		return Mode{}, err
	}
	// The templated-glob fix came to each supported line in a patch
	// release of its own; lines after 1.21 (1.22, 2.0.1 and later) have it.
	var fixed bool
	switch {
	case v.Major > 2, v.Major == 2 && (v.Minor > 0 || v.Patch >= 1):
		fixed = true
	case v.Major == 1 && v.Minor >= 22:
		fixed = true
	case v.Major == 1 && v.Minor == 21:
		fixed = v.Patch >= 6
	case v.Major == 1 && v.Minor == 20:
		fixed = v.Patch >= 11
	case v.Major == 1 && v.Minor == 19:
		fixed = v.Patch >= 17
	}
	return Mode{
		Version:                  v.String(),
		RejectTemplatedGlobs:     fixed,
		RefuseUncleanedPaths:     v.AtLeast(1, 21, 5),
		WholeListParameters:      !v.AtLeast(1, 21, 0),
		NoRecover:                !v.AtLeast(1, 20, 0),
		AllowDuplicateAttributes: !v.AtLeast(1, 21, 0),
	}, nil
}

// modeRules are the sentences Rules says: for each behaviour, what the
// audit names when the mode has it (on) and when it has not (off; "" says
// nothing).
var modeRules = []struct {
	has     func(Mode) bool
	on, off string
}{
	{func(m Mode) bool { return m.RejectTemplatedGlobs },
		"a templated value with * or + drops its rule (1.19.17, 1.20.11, 1.21.6, 2.0.1 and later)",
		"a templated value with * or + is spliced into the path and can widen the rule (dropped from 1.19.17, 1.20.11, 1.21.6, 2.0.1)"},
	{func(m Mode) bool { return m.DenySlash },
		"a templated value with / drops its rule (deny_slash_in_templated_paths)", ""},
	{func(m Mode) bool { return m.RefuseUncleanedPaths },
		"real requests with //, /./ or /../ are refused (1.21.5 and later); sys/capabilities answers them as written",
		"real requests with //, /./ or /../ are served (refused from 1.21.5)"},
	{func(m Mode) bool { return m.WholeListParameters },
		"allowed_parameters and denied_parameters compare a list value whole (element by element from 1.21.0)",
		"allowed_parameters and denied_parameters check a list value element by element (1.21.0 and later)"},
	{func(m Mode) bool { return m.NoRecover },
		"no recover capability: a policy naming it is refused (added in 1.20.0)",
		"recover is a capability (1.20.0 and later)"},
	{func(m Mode) bool { return m.AllowDuplicateAttributes },
		"a policy setting an HCL attribute twice is accepted (refused from 1.21.0)",
		"a policy setting an HCL attribute twice is refused (1.21.0 and later)"},
}

// Rules says, one sentence each, how the mode answers where Vault releases
// differ: what an audit names beside its version.
func (m Mode) Rules() []string {
	var out []string
	for _, r := range modeRules {
		switch {
		case r.has(m):
			out = append(out, r.on)
		case r.off != "":
			out = append(out, r.off)
		}
	}
	return out
}

// UncleanedCaveat is what the audit says of a path with "//", "/./" or
// "/../" under this mode.
func (m Mode) UncleanedCaveat() string {
	if m.RefuseUncleanedPaths {
		return "the path has //, . or .. segments: capabilities evaluate it as it is, a real request is refused (Vault 1.21.5 and later)"
	}
	return "the path has //, . or .. segments: capabilities evaluate it as it is and a real request is served here, but Vault 1.21.5 and later refuse it"
}

// ParametersNote is what the audit adds to "with parameter constraints"
// when the pattern has allowed_parameters or denied_parameters.
func (m Mode) ParametersNote() string {
	if m.WholeListParameters {
		return "a list value must equal a listed value whole (before Vault 1.21.0)"
	}
	return "a list value is checked element by element (Vault 1.21.0 and later)"
}

// GlobCaveat is what the audit says of a templated rule whose value
// brought a '*' or '+' into the path (only seen in a mode that splices).
func (m Mode) GlobCaveat() string {
	return "a value brought a * or +, which Vault 1.19.17, 1.20.11, 1.21.6, 2.0.1 and later drop"
}
