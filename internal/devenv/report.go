package devenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/localenv"
	"github.com/minionvault/minion-vault-operator/pkg/ownership"
)

// What the quickstart prints once everything is Ready.

// report prints the bindings' table and what the operator wrote to Vault.
func (r *Runner) report(ctx context.Context, cfg *rest.Config, kc client.Client, v *localenv.Vault, objs []Object) error {
	out := r.cfg.Out
	gv := v1alpha1.GroupVersion
	t, err := GetTable(ctx, cfg, "/apis/"+gv.Group+"/"+gv.Version+"/minionbindings")
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "MinionBindings (kubectl get minionbindings -A -o wide, without the STATUS column):")
	if err := WriteTable(out, t, true, "Policies"); err != nil {
		return err
	}

	var bindings []*v1alpha1.MinionBinding
	var templates []*v1alpha1.MinionTemplate
	for _, o := range objs {
		switch {
		case isKind(o.Unstructured, "MinionBinding"):
			b := &v1alpha1.MinionBinding{}
			if err := kc.Get(ctx, client.ObjectKeyFromObject(o.Unstructured), b); err != nil {
				return err
			}
			bindings = append(bindings, b)
		case isKind(o.Unstructured, "MinionTemplate"):
			tpl := &v1alpha1.MinionTemplate{}
			if err := kc.Get(ctx, client.ObjectKeyFromObject(o.Unstructured), tpl); err != nil {
				return err
			}
			templates = append(templates, tpl)
		}
	}

	fmt.Fprintf(out, "\nVault at %s:\n", v.Addr)
	all, err := v.Client.Sys().ListPoliciesWithContext(ctx)
	if err != nil {
		return fmt.Errorf("listing Vault policies: %w", err)
	}
	sort.Strings(all)
	fmt.Fprintln(out, "  ACL policies (vault policy list); * = written by the operator from the MinionTemplates' policyDocuments:")
	var managed []string
	for _, p := range all {
		mark := " "
		if hcl, err := v.Client.Sys().GetPolicyWithContext(ctx, p); err == nil {
			if _, ok := ownership.ParseHeader(hcl); ok {
				mark = "*"
				managed = append(managed, p)
			}
		}
		fmt.Fprintf(out, "    %s %s\n", mark, p)
	}

	b := pickBinding(bindings)
	r.shown = b
	if b == nil {
		return nil
	}
	if name := pickPolicy(b, bindings, managed); name != "" {
		body, err := v.Client.Sys().GetPolicyWithContext(ctx, name)
		if err != nil {
			return fmt.Errorf("reading Vault policy %s: %w", name, err)
		}
		fmt.Fprintf(out, "\n  vault policy read %s\n%s", name, indent(body, "    "))
	}
	if b.Status.Entity != nil && b.Status.Entity.Name != "" {
		path := "identity/entity/name/" + b.Status.Entity.Name
		sec, err := v.Client.Logical().ReadWithContext(ctx, path)
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		fmt.Fprintf(out, "\n  vault read %s  (the metadata of minion %s's entity)\n", path, b.Spec.MinionID)
		md := map[string]string{}
		if sec != nil {
			if m, ok := sec.Data["metadata"].(map[string]any); ok {
				for k, val := range m {
					md[k] = fmt.Sprint(val)
				}
			}
		}
		writeKV(out, "    ", md)
	}
	if b.Status.AppRole != nil && b.Status.AppRole.Name != "" {
		path := "auth/" + b.Status.AppRole.Mount + "/role/" + b.Status.AppRole.Name
		sec, err := v.Client.Logical().ReadWithContext(ctx, path)
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		var pols []string
		if sec != nil {
			if l, ok := sec.Data["token_policies"].([]any); ok {
				for _, p := range l {
					pols = append(pols, fmt.Sprint(p))
				}
			}
		}
		fmt.Fprintf(out, "\n  vault read -field=token_policies %s  (minion %s's AppRole)\n    %s\n", path, b.Spec.MinionID, "["+strings.Join(pols, " ")+"]")
	}
	fmt.Fprintln(out)
	return nil
}

