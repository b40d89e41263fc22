package acl

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Entity is what templating and the identity policies read of a Vault
// entity.
type Entity struct {
	ID       string
	Name     string
	Metadata map[string]string
	Aliases  []Alias
	// Policies are the entity's own policies (identity policies: live, they
	// apply to existing tokens at once).
	Policies []string
	Disabled bool
}

// Alias is one entity alias. For AppRole the name is the role ID and the
// metadata holds the secret ID's metadata plus role_name.
type Alias struct {
	ID             string
	Name           string
	MountAccessor  string
	Metadata       map[string]string
	CustomMetadata map[string]string
}

// Group is an identity group the entity belongs to, directly or inherited.
type Group struct {
	ID          string
	Name        string
	NamespaceID string // "" is the root namespace
	Metadata    map[string]string
	Policies    []string
}

// The templating errors of sdk/helper/identitytpl. Each drops the one rule
// it happens in.
var (
	ErrUnbalanced        = errors.New("unbalanced templating characters")
	ErrNoEntity          = errors.New("string contains entity template directives but no entity was provided")
	ErrNoGroups          = errors.New("string contains groups template directives but no groups were provided")
	ErrValueNotFound     = errors.New("no value could be found for one of the template directives")
	ErrTemplatedWildcard = errors.New("globs and wildcards are not allowed in template result")
	ErrTemplatedSlash    = errors.New("templated policy paths cannot contain '/' when denied via configuration")
	errAliasNotFound     = errors.New("alias not found")
)

// validateTemplate is PopulateString with ValidityCheckOnly: whether the
// string has directives, and whether its braces balance.
func validateTemplate(s string) (bool, error) {
	parts := strings.Split(s, "{{")
	if strings.Contains(parts[0], "}}") {
		return false, ErrUnbalanced
	}
	for _, p := range parts[1:] {
		if strings.Count(p, "}}") != 1 {
			return false, ErrUnbalanced
		}
	}
	return len(parts) > 1, nil
}

// renderInput is what one token gives the templating.
type renderInput struct {
	entity *Entity
	groups []Group
	mode   Mode
	now    time.Time
}

// renderInfo records what a rendering did that an audit should mention.
type renderInfo struct {
	usedTime bool
	// glob and slash are set when a substituted value contains a '*' or
	// '+', or a '/': in splice mode it then changes the rule's shape.
	glob, slash bool
}

// render is PopulateString in ACL mode (sdk/helper/identitytpl). An error
// drops the rule.
func render(s string, in *renderInput) (string, renderInfo, error) {
	var info renderInfo
	parts := strings.Split(s, "{{")
	if strings.Contains(parts[0], "}}") {
		return "", info, ErrUnbalanced
	}
	if len(parts) == 1 {
		return s, info, nil
	}
	var b strings.Builder
	b.WriteString(parts[0])
	for _, p := range parts[1:] {
		piece := strings.Split(p, "}}")
		if len(piece) != 2 {
			return "", info, ErrUnbalanced
		}
		sel := strings.TrimSpace(piece[0])
		v, err := selectValue(sel, in)
		if err != nil {
			return "", info, err
		}
		if strings.HasPrefix(sel, "time.") {
			info.usedTime = true
		}
		if strings.ContainsAny(v, "*+") {
			if in.mode.RejectTemplatedGlobs {
				return "", info, ErrTemplatedWildcard
			}
			info.glob = true
		}
		if strings.Contains(v, "/") {
			if in.mode.DenySlash {
				return "", info, ErrTemplatedSlash
			}
			info.slash = true
		}
		b.WriteString(v)
		b.WriteString(piece[1])
	}
	return b.String(), info, nil
}

// str is the ACL handler for a string: empty is not found.
func str(s string) (string, error) {
	if s == "" {
		return "", ErrValueNotFound
	}
	return s, nil
}

// mapValue is the ACL handler for a map with a key: a present key gives its
// value, even an empty one.
func mapValue(m map[string]string, key string) (string, error) {
	if v, ok := m[key]; ok {
		return v, nil
	}
	return "", ErrValueNotFound
}

