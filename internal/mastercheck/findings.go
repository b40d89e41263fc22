package mastercheck

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// Severity says whether a finding makes the master and the operator
// fight (or the master fail to issue), or is advice.
type Severity string

const (
	// Fight: the master rewrites, creates or deletes what the operator
	// owns, or cannot issue credentials for the operator's roles.
	Fight Severity = "fight"
	// Note: safe today, a hazard or a cost later.
	Note Severity = "note"
)

// Finding is one problem of a master beside the operator, with its fix.
type Finding struct {
	Severity Severity `json:"severity"`
	// Key is the master configuration key (vault:issue:type), the Vault
	// path, or the minion the finding is about.
	Key     string `json:"key"`
	Problem string `json:"problem"`
	Fix     string `json:"fix"`
}

// Fights counts the findings that make the two fight.
func Fights(fs []Finding) int {
	n := 0
	for _, f := range fs {
		if f.Severity == Fight {
			n++
		}
	}
	return n
}

// lookup walks the vault: mapping by a colon-separated key, as saltext's
// _config does (traverse_dict).
func (m *Master) lookup(key string) (value.Value, bool) {
	v := m.Vault
	for _, k := range strings.Split(key, ":") {
		if !v.IsMap() {
			return value.Value{}, false
		}
		var ok bool
		if v, ok = v.GetString(k); !ok {
			return value.Value{}, false
		}
	}
	return v, true
}

// issueChecks are the static checks of vault:issue against the template.
func (m *Master) issueChecks(t *Template) []Finding {
	var out []Finding
	add := func(sev Severity, key, problem, fix string) {
		out = append(out, Finding{Severity: sev, Key: key, Problem: problem, Fix: fix})
	}
	if m.Vault.IsNull() {
		add(Fight, "vault", "the configuration has no vault: mapping", "configure saltext-vault on the master: see docs/operations.md#running-beside-a-salt-master")
		return out
	}
	issueType := "token" // saltext's default (factory.parse_config)
	if v, ok := m.lookup("issue:type"); ok && v.IsString() {
		issueType = v.Str()
	}
	if issueType != "approle" {
		add(Fight, "vault:issue:type", fmt.Sprintf("is %s: the master issues tokens with the policies it renders and no entity; the operator's roles go unused and its entity metadata never reaches a token", issueType),
			"set vault:issue:type: approle")
	}
	mount := "salt-minions" // saltext's default
	if v, ok := m.lookup("issue:approle:mount"); ok && v.IsString() {
		mount = strings.Trim(v.Str(), "/")
	}
	if mount != t.Mount {
		add(Fight, "vault:issue:approle:mount", fmt.Sprintf("is %s: the master issues for roles on %s, the template %s writes them on %s", mount, mount, t.Name, t.Mount),
			"set vault:issue:approle:mount: "+t.Mount)
	}
	if v, ok := m.lookup("issue:allow_minion_override_params"); ok && v.Truthy() {
		add(Fight, "vault:issue:allow_minion_override_params", "is true: a minion's vault:issue_params make the master rewrite its role at every request",
			"set vault:issue:allow_minion_override_params: false")
	}
	if v, ok := m.lookup("issue:approle:params"); ok && v.IsNull() {
		add(Fight, "vault:issue:approle:params", "is null: saltext's get_config fails on it (it looks parameters up in the map), so minions get no credentials",
			"null the parameters one by one, not the map (docs/operations.md#running-beside-a-salt-master)")
	}
	bind := value.NewBool(true) // saltext's default
	if v, ok := m.lookup("issue:approle:params:bind_secret_id"); ok {
		bind = v
	}
	switch {
	case bind.IsNull():
		add(Fight, "vault:issue:approle:params:bind_secret_id", "is null: the master tells minions their role needs no secret ID, so their logins fail",
			fmt.Sprintf("set it to %t, the template's bindSecretID", t.BindSecretID))
	case bind.Truthy() != t.BindSecretID:
		add(Fight, "vault:issue:approle:params:bind_secret_id", fmt.Sprintf("is %s, the template's bindSecretID is %t: minions %s", bind.PyStr(), t.BindSecretID,
			map[bool]string{true: "never fetch the secret IDs their roles require, so their logins fail",
				false: "loop on \"Minion AppRole does not require a secret ID.\" (expire_cache)"}[t.BindSecretID]),
			fmt.Sprintf("set it to %t", t.BindSecretID))
	}
	return out
}

// The peer runners a minion calls to get credentials, and the deprecated
// ones that issue tokens without an entity.
var (
	issueRunners = []string{"vault.get_config", "vault.generate_secret_id"}
	tokenRunners = []string{"vault.generate_token", "vault.generate_new_token"}
)

// peerRunChecks reads peer_run: minion ID patterns to lists of function
// patterns, which Salt matches as regular expressions from the start.
func (m *Master) peerRunChecks() []Finding {
	var out []Finding
	granted := map[string][]string{} // runner -> minion patterns allowed it
	for _, p := range m.PeerRun.Pairs() {
		for _, fn := range p.Val.Items() {
			if !fn.IsString() {
				continue
			}
			for _, runner := range append(slices.Clone(issueRunners), tokenRunners...) {
				if peerRunMatches(fn.Str(), runner) {
					granted[runner] = append(granted[runner], p.Key.PyStr())
				}
			}
		}
	}
	for _, r := range issueRunners {
		if len(granted[r]) == 0 {
			out = append(out, Finding{Severity: Fight, Key: "peer_run", Problem: "no minion may run " + r + ": minions cannot fetch their credentials",
				Fix: "allow it: peer_run: {'.*': [vault.get_config, vault.generate_secret_id]}"})
		}
	}
	for _, r := range tokenRunners {
		if who := granted[r]; len(who) > 0 {
			out = append(out, Finding{Severity: Fight, Key: "peer_run", Problem: fmt.Sprintf("minions matching %s may run %s: a token with the master's policies and no entity, past the operator's roles",
				strings.Join(who, ", "), r), Fix: "allow only vault.get_config and vault.generate_secret_id"})
		}
	}
	return out
}

// peerRunMatches is Salt's match of a peer_run function pattern: a
// regular expression matched from the start (re.match).
func peerRunMatches(pattern, fn string) bool {
	re, err := regexp.Compile(`^(?:` + pattern + `)`)
	return err == nil && re.MatchString(fn)
}
