package cli

import (
	"bufio"
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
	"github.com/minionvault/minion-vault-operator/internal/convert"
	"github.com/minionvault/minion-vault-operator/pkg/acl"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/template"
)

// A fleet is what the audit commands read offline: every minion the
// manifests bind, as the operator would render it, and every policy
// document the templates render or the policy files hold.

type fleet struct {
	minions []*fleetMinion // by minion ID
	byID    map[string]*fleetMinion
	docs    map[string]string
	ev      *acl.Evaluator
	// warnings are what the audit cannot see or had to assume.
	warnings []string
	// Online only: the Vault version whose rules apply, the minion mount's
	// accessor, and the client that read the fleet.
	version, accessor string
	client            *vaultapi.Client
}

type fleetMinion struct {
	id, binding, template, role string
	// roles is the entity metadata "roles" (comma-joined by the operator).
	metadata map[string]string
	subject  acl.Subject
	prep     *acl.Prepared
	// unprepared (audit diff) keeps the rendered parts of the subject
	// instead of subject and metadata: a fraction of the memory of the
	// maps, which fleet.prepared makes for the moment of a comparison.
	unprepared *unpreparedMinion
	// pillarPaths are the predicted pillar paths (offline only).
	pillarPaths []string
	// Online only: the role ID, and the entity as Vault holds it (nil when
	// there is none yet), its alias metadata as the last login left it.
	roleID string
	live   *acl.Entity
}

type fleetOptions struct {
	vaultVersion string
	accessor     string
	// vaultDocs (audit drift): the policies Vault holds, for those the
	// minions name that are neither rendered nor a file, and for default.
	vaultDocs map[string]string
	// manifests, when set, parses a file content once for several fleets.
	manifests *manifestCache
	// unprepared leaves every minion's prep nil (audit diff prepares each
	// minion while it compares it and lets it go).
	unprepared bool
	// shared, with unprepared, lets fleets read side by side share the
	// parts of a minion that render the same on both.
	shared *sharedMinions
}

// maxMissingNamed is how many absent policies get a warning each; more are
// said in one warning.
const maxMissingNamed = 5

