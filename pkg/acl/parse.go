package acl

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/hcl"
	"github.com/hashicorp/hcl/hcl/ast"
	hclparser "github.com/hashicorp/hcl/hcl/parser"
)

// Policy is one ACL policy document as Vault stores it after a successful
// write: its rules in document order, before templating.
type Policy struct {
	Name string
	// Templated is Vault's flag: at least one path contains {{ }}. Vault
	// parses such a policy again for every request, with the token's entity.
	Templated bool
	Rules     []Rule
}

// Rule is one path stanza.
type Rule struct {
	// Pattern is the key as written in the document.
	Pattern string
	// Line is the stanza's line in the document (0 when unknown).
	Line int
	// Caps is the stanza's bitmap after the old-style policy mapping.
	Caps Caps
	// Constrained is set when the stanza carries parameter constraints
	// (allowed, denied or required parameters), wrapping TTLs, MFA methods
	// or a control group: things a real request checks and
	// sys/capabilities never shows.
	Constrained bool
	// Parameters is set when the constraints include allowed_parameters
	// or denied_parameters (whose list matching changed in Vault 1.21.0).
	Parameters bool
	// Templated is set when Pattern contains a template directive.
	Templated bool
}

// ErrWildcards is Vault's refusal of a path containing "+*".
var ErrWildcards = errors.New("invalid use of wildcards ('+*' is forbidden)")

// hclRule mirrors the fields of Vault's PathRules that HCL decodes
// (vault/policy.go); decoding into the same shapes gives the same type
// errors.
type hclRule struct {
	Policy                string                   `hcl:"policy"`
	Capabilities          []string                 `hcl:"capabilities"`
	MinWrappingTTLHCL     interface{}              `hcl:"min_wrapping_ttl"`
	MaxWrappingTTLHCL     interface{}              `hcl:"max_wrapping_ttl"`
	AllowedParametersHCL  map[string][]interface{} `hcl:"allowed_parameters"`
	DeniedParametersHCL   map[string][]interface{} `hcl:"denied_parameters"`
	RequiredParametersHCL []string                 `hcl:"required_parameters"`
	MFAMethodsHCL         []string                 `hcl:"mfa_methods"`
	ControlGroupHCL       *controlGroupHCL         `hcl:"control_group"`
	SubscribeEventTypes   []string                 `hcl:"subscribe_event_types"`
}

type controlGroupHCL struct {
	TTL     interface{}                    `hcl:"ttl"`
	Factors map[string]*controlGroupFactor `hcl:"factor"`
}

type controlGroupFactor struct {
	Identity *struct {
		GroupIDs          []string `hcl:"group_ids"`
		GroupNames        []string `hcl:"group_names"`
		ApprovalsRequired int      `hcl:"approvals"`
	} `hcl:"identity"`
	ControlledCapabilities []string `hcl:"controlled_capabilities"`
}

var (
	topKeys  = []string{"name", "path"}
	pathKeys = []string{
		"comment", "policy", "capabilities", "allowed_parameters", "denied_parameters",
		"required_parameters", "min_wrapping_ttl", "max_wrapping_ttl", "mfa_methods",
		"control_group", "subscribe_event_types",
	}
)

// Parse parses a policy document as Vault 1.21 and later does when it is
// written (vault/policy.go ParseACLPolicy): an error is a document Vault
// refuses. The name is sanitised as the policy store does (lower case,
// trimmed). An attribute set twice in one block is refused, as Vault 1.21
// and 2.0 refuse it unless VAULT_ALLOW_PENDING_REMOVAL_DUPLICATE_HCL_ATTRIBUTES
// is set, and as Vault 2.1 always does (DuplicateAttributeError).
func Parse(name, text string) (*Policy, error) { return ParseMode(name, text, Mode{}) }

