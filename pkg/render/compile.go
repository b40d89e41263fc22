package render

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/minionvault/minion-vault-operator/pkg/acl"
	"github.com/minionvault/minion-vault-operator/pkg/parameters"
	"github.com/minionvault/minion-vault-operator/pkg/template"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// Compiled is a template with its patterns parsed, ready to render many
// bindings. It is immutable and safe for concurrent use.
type Compiled struct {
	t          Template
	places     template.Places
	entityName *template.Pattern
	docs       []compiledDoc
	appRole    []Param // everything but token_policies
	// problems are template errors found while compiling; every binding
	// of the template reports them.
	problems []Violation
	// files are the parameter files, text files decoded.
	files map[string]value.Value
	// err fails every render: a parameter file that is not YAML.
	err error
	// stack computes the parameter stack (mapdata) when the template has one.
	stack *parameters.Memo
}

// compiledDoc renders a policy document's name and rule paths as one
// pattern, joined by docSep: the same field is then substituted with the
// same element everywhere, so each concrete name gets the paths that belong
// to it.
type compiledDoc struct {
	joint *template.Pattern
	rules int
	// bodies caches the HCL of each substituted text of joint: many
	// bindings render the same policy text.
	bodies *bodyCache
}

// bodyCache maps a document's substituted text to its canonical HCL and
// what Vault would say of it. It is bounded: past maxBodies texts, bodies
// are rendered (and parsed) without being kept.
type bodyCache struct {
	m sync.Map // string -> renderedBody
	n atomic.Int64
}

// renderedBody is one canonical body and, when Vault would refuse it, why
// (acl.Parse: what a write of Vault 1.21 and later refuses).
type renderedBody struct {
	hcl     string
	refusal string
}

const maxBodies = 4096

func (c *bodyCache) get(text string, render func() string) renderedBody {
	if v, ok := c.m.Load(text); ok {
		return v.(renderedBody)
	}
	b := renderedBody{hcl: render()}
	b.refusal = bodyRefusal(b.hcl)
	if c.n.Load() < maxBodies {
		if _, loaded := c.m.LoadOrStore(text, b); !loaded {
			c.n.Add(1)
		}
	}
	return b
}

// bodyRefusal is why Vault would refuse a rendered body, "" when it would
// take it: the body goes through the parser the access audit evaluates
// with (pkg/acl), which refuses what a write to Vault 1.21 and later
// refuses, duplicate attributes included (Vault 2.1 refuses them
// whatever its environment says). The canonical writer cannot produce a
// duplicate; the check keeps it so.
func bodyRefusal(hcl string) string {
	if _, err := acl.Parse("", hcl); err != nil {
		return err.Error()
	}
	return ""
}

const docSep = "\x00"

// vaultTemplate matches Vault's own ACL templating, which must reach Vault
// untouched: {{identity.entity.metadata.roles__0}}.
var vaultTemplate = regexp.MustCompile(`\{\{(identity\.[^{}]*)\}\}`)

// Compile parses every pattern of t once. Problems a template has whatever
// the binding (a rule field missing from the name, a bad TTL) are kept and
// reported by Validate.
func Compile(t Template) *Compiled {
	c := &Compiled{t: t}
	policies := t.Policies
	if policies == nil {
		policies = DefaultPolicies
	}
	for _, p := range policies {
		c.places.Policies = append(c.places.Policies, template.Compile(p))
	}
	for _, kv := range mergeMetadata(DefaultEntityMetadata, t.EntityMetadata) {
		c.places.Entity = append(c.places.Entity, template.MetaEntry{Key: kv.Key, Pattern: template.Compile(kv.Value)})
	}
	for _, kv := range mergeMetadata(DefaultSecretMetadata, t.SecretMetadata) {
		c.places.Secret = append(c.places.Secret, template.MetaEntry{Key: kv.Key, Pattern: template.Compile(kv.Value)})
	}
	for _, p := range t.PillarPaths {
		c.places.PillarPaths = append(c.places.PillarPaths, template.Compile(p))
	}
	name := t.EntityName
	if name == "" {
		name = DefaultEntityName
	}
	c.entityName = template.Compile(name)

	for i, d := range t.PolicyDocuments {
		c.docs = append(c.docs, c.compileDoc(i, d))
	}
	if t.Parameters != nil {
		c.files, c.err = decodeFiles(t.Parameters.Files)
		if c.err == nil {
			c.stack = parameters.NewMemo(t.Parameters.Root, c.files)
		}
	}
	params, err := appRoleParams(t.AppRole)
	if err != nil {
		c.problems = append(c.problems, Violation{Reason: ReasonInvalidTemplate, Field: "appRole", Message: err.Error()})
	}
	c.appRole = params
	return c
}

func (c *Compiled) compileDoc(i int, d PolicyDocument) compiledDoc {
	field := fmt.Sprintf("policyDocuments[%d]", i)
	nameFields := map[string]bool{}
	for _, f := range template.Compile(d.Name).Fields() {
		nameFields[f] = true
	}
	parts := []string{d.Name}
	for j, r := range d.Rules {
		path := vaultTemplate.ReplaceAllString(r.Path, "{{{{$1}}}}")
		for _, f := range template.Compile(path).Fields() {
			if !nameFields[f] {
				c.problems = append(c.problems, Violation{
					Reason: ReasonInvalidTemplate, Field: fmt.Sprintf("%s.rules[%d].path", field, j),
					Message: fmt.Sprintf("{%s} is used in the rule path but not in the name %q: one policy name must always have one body", f, d.Name),
				})
			}
		}
		parts = append(parts, path)
	}
	return compiledDoc{joint: template.Compile(strings.Join(parts, docSep)), rules: len(d.Rules), bodies: &bodyCache{}}
}

// decodeFiles parses the files given as YAML text (a string document).
func decodeFiles(files map[string]value.Value) (map[string]value.Value, error) {
	out := make(map[string]value.Value, len(files))
	for name, v := range files {
		if v.IsString() {
			doc, err := value.DecodeYAML([]byte(v.Str()))
			if err != nil {
				return nil, fmt.Errorf("parameter file %q: %w", name, err)
			}
			v = doc
		}
		out[name] = v
	}
	return out, nil
}

// Template returns the template the Compiled was made from.
func (c *Compiled) Template() *Template { return &c.t }

// AppRoleParams are the AppRole role parameters every binding of the
// template writes, token_policies aside, in the fixed order of Result.
func (c *Compiled) AppRoleParams() []Param { return slices.Clone(c.appRole) }

// Problems are the template's own errors (an invalid pattern or TTL), found
// while compiling: every binding of the template is refused with them.
func (c *Compiled) Problems() []Violation { return append([]Violation(nil), c.problems...) }
