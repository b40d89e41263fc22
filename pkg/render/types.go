// Package render turns a template and a binding into everything the
// controller writes to Vault, with no Kubernetes or Vault in sight: the same
// function serves the controller and `minionvault render` in pull requests.
package render

import (
	"github.com/minionvault/minion-vault-operator/pkg/template"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// Template is a MinionTemplate's spec in plain Go. Nil slices mean "not
// set" (take the saltext default); empty non-nil slices mean empty.
type Template struct {
	Name string

	Policies       []string      // nil: DefaultPolicies
	EntityMetadata []template.KV // key -> pattern, merged into DefaultEntityMetadata
	SecretMetadata []template.KV // key -> pattern, merged into DefaultSecretMetadata
	PillarPaths    []string
	EntityName     string // "": DefaultEntityName

	PolicyDocuments []PolicyDocument
	AppRole         AppRole
	Parameters      *Parameters

	// Guard rails.
	AllowedPolicies   []string // globs; nil: every policy allowed
	TrustMinionGrains bool
}

// PolicyDocument is an ACL policy whose name and rule paths are patterns.
// Fields used in rules must also appear in the name, so one concrete name
// has exactly one body.
type PolicyDocument struct {
	Name  string
	Rules []Rule
}

// Rule is one `path` block. Only Path is a pattern.
type Rule struct {
	Path               string
	Capabilities       []string
	RequiredParameters []string
	AllowedParameters  []ParameterValues
	DeniedParameters   []ParameterValues
	MinWrappingTTL     string
	MaxWrappingTTL     string
}

// ParameterValues is one allowed_parameters / denied_parameters entry.
type ParameterValues struct {
	Name   string
	Values []string
}

// AppRole is the role written per minion. Nil fields take saltext's
// defaults; TTLs are "1h"-style strings or plain seconds.
type AppRole struct {
	Mount               string
	BindSecretID        *bool
	SecretIDNumUses     *int64
	SecretIDTTL         string
	SecretIDBoundCIDRs  []string
	TokenTTL            string
	TokenMaxTTL         string
	TokenExplicitMaxTTL string
	TokenPeriod         string
	TokenNumUses        *int64
	TokenBoundCIDRs     []string
	TokenType           string
}

// Parameters is the map.jinja parameter stack of a template.
type Parameters struct {
	Root  string
	Files map[string]value.Value // path -> YAML document, or a string holding YAML text
}

// Binding is one minion.
type Binding struct {
	MinionID string
	Grains   value.Value
	Pillar   value.Value
	Config   value.Value // minion options, for config.get
}

// Options are per-call inputs that do not come from the manifests.
type Options struct {
	JID  string // "": template.DefaultJID
	User string // "": template.DefaultUser
}

// Result is everything rendered for one binding.
type Result struct {
	Minion          string
	Policies        []string
	EntityMetadata  []template.KV
	SecretMetadata  []template.KV
	PillarPaths     []string
	Mapdata         value.Value
	PolicyDocuments []RenderedPolicy
	EntityName      string
	AppRole         AppRolePayload
	Warnings        []string

	// docFields keeps what each field substituted into policy documents,
	// for validation.
	docFields []docField
	// grainsID is the binding's grains["id"], when it has one.
	grainsID *string
}

// RenderedPolicy is one concrete ACL policy: its name and canonical HCL.
type RenderedPolicy struct {
	Name string
	HCL  string
}

// AppRolePayload is the write to auth/<Mount>/role/<RoleName>.
type AppRolePayload struct {
	Mount    string
	RoleName string
	// Params in a fixed order, TTLs in seconds, token_policies last.
	Params []Param
}

// Param is one AppRole role parameter.
type Param struct {
	Name  string
	Value any // bool, int64, string or []string
}

type docField struct {
	doc      int    // index in Template.PolicyDocuments
	name     string // the concrete policy name
	value    string // what a field substituted into the document
	conflict bool   // this name already had a different body
	refusal  string // why Vault would refuse the body ("" when it takes it)
}