// pickBinding chooses the binding to show in detail: the first (in the
// samples' order) with the most list-valued metadata entries (roles__N).
func pickBinding(bindings []*v1alpha1.MinionBinding) *v1alpha1.MinionBinding {
	var best *v1alpha1.MinionBinding
	bestN := -1
	for _, b := range bindings {
		n := 0
		if b.Status.Entity != nil {
			for k := range b.Status.Entity.Metadata {
				if strings.Contains(k, "__") {
					n++
				}
			}
		}
		if n > bestN {
			best, bestN = b, n
		}
	}
	return best
}

// pickPolicy chooses a policy document of b to print: the first (sorted)
// that the operator manages and that not every binding has, else the first
// it manages.
func pickPolicy(b *v1alpha1.MinionBinding, bindings []*v1alpha1.MinionBinding, managed []string) string {
	docs := slices.Clone(b.Status.PolicyDocuments)
	slices.Sort(docs)
	first := ""
	for _, d := range docs {
		if !slices.Contains(managed, d) {
			continue
		}
		if first == "" {
			first = d
		}
		shared := true
		for _, o := range bindings {
			if !slices.Contains(o.Status.PolicyDocuments, d) {
				shared = false
				break
			}
		}
		if !shared {
			return d
		}
	}
	return first
}

func writeKV(w io.Writer, prefix string, m map[string]string) {
	keys := make([]string, 0, len(m))
	width := 0
	for k := range m {
		keys = append(keys, k)
		width = max(width, len(k))
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "%s%-*s  %s\n", prefix, width, k, m[k])
	}
}

func indent(s, prefix string) string {
	var b bytes.Buffer
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if l == "" {
			b.WriteString("\n")
			continue
		}
		b.WriteString(prefix + l + "\n")
	}
	return b.String()
}

// explore prints the commands to look around while it runs.
func (r *Runner) explore(kubeconfig string, v *localenv.Vault) {
	out := r.cfg.Out
	abs, err := filepath.Abs(kubeconfig)
	if err != nil {
		abs = kubeconfig
	}
	kubectl := display(filepath.Join(r.cfg.ToolsDir, "kubectl"))
	vaultBin := display(filepath.Join(r.cfg.ToolsDir, "vault"))
	b := r.shown
	fmt.Fprintln(out, "Explore, in another terminal, while this runs:")
	fmt.Fprintf(out, "  export KUBECONFIG=%s\n", abs)
	if st, err := os.Stat(filepath.Join(r.cfg.ToolsDir, "kubectl")); err != nil || st.IsDir() {
		// make run does not build kubectl: the quickstart needs only the servers.
		fmt.Fprintf(out, "  make kubectl   # builds %s, about a minute the first time\n", kubectl)
	}
	fmt.Fprintf(out, "  %s get minionbindings -A -o wide   # also: get mt,vc\n", kubectl)
	if b != nil {
		fmt.Fprintf(out, "  %s -n %s edit mb %s   # change spec.pillar.roles: the operator updates Vault\n", kubectl, b.Namespace, b.Name)
	}
	fmt.Fprintf(out, "  export VAULT_ADDR=%s VAULT_TOKEN=%s\n", v.Addr, v.RootToken)
	fmt.Fprintln(out, "    # (the dev server's root token: a throwaway in-memory Vault on loopback, gone when this stops)")
	fmt.Fprintf(out, "  %s policy list\n", vaultBin)
	if b != nil && b.Status.Entity != nil && b.Status.Entity.Name != "" {
		fmt.Fprintf(out, "  %s read identity/entity/name/%s\n", vaultBin, b.Status.Entity.Name)
	}
	fmt.Fprintf(out, "Operator log: %s\n", display(r.cfg.LogPath))
}

// display shortens a path below the working directory to a relative one.
func display(p string) string {
	if p == "" {
		return p
	}
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	rel, err := filepath.Rel(wd, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return abs
	}
	if !strings.Contains(rel, string(filepath.Separator)) {
		return "." + string(filepath.Separator) + rel
	}
	return rel
}
