package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Defaults of MinionTemplate. The saltext-vault defaults (policies and
// metadata) are applied by the renderer, not by the API server, because an
// explicitly empty list must stay empty; the others are also API server
// defaults and are repeated here for objects that were never defaulted.
const (
	DefaultMinionAppRoleMount         = "salt-minions"
	DefaultEntityNamePattern          = "salt_minion_{minion}"
	DefaultBindSecretID               = true
	DefaultSecretIDNumUses            = int64(1)
	DefaultSecretIDTTLSeconds         = 60
	DefaultTokenExplicitMaxTTLSeconds = 60
	DefaultTokenNumUses               = int64(10)
	DefaultTemplateInterval           = time.Hour
	DefaultParametersSubdirName       = "parameters"
)

// DeletionPolicy says what happens to a binding's Vault objects when the
// binding is deleted (and, for the template's ACL policies, when the
// template is deleted).
// +kubebuilder:validation:Enum=Delete;Retain
type DeletionPolicy string

const (
	// DeletionPolicyDelete removes the AppRole role, the identity entity and
	// the ACL policies nobody uses any more.
	DeletionPolicyDelete DeletionPolicy = "Delete"
	// DeletionPolicyRetain leaves everything in Vault.
	DeletionPolicyRetain DeletionPolicy = "Retain"
)

// DriftDetectionMode says what the operator does when Vault differs from the
// rendered state.
// +kubebuilder:validation:Enum=Correct;DetectOnly
type DriftDetectionMode string

const (
	// DriftDetectionCorrect rewrites Vault to the rendered state.
	DriftDetectionCorrect DriftDetectionMode = "Correct"
	// DriftDetectionDetectOnly reports drift in conditions and events and
	// does not correct it (new and changed renderings are still written).
	DriftDetectionDetectOnly DriftDetectionMode = "DetectOnly"
)

// TokenType is the type of the tokens a minion's AppRole issues.
// +kubebuilder:validation:Enum=default;service;batch
type TokenType string

const (
	TokenTypeDefault TokenType = "default"
	TokenTypeService TokenType = "service"
	TokenTypeBatch   TokenType = "batch"
)

// PolicyCapability is one capability of a Vault ACL rule.
// +kubebuilder:validation:Enum=create;read;update;patch;delete;list;sudo;deny;subscribe;recover
type PolicyCapability string

const (
	CapabilityCreate    PolicyCapability = "create"
	CapabilityRead      PolicyCapability = "read"
	CapabilityUpdate    PolicyCapability = "update"
	CapabilityPatch     PolicyCapability = "patch"
	CapabilityDelete    PolicyCapability = "delete"
	CapabilityList      PolicyCapability = "list"
	CapabilitySudo      PolicyCapability = "sudo"
	CapabilityDeny      PolicyCapability = "deny"
	CapabilitySubscribe PolicyCapability = "subscribe"
	CapabilityRecover   PolicyCapability = "recover"
)

// MinionTemplateSpec describes how every minion bound to this template is
// represented in Vault. It follows the "vault" configuration of the Salt
// Vault extension (saltext-vault), whose defaults apply where a field is
// omitted.
//
// Fields documented as patterns are templates in Python str.format syntax,
// rendered per minion: {minion} is the minion ID, {pillar[key]} and
// {grains[key]} read the binding's pillar and grains (nest with
// {pillar[a][b]}; no colon traversal), {mapdata[key]} reads the result of
// the parameter stack (spec.parameters), and {{ and }} are literal braces. A
// field whose value is a list or mapping expands the pattern once per
// element (mapping: per key), so "salt_role_{pillar[roles]}" with roles
// [web, db] gives salt_role_web and salt_role_db. A pattern referring to a
// missing key yields nothing.
type MinionTemplateSpec struct {
	// connectionRef names the VaultConnection this template's minions are
	// written to.
	// +required
	ConnectionRef VaultConnectionReference `json:"connectionRef"`

	// policies lists the policies assigned to each minion's AppRole tokens
	// (token_policies). When policies is omitted, saltext's default applies:
	// [saltstack/minions, saltstack/{minion}]. When policies is present,
	// assign is used as written, so "policies: {assign: []}" assigns no
	// policies at all.
	// +optional
	Policies *PoliciesSpec `json:"policies,omitempty"`

	// metadata are the templated key/value pairs written as identity entity
	// metadata (entity) and attached to secret IDs and tokens (secret). Each
	// list is merged into saltext's defaults like a Python dict update: a
	// default key gets the new pattern in place, other keys are appended in
	// list order; the resulting order is the rendering order. Variables:
	// {minion}, {pillar}, {mapdata}, {jid}, {user} (no grains); a missing key
	// renders as "". A value that expands to several strings renders as the
	// sorted, comma-joined list, and each string also gets a key
	// "<key>__0", "<key>__1", ... (for Vault ACL templates such as
	// {{identity.entity.metadata.roles__0}}), unless another key of the same
	// list starts with "<key>__".
	// +optional
	Metadata *MetadataSpec `json:"metadata,omitempty"`

	// pillarPaths are patterns of Vault KV paths whose secrets are the
	// minion's Vault pillar (like the Vault ext_pillar's "path" setting), for
	// example "salt/data/minions/{minion}". Variables: {minion}, {pillar},
	// {mapdata}; grains are not visible here. Rendered results keep their
	// case and order. When omitted, the minion has no Vault pillar paths.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=1024
	// +listType=atomic
	// +optional
	PillarPaths []string `json:"pillarPaths,omitempty"`

	// appRole configures the AppRole role written for each minion at
	// auth/<mount>/role/<minion ID>, with token_policies set to the rendered
	// policies. Omitted fields take saltext's defaults. Durations are a
	// number of seconds ("60") or a number with unit s, m, h or d ("90s",
	// "1h", "7d"), written as strings, and sent to Vault as seconds.
	// +kubebuilder:default={}
	// +optional
	AppRole *MinionAppRoleSpec `json:"appRole,omitempty"`

	// entityName is the pattern of the name of the minion's identity entity.
	// It must render to exactly one non-empty string. Variables: {minion},
	// {pillar}, {mapdata}.
	// +kubebuilder:default="salt_minion_{minion}"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	EntityName string `json:"entityName,omitempty"`

	// policyDocuments are ACL policies the operator writes to Vault, so that
	// the policies assigned by policies.assign exist. Each document's name is
	// a pattern: a document is written once per distinct rendered name, and
	// shared by every minion that renders the same name. Placeholders used in
	// rules must also appear in the name (the rules are rendered with the
	// name's values; anything else could differ between minions sharing the
	// policy, and is refused). Vault's own ACL templating, such as
	// {{identity.entity.id}} or {{identity.entity.metadata.roles__0}}, is
	// written to Vault unchanged rather than read as escaped braces.
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	// +optional
	PolicyDocuments []PolicyDocument `json:"policyDocuments,omitempty"`

	// parameters is a map.jinja-style parameter stack ("mapdata") computed
	// per minion from YAML files and the minion's grains, pillar and config,
	// as the saltstack-formulas template-formula does, and visible to
	// patterns as {mapdata[...]}. Files are addressed by their Salt
	// fileserver path: parameters/map_jinja.yaml (global),
	// <root>/parameters/defaults.yaml, <root>/parameters/map_jinja.yaml,
	// <root>/parameters/os_family/Debian.yaml, and so on.
	// +optional
	Parameters *ParametersSpec `json:"parameters,omitempty"`

	// namespaceSelector restricts which namespaces may hold MinionBindings
	// of this template. A binding in any other namespace is not rendered
	// (reason NamespaceNotAllowed). When omitted, all namespaces may.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// allowedPolicies are globs of policy names ('*' matches any run of
	// characters, including '/'; '?' matches one character). Every rendered
	// (lowercased) policy name and every rendered policyDocuments name must
	// match at least one of them, or the binding is not written (reason
	// PolicyNotAllowed). When omitted, every policy name is allowed.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +listType=set
	// +optional
	AllowedPolicies []string `json:"allowedPolicies,omitempty"`

	// trustMinionGrains allows the patterns that decide access
	// (policies.assign, entityName, metadata.entity, policyDocuments) to use
	// grains other than grains[id], and {mapdata[...]} (the parameter stack
	// picks its layers by grains). Grains are reported by the minion itself,
	// so a compromised minion could claim any role. When false (the
	// default), bindings of a template whose patterns do so are refused
	// (reason ValidationFailed, violation UntrustedGrain).
	// +kubebuilder:default=false
	// +optional
	TrustMinionGrains bool `json:"trustMinionGrains,omitempty"`

	// interval is how often every binding is compared with Vault and drift
	// is handled (see driftDetection), a Go duration such as "1h" or "30m",
	// at least 1m: each binding costs three reads per interval.
	// +kubebuilder:default="1h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="interval must be at least 1m"
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`

	// deletionPolicy says what happens in Vault when a binding of this
	// template is deleted: Delete removes the minion's AppRole role and
	// identity entity, and the ACL policies written from policyDocuments
	// that no other binding uses; Retain leaves everything in Vault.
	// +kubebuilder:default=Delete
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// driftDetection says what happens when someone changes Vault after the
	// operator applied a binding's rendering: Correct rewrites Vault;
	// DetectOnly only reports the drift in the binding's conditions and
	// events. Either way a new binding, or a changed rendering, is written.
	// +kubebuilder:default=Correct
	// +optional
	DriftDetection DriftDetectionMode `json:"driftDetection,omitempty"`

	// adoptPolicies allows the operator to overwrite ACL policies named by
	// policyDocuments that exist in Vault but were not written by the
	// operator. When false (the default), such a policy is left alone and
	// the template reports PolicyNotOwned.
	// +kubebuilder:default=false
	// +optional
	AdoptPolicies bool `json:"adoptPolicies,omitempty"`

	// adoptMinions allows the operator to take over a minion's entity and
	// AppRole role that exist in Vault without its owner marker (made by a
	// Salt master, by hand, or by a minion's login): the marker is written
	// and from then on the objects are the binding's, deleted with it
	// under deletionPolicy Delete. When false (the default), such a binding
	// reports NotOwned and nothing is written. Objects marked for another
	// MinionBinding are never adopted.
	// +kubebuilder:default=false
	// +optional
	AdoptMinions bool `json:"adoptMinions,omitempty"`
}

// VaultConnectionReference names a VaultConnection.
type VaultConnectionReference struct {
	// name of the VaultConnection.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Name string `json:"name"`
}

// PoliciesSpec lists the policies assigned to a minion.
type PoliciesSpec struct {
	// assign are patterns of policy names, as saltext's policies:assign.
	// Variables: {minion}, {grains} (see trustMinionGrains), {pillar},
	// {mapdata}. Every rendered name is lowercased; order and duplicates are
	// kept. An empty list assigns no policies. (Go clients: set an empty,
	// non-nil slice; nil is sent as null and refused.)
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=1024
	// +listType=atomic
	// +required
	Assign []string `json:"assign"`
}

// MetadataSpec holds the templated metadata of a minion. Each list is merged
// into saltext's defaults like a Python dict update: a key already in the
// defaults replaces the default pattern in place, other keys are appended
// in list order. The order matters: it is the order of the rendered
// metadata.
//
// Variables in patterns: {minion}, {pillar}, {mapdata}, {jid}, {user}
// (grains are not visible). A missing key renders as "". A value that
// expands to several strings is rendered as the sorted, comma-joined list,
// and each string also gets its own key "<key>__0", "<key>__1", ... (usable
// in Vault ACL templates as {{identity.entity.metadata.<key>__0}}), unless
// another key of the same list starts with "<key>__".
type MetadataSpec struct {
	// entity maps metadata keys (literal) to value patterns. It is merged
	// into the default entity metadata {minion-id: "{minion}"} and written to the minion's
	// identity entity. Vault refuses more than 64 pairs (counting defaults
	// and generated "__N" keys) and keys over 128 characters.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) >= 1 && size(k) <= 128 && size(self[k]) <= 1024)",message="metadata keys must be 1 to 128 characters and patterns at most 1024"
	// +optional
	Entity map[string]string `json:"entity,omitempty"`

	// secret maps metadata keys (literal) to value patterns. It is merged
	// into the default secret metadata {saltstack-jid: "{jid}",
	// saltstack-minion: "{minion}", saltstack-user: "{user}"} and
	// attached to each secret ID and token issued to the minion. {jid} and
	// {user} are known only when a secret is issued ("<no jid set>" and
	// "<no user set>" otherwise).
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) >= 1 && size(k) <= 128 && size(self[k]) <= 1024)",message="metadata keys must be 1 to 128 characters and patterns at most 1024"
	// +optional
	Secret map[string]string `json:"secret,omitempty"`
}

// MinionAppRoleSpec configures the AppRole role written for each minion.
// Fields map to the Vault role parameters of the same name in snake_case.
// Durations are a number of seconds (60) or a string with unit s, m, h or
// d ("90s", "1h", "7d"). The operator sends them to Vault as integer
// seconds.
type MinionAppRoleSpec struct {
	// mount is the path of the AppRole auth method the roles are written
	// to, without the "auth/" prefix.
	// +kubebuilder:default="salt-minions"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)*$')",message="appRole.mount must be a Vault mount path such as salt-minions: letters, digits, '_', '.', '-', segments separated by single '/', no leading or trailing '/'"
	// +optional
	Mount string `json:"mount,omitempty"`

	// bindSecretID requires a secret ID to log in (bind_secret_id).
	// +kubebuilder:default=true
	// +optional
	BindSecretID *bool `json:"bindSecretID,omitempty"`

	// secretIDNumUses is how many logins one secret ID allows
	// (secret_id_num_uses); 0 means unlimited.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	SecretIDNumUses *int64 `json:"secretIDNumUses,omitempty"`

	// secretIDTTL is how long a secret ID stays valid (secret_id_ttl).
	// +kubebuilder:default=60
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+([.][0-9]+)?[smhd]?$')",message="a duration is a number of seconds or a number with unit s, m, h or d, such as 90s or 1h"
	// +optional
	SecretIDTTL *intstr.IntOrString `json:"secretIDTTL,omitempty"`

	// secretIDBoundCIDRs restricts the source addresses that may use a
	// secret ID (secret_id_bound_cidrs), as CIDR blocks.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=set
	// +optional
	SecretIDBoundCIDRs []string `json:"secretIDBoundCIDRs,omitempty"`

	// tokenTTL is the TTL of issued tokens (token_ttl). When omitted, Vault's
	// mount or system default applies.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+([.][0-9]+)?[smhd]?$')",message="a duration is a number of seconds or a number with unit s, m, h or d, such as 90s or 1h"
	// +optional
	TokenTTL *intstr.IntOrString `json:"tokenTTL,omitempty"`

	// tokenMaxTTL is the maximum lifetime of issued tokens including
	// renewals (token_max_ttl). When omitted, Vault's default applies.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+([.][0-9]+)?[smhd]?$')",message="a duration is a number of seconds or a number with unit s, m, h or d, such as 90s or 1h"
	// +optional
	TokenMaxTTL *intstr.IntOrString `json:"tokenMaxTTL,omitempty"`

	// tokenExplicitMaxTTL is a hard cap on the lifetime of issued tokens
	// (token_explicit_max_ttl).
	// +kubebuilder:default=60
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+([.][0-9]+)?[smhd]?$')",message="a duration is a number of seconds or a number with unit s, m, h or d, such as 90s or 1h"
	// +optional
	TokenExplicitMaxTTL *intstr.IntOrString `json:"tokenExplicitMaxTTL,omitempty"`

	// tokenNumUses is how many requests an issued token may make
	// (token_num_uses); 0 means unlimited.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	TokenNumUses *int64 `json:"tokenNumUses,omitempty"`

	// tokenPeriod makes issued tokens periodic with this renewal period
	// (token_period). When omitted, tokens are not periodic.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+([.][0-9]+)?[smhd]?$')",message="a duration is a number of seconds or a number with unit s, m, h or d, such as 90s or 1h"
	// +optional
	TokenPeriod *intstr.IntOrString `json:"tokenPeriod,omitempty"`

	// tokenBoundCIDRs restricts the source addresses that may use an issued
	// token (token_bound_cidrs), as CIDR blocks.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=set
	// +optional
	TokenBoundCIDRs []string `json:"tokenBoundCIDRs,omitempty"`

	// tokenType is the type of issued tokens (token_type): default, service
	// or batch. When omitted, Vault's default applies.
	// +optional
	TokenType TokenType `json:"tokenType,omitempty"`
}

// PolicyDocument is a Vault ACL policy written by the operator.
//
// Placeholders used in rules must also appear in name: the document is
// rendered once per rendered name, and the rules are rendered with the same
// values, so "salt_role_{pillar[roles]}" may use {pillar[roles]} in its
// paths. A rule placeholder missing from the name is refused, as two
// minions could otherwise render different rules for the same policy.
// Vault's own ACL templating ({{identity.entity.id}},
// {{identity.entity.metadata.<key>}}, {{identity.groups...}}) is written to
// Vault unchanged, not read as escaped braces.
type PolicyDocument struct {
	// name is the pattern of the policy name, with the variables of
	// policies.assign. Rendered names are lowercased, as Vault stores them;
	// "root" cannot be written.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.trim() == self && self.size() > 0",message="policy document name must not be empty or start or end with whitespace"
	// +kubebuilder:validation:XValidation:rule="self != 'root'",message="the root policy cannot be written"
	// +required
	Name string `json:"name"`

	// rules are the path stanzas of the policy, in order.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	// +required
	Rules []PolicyRule `json:"rules"`
}

// PolicyRule is one path stanza of a Vault ACL policy.
type PolicyRule struct {
	// path is the pattern of the Vault API path the rule applies to, with
	// Vault's glob ('*' at the end) and segment ('+') wildcards, for example
	// "salt/data/roles/{pillar[roles]}".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +required
	Path string `json:"path"`

	// capabilities granted (or, with deny, refused) on path.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	// +listType=set
	// +required
	Capabilities []PolicyCapability `json:"capabilities"`

	// requiredParameters must be present in requests (required_parameters).
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +listType=set
	// +optional
	RequiredParameters []string `json:"requiredParameters,omitempty"`

	// allowedParameters maps request parameter names to their allowed values
	// (allowed_parameters); an empty list allows any value, "*" any
	// parameter.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	AllowedParameters map[string]ParameterValues `json:"allowedParameters,omitempty"`

	// deniedParameters maps request parameter names to refused values
	// (denied_parameters); an empty list refuses any value.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	DeniedParameters map[string]ParameterValues `json:"deniedParameters,omitempty"`

	// minWrappingTTL is the minimum response-wrapping TTL requests must ask
	// for (min_wrapping_ttl), a number of seconds or a number with unit s,
	// m, h or d.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^[0-9]+[smhd]?$`
	// +optional
	MinWrappingTTL string `json:"minWrappingTTL,omitempty"`

	// maxWrappingTTL is the maximum response-wrapping TTL requests may ask
	// for (max_wrapping_ttl), a number of seconds or a number with unit s,
	// m, h or d.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^[0-9]+[smhd]?$`
	// +optional
	MaxWrappingTTL string `json:"maxWrappingTTL,omitempty"`
}

// ParameterValues are the values of one parameter in an ACL rule.
// +kubebuilder:validation:MaxItems=64
// +kubebuilder:validation:items:MaxLength=256
type ParameterValues []string

// ParametersSpec is a parameter stack in the style of the saltstack-formulas
// template-formula's map.jinja: layers of YAML files selected by the
// minion's grains, pillar and config are merged into "mapdata".
//
// Files are addressed by their path on the Salt fileserver: the global
// parameters/map_jinja.yaml, and <root>/parameters/defaults.yaml,
// <root>/parameters/map_jinja.yaml, <root>/parameters/<grain>/<value>.yaml,
// and so on.
type ParametersSpec struct {
	// root is the formula name ("tplroot"): layers are looked up under
	// <root>/parameters, and config and pillar settings under <root>.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.-]*$`
	// +required
	Root string `json:"root"`

	// files maps a fileserver path (relative, normalised, ending in ".yaml",
	// at most 512 characters; the operator checks this) to the YAML document
	// of that file, written as an object, or a string holding the file's
	// YAML text. Layer files hold their settings under a top-level "values"
	// key.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:MaxProperties=256
	// +optional
	Files map[string]ParameterFile `json:"files,omitempty"`

	// configMapRefs adds files from ConfigMaps: each data key of a ConfigMap
	// is a file name (ConfigMap keys cannot contain '/') placed in the
	// reference's directory, and its value is the YAML text of the file.
	// A path defined twice (by files or by another ConfigMap) is an error.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	ConfigMapRefs []ParameterConfigMapReference `json:"configMapRefs,omitempty"`
}

// ParameterConfigMapReference is a ConfigMap whose data keys are parameter
// files of one directory.
type ParameterConfigMapReference struct {
	ConfigMapReference `json:",inline"`

	// directory is the fileserver directory the ConfigMap's files are placed
	// in, for example "vault/parameters/os_family". Defaults to
	// "<root>/parameters".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*$`
	// +optional
	Directory string `json:"directory,omitempty"`
}

// EffectiveDirectory returns directory, or <root>/parameters.
func (p *ParametersSpec) EffectiveDirectory(ref ParameterConfigMapReference) string {
	if ref.Directory != "" {
		return ref.Directory
	}
	return p.Root + "/" + DefaultParametersSubdirName
}

// MinionTemplateStatus is the observed state of a MinionTemplate.
type MinionTemplateStatus struct {
	// observedGeneration is the metadata.generation last processed.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready is True when the template is valid and its
	// connection is Ready; Reconciling and Stalled follow kstatus.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// bindings is the number of MinionBindings that refer to this template.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Bindings int32 `json:"bindings"`

	// policies counts the ACL policies the operator keeps in Vault for this
	// template's policyDocuments. The names are not listed here, because a
	// template with a policy per minion has as many as it has bindings:
	// each binding's status.policyDocuments names its own, and every policy
	// carries an ownership header naming the template.
	// +optional
	Policies *PolicySummary `json:"policies,omitempty"`

	// lastHandledReconcileAt is the last value of the
	// reconcile.minionvault.dev/requestedAt annotation that was handled.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
}

// PolicySummary describes a set of ACL policy names without listing them.
type PolicySummary struct {
	// count is the number of policies.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Count int64 `json:"count"`

	// digest is a hash of the set of names, independent of their order
	// (the XOR of the SHA-256 of each name, first 16 bytes in hex): equal
	// digests mean equal sets.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Digest string `json:"digest,omitempty"`

	// contentDigest is a hash of the policies' names and bodies as last
	// confirmed in Vault (the XOR of the SHA-256 of each name and body,
	// first 16 bytes in hex). A new operator process that renders the
	// same digest, and finds every name in Vault's list, takes the
	// policies as confirmed and compares them with Vault over the next
	// interval instead of all at its start.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	ContentDigest string `json:"contentDigest,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=mt,categories=minionvault
// +kubebuilder:printcolumn:name="Connection",type=string,JSONPath=`.spec.connectionRef.name`
// +kubebuilder:printcolumn:name="Bindings",type=integer,JSONPath=`.status.bindings`
// +kubebuilder:printcolumn:name="Policies",type=integer,JSONPath=`.status.policies.count`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// MinionTemplate says how Salt minions are represented in Vault: the
// policies assigned to them, their identity metadata, their Vault pillar
// paths, their AppRole role settings, the ACL policies written for them, and
// the guard rails that limit what MinionBindings may obtain.
type MinionTemplate struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired template.
	//
	// Fields described as patterns are templates in Python str.format syntax,
	// rendered per minion as saltext-vault does: {minion} is the minion ID,
	// {pillar[key]} and {grains[key]} read the binding's pillar and grains
	// (nest with {pillar[a][b]}; "a:b" is a literal key, not a path),
	// {mapdata[key]} reads the result of spec.parameters, and {{ and }} are
	// literal braces. A field whose value is a list or a mapping expands the
	// pattern once per element (mapping: per key): "salt_role_{pillar[roles]}"
	// with roles [web, db] gives salt_role_web and salt_role_db. A pattern
	// that refers to a missing key yields nothing.
	// +required
	Spec MinionTemplateSpec `json:"spec"`

	// status is the observed state of the template. A new object starts
	// with observedGeneration -1, so that kstatus sees it in progress.
	// +kubebuilder:default={observedGeneration:-1}
	// +optional
	Status MinionTemplateStatus `json:"status,omitzero"`
}

// GetConditions returns the status conditions.
func (in *MinionTemplate) GetConditions() []metav1.Condition {
	return in.Status.Conditions
}

// SetConditions replaces the status conditions.
func (in *MinionTemplate) SetConditions(conditions []metav1.Condition) {
	in.Status.Conditions = conditions
}

// EffectiveAppRoleMount returns spec.appRole.mount, or its default.
func (s *MinionTemplateSpec) EffectiveAppRoleMount() string {
	if s.AppRole == nil || s.AppRole.Mount == "" {
		return DefaultMinionAppRoleMount
	}
	return s.AppRole.Mount
}

// EffectiveAppRole returns a copy of spec.appRole with every field that has
// a default filled in (fields without a default stay empty).
func (s *MinionTemplateSpec) EffectiveAppRole() MinionAppRoleSpec {
	var r MinionAppRoleSpec
	if s.AppRole != nil {
		s.AppRole.DeepCopyInto(&r)
	}
	if r.Mount == "" {
		r.Mount = DefaultMinionAppRoleMount
	}
	if r.BindSecretID == nil {
		v := DefaultBindSecretID
		r.BindSecretID = &v
	}
	if r.SecretIDNumUses == nil {
		v := DefaultSecretIDNumUses
		r.SecretIDNumUses = &v
	}
	if r.SecretIDTTL == nil {
		v := intstr.FromInt32(DefaultSecretIDTTLSeconds)
		r.SecretIDTTL = &v
	}
	if r.TokenExplicitMaxTTL == nil {
		v := intstr.FromInt32(DefaultTokenExplicitMaxTTLSeconds)
		r.TokenExplicitMaxTTL = &v
	}
	if r.TokenNumUses == nil {
		v := DefaultTokenNumUses
		r.TokenNumUses = &v
	}
	return r
}

// EffectiveEntityName returns spec.entityName, or its default pattern.
func (s *MinionTemplateSpec) EffectiveEntityName() string {
	if s.EntityName == "" {
		return DefaultEntityNamePattern
	}
	return s.EntityName
}

// EffectiveInterval returns spec.interval, or its default.
func (s *MinionTemplateSpec) EffectiveInterval() time.Duration {
	if s.Interval != nil && s.Interval.Duration > 0 {
		return s.Interval.Duration
	}
	return DefaultTemplateInterval
}

// EffectiveDeletionPolicy returns spec.deletionPolicy, or Delete.
func (s *MinionTemplateSpec) EffectiveDeletionPolicy() DeletionPolicy {
	if s.DeletionPolicy == "" {
		return DeletionPolicyDelete
	}
	return s.DeletionPolicy
}

// EffectiveDriftDetection returns spec.driftDetection, or Correct.
func (s *MinionTemplateSpec) EffectiveDriftDetection() DriftDetectionMode {
	if s.DriftDetection == "" {
		return DriftDetectionCorrect
	}
	return s.DriftDetection
}

// +kubebuilder:object:root=true

// MinionTemplateList is a list of MinionTemplates.
type MinionTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MinionTemplate `json:"items"`
}
