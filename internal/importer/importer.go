// Package importer converts a Salt master's Vault setup (the saltext-vault
// "vault:" configuration, legacy shapes included, and the vault ext_pillar
// entries) into a VaultConnection and a MinionTemplate, and the minions'
// cached grains and pillar (`salt-run cache.grains --out=json`,
// `salt-run cache.pillar --out=json`) into MinionBindings.
//
// It is a pure conversion: bytes in, ordered YAML documents out. Nothing is
// read from or written to Vault or Kubernetes, and no credential of the
// master's configuration is ever copied.
package importer

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// Defaults of Options.
const (
	DefaultTemplateName = "salt-minions"
	DefaultNamespace    = "default"
	DefaultConnection   = "vault"
)

// Placeholder credentials of the VaultConnection: the Secret the sample
// connection uses. The user fills them in.
const (
	placeholderSecret    = "vault-token"
	placeholderSecretNS  = "minion-vault-system"
	maxBindingJSONLength = 1 << 20
)

// Options name the objects written and select the minion data kept.
type Options struct {
	TemplateName string // MinionTemplate name; DefaultTemplateName when empty
	Namespace    string // namespace of the MinionBindings; DefaultNamespace when empty
	Connection   string // VaultConnection name; DefaultConnection when empty
	// AllGrains keeps every grain; by default only id and the grains the
	// template's patterns read are kept.
	AllGrains bool
	// AllPillar keeps the whole pillar; by default only the top-level keys
	// the template's patterns read are kept (pillar often holds secrets).
	AllPillar bool
}

func (o Options) withDefaults() (Options, error) {
	if o.TemplateName == "" {
		o.TemplateName = DefaultTemplateName
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Connection == "" {
		o.Connection = DefaultConnection
	}
	if errs := validation.IsDNS1123Subdomain(o.TemplateName); len(errs) > 0 {
		return o, fmt.Errorf("template name %q: %s", o.TemplateName, errs[0])
	}
	if errs := validation.IsDNS1123Subdomain(o.Connection); len(errs) > 0 {
		return o, fmt.Errorf("connection name %q: %s", o.Connection, errs[0])
	}
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return o, fmt.Errorf("namespace %q: %s", o.Namespace, errs[0])
	}
	return o, nil
}

// Input is what is imported. Grains and Pillar are optional.
type Input struct {
	Config []File
	Grains *File
	Pillar *File
}

// Document is one manifest of the output.
type Document struct {
	Kind     string
	Name     string
	MinionID string // MinionBindings only
	Value    value.Value
	// Comments: above the document, and above keys (by key path, such as
	// "spec.auth").
	Comment     string
	KeyComments map[string]string
}

// Output is the result of an import.
type Output struct {
	Config    *Config
	Documents []Document // VaultConnection (when the URL is known), MinionTemplate, MinionBindings by minion ID
	Warnings  []string   // the config's warnings, then the minions'
}

