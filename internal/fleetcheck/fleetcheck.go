// Package fleetcheck compares what Vault holds with a fleet of
// MinionBindings, from the outside, as root: for tests that disturb the
// operator or Vault (an HA failover, a crash) and then ask whether
// anything went wrong. It reads every entity, entity alias and AppRole
// role of the fleet's mount, and for each binding:
//
//   - one entity, one alias and one role, nothing twice: no entity or
//     alias that no binding accounts for, no second alias of a role ID;
//   - the role proven the binding's as the operator proves it
//     (pkg/ownership): its role ID chosen for the binding in this cluster,
//     or linked to the binding's entity by its alias; the entity's owner
//     marker names the binding (its UID);
//   - no write lost: the role's parameters (token_policies in order) are
//     what the binding renders (pkg/render, as `minionvault render` prints
//     it), the entity's metadata exactly what the operator writes for that
//     rendering (the rendered keys, the marker, the key list), the ACL
//     policies' bodies the rendered documents under the template's header;
//   - the binding's status Ready for its generation, naming the entity and
//     role ID that Vault holds.
//
// It never writes. It uses the Vault API library directly, not the
// operator's client, so that a bug there is not hidden here.
package fleetcheck

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	vaultapi "github.com/hashicorp/vault/api"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/convert"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
	"github.com/minionvault/minion-vault-operator/pkg/render"
)

// Fleet is what is compared with Vault.
type Fleet struct {
	// Cluster is the operator's cluster identity (--cluster-id, or the UID
	// of kube-system): the owner markers and role IDs name it.
	Cluster string
	// Templates render the bindings (each its spec.templateRef), with no
	// parameter ConfigMaps.
	Templates []*v1alpha1.MinionTemplate
	// Bindings are the fleet, as read from the API server: every binding
	// of the templates' AppRole mount, or Vault's other objects there are
	// orphans.
	Bindings []v1alpha1.MinionBinding
	// Workers read Vault in parallel (default 8).
	Workers int
}

// Report is what Check found. Each list holds one line per problem.
type Report struct {
	// Bindings, Entities, Aliases, Roles count what was compared: the
	// fleet, and Vault's entities, the aliases and roles on the mount.
	Bindings, Entities, Aliases, Roles, Policies int
	// Duplicates: a second entity marked for a binding, a second alias on
	// the mount for an entity or a role ID.
	Duplicates []string
	// Orphans: entities, aliases on the mount and roles that no binding
	// accounts for.
	Orphans []string
	// Missing: a binding's role, entity or alias not in Vault.
	Missing []string
	// Unproven: a role or entity Vault does not prove the binding's.
	Unproven []string
	// Mismatched: Vault differs from the rendering (a lost write).
	Mismatched []string
	// Status: a binding's status not Ready, or naming other objects than
	// Vault holds.
	Status []string
}

// Problems are all the report's problems, each prefixed with its kind.
func (r Report) Problems() []string {
	var out []string
	for _, l := range []struct {
		kind string
		list []string
	}{{"duplicate", r.Duplicates}, {"orphan", r.Orphans}, {"missing", r.Missing}, {"unproven", r.Unproven}, {"mismatched", r.Mismatched}, {"status", r.Status}} {
		for _, p := range l.list {
			out = append(out, l.kind+": "+p)
		}
	}
	return out
}

// OK says whether nothing is wrong.
func (r Report) OK() bool { return len(r.Problems()) == 0 }

// String sums the report up in one line, with the first problems.
func (r Report) String() string {
	p := r.Problems()
	s := fmt.Sprintf("%d bindings: %d entities, %d aliases and %d roles on the mount, %d policies; %d duplicates, %d orphans, %d missing, %d unproven, %d mismatched, %d status",
		r.Bindings, r.Entities, r.Aliases, r.Roles, r.Policies, len(r.Duplicates), len(r.Orphans), len(r.Missing), len(r.Unproven), len(r.Mismatched), len(r.Status))
	if len(p) > 0 {
		s += "; for example: " + strings.Join(p[:min(len(p), 5)], "; ")
	}
	return s
}

