package audit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/internal/manifest"
	"github.com/minionvault/minion-vault-operator/pkg/acl"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/template"
)

// Fleet is what the audit reads: every minion the manifests bind, as the
// operator would render it, and every policy document the templates render
// or the policy files hold (Load); or every role of a minion mount as
// Vault holds it now, and Vault's policies (LoadOnline).
type Fleet struct {
	minions []*Minion // by minion ID
	byID    map[string]*Minion
	docs    map[string]string
	ev      *acl.Evaluator
	// warnings are what the audit cannot see or had to assume.
	warnings []string
	// leftOut are the bindings the gate did not admit (each also has its
	// warning): audit diff says them up front and fails on them.
	leftOut []LeftOut
	// bindings counts the MinionBindings the manifests hold, admitted or
	// not: a fleet of none is an error (nothing to audit).
	bindings int
	// rules are the Vault version's whose rules apply, and where the
	// version comes from.
	rules VaultRules
	// Online only: the minion mount's and the token mount's accessors,
	// the client that read the fleet, and Vault's policy names (sanitised
	// name to name as listed).
	accessor, tokenAccessor string
	client                  *vaultapi.Client
	policyNames             map[string]string
	// docsMu guards docs and extraDocs when audit drift reads more
	// policies (policyText); extraDocs are those, nil for one Vault lacks.
	docsMu    sync.Mutex
	extraDocs map[string]*string
}

// Minion is one minion of a fleet: its token policies, entity and alias
// as Vault holds them after its next login (offline) or now (online).
type Minion struct {
	id, binding, template, role string
	// roles is the entity metadata "roles" (comma-joined by the operator).
	metadata map[string]string
	subject  acl.Subject
	prep     *acl.Prepared
	// unprepared (audit diff) keeps the rendered parts of the subject
	// instead of subject and metadata: a fraction of the memory of the
	// maps, which Fleet.prepared makes for the moment of a comparison.
	unprepared *unpreparedMinion
	// pillarPaths are the predicted pillar paths (offline only).
	pillarPaths []string
	// Online only: the role ID, and the entity as Vault holds it (nil when
	// there is none yet), its alias metadata as the last login left it.
	roleID string
	live   *acl.Entity
	// groupIDs are the entity's groups, direct then inherited, until
	// their reads fill subject.Groups.
	groupIDs []string
}

// LeftOut is a binding of the manifests that the fleet leaves out, and
// why: the operator would refuse it (Stalled: it can never succeed as
// written) or leave it waiting (for a template that is not among the
// manifests). Either way its minion gets no token from it.
type LeftOut struct {
	Binding string `json:"binding"`
	Minion  string `json:"minion"`
	// Kind is "refused" or "waiting".
	Kind string `json:"kind"`
	// Reason is the condition reason the binding would get
	// (ConflictingPolicyBody, DuplicateMinionID, TemplateNotFound, ...).
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// OnBase (audit diff) is set when the base leaves the binding out
	// too.
	OnBase bool `json:"onBase,omitempty"`
	// warning is the fleet's warning saying the same.
	warning string
	// said: another warning says it (its template's), it has none.
	said bool
}

// The kinds of LeftOut.
const (
	Refused = "refused"
	Waiting = "waiting"
)

// Options say how a fleet of manifests is evaluated.
type Options struct {
	// VaultVersion is the Vault version whose rules apply
	// (acl.ModeForVersion), as --vault-version gives it; "" is the
	// default, the newest version the project tests.
	VaultVersion string
	// Accessor is the mount accessor of the minions' AppRole mount, for
	// {{identity.entity.aliases.<accessor>...}}.
	Accessor string
}

type loadOptions struct {
	Options
	// rules, when set, are the rules to apply instead of VaultVersion's
	// (audit drift: the online fleet's).
	rules *VaultRules
	// vault (audit drift): the online fleet, whose Vault has the policies
	// for those the
	// minions name that are neither rendered nor a file, and for default.
	vault *Fleet
	// manifests, when set, parses a file content once for several fleets.
	manifests *manifest.Cache
	// unprepared leaves every minion's prep nil (audit diff prepares each
	// minion while it compares it and lets it go).
	unprepared bool
	// shared, with unprepared, lets fleets read side by side share the
	// parts of a minion that render the same on both.
	shared *sharedMinions
}