// ParseMode parses a policy document as the Vault release of mode does
// when it is written. With mode.AllowDuplicateAttributes it parses as
// Vault 1.20 and earlier (and OpenBao) do, where an attribute set twice is
// accepted and decoded as HCL decodes it (lists joined, the last scalar
// kept): Vault 1.20's helper/random/parser.go
// ParseAndCheckForDuplicateHclAttributes accepts it with a warning, and
// before 1.20 the parser did not check.
func ParseMode(name, text string, mode Mode) (p *Policy, err error) {
	// The HCL library panics on some malformed tokens; Vault's HTTP layer
	// would turn that into an error, so do we.
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("failed to parse policy: %v", r)
		}
	}()
	var root *ast.File
	if mode.AllowDuplicateAttributes && !isJSON(text) {
		root, err = hclparser.ParseDontErrorOnDuplicateKeys([]byte(text))
	} else {
		root, err = hcl.Parse(text)
	}
	if err != nil {
		if d := findDuplicate(text); d != nil && strings.Contains(err.Error(), duplicateText) {
			d.Vault = err.Error()
			return nil, fmt.Errorf("failed to parse policy: %w", d)
		}
		return nil, fmt.Errorf("failed to parse policy: %w", err)
	}
	list, ok := root.Node.(*ast.ObjectList)
	if !ok {
		return nil, errors.New("failed to parse policy: does not contain a root object")
	}
	if err := checkKeys(list, topKeys); err != nil {
		return nil, fmt.Errorf("failed to parse policy: %w", err)
	}
	var top struct {
		Name string `hcl:"name"`
	}
	if err := hcl.DecodeObject(&top, list); err != nil {
		return nil, fmt.Errorf("failed to parse policy: %w", err)
	}
	p = &Policy{Name: SanitizeName(name)}
	for _, item := range list.Filter("path").Items {
		r, err := parseRule(item, mode)
		if err != nil {
			return nil, fmt.Errorf("failed to parse policy: %w", err)
		}
		if r.Templated {
			p.Templated = true
		}
		p.Rules = append(p.Rules, r)
	}
	return p, nil
}

func parseRule(item *ast.ObjectItem, mode Mode) (Rule, error) {
	key := "path"
	if len(item.Keys) > 0 {
		s, ok := item.Keys[0].Token.Value().(string)
		if !ok {
			return Rule{}, fmt.Errorf("path key on line %d is not a string", item.Pos().Line)
		}
		key = s
	}
	r := Rule{Pattern: key, Line: item.Pos().Line}
	templated, err := validateTemplate(key)
	if err != nil {
		return Rule{}, fmt.Errorf("failed to validate policy templating: %w", err)
	}
	r.Templated = templated
	if err := checkKeys(item.Val, pathKeys); err != nil {
		return Rule{}, fmt.Errorf("path %q: %w", key, err)
	}
	var pc hclRule
	if err := hcl.DecodeObject(&pc, item.Val); err != nil {
		return Rule{}, fmt.Errorf("path %q: %w", key, err)
	}
	if _, err := classify(strings.TrimPrefix(key, "/")); err != nil {
		return Rule{}, fmt.Errorf("path %q: %w", strings.TrimPrefix(key, "/"), err)
	}
	caps := pc.Capabilities
	switch pc.Policy {
	case "":
	case "deny":
		caps = []string{"deny"}
	case "read":
		caps = append(caps, "read", "list")
	case "write":
		caps = append(caps, "create", "read", "update", "delete", "list")
	case "sudo":
		caps = append(caps, "create", "read", "update", "delete", "list", "sudo")
	default:
		return Rule{}, fmt.Errorf("path %q: invalid policy %q", key, pc.Policy)
	}
	// The walk stops at deny: ["deny", "bogus"] is accepted and
	// ["bogus", "deny"] is not.
	for _, name := range caps {
		c, ok := ParseCap(name)
		if !ok || (c == Recover && mode.NoRecover) {
			return Rule{}, fmt.Errorf("path %q: invalid capability %q", key, name)
		}
		if c == Deny {
			r.Caps = Deny
			return r, nil
		}
		r.Caps |= c
	}
	if err := checkExtras(&pc, caps); err != nil {
		return Rule{}, fmt.Errorf("path %q: %w", key, err)
	}
	r.Constrained = pc.AllowedParametersHCL != nil || pc.DeniedParametersHCL != nil ||
		len(pc.RequiredParametersHCL) > 0 || pc.MinWrappingTTLHCL != nil ||
		pc.MaxWrappingTTLHCL != nil || len(pc.MFAMethodsHCL) > 0 || pc.ControlGroupHCL != nil
	r.Parameters = pc.AllowedParametersHCL != nil || pc.DeniedParametersHCL != nil
	return r, nil
}

