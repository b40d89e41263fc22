package audit

import (
	"fmt"
	"io"
	"strings"

	"github.com/minionvault/minion-vault-operator/pkg/acl"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
	"github.com/minionvault/minion-vault-operator/pkg/vaultversion"
)

// Where the Vault version of an audit comes from.
const (
	// VersionFromServer: online, the version the Vault read reports.
	VersionFromServer = "server"
	// VersionFromFlag: --vault-version.
	VersionFromFlag = "flag"
	// VersionDefault: offline without --vault-version, the newest version
	// the project tests (vault.NewestTested).
	VersionDefault = "default"
)

// VaultRules names the Vault release whose ACL rules an audit applied,
// where that version comes from, and how the rules answer where Vault
// releases differ (acl.Mode.Rules). Every report carries it.
type VaultRules struct {
	Version string `json:"version"`
	// Source is server, flag or default.
	Source string `json:"source"`
	// Testing is how the project tests the version: tested, line tested
	// (another patch release of a tested line) or untested.
	Testing string `json:"testing"`
	// Rules are the version-dependent rules in force, one sentence each.
	Rules []string `json:"rules"`
	mode  acl.Mode
}

// ParseVaultVersion checks a version given by hand (--vault-version).
func ParseVaultVersion(v string) error {
	if _, err := vaultversion.Parse(v); err != nil {
		return fmt.Errorf("--vault-version %q: not a Vault release such as %s (MAJOR.MINOR.PATCH)", v, vault.NewestTested())
	}
	return nil
}

// vaultRules chooses the rules of version ("" is the default, the newest
// tested version) from source.
func vaultRules(version, source string) (VaultRules, error) {
	if version == "" {
		version, source = vault.NewestTested(), VersionDefault
	}
	mode, err := acl.ModeForVersion(version)
	if err != nil {
		if source == VersionFromServer {
			return VaultRules{}, fmt.Errorf("the Vault server reports version %q, whose rules are unknown: give --vault-version: %w", version, err)
		}
		return VaultRules{}, err
	}
	r := VaultRules{Version: mode.Version, Source: source, Rules: mode.Rules(), mode: mode}
	switch state, release := vault.TestingOf(mode.Version); state {
	case vault.Tested:
		r.Testing = "tested"
	case vault.LineTested:
		r.Testing = "line tested (with " + release + ")"
	default:
		r.Testing = "untested"
	}
	return r, nil
}

// rulesOfMode is the rules of an evaluator made without a version (tests).
func rulesOfMode(m acl.Mode) VaultRules {
	v := m.Version
	if v == "" {
		v = "1.21.4" // the zero Mode
	}
	return VaultRules{Version: v, Source: VersionDefault, Testing: "tested", Rules: m.Rules(), mode: m}
}

// untestedWarning is the warning of a version the project does not test
// ("" when it does).
func (v VaultRules) untestedWarning() string {
	if v.Testing != "untested" {
		return ""
	}
	return fmt.Sprintf("Vault %s is not a line the project tests (%s): its rules are assumed from the version notes of the ACL specification",
		v.Version, strings.Join(vault.TestedVersions(), ", "))
}

// Title names the version and where it comes from, in a few words.
func (v VaultRules) Title() string {
	var from string
	switch v.Source {
	case VersionFromServer:
		from = "the version the server reports"
	case VersionFromFlag:
		from = "--vault-version"
	default:
		from = "the default: the newest version the project tests; --vault-version sets another"
	}
	return fmt.Sprintf("ACL rules of Vault %s (%s; %s)", v.Version, from, v.Testing)
}

// table prints the rules under a report for people.
func (v VaultRules) table(w io.Writer) {
	fmt.Fprintf(w, "%s:\n", v.Title())
	for _, r := range v.Rules {
		fmt.Fprintf(w, "  %s\n", r)
	}
}