// Load reads the fleet of the manifests in paths (files or folders, as
// plan reads them) and of the *.hcl policy files beside them. A policy
// file is named by its file name without .hcl, or by a first line
// "# policy: NAME" (for names with a "/").
func Load(paths []string, o Options) (*Fleet, error) {
	return loadFleet(paths, loadOptions{Options: o})
}

// LoadDiff reads the fleets of two sets of manifests for Diff, side by
// side: a file the same on both is parsed once, and a minion's rendered
// parts are kept once where both sides render it alike. The minions are
// left unprepared: Diff prepares each one while it compares it, never all
// at once.
func LoadDiff(base, head []string, o Options) (*Fleet, *Fleet, error) {
	lo := loadOptions{Options: o, manifests: manifest.NewCache(2), unprepared: true, shared: newSharedMinions(2)}
	var bf *Fleet
	var berr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		bf, berr = loadFleet(base, lo)
	}()
	hf, herr := loadFleet(head, lo)
	<-done
	if berr != nil {
		return nil, nil, fmt.Errorf("base: %w", berr)
	}
	if herr != nil {
		return nil, nil, fmt.Errorf("head: %w", herr)
	}
	return bf, hf, nil
}

// LoadForDrift reads the fleet of the manifests in paths to compare with
// online (Drift): with the rules of its Vault version, its minion mount's
// accessor, and Vault's text of the policies that are neither rendered nor
// a file.
func LoadForDrift(paths []string, online *Fleet) (*Fleet, error) {
	return loadFleet(paths, loadOptions{Options: Options{Accessor: online.accessor}, rules: &online.rules, vault: online})
}

// maxMissingNamed is how many absent policies get a warning each; more are
// said in one warning.
const maxMissingNamed = 5

// loadFleet admits and renders the bindings of the manifests in paths
// through the operator's admission gate, then prepares the minions with
// the policy documents.
func loadFleet(paths []string, o loadOptions) (*Fleet, error) {
	var rules VaultRules
	if o.rules != nil {
		rules = *o.rules
	} else {
		var err error
		if rules, err = vaultRules(o.VaultVersion, VersionFromFlag); err != nil {
			return nil, err
		}
	}
	in, err := manifest.ReadSet(paths, o.manifests)
	if err != nil {
		return nil, err
	}
	files, err := policyFiles(paths)
	if err != nil {
		return nil, err
	}
	f := &Fleet{byID: map[string]*Minion{}, docs: map[string]string{}, rules: rules}
	if w := rules.untestedWarning(); w != "" && o.rules == nil {
		// (audit drift: the online fleet says it)
		f.warnings = append(f.warnings, w)
	}
	if err := f.addPolicyFiles(files, o.vault); err != nil {
		return nil, err
	}
	f.bindings = len(in.Bindings)
	if err := f.admit(in, files, o); err != nil {
		return nil, err
	}
	if o.vault != nil {
		if err := f.addVaultDocs(o.vault); err != nil {
			return nil, err
		}
	}
	f.ev, err = acl.New(f.docs, acl.Options{Mode: rules.mode})
	if err != nil {
		return nil, err
	}
	f.prepare()
	slices.SortFunc(f.minions, func(a, b *Minion) int { return strings.Compare(a.id, b.id) })
	return f, nil
}

// addPolicyFiles takes the policy files' texts, and the default policy
// from Vault or as Vault ships it when no file holds it.
func (f *Fleet) addPolicyFiles(files map[string]string, vault *Fleet) error {
	for name, text := range files {
		f.docs[name] = text
	}
	if vault != nil && f.docs["default"] == "" {
		text, ok, err := vault.policyText(context.Background(), "default")
		if err != nil {
			return err
		}
		if ok {
			f.docs["default"] = text
			f.warnings = append(f.warnings, "policy \"default\" is Vault's text (no default.hcl among the files)")
		}
	}
	if _, ok := f.docs["default"]; !ok {
		f.docs["default"] = acl.DefaultPolicy
		f.warnings = append(f.warnings, "policy \"default\" is the text Vault ships (the same from 1.15.6 to 1.21.4; no default.hcl among the files): an edited default policy is not seen")
	}
	return nil
}