// loadFleet renders the bindings of the manifests in paths (files or
// folders, as plan reads them) and reads the *.hcl policy files beside
// them. A policy file is named by its file name without .hcl, or by a first
// line "# policy: NAME" (for names with a "/").
func loadFleet(paths []string, o fleetOptions) (*fleet, error) {
	mode, err := acl.ModeForVersion(o.vaultVersion)
	if err != nil {
		return nil, err
	}
	in, err := readPlanInputCached(paths, o.manifests)
	if err != nil {
		return nil, err
	}
	f := &fleet{byID: map[string]*fleetMinion{}, docs: map[string]string{}}
	files, err := policyFiles(paths)
	if err != nil {
		return nil, err
	}
	for name, text := range files {
		f.docs[name] = text
	}
	if text, ok := o.vaultDocs["default"]; ok && f.docs["default"] == "" {
		f.docs["default"] = text
		f.warnings = append(f.warnings, "policy \"default\" is Vault's text (no default.hcl among the files)")
	}
	if _, ok := f.docs["default"]; !ok {
		f.docs["default"] = acl.DefaultPolicy
		f.warnings = append(f.warnings, "policy \"default\" is Vault 1.21.4's shipped text (no default.hcl among the files): an edited default policy is not seen")
	}

	known := map[string]bool{}
	for _, t := range in.templates {
		known[t.obj.Name] = true
	}
	var unknown []string
	for _, b := range in.bindings {
		if !known[b.Spec.TemplateRef.Name] {
			unknown = append(unknown, fmt.Sprintf("MinionBinding %s/%s is left out: MinionTemplate %q is not among the manifests", b.Namespace, b.Name, b.Spec.TemplateRef.Name))
		}
	}
	// Each binding is let go once rendered (its slot set to nil), so the
	// claims are kept by name: the bindings' names are unique.
	claimedBy := map[string]string{}
	for id, b := range minionIDClaims(in.bindings) {
		claimedBy[id] = b.Namespace + "/" + b.Name
	}
	from := map[string]string{}
	for _, t := range in.templates {
		tpl := t.obj
		rt, err := convert.Template(tpl.Name, &tpl.Spec, in.configMaps, t.doc.MetadataOrder())
		if err != nil {
			f.warnings = append(f.warnings, fmt.Sprintf("MinionTemplate %s does not render (%v): its minions are left out", tpl.Name, err))
			continue
		}
		compiled := render.Compile(rt)
		// The namespace selector is applied once per namespace, not per
		// binding (a fleet is thousands of bindings in a few namespaces).
		type verdict struct {
			ok  bool
			msg string
		}
		selected := map[string]verdict{}
		for i, b := range in.bindings {
			if b == nil || b.Spec.TemplateRef.Name != tpl.Name {
				continue
			}
			// A binding has one template: no later pass needs it, and
			// with the other side's done with it too, its memory goes.
			in.bindings[i] = nil
			name := b.Namespace + "/" + b.Name
			skip := func(why string) {
				f.warnings = append(f.warnings, fmt.Sprintf("MinionBinding %s is left out: %s", name, why))
			}
			v, seen := selected[b.Namespace]
			if !seen {
				v.ok, v.msg = namespaceSelected(tpl, b.Namespace, in.namespaces)
				selected[b.Namespace] = v
			}
			if !v.ok {
				skip(v.msg)
				continue
			}
			if claimedBy[strings.ToLower(b.Spec.MinionID)] != name {
				skip("its minion ID is bound by another MinionBinding")
				continue
			}
			rb, err := o.manifests.binding(b)
			if err != nil {
				skip(err.Error())
				continue
			}
			res, err := compiled.Render(rb, render.Options{})
			if err != nil {
				skip(err.Error())
				continue
			}
			if vs := compiled.Validate(res); len(vs) > 0 {
				skip("the operator would refuse it: " + vs[0].String())
				continue
			}
			for _, d := range res.PolicyDocuments {
				if prev, ok := f.docs[d.Name]; ok && prev != d.HCL {
					if _, isFile := files[d.Name]; isFile {
						f.warnings = append(f.warnings, fmt.Sprintf("policy %q is both a file and rendered by %s: the rendered text is used", d.Name, name))
					} else {
						return nil, admission.PolicyConflict(d.Name, from[d.Name], name)
					}
				}
				f.docs[d.Name] = d.HCL
				from[d.Name] = name
			}
			f.addMinion(b, name, tpl.Name, res, o)
		}
	}
	f.warnings = append(f.warnings, unknown...)
	if o.vaultDocs != nil {
		var fromVault []string
		for _, m := range f.minions {
			for _, n := range m.subject.PolicyNames() {
				if _, ok := f.docs[n]; ok {
					continue
				}
				if text, ok := o.vaultDocs[n]; ok {
					f.docs[n] = text
					fromVault = append(fromVault, n)
				}
			}
		}
		slices.Sort(fromVault)
		for _, n := range fromVault {
			f.warnings = append(f.warnings, fmt.Sprintf("policy %q is neither rendered by a template nor among the policy files: Vault's text is used on both sides", n))
		}
	}
	f.ev, err = acl.New(f.docs, acl.Options{Mode: mode})
	if err != nil {
		return nil, err
	}
	var missing []string
	seenMissing := map[string]bool{}
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
			if !seenMissing[n] {
				seenMissing[n] = true
				missing = append(missing, n)
			}
		}
	}
	slices.Sort(missing)
	if len(missing) <= maxMissingNamed {
		for _, n := range missing {
			f.warnings = append(f.warnings, fmt.Sprintf("policy %q is neither rendered by a template nor among the policy files: treated as absent (Vault skips unknown policies)", n))
		}
	} else {
		// Typically a per-minion name ("saltstack/{minion}") that nobody
		// wrote: one warning, not one per minion.
		named := make([]string, maxMissingNamed)
		for i, n := range missing[:maxMissingNamed] {
			named[i] = strconv.Quote(n)
		}
		f.warnings = append(f.warnings, fmt.Sprintf("%d policies are neither rendered by a template nor among the policy files: treated as absent (Vault skips unknown policies): %s and %d more",
			len(missing), strings.Join(named, ", "), len(missing)-maxMissingNamed))
	}
	slices.SortFunc(f.minions, func(a, b *fleetMinion) int { return strings.Compare(a.id, b.id) })
	return f, nil
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
func (f *fleet) addMinion(b *v1alpha1.MinionBinding, name, template string, res *render.Result, o fleetOptions) {
	id := b.Spec.MinionID
	m := &fleetMinion{id: id, binding: name, template: template, role: res.AppRole.RoleName, pillarPaths: res.PillarPaths}
	u := &unpreparedMinion{tokenPolicies: acl.LoginPolicies(res.Policies, true), entityName: res.EntityName,
		entityMD: res.EntityMetadata, secretMD: res.SecretMetadata, accessor: o.accessor}
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

// minion finds a minion by ID (case-insensitive), binding name or role.
func (f *fleet) minion(key string) *fleetMinion {
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

// roles is the minion's roles as the operator writes them to the entity.
func (m *fleetMinion) roles() []string {
	var out []string
	for _, r := range strings.Split(m.metadata["roles"], ",") {
		if r = strings.TrimSpace(r); r != "" {
			out = append(out, r)
		}
	}
	return out
}

func readFileString(file string) (string, error) {
	data, err := os.ReadFile(file)
	return string(data), err
}