// entity is what Check reads of an entity.
type entity struct {
	id, name string
	metadata map[string]string
}

// alias is one entry of the alias listing.
type alias struct {
	id, name, accessor, canonical string
}

// role is what Check reads of a role.
type role struct {
	params map[string]any
	roleID string
}

// Check compares Vault, read through vc (a root token), with the fleet.
func Check(ctx context.Context, vc *vaultapi.Client, f Fleet) (Report, error) {
	r := Report{Bindings: len(f.Bindings)}
	if f.Workers <= 0 {
		f.Workers = 8
	}
	compiled := map[string]*render.Compiled{}
	for _, t := range f.Templates {
		rt, err := convert.Template(t.Name, &t.Spec, nil, nil)
		if err != nil {
			return r, fmt.Errorf("template %s: %w", t.Name, err)
		}
		compiled[t.Name] = render.Compile(rt)
	}
	type rendered struct {
		b     *v1alpha1.MinionBinding
		res   *render.Result
		owner ownership.Owner
	}
	fleet := make([]rendered, len(f.Bindings))
	mounts := map[string]bool{}
	docOwner := map[string]string{} // policy document -> its template
	for i := range f.Bindings {
		b := &f.Bindings[i]
		c := compiled[b.Spec.TemplateRef.Name]
		if c == nil {
			return r, fmt.Errorf("binding %s/%s: template %s not given", b.Namespace, b.Name, b.Spec.TemplateRef.Name)
		}
		in, err := convert.Binding(&b.Spec)
		if err != nil {
			return r, fmt.Errorf("binding %s/%s: %w", b.Namespace, b.Name, err)
		}
		res, err := c.Render(in, render.Options{})
		if err != nil {
			return r, fmt.Errorf("rendering %s/%s: %w", b.Namespace, b.Name, err)
		}
		fleet[i] = rendered{b: b, res: res, owner: ownership.Owner{Cluster: f.Cluster, Namespace: b.Namespace, Name: b.Name, UID: string(b.UID)}}
		mounts[res.AppRole.Mount] = true
	}
	if len(mounts) > 1 {
		return r, fmt.Errorf("the fleet renders %d AppRole mounts: one at a time", len(mounts))
	}
	mount := ""
	for m := range mounts {
		mount = m
	}

	accessor, err := accessorOf(ctx, vc, mount)
	if err != nil {
		return r, err
	}
	entities, err := readEntities(ctx, vc, f.Workers)
	if err != nil {
		return r, err
	}
	aliases, err := listAliases(ctx, vc, accessor)
	if err != nil {
		return r, err
	}
	names := make([]string, len(fleet))
	for i, x := range fleet {
		names[i] = x.res.AppRole.RoleName
	}
	roles, listed, err := readRoles(ctx, vc, mount, names, f.Workers)
	if err != nil {
		return r, err
	}
	r.Entities, r.Aliases, r.Roles = len(entities), len(aliases), len(listed)

	byName := map[string]*entity{}
	byID := map[string]*entity{}
	marked := map[string][]string{} // binding namespace/name -> entity names marked for it
	for _, e := range entities {
		byName[strings.ToLower(e.name)] = e
		byID[e.id] = e
		if o, ok := ownership.ParseMarker(e.metadata[ownership.MarkerKey]); ok && o.Cluster == f.Cluster {
			k := o.Namespace + "/" + o.Name
			marked[k] = append(marked[k], e.name)
		}
	}
	aliasesOf := map[string][]alias{}    // entity ID -> its aliases on the mount
	aliasesNamed := map[string][]alias{} // alias name -> aliases on the mount
	for _, a := range aliases {
		aliasesOf[a.canonical] = append(aliasesOf[a.canonical], a)
		aliasesNamed[a.name] = append(aliasesNamed[a.name], a)
	}

	accounted := map[string]bool{} // entity IDs of the fleet
	roleNames := map[string]bool{}
	docs := map[string]string{} // rendered policy documents, by name
	for _, x := range fleet {
		b, res, owner := x.b, x.res, x.owner
		who := b.Namespace + "/" + b.Name
		roleNames[strings.ToLower(res.AppRole.RoleName)] = true
		for _, d := range res.PolicyDocuments {
			docs[d.Name] = d.HCL
			docOwner[d.Name] = b.Spec.TemplateRef.Name
		}
		if m := marked[who]; len(m) > 1 {
			r.Duplicates = append(r.Duplicates, fmt.Sprintf("%s: %d entities marked for it: %s", who, len(m), strings.Join(m, ", ")))
		}
		e := byName[strings.ToLower(res.EntityName)]
		ro := roles[strings.ToLower(res.AppRole.RoleName)]
		if e == nil {
			r.Missing = append(r.Missing, fmt.Sprintf("%s: entity %s", who, res.EntityName))
		}
		if ro == nil {
			r.Missing = append(r.Missing, fmt.Sprintf("%s: role %s/%s", who, mount, res.AppRole.RoleName))
		}
		if e != nil {
			accounted[e.id] = true
			if o, ok := ownership.ParseMarker(e.metadata[ownership.MarkerKey]); !ok || !o.Same(owner) {
				r.Unproven = append(r.Unproven, fmt.Sprintf("%s: entity %s has marker %q, want %q", who, e.name, e.metadata[ownership.MarkerKey], owner.Marker()))
			}
			want, err := ownership.Metadata(e.metadata, res.EntityMetadata, owner)
			if err != nil {
				return r, fmt.Errorf("%s: %w", who, err)
			}
			if d := mapDiff(e.metadata, want); d != "" {
				r.Mismatched = append(r.Mismatched, fmt.Sprintf("%s: entity %s metadata: %s", who, e.name, d))
			}
			if as := aliasesOf[e.id]; len(as) > 1 {
				r.Duplicates = append(r.Duplicates, fmt.Sprintf("%s: entity %s has %d aliases on %s", who, e.name, len(as), mount))
			}
		}
		if ro != nil {
			if n := len(aliasesNamed[ro.roleID]); n > 1 {
				r.Duplicates = append(r.Duplicates, fmt.Sprintf("%s: %d aliases named by role ID %s on %s", who, n, ro.roleID, mount))
			}
			for _, p := range res.AppRole.Params {
				if got, ok := ro.params[p.Name]; !ok || !sameParam(got, p.Value) {
					r.Mismatched = append(r.Mismatched, fmt.Sprintf("%s: role %s %s is %v, rendered %v", who, res.AppRole.RoleName, p.Name, got, p.Value))
				}
			}
			place := ownership.RolePlace{Mount: mount, Role: res.AppRole.RoleName}
			proven := ownership.ProveRoleID(ro.roleID, f.Cluster, place).For(owner, false)
			linked := false
			if e != nil {
				for _, a := range aliasesOf[e.id] {
					linked = linked || a.name == ro.roleID
				}
			}
			if !proven && !linked {
				r.Unproven = append(r.Unproven, fmt.Sprintf("%s: role %s: role ID %s neither chosen for it nor linked to its entity", who, res.AppRole.RoleName, ro.roleID))
			}
		}
		if e != nil && ro != nil {
			as := aliasesOf[e.id]
			if len(as) == 0 {
				r.Missing = append(r.Missing, fmt.Sprintf("%s: alias of entity %s on %s", who, e.name, mount))
			} else if as[0].name != ro.roleID {
				r.Mismatched = append(r.Mismatched, fmt.Sprintf("%s: entity %s's alias is named %s, the role ID is %s", who, e.name, as[0].name, ro.roleID))
			}
		}
		r.Status = append(r.Status, statusProblems(b, res, e, ro)...)
	}
	for _, e := range entities {
		if !accounted[e.id] {
			r.Orphans = append(r.Orphans, fmt.Sprintf("entity %s (%s), marker %q", e.name, e.id, e.metadata[ownership.MarkerKey]))
		}
	}
	for _, a := range aliases {
		if !accounted[a.canonical] {
			r.Orphans = append(r.Orphans, fmt.Sprintf("alias %s on %s of entity %s", a.name, mount, a.canonical))
		}
	}
	for _, name := range listed {
		if !roleNames[strings.ToLower(name)] {
			r.Orphans = append(r.Orphans, fmt.Sprintf("role %s/%s", mount, name))
		}
	}

	r.Policies = len(docs)
	for _, name := range sortedKeys(docs) {
		header := ownership.PolicyOwner{Cluster: f.Cluster, Template: docOwner[name]}.Header()
		sec, err := vc.Logical().ReadWithContext(ctx, "sys/policies/acl/"+name)
		if err != nil {
			return r, fmt.Errorf("reading policy %s: %w", name, err)
		}
		if sec == nil {
			r.Missing = append(r.Missing, "policy "+name)
			continue
		}
		body, _ := sec.Data["policy"].(string)
		if body != header+docs[name] {
			r.Mismatched = append(r.Mismatched, fmt.Sprintf("policy %s: %q, rendered %q", name, body, header+docs[name]))
		}
	}
	for _, l := range [][]string{r.Duplicates, r.Orphans, r.Missing, r.Unproven, r.Mismatched, r.Status} {
		sort.Strings(l)
	}
	return r, nil
}