// leave records a binding left out, with its warning (why, in the words
// of l.warning when set, else its message).
func (f *Fleet) leave(l LeftOut) {
	why := l.Message
	if l.warning != "" {
		why = l.warning
	}
	l.warning = fmt.Sprintf("MinionBinding %s is left out: %s", l.Binding, why)
	f.warnings = append(f.warnings, l.warning)
	f.leftOut = append(f.leftOut, l)
}

// admit passes every binding through the admission gate
// (admission.Admit, as the operator and plan do), template by template,
// and adds the admitted ones with their policy documents; then the
// bindings of templates not among the manifests, which the gate has wait
// for them, said after the templates' warnings, where the audit has
// always said them. A template that does not compile leaves its bindings
// out (the gate refuses them), with one warning.
func (f *Fleet) admit(in *manifest.Set, files map[string]string, o loadOptions) error {
	ctx := context.Background()
	facts := manifest.NewFacts(in, o.manifests)
	from := map[string]string{}
	for _, t := range in.Templates {
		tpl := t.Obj
		var te *manifest.TemplateError
		if _, err := facts.Compile(ctx, tpl); errors.As(err, &te) {
			f.warnings = append(f.warnings, fmt.Sprintf("MinionTemplate %s does not render (%v): its minions are left out", tpl.Name, te.Err))
		}
		for i, b := range in.Bindings {
			if b == nil || b.Spec.TemplateRef.Name != tpl.Name {
				continue
			}
			// A binding has one template: no later pass needs it, and
			// with the other side's done with it too, its memory goes
			// (the gate's claims keep what they need of it).
			in.Bindings[i] = nil
			if err := f.admitOne(ctx, facts, b, files, from, o); err != nil {
				return err
			}
		}
	}
	for _, b := range in.Bindings {
		if b != nil {
			if err := f.admitOne(ctx, facts, b, files, from, o); err != nil {
				return err
			}
		}
	}
	return nil
}

// admitOne passes one binding through the gate: admitted, it joins the
// fleet; refused, it is left out.
func (f *Fleet) admitOne(ctx context.Context, facts *manifest.Facts, b *v1alpha1.MinionBinding, files, from map[string]string, o loadOptions) error {
	name := b.Namespace + "/" + b.Name
	a, err := admission.Admit(ctx, facts, b)
	out, err := leftOut(a, err)
	switch {
	case err != nil:
		return fmt.Errorf("MinionBinding %s: %w", name, err)
	case out != nil:
		out.Binding, out.Minion = name, b.Spec.MinionID
		if out.said {
			f.leftOut = append(f.leftOut, *out)
		} else {
			f.leave(*out)
		}
		return nil
	}
	if err := f.addDocuments(a.Result, name, files, from); err != nil {
		return err
	}
	f.addMinion(b, name, a.Template.Name, a.Result, o)
	return nil
}