// checkKeys is hclutil.CheckHCLKeys: every key of the object must be valid.
func checkKeys(node ast.Node, valid []string) error {
	var list *ast.ObjectList
	switch n := node.(type) {
	case *ast.ObjectList:
		list = n
	case *ast.ObjectType:
		list = n.List
	default:
		return fmt.Errorf("cannot check HCL keys of type %T", n)
	}
	var errs []error
	for _, item := range list.Items {
		key, _ := item.Keys[0].Token.Value().(string)
		ok := false
		for _, v := range valid {
			if v == key {
				ok = true
				break
			}
		}
		if !ok {
			errs = append(errs, fmt.Errorf("invalid key %q on line %d", key, item.Assign.Line))
		}
	}
	return errors.Join(errs...)
}

// SanitizeName is the policy store's sanitizeName: lower case, trimmed.
func SanitizeName(name string) string {
	return strings.ToLower(strings.TrimSpace(name))
}

// kind is the store a rule lands in (vault/acl.go NewACL).
type kind uint8

const (
	exactKind kind = iota
	prefixKind
	segmentKind
)

func (k kind) String() string {
	switch k {
	case prefixKind:
		return "prefix"
	case segmentKind:
		return "segment"
	}
	return "exact"
}

// classify is the tail of parsePaths for a path whose leading "/" is
// already gone: "+*" is an error, a segment path keeps its "*", any other
// path ending in "*" is a prefix rule.
func classify(path string) (kind, error) {
	if strings.Contains(path, "+*") {
		return 0, ErrWildcards
	}
	if path == "+" || strings.Contains(path, "/+") || strings.HasPrefix(path, "+/") {
		return segmentKind, nil
	}
	if strings.HasSuffix(path, "*") {
		return prefixKind, nil
	}
	return exactKind, nil
}

// checkExtras are parsePaths' checks of what does not reach capabilities:
// Vault refuses the document when they fail, so Parse does too.
func checkExtras(pc *hclRule, caps []string) error {
	var minTTL, maxTTL time.Duration
	var err error
	if pc.MinWrappingTTLHCL != nil {
		if minTTL, err = durationSecond(pc.MinWrappingTTLHCL); err != nil {
			return fmt.Errorf("error parsing min_wrapping_ttl: %w", err)
		}
	}
	if pc.MaxWrappingTTLHCL != nil {
		if maxTTL, err = durationSecond(pc.MaxWrappingTTLHCL); err != nil {
			return fmt.Errorf("error parsing max_wrapping_ttl: %w", err)
		}
	}
	if minTTL != 0 && maxTTL != 0 && maxTTL < minTTL {
		return errors.New("max_wrapping_ttl cannot be less than min_wrapping_ttl")
	}
	cg := pc.ControlGroupHCL
	if cg == nil {
		return nil
	}
	if cg.TTL != nil {
		if _, err := durationSecond(cg.TTL); err != nil {
			return fmt.Errorf("error parsing control group max ttl: %w", err)
		}
	}
	n := 0
	for _, f := range cg.Factors {
		if f == nil || f.Identity == nil {
			return errors.New("no control_group factor provided")
		}
		if f.Identity.ApprovalsRequired <= 0 || (len(f.Identity.GroupIDs) == 0 && len(f.Identity.GroupNames) == 0) {
			return errors.New("must provide more than one identity group and approvals > 0")
		}
		for _, c := range f.ControlledCapabilities {
			found := false
			for _, have := range caps {
				found = found || have == c
			}
			if !found {
				return errors.New("control group factor capabilities must be a subset of the policy's capabilities")
			}
		}
		n++
	}
	if n == 0 {
		return errors.New("no control group factors provided")
	}
	return nil
}

// durationSecond is parseutil.ParseDurationSecond for what HCL decodes: a
// number is seconds, a string a number of seconds or a Go duration.
func durationSecond(v interface{}) (time.Duration, error) {
	switch x := v.(type) {
	case int:
		return time.Duration(x) * time.Second, nil
	case int64:
		return time.Duration(x) * time.Second, nil
	case float64:
		return time.Duration(x * float64(time.Second)), nil
	case string:
		return parseDurationSecond(x)
	}
	return 0, fmt.Errorf("could not parse duration from input %v", v)
}
