package mastercheck

import (
	"fmt"
	"slices"

	"github.com/minionvault/minion-vault-operator/internal/saltext"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// paramDiffs are the issue parameters the master finds different from a
// role: saltext's naive != (runners/vault.py _approle_params_match).
type paramDiffs []saltext.Mismatch

func (ds paramDiffs) has(p string) bool {
	return slices.ContainsFunc(ds, func(d saltext.Mismatch) bool { return d.Param == p })
}

func (ds paramDiffs) strings() []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.String()
	}
	return out
}

// issueParams are the master's effective AppRole issue parameters:
// saltext's defaults merged in, nulls dropped, durations in seconds.
func (m *Master) issueParams() (map[string]any, error) {
	if v, ok := m.lookup("issue:approle:params"); ok && v.IsNull() {
		// saltext fails on it (issueChecks says so): nothing is compared.
		return map[string]any{}, nil
	}
	vault := m.Vault
	if vault.IsNull() {
		vault = value.NewMap(nil) // saltext's defaults
	}
	cfg, err := saltext.NewConfigValue(vault)
	if err != nil {
		return nil, err
	}
	return saltext.ParseIssueParams(cfg, nil)
}

// differences are the parameters the master would find different from
// role (a read as Vault answers it).
func (m *Master) differences(role map[string]any) (paramDiffs, error) {
	params, err := m.issueParams()
	if err != nil {
		return nil, fmt.Errorf("the master's issue parameters: %w", err)
	}
	_, mismatches := saltext.ParamsMatch(normalizeRead(role), params)
	return mismatches, nil
}

// comparedParams are the master's effective parameters saltext compares.
func (m *Master) comparedParams() ([]string, error) {
	params, err := m.issueParams()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range comparedParams {
		if _, ok := params[p]; ok {
			out = append(out, p)
		}
	}
	return out, nil
}