// leftOut is why the gate's answer leaves a binding out of the fleet (nil:
// admitted), in the audit's words, without the binding's names; err is
// the source's own failure.
func leftOut(a *admission.Admitted, err error) (*LeftOut, error) {
	const bound = "its minion ID is bound by another MinionBinding"
	var te *manifest.TemplateError
	if errors.As(err, &te) {
		// Its template does not compile: the template's warning says it,
		// once (admit); the diff's gate counts bindings, not templates.
		return &LeftOut{Kind: Refused, Reason: te.Verdict.Reason, said: true,
			Message: fmt.Sprintf("MinionTemplate %s does not render: %v", a.Template.Name, te.Err)}, nil
	}
	if a != nil && a.Ahead != nil {
		// Another binding claims the minion ID first and has not
		// written yet: the operator asks Vault whose the minion is, the
		// audit does not read Vault.
		return &LeftOut{Kind: Refused, Reason: v1alpha1.DuplicateMinionIDReason, Message: bound}, nil
	}
	if err == nil {
		return nil, nil
	}
	v, ok := admission.AsVerdict(err)
	if !ok {
		return nil, err
	}
	kind := Refused
	if v.Kind == admission.Waiting {
		kind = Waiting
	}
	switch {
	case v.Reason == v1alpha1.DuplicateMinionIDReason, v.Reason == v1alpha1.MinionIDReleasingReason:
		return &LeftOut{Kind: kind, Reason: v.Reason, Message: bound}, nil
	case a.Result != nil:
		// It rendered and failed validation: the first violation, as the
		// audit always said it, and its own reason (ConflictingPolicyBody
		// says more than the condition's ValidationFailed).
		first := a.Compiled.Validate(a.Result)[0]
		msg := first.Message
		if first.Field != "" {
			msg = first.Field + ": " + msg
		}
		return &LeftOut{Kind: kind, Reason: string(first.Reason), Message: msg, warning: "the operator would refuse it: " + first.String()}, nil
	}
	return &LeftOut{Kind: kind, Reason: v.Reason, Message: v.Message}, nil
}

// addDocuments takes the policy documents a binding renders. A document a
// policy file holds too is the rendered one; two bindings rendering one
// policy differently is the template reconciler's refusal.
func (f *Fleet) addDocuments(res *render.Result, name string, files, from map[string]string) error {
	for _, d := range res.PolicyDocuments {
		if prev, ok := f.docs[d.Name]; ok && prev != d.HCL {
			if _, isFile := files[d.Name]; isFile {
				f.warnings = append(f.warnings, fmt.Sprintf("policy %q is both a file and rendered by %s: the rendered text is used", d.Name, name))
			} else {
				return admission.PolicyConflict(d.Name, from[d.Name], name)
			}
		}
		f.docs[d.Name] = d.HCL
		from[d.Name] = name
	}
	return nil
}

// addVaultDocs takes Vault's text of the policies the minions name that
// are neither rendered nor a file (audit drift).
func (f *Fleet) addVaultDocs(vault *Fleet) error {
	var fromVault []string
	for _, m := range f.minions {
		for _, n := range m.subject.PolicyNames() {
			if _, ok := f.docs[n]; ok {
				continue
			}
			text, ok, err := vault.policyText(context.Background(), n)
			if err != nil {
				return err
			}
			if ok {
				f.docs[n] = text
				fromVault = append(fromVault, n)
			}
		}
	}
	slices.Sort(fromVault)
	for _, n := range fromVault {
		if b, ok := acl.Builtin(n); ok {
			f.warnings = append(f.warnings, fmt.Sprintf("policy %q is the built-in policy of %s: Vault's text is used on both sides", n, b.Servers))
			continue
		}
		f.warnings = append(f.warnings, fmt.Sprintf("policy %q is neither rendered by a template nor among the policy files: Vault's text is used on both sides", n))
	}
	return nil
}

// prepare prepares every minion (audit diff's only finds their absent
// policies) and warns of the policies no document holds.
func (f *Fleet) prepare() {
	var missing []string
	seenMissing := map[string]bool{}
	var builtins []string
	for _, m := range f.minions {
		var absent []string
		if m.unprepared != nil {
			// Only the token policies name policies offline.
			absent = f.ev.Missing(acl.Subject{TokenPolicies: m.unprepared.tokenPolicies})
		} else {
			m.prep = f.ev.Prepare(m.subject)
			absent = m.prep.Missing()
		}
		for _, n := range absent {
			if seenMissing[n] {
				continue
			}
			seenMissing[n] = true
			if acl.IsBuiltin(n) {
				// The server's own (Vault 2's default-ceiling): not
				// someone else's, only a text the audit lacks.
				builtins = append(builtins, n)
				continue
			}
			missing = append(missing, n)
		}
	}
	slices.Sort(builtins)
	for _, n := range builtins {
		f.warnings = append(f.warnings, builtinAbsent(n))
	}
	slices.Sort(missing)
	if len(missing) <= maxMissingNamed {
		for _, n := range missing {
			f.warnings = append(f.warnings, fmt.Sprintf("policy %q is neither rendered by a template nor among the policy files: treated as absent (Vault skips unknown policies)", n))
		}
		return
	}
	// Typically a per-minion name ("saltstack/{minion}") that nobody
	// wrote: one warning, not one per minion.
	named := make([]string, maxMissingNamed)
	for i, n := range missing[:maxMissingNamed] {
		named[i] = strconv.Quote(n)
	}
	f.warnings = append(f.warnings, fmt.Sprintf("%d policies are neither rendered by a template nor among the policy files: treated as absent (Vault skips unknown policies): %s and %d more",
		len(missing), strings.Join(named, ", "), len(missing)-maxMissingNamed))
}