// statusProblems: the binding Ready for its generation, its status naming
// Vault's entity and role ID and the rendered policies.
func statusProblems(b *v1alpha1.MinionBinding, res *render.Result, e *entity, ro *role) []string {
	who := b.Namespace + "/" + b.Name
	var out []string
	c := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.ReadyCondition)
	if c == nil || c.Status != "True" || b.Status.ObservedGeneration != b.Generation {
		out = append(out, fmt.Sprintf("%s: not Ready for generation %d: %+v", who, b.Generation, c))
	}
	if e != nil && (b.Status.Entity == nil || b.Status.Entity.ID != e.id) {
		out = append(out, fmt.Sprintf("%s: status.entity %+v, Vault's entity is %s", who, b.Status.Entity, e.id))
	}
	if ro != nil && (b.Status.AppRole == nil || b.Status.AppRole.RoleID != ro.roleID) {
		out = append(out, fmt.Sprintf("%s: status.appRole %+v, Vault's role ID is %s", who, b.Status.AppRole, ro.roleID))
	}
	if !slices.Equal(b.Status.Policies, res.Policies) {
		out = append(out, fmt.Sprintf("%s: status.policies %v, rendered %v", who, b.Status.Policies, res.Policies))
	}
	return out
}

// sameParam compares a role parameter as Vault answers it (JSON: numbers
// as json.Number, lists of any) with a rendered one (bool, int64, string, []string).
func sameParam(got, want any) bool {
	switch w := want.(type) {
	case []string:
		l, ok := got.([]any)
		if !ok {
			return len(w) == 0 && got == nil
		}
		if len(l) != len(w) {
			return false
		}
		for i := range w {
			if fmt.Sprint(l[i]) != w[i] {
				return false
			}
		}
		return true
	default:
		return fmt.Sprint(got) == fmt.Sprint(want)
	}
}