func selectValue(sel string, in *renderInput) (string, error) {
	switch {
	case strings.HasPrefix(sel, "identity.entity."):
		if in.entity == nil {
			return "", ErrNoEntity
		}
		return entityValue(strings.TrimPrefix(sel, "identity.entity."), in)
	case strings.HasPrefix(sel, "identity.groups."):
		if len(in.groups) == 0 {
			return "", ErrNoGroups
		}
		return groupValue(strings.TrimPrefix(sel, "identity.groups."), in.groups)
	case strings.HasPrefix(sel, "time."):
		return timeValue(strings.TrimPrefix(sel, "time."), in.now)
	}
	return "", ErrValueNotFound
}

func entityValue(sel string, in *renderInput) (string, error) {
	e := in.entity
	switch {
	case sel == "id":
		return str(e.ID)
	case sel == "name":
		return str(e.Name)
	case strings.HasPrefix(sel, "metadata."):
		return mapValue(e.Metadata, strings.TrimPrefix(sel, "metadata."))
	case strings.HasPrefix(sel, "aliases."):
		split := strings.SplitN(strings.TrimPrefix(sel, "aliases."), ".", 2)
		if len(split) != 2 {
			return "", errors.New("invalid alias selector")
		}
		for i := range e.Aliases {
			if e.Aliases[i].MountAccessor == split[0] {
				return aliasValue(split[1], &e.Aliases[i])
			}
		}
		return "", errAliasNotFound
	}
	// A whole map or list (metadata, groups.names, groups.ids) and unknown
	// selectors are "not found" in ACL mode.
	return "", ErrValueNotFound
}

func aliasValue(sel string, a *Alias) (string, error) {
	switch {
	case sel == "id":
		return str(a.ID)
	case sel == "name":
		return str(a.Name)
	case strings.HasPrefix(sel, "metadata."):
		return mapValue(a.Metadata, strings.TrimPrefix(sel, "metadata."))
	case strings.HasPrefix(sel, "custom_metadata."):
		return mapValue(a.CustomMetadata, strings.TrimPrefix(sel, "custom_metadata."))
	}
	return "", ErrValueNotFound
}

func groupValue(sel string, groups []Group) (string, error) {
	split := strings.SplitN(sel, ".", 2)
	if len(split) != 2 || (split[0] != "ids" && split[0] != "names") {
		return "", errors.New("invalid groups selector")
	}
	ids := split[0] == "ids"
	acc := strings.SplitN(split[1], ".", 2)
	if len(acc) != 2 {
		return "", errors.New("invalid groups accessor")
	}
	var found *Group
	for i := range groups {
		g := &groups[i]
		compare := g.ID
		if !ids {
			// Names are looked up in the token's namespace only.
			if g.NamespaceID != "" && g.NamespaceID != "root" {
				continue
			}
			compare = g.Name
		}
		if compare == acc[0] {
			found = g
			break
		}
	}
	if found == nil {
		return "", fmt.Errorf("entity is not a member of group %q", acc[0])
	}
	switch {
	case acc[1] == "id":
		return found.ID, nil
	case acc[1] == "name":
		return str(found.Name)
	case strings.HasPrefix(acc[1], "metadata."):
		return mapValue(found.Metadata, strings.TrimPrefix(acc[1], "metadata."))
	}
	return "", ErrValueNotFound
}

func timeValue(sel string, now time.Time) (string, error) {
	ops := strings.SplitN(sel, ".", 3)
	if ops[0] != "now" {
		return "", fmt.Errorf("invalid time selector %q", ops[0])
	}
	switch len(ops) {
	case 2:
		return "", errors.New("missing time operand")
	case 3:
		d, err := parseDurationSecond(ops[2])
		if err != nil {
			return "", fmt.Errorf("invalid duration: %w", err)
		}
		switch ops[1] {
		case "plus":
			now = now.Add(d)
		case "minus":
			now = now.Add(-d)
		default:
			return "", fmt.Errorf("invalid time operator %q", ops[1])
		}
	}
	return strconv.FormatInt(now.Unix(), 10), nil
}

// parseDurationSecond is parseutil.ParseDurationSecond for a string: a bare
// number is seconds, anything else a Go duration (with "d" for days).
func parseDurationSecond(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	if strings.HasSuffix(s, "d") {
		n, err := strconv.ParseInt(strings.TrimSuffix(s, "d"), 10, 64)
		if err != nil {
			return 0, err
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}