// Import converts in.
func Import(in Input, opts Options) (*Output, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(in.Config...)
	if err != nil {
		return nil, err
	}
	out := &Output{Config: cfg, Warnings: slices.Clone(cfg.Warnings)}
	warnf := func(format string, args ...any) { out.Warnings = append(out.Warnings, fmt.Sprintf(format, args...)) }

	var grains, pillar MinionData
	for _, src := range []struct {
		what string
		f    *File
		dst  *MinionData
	}{{"grains", in.Grains, &grains}, {"pillar", in.Pillar, &pillar}} {
		if src.f == nil {
			continue
		}
		data, ws, err := ParseMinionData(src.what, src.f.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src.f.Name, err)
		}
		*src.dst = data
		out.Warnings = append(out.Warnings, ws...)
	}

	if cfg.ServerURL != "" {
		out.Documents = append(out.Documents, connectionDoc(cfg, opts))
	}
	untrusted := cfg.untrustedGrains()
	if len(untrusted) > 0 {
		warnf("policies use minion-controlled grains ({%s}): trustMinionGrains is set to true to keep Salt's behaviour; a compromised minion can claim these grains, prefer pillar", strings.Join(untrusted, "}, {"))
	}
	out.Documents = append(out.Documents, templateDoc(cfg, opts, len(untrusted) > 0))

	// Minions: everything with grains or pillar, sorted by ID.
	grainsByID, pillarByID := grains.byID(), pillar.byID()
	var ids []string
	for _, m := range []map[string]value.Value{grainsByID, pillarByID} {
		for id := range m {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	valid := ids[:0]
	for _, id := range ids {
		if !validMinionID(id) {
			warnf("minion %q: not a valid minionID (1 to 253 characters, no '/' or whitespace, not . or ..): skipped", id)
			continue
		}
		valid = append(valid, id)
	}
	ids = valid
	names, err := bindingNames(ids)
	if err != nil {
		return nil, err
	}
	grainRefs, pillarRefs := cfg.grainRefs(), cfg.pillarRefs()
	grainRefs.add("id")
	usesPillar := pillarRefs.all || len(pillarRefs.keys) > 0
	if usesPillar && in.Pillar == nil && len(ids) > 0 {
		warnf("no pillar given while the template reads pillar: the bindings have none (export it with salt-run cache.pillar --out=json)")
	}
	for _, id := range ids {
		b := bindingDoc{id: id, name: names[id], opts: opts}
		if g, ok := grainsByID[id]; ok {
			if !opts.AllGrains {
				g = grainRefs.filter(g)
			}
			b.grains = &g
		} else if in.Grains != nil {
			warnf("minion %q has no grains: rendered with {id: %s}, as Salt does without cached grains", id, id)
		}
		if p, ok := pillarByID[id]; ok {
			if !opts.AllPillar {
				p = pillarRefs.filter(p)
			}
			if p.Len() > 0 || opts.AllPillar {
				b.pillar = &p
			}
		} else if usesPillar && in.Pillar != nil {
			warnf("minion %q has no pillar data: rendered with an empty pillar (Salt would compile the pillar)", id)
		}
		doc := b.document()
		if n := len(doc.Value.AppendJSON(nil)); n > maxBindingJSONLength {
			warnf("minion %q: the binding is %d bytes, too large for the API server; use the default grain and pillar selection", id, n)
		}
		out.Documents = append(out.Documents, doc)
	}
	return out, nil
}

func pair(k string, v value.Value) value.Pair { return value.Pair{Key: value.NewString(k), Val: v} }

func str(s string) value.Value { return value.NewString(s) }

func header(kind, name string, meta ...value.Pair) []value.Pair {
	md := append([]value.Pair{pair("name", str(name))}, meta...)
	return []value.Pair{
		pair("apiVersion", str(v1alpha1.GroupVersion.String())),
		pair("kind", str(kind)),
		pair("metadata", value.NewMap(md)),
	}
}

func connectionDoc(cfg *Config, opts Options) Document {
	spec := []value.Pair{pair("address", str(cfg.ServerURL))}
	if cfg.ServerNamespace != "" {
		spec = append(spec, pair("namespace", str(cfg.ServerNamespace)))
	}
	spec = append(spec, pair("auth", value.NewMap([]value.Pair{
		pair("token", value.NewMap([]value.Pair{
			pair("secretRef", value.NewStringMap("name", placeholderSecret, "namespace", placeholderSecretNS, "key", v1alpha1.DefaultTokenSecretKey)),
		})),
	})))
	method := cfg.AuthMethod
	if method == "" {
		method = "token"
	}
	return Document{
		Kind: "VaultConnection",
		Name: opts.Connection,
		Value: value.NewMap(append(header("VaultConnection", opts.Connection),
			pair("spec", value.NewMap(spec)))),
		Comment: "Converted from the Salt master's vault:server settings by `minionvault import`.",
		KeyComments: map[string]string{
			"spec.auth": fmt.Sprintf("FILL IN: the operator's own login to Vault (it needs only config/vault/operator-policy.hcl).\n"+
				"The master logged in with %s auth; its credentials are never copied. Either create the\n"+
				"Secret below (kubectl -n %s create secret generic %s --from-literal=token=...)\n"+
				"or replace token with kubernetes or appRole.", method, placeholderSecretNS, placeholderSecret),
		},
	}
}

func templateDoc(cfg *Config, opts Options, trustGrains bool) Document {
	spec := []value.Pair{pair("connectionRef", value.NewStringMap("name", opts.Connection))}
	comments := map[string]string{}
	if cfg.Policies != nil {
		spec = append(spec, pair("policies", value.NewMap([]value.Pair{pair("assign", strList(cfg.Policies))})))
	}
	var md []value.Pair
	if cfg.EntityMetadata != nil {
		md = append(md, pair("entity", kvMap(cfg.EntityMetadata)))
	}
	if cfg.SecretMetadata != nil {
		md = append(md, pair("secret", kvMap(cfg.SecretMetadata)))
	}
	if md != nil {
		spec = append(spec, pair("metadata", value.NewMap(md)))
	}
	if cfg.PillarPaths != nil {
		spec = append(spec, pair("pillarPaths", strList(cfg.PillarPaths)))
		comments["spec.pillarPaths"] = "From the vault ext_pillar entries (path=...)."
	}
	if cfg.AppRole != nil {
		spec = append(spec, pair("appRole", appRoleMap(cfg.AppRole)))
	}
	// The master made the minions' entities and roles: without their
	// owner marker the operator would refuse them (NotOwned).
	spec = append(spec, pair("adoptMinions", value.NewBool(true)))
	comments["spec.adoptMinions"] = "The Salt master's entities and AppRoles of these minions are taken over at cut-over.\n" +
		"Remove it once every binding is Ready: later objects made outside the operator are then refused."
	if trustGrains {
		spec = append(spec, pair("trustMinionGrains", value.NewBool(true)))
		comments["spec.trustMinionGrains"] = "Salt's policies:assign reads minion-controlled grains; the operator refuses that\n" +
			"unless trusted. Prefer pillar (set by the master) and remove this."
	}
	return Document{
		Kind:  "MinionTemplate",
		Name:  opts.TemplateName,
		Value: value.NewMap(append(header("MinionTemplate", opts.TemplateName), pair("spec", value.NewMap(spec)))),
		Comment: "Converted from the Salt master's vault: configuration by `minionvault import`.\n" +
			"Omitted fields take saltext-vault's defaults (policies, metadata, AppRole parameters).",
		KeyComments: comments,
	}
}

func strList(ss []string) value.Value {
	items := make([]value.Value, len(ss))
	for i, s := range ss {
		items[i] = str(s)
	}
	return value.NewList(items)
}

func kvMap(kvs []KV) value.Value {
	pairs := make([]value.Pair, len(kvs))
	for i, kv := range kvs {
		pairs[i] = pair(kv.Key, str(kv.Pattern))
	}
	return value.NewMap(pairs)
}

func appRoleMap(a *v1alpha1.MinionAppRoleSpec) value.Value {
	var pairs []value.Pair
	if a.Mount != "" {
		pairs = append(pairs, pair("mount", str(a.Mount)))
	}
	if a.BindSecretID != nil {
		pairs = append(pairs, pair("bindSecretID", value.NewBool(*a.BindSecretID)))
	}
	if a.SecretIDNumUses != nil {
		pairs = append(pairs, pair("secretIDNumUses", value.NewInt(*a.SecretIDNumUses)))
	}
	ttl := func(name string, t *intstr.IntOrString) {
		if t == nil {
			return
		}
		if t.Type == intstr.Int {
			pairs = append(pairs, pair(name, value.NewInt(int64(t.IntVal))))
		} else {
			pairs = append(pairs, pair(name, str(t.StrVal)))
		}
	}
	ttl("secretIDTTL", a.SecretIDTTL)
	if a.SecretIDBoundCIDRs != nil {
		pairs = append(pairs, pair("secretIDBoundCIDRs", strList(a.SecretIDBoundCIDRs)))
	}
	ttl("tokenTTL", a.TokenTTL)
	ttl("tokenMaxTTL", a.TokenMaxTTL)
	ttl("tokenExplicitMaxTTL", a.TokenExplicitMaxTTL)
	if a.TokenNumUses != nil {
		pairs = append(pairs, pair("tokenNumUses", value.NewInt(*a.TokenNumUses)))
	}
	ttl("tokenPeriod", a.TokenPeriod)
	if a.TokenBoundCIDRs != nil {
		pairs = append(pairs, pair("tokenBoundCIDRs", strList(a.TokenBoundCIDRs)))
	}
	return value.NewMap(pairs)
}

type bindingDoc struct {
	id, name       string
	opts           Options
	grains, pillar *value.Value
}

func (b bindingDoc) document() Document {
	spec := []value.Pair{
		pair("minionID", str(b.id)),
		pair("templateRef", value.NewStringMap("name", b.opts.TemplateName)),
	}
	if b.grains != nil {
		spec = append(spec, pair("grains", *b.grains))
	}
	if b.pillar != nil {
		spec = append(spec, pair("pillar", *b.pillar))
	}
	return Document{
		Kind:     "MinionBinding",
		Name:     b.name,
		MinionID: b.id,
		Value:    value.NewMap(append(header("MinionBinding", b.name, pair("namespace", str(b.opts.Namespace))), pair("spec", value.NewMap(spec)))),
	}
}

// WriteYAML writes the documents as one YAML stream, separated by ---.
// Strings that YAML 1.1 (Salt's and the project's reader) would read as
// another type are quoted; floats keep their decimal point.
func (o *Output) WriteYAML(w io.Writer) error {
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	for _, d := range o.Documents {
		n := d.Value.ToYAMLNode()
		quoteAmbiguous(n)
		n.HeadComment = d.Comment
		for path, c := range d.KeyComments {
			if k := findKey(n, path); k != nil {
				k.HeadComment = c
			}
		}
		if err := enc.Encode(n); err != nil {
			return err
		}
	}
	return enc.Close()
}

// findKey returns the key node at a dotted path of mapping keys.
func findKey(n *yaml.Node, path string) *yaml.Node {
	var key *yaml.Node
	for _, part := range strings.Split(path, ".") {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == part {
				key, next = n.Content[i], n.Content[i+1]
				break
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return key
}

// quoteAmbiguous double-quotes plain string scalars that some YAML reader
// might take for another type. ToYAMLNode already quotes what YAML 1.1
// (PyYAML, the project's reader) would; kubectl reads YAML with other
// rules (yaml.v2: y/n are booleans, 1e5 is a number, 2001-12-14 a
// timestamp), and a pillar value must reach the cluster as the string it
// is. Quoting a string is never wrong, so anything starting like a number
// and every boolean or null spelling is quoted.
func quoteAmbiguous(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && n.Style == 0 && ambiguous(n.Value) {
		n.Style = yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		quoteAmbiguous(c)
	}
}

func ambiguous(s string) bool {
	switch strings.ToLower(s) {
	case "", "~", "null", "y", "n", "yes", "no", "on", "off", "true", "false", ".inf", "-.inf", "+.inf", ".nan":
		return true
	}
	t := strings.TrimLeft(s, "+-")
	if t == "" {
		return false
	}
	if c := t[0]; c >= '0' && c <= '9' {
		return true
	}
	return len(t) > 1 && t[0] == '.' && t[1] >= '0' && t[1] <= '9'
}