// mapDiff names the keys in which two metadata maps differ, "" when equal.
func mapDiff(got, want map[string]string) string {
	var d []string
	for _, k := range sortedKeys(want) {
		if g, ok := got[k]; !ok {
			d = append(d, fmt.Sprintf("%q missing (want %q)", k, want[k]))
		} else if g != want[k] {
			d = append(d, fmt.Sprintf("%q is %q, want %q", k, g, want[k]))
		}
	}
	for _, k := range sortedKeys(got) {
		if _, ok := want[k]; !ok {
			d = append(d, fmt.Sprintf("%q = %q not wanted", k, got[k]))
		}
	}
	return strings.Join(d, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func accessorOf(ctx context.Context, vc *vaultapi.Client, mount string) (string, error) {
	auths, err := vc.Sys().ListAuthWithContext(ctx)
	if err != nil {
		return "", fmt.Errorf("listing auth methods: %w", err)
	}
	m, ok := auths[strings.Trim(mount, "/")+"/"]
	if !ok || m.Type != "approle" {
		return "", fmt.Errorf("no approle auth method at %s", mount)
	}
	return m.Accessor, nil
}

// keysOf reads a LIST answer's keys and key_info.
func keysOf(sec *vaultapi.Secret) ([]string, map[string]any) {
	if sec == nil {
		return nil, nil
	}
	var keys []string
	if l, ok := sec.Data["keys"].([]any); ok {
		for _, k := range l {
			keys = append(keys, fmt.Sprint(k))
		}
	}
	info, _ := sec.Data["key_info"].(map[string]any)
	return keys, info
}

// readEntities lists every entity by ID and reads each.
func readEntities(ctx context.Context, vc *vaultapi.Client, workers int) ([]*entity, error) {
	sec, err := vc.Logical().ListWithContext(ctx, "identity/entity/id")
	if err != nil {
		return nil, fmt.Errorf("listing entities: %w", err)
	}
	ids, _ := keysOf(sec)
	out := make([]*entity, len(ids))
	err = parallel(ctx, workers, len(ids), func(i int) error {
		s, err := vc.Logical().ReadWithContext(ctx, "identity/entity/id/"+ids[i])
		if err != nil {
			return fmt.Errorf("reading entity %s: %w", ids[i], err)
		}
		if s == nil {
			return fmt.Errorf("entity %s listed, then not found", ids[i])
		}
		e := &entity{id: ids[i], metadata: map[string]string{}}
		e.name, _ = s.Data["name"].(string)
		if md, ok := s.Data["metadata"].(map[string]any); ok {
			for k, v := range md {
				e.metadata[k] = fmt.Sprint(v)
			}
		}
		out[i] = e
		return nil
	})
	return out, err
}

// listAliases lists the entity aliases on the mount of accessor.
func listAliases(ctx context.Context, vc *vaultapi.Client, accessor string) ([]alias, error) {
	sec, err := vc.Logical().ListWithContext(ctx, "identity/entity-alias/id")
	if err != nil {
		return nil, fmt.Errorf("listing entity aliases: %w", err)
	}
	ids, info := keysOf(sec)
	var out []alias
	for _, id := range ids {
		m, _ := info[id].(map[string]any)
		a := alias{id: id}
		a.name, _ = m["name"].(string)
		a.accessor, _ = m["mount_accessor"].(string)
		a.canonical, _ = m["canonical_id"].(string)
		if a.accessor == accessor {
			out = append(out, a)
		}
	}
	return out, nil
}

// readRoles lists the mount's roles and reads those named (with their
// role IDs), by lowercased name.
func readRoles(ctx context.Context, vc *vaultapi.Client, mount string, names []string, workers int) (map[string]*role, []string, error) {
	base := "auth/" + strings.Trim(mount, "/") + "/role"
	sec, err := vc.Logical().ListWithContext(ctx, base)
	if err != nil {
		return nil, nil, fmt.Errorf("listing roles: %w", err)
	}
	listed, _ := keysOf(sec)
	have := map[string]bool{}
	for _, n := range listed {
		have[strings.ToLower(n)] = true
	}
	out := make([]*role, len(names))
	err = parallel(ctx, workers, len(names), func(i int) error {
		name := strings.ToLower(names[i])
		if !have[name] {
			return nil
		}
		s, err := vc.Logical().ReadWithContext(ctx, base+"/"+name)
		if err != nil || s == nil {
			return fmt.Errorf("reading role %s: %v %w", name, s, err)
		}
		id, err := vc.Logical().ReadWithContext(ctx, base+"/"+name+"/role-id")
		if err != nil || id == nil {
			return fmt.Errorf("reading role ID of %s: %v %w", name, id, err)
		}
		ro := &role{params: s.Data}
		ro.roleID, _ = id.Data["role_id"].(string)
		out[i] = ro
		return nil
	})
	m := map[string]*role{}
	for i, ro := range out {
		if ro != nil {
			m[strings.ToLower(names[i])] = ro
		}
	}
	return m, listed, err
}

// parallel runs f(0..n-1) on workers goroutines; the first error wins.
func parallel(ctx context.Context, workers, n int, f func(i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
						cancel()
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	return first
}