// builtinAbsent says that a built-in policy the minions carry has no text
// here: the server makes it (it is nobody's, not someone else's), the
// offline audit ships only default's text.
func builtinAbsent(n string) string {
	b, _ := acl.Builtin(n)
	return fmt.Sprintf("policy %q is the built-in policy of %s, whose text the offline audit does not ship: treated as absent (as a server without it skips it); give Vault's text (vault policy read %s) as %s.hcl among the policy files to count it",
		n, b.Servers, n, n)
}

// unpreparedMinion is what an offline subject is made of.
type unpreparedMinion struct {
	tokenPolicies      []string
	entityName         string
	entityMD, secretMD []template.KV
	accessor           string
}

// addMinion is the minion of b as Vault will hold it after its next login:
// the role's token policies (with "default"), the entity with its
// metadata, and the AppRole alias whose metadata is the secret ID's plus
// role_name. Unprepared, only its parts are kept (see
// unpreparedMinion.subject).
func (f *Fleet) addMinion(b *v1alpha1.MinionBinding, name, template string, res *render.Result, o loadOptions) {
	id := b.Spec.MinionID
	m := &Minion{id: id, binding: name, template: template, role: res.AppRole.RoleName, pillarPaths: res.PillarPaths}
	u := &unpreparedMinion{tokenPolicies: acl.LoginPolicies(res.Policies, true), entityName: res.EntityName,
		entityMD: res.EntityMetadata, secretMD: res.SecretMetadata, accessor: o.Accessor}
	if o.unprepared {
		m.unprepared = o.shared.share(b, template, u)
	} else {
		m.subject = u.subject(m.role)
		m.metadata = m.subject.Entity.Metadata
	}
	f.minions = append(f.minions, m)
	f.byID[strings.ToLower(id)] = m
}

// sharedMinions holds a binding's rendered parts from the first fleet that
// rendered it until the last one has: with two sides of 10,000 minions
// that render alike, one copy instead of two.
type sharedMinions struct {
	readers int
	m       sync.Map // sharedKey to *sharedMinion
}

type sharedKey struct {
	binding  *v1alpha1.MinionBinding
	template string
}

type sharedMinion struct {
	u     *unpreparedMinion
	reads atomic.Int32
}

func newSharedMinions(readers int) *sharedMinions { return &sharedMinions{readers: readers} }

// share is the first reader's parts when u is equal to them, else u.
func (s *sharedMinions) share(b *v1alpha1.MinionBinding, template string, u *unpreparedMinion) *unpreparedMinion {
	if s == nil {
		return u
	}
	k := sharedKey{b, template}
	v, _ := s.m.LoadOrStore(k, &sharedMinion{u: u})
	sm := v.(*sharedMinion)
	if int(sm.reads.Add(1)) >= s.readers {
		s.m.Delete(k)
	}
	if sm.u.equal(u) {
		return sm.u
	}
	return u
}

func (u *unpreparedMinion) equal(o *unpreparedMinion) bool {
	return u.entityName == o.entityName && u.accessor == o.accessor && slices.Equal(u.tokenPolicies, o.tokenPolicies) &&
		slices.Equal(u.entityMD, o.entityMD) && slices.Equal(u.secretMD, o.secretMD)
}

// subject is the offline subject of the minion whose AppRole role is role.
func (u *unpreparedMinion) subject(role string) acl.Subject {
	md := make(map[string]string, len(u.entityMD))
	for _, kv := range u.entityMD {
		md[kv.Key] = kv.Value
	}
	aliasMD := make(map[string]string, len(u.secretMD)+1)
	aliasMD["role_name"] = role
	for _, kv := range u.secretMD {
		aliasMD[kv.Key] = kv.Value
	}
	return acl.Subject{
		TokenPolicies: u.tokenPolicies,
		Entity: &acl.Entity{
			// The entity ID is Vault's: offline a stand-in renders
			// {{identity.entity.id}}.
			ID: "offline-id-" + u.entityName, Name: u.entityName, Metadata: md,
			Aliases: []acl.Alias{{ID: "offline-alias-" + u.entityName, Name: "offline-role-id-" + role,
				MountAccessor: u.accessor, Metadata: aliasMD}},
		},
	}
}

// policyFiles reads the *.hcl files among paths (and in the folders).
func policyFiles(paths []string) (map[string]string, error) {
	out := map[string]string{}
	add := func(file string) error {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(filepath.Base(file), ".hcl")
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		if sc.Scan() {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "# policy:"); ok {
				name = strings.TrimSpace(rest)
			}
		}
		name = acl.SanitizeName(name)
		if _, dup := out[name]; dup {
			return fmt.Errorf("%s: policy %q is also in another file", file, name)
		}
		out[name] = string(data)
		return nil
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			if filepath.Ext(p) == ".hcl" {
				if err := add(p); err != nil {
					return nil, err
				}
			}
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if !e.IsDir() && filepath.Ext(e.Name()) == ".hcl" {
				if err := add(filepath.Join(p, e.Name())); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}

// Minion finds a minion by ID (case-insensitive), binding name or role;
// nil when none is.
func (f *Fleet) Minion(key string) *Minion {
	if m, ok := f.byID[strings.ToLower(key)]; ok {
		return m
	}
	for _, m := range f.minions {
		if m.binding == key || m.role == key {
			return m
		}
	}
	return nil
}

// LeftOut are the bindings of the manifests the fleet leaves out, and why.
func (f *Fleet) LeftOut() []LeftOut { return f.leftOut }

// Empty is the error of a fleet with no minion to audit, nil otherwise:
// a gate must not pass on nothing (a wrong folder, every binding
// refused). what names the manifests for the message.
func (f *Fleet) Empty(what string) error {
	if len(f.minions) > 0 {
		return nil
	}
	if f.client != nil {
		return fmt.Errorf("%s: no AppRole role on the minion mount: nothing to audit", what)
	}
	if f.bindings == 0 {
		return fmt.Errorf("%s: no MinionBinding among the manifests: nothing to audit (a wrong folder?)", what)
	}
	if len(f.leftOut) == 0 {
		return fmt.Errorf("%s: none of the %d MinionBindings is admitted: nothing to audit", what, f.bindings)
	}
	l := f.leftOut[0]
	return fmt.Errorf("%s: none of the %d MinionBindings is admitted: nothing to audit (%s: %s: %s)", what, f.bindings, l.Binding, l.Reason, l.Message)
}

// Rules are the Vault version's whose rules the fleet is evaluated with.
func (f *Fleet) Rules() VaultRules {
	if f.rules.Version == "" && f.ev != nil {
		return rulesOfMode(f.ev.Mode())
	}
	return f.rules
}

// Minions are the fleet's minions, by minion ID.
func (f *Fleet) Minions() []*Minion { return f.minions }

// ID is the minion ID (online: the role name).
func (m *Minion) ID() string { return m.id }

// Role is the name of the minion's AppRole role.
func (m *Minion) Role() string { return m.role }

// roles is the minion's roles as the operator writes them to the entity.
func (m *Minion) roles() []string {
	var out []string
	joined := m.metadata["roles"]
	if m.unprepared != nil {
		for _, kv := range m.unprepared.entityMD {
			if kv.Key == "roles" {
				joined = kv.Value
			}
		}
	}
	for _, r := range strings.Split(joined, ",") {
		if r = strings.TrimSpace(r); r != "" {
			out = append(out, r)
		}
	}
	return out
}
