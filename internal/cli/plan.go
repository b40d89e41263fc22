package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/binding"
	"github.com/minionvault/minion-vault-operator/controllers/policy"
	"github.com/minionvault/minion-vault-operator/internal/admission"
	"github.com/minionvault/minion-vault-operator/internal/manifest"
	"github.com/minionvault/minion-vault-operator/pkg/render"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// Exit codes of plan.
const (
	planInSync  = 0 // Vault matches the manifests
	planPending = 1 // changes pending
	planFailed  = 2 // an error, or the operator would refuse a binding or template
)

type planOptions struct {
	files        []string
	output       string
	address      string
	namespace    string
	caCert       string
	serverName   string
	skipVerify   bool
	tokenFile    string
	appRoleMount string
	roleID       string
	k8sRole      string
	k8sMount     string
	jwtFile      string
	secretIDFile string
	clusterID    string
	timeout      time.Duration
}

func newPlanCmd(stdout, stderr io.Writer) *cobra.Command {
	o := planOptions{}
	cmd := &cobra.Command{
		Use:   "plan -f MANIFESTS...",
		Short: "Show what the operator would create, change or delete in Vault for these manifests",
		Long: `Plan reads MinionTemplates, MinionBindings, their parameter ConfigMaps,
Namespaces and VaultConnections from files or folders, reads Vault, and
prints what the operator would write: AppRole roles, entities (metadata),
entity aliases and ACL policies, as a diff. Nothing is written: the
bindings' changes are the binding reconciler's own plan (what it would
execute, decided by the same code), the policies' the template
reconciler's own plan likewise. A binding read from the cluster (kubectl
get -o yaml) is planned with its record of where it wrote: the removals a
switch of template, mount or entity name makes are shown, and for a
binding with a deletionTimestamp those of its deletion.

Vault is reached like a VaultConnection: the address, Vault namespace and
TLS settings come from the VaultConnection the templates refer to when it
is among the manifests, and flags override them. Credentials: an AppRole
login (--role-id with --secret-id-file or VAULT_SECRET_ID), a kubernetes
auth login (--kubernetes-role, with the pod's ServiceAccount token or
--jwt-file), or a token (VAULT_TOKEN or --token-file). Reading needs the operator's
policy minus its writes; to show ACL policies a template no longer renders,
the token also needs "list" on sys/policies/acl, and to tell whose login a
role that is not linked to its minion's entity leads to, "update" on
identity/lookup/entity (a lookup that changes nothing).

Bindings removed from the manifests are not found: the operator deletes a
minion's objects when its MinionBinding is deleted.

Exit status: 0 when Vault matches, 1 when changes are pending, 2 on an error
or when the operator would refuse a binding or template (printed).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPlan(cmd.Context(), o, stdout, stderr)
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&o.files, "filename", "f", nil, "manifest file or folder (repeatable; folders: *.yaml, *.yml, *.json)")
	f.StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	f.StringVar(&o.address, "address", "", "Vault address (default: the VaultConnection's, or VAULT_ADDR)")
	f.StringVar(&o.namespace, "vault-namespace", "", "Vault Enterprise namespace (default: the VaultConnection's, or VAULT_NAMESPACE)")
	f.StringVar(&o.caCert, "ca-cert", "", "PEM file with the CA certificates of Vault's TLS certificate (default: VAULT_CACERT)")
	f.StringVar(&o.serverName, "tls-server-name", "", "server name to verify Vault's certificate against")
	f.BoolVar(&o.skipVerify, "tls-skip-verify", false, "do not verify Vault's certificate (never in production)")
	f.StringVar(&o.tokenFile, "token-file", "", "file holding a Vault token (default: VAULT_TOKEN)")
	f.StringVar(&o.appRoleMount, "approle-mount", vault.DefaultAppRoleMount, "AppRole auth mount for --role-id")
	f.StringVar(&o.roleID, "role-id", "", "log in with this AppRole role ID")
	f.StringVar(&o.k8sRole, "kubernetes-role", "", "log in with Vault's kubernetes auth as this role (in a pod: its ServiceAccount token)")
	f.StringVar(&o.k8sMount, "kubernetes-mount", vault.DefaultKubernetesMount, "kubernetes auth mount for --kubernetes-role")
	f.StringVar(&o.jwtFile, "jwt-file", "/var/run/secrets/kubernetes.io/serviceaccount/token", "the ServiceAccount token for --kubernetes-role")
	f.StringVar(&o.secretIDFile, "secret-id-file", "", "file holding the AppRole secret ID (default: VAULT_SECRET_ID)")
	f.StringVar(&o.clusterID, "cluster-id", "", "the operator's cluster identity (its --cluster-id, or the UID of kube-system), which the ACL policies' ownership headers name (default: the one cluster the headers of a template's policies name)")
	f.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up after this long")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

// planInput is what the manifests hold, and whose cluster the plan is for.
type planInput struct {
	*manifest.Set
	// cluster is the operator's cluster identity ("": learned from the
	// policies' headers).
	cluster string
}

// PlanResult is the JSON output of plan.
type PlanResult struct {
	Templates []TemplatePlan `json:"templates"`
	Bindings  []BindingPlan  `json:"bindings"`
	Warnings  []string       `json:"warnings,omitempty"`
	Summary   PlanSummary    `json:"summary"`
}

type TemplatePlan struct {
	Name    string         `json:"name"`
	Changes []vault.Change `json:"changes"`
	Refused *Refusal       `json:"refused,omitempty"`
}

type BindingPlan struct {
	Namespace string         `json:"namespace"`
	Name      string         `json:"name"`
	MinionID  string         `json:"minionID"`
	Template  string         `json:"template"`
	Changes   []vault.Change `json:"changes"`
	Refused   *Refusal       `json:"refused,omitempty"`
	// plan is the planner's: what it would leave and could not look at
	// become the plan's warnings.
	plan binding.BindingPlan
}

// Refusal is why the operator would not write a binding or template: the
// reason its Ready condition would show, and the message.
type Refusal struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

type PlanSummary struct {
	Create  int `json:"create"`
	Update  int `json:"update"`
	Delete  int `json:"delete"`
	Refused int `json:"refused"`
}

func runPlan(ctx context.Context, o planOptions, stdout, stderr io.Writer) error {
	if o.output != "text" && o.output != "json" {
		return fmt.Errorf("--output must be text or json, not %q", o.output)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	in, err := readPlanInput(o.files)
	if err != nil {
		return err
	}
	in.cluster = o.clusterID
	if len(in.Templates) == 0 {
		return errors.New("no MinionTemplate among the manifests")
	}
	cfg, err := planVaultConfig(o, in)
	if err != nil {
		return err
	}
	vc, err := vault.New(ctx, cfg, nil)
	if err != nil {
		return fmt.Errorf("connecting to Vault at %s: %w", cfg.Address, err)
	}
	if c, ok := vc.(io.Closer); ok {
		defer c.Close()
	}
	plan, err := buildPlan(ctx, vault.ReadOnly(vc), in)
	if err != nil {
		return err
	}
	conns := map[string]bool{}
	for _, t := range in.Templates {
		conns[t.Obj.Spec.ConnectionRef.Name] = true
	}
	if len(conns) > 1 {
		plan.Warnings = append(plan.Warnings, fmt.Sprintf("the templates refer to %d VaultConnections; all were planned against %s", len(conns), cfg.Address))
	}
	if o.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(plan); err != nil {
			return err
		}
	} else {
		writePlanText(stdout, plan)
	}
	for _, w := range plan.Warnings {
		fmt.Fprintf(stderr, "minionvault plan: warning: %s\n", w)
	}
	switch s := plan.Summary; {
	case s.Refused > 0:
		return exitError{planFailed}
	case s.Create+s.Update+s.Delete > 0:
		return exitError{planPending}
	}
	return nil
}

// buildPlan plans every template's bindings, then its policies, in name
// order, so the output is stable; then the bindings whose template is not
// among the manifests. Only the admission gate refuses a binding (a
// template missing or not compiling included). It only reads vc.
func buildPlan(ctx context.Context, vc vault.Client, in *planInput) (*PlanResult, error) {
	plan := &PlanResult{Templates: []TemplatePlan{}, Bindings: []BindingPlan{}}
	byTemplate := map[string][]*v1alpha1.MinionBinding{}
	facts := newManifestFacts(in)
	for _, b := range in.Bindings {
		if !b.DeletionTimestamp.IsZero() {
			// Being deleted: its finalizer's removals, no admission, no
			// policy documents.
			bp, err := planVault(ctx, vc, in, b, &admission.Admitted{Template: templateNamed(in, b.Spec.TemplateRef.Name)})
			if err != nil {
				return nil, err
			}
			plan.Bindings = append(plan.Bindings, bp)
			continue
		}
		byTemplate[b.Spec.TemplateRef.Name] = append(byTemplate[b.Spec.TemplateRef.Name], b)
	}

	policies := &policy.Planner{Vault: vc}
	for _, t := range in.Templates {
		tpl := t.Obj
		rendered := map[types.NamespacedName]*render.Result{}
		for _, b := range byTemplate[tpl.Name] {
			bp, res, err := planBinding(ctx, vc, facts, b)
			if err != nil {
				return nil, err
			}
			if res != nil {
				rendered[types.NamespacedName{Namespace: b.Namespace, Name: b.Name}] = res
			}
			plan.Bindings = append(plan.Bindings, bp)
		}
		delete(byTemplate, tpl.Name)
		// The gate's compile, once per template: one that does not
		// compile is refused itself, its policies not planned.
		if _, err := facts.Compile(ctx, tpl); err != nil {
			var te *manifest.TemplateError
			if !errors.As(err, &te) {
				return nil, fmt.Errorf("MinionTemplate %s: %w", tpl.Name, err)
			}
			plan.Templates = append(plan.Templates, TemplatePlan{Name: tpl.Name, Changes: []vault.Change{},
				Refused: &Refusal{Reason: te.Verdict.Reason, Message: te.Err.Error()}})
			continue
		}
		tp, warnings, err := planPolicies(ctx, policies, tpl, in.cluster, rendered)
		if err != nil {
			return nil, err
		}
		plan.Warnings = append(plan.Warnings, warnings...)
		plan.Templates = append(plan.Templates, tp)
	}
	// Left: the bindings of templates not among the manifests, which the
	// gate has wait for them (TemplateNotFound).
	for _, b := range in.Bindings {
		if _, left := byTemplate[b.Spec.TemplateRef.Name]; left && b.DeletionTimestamp.IsZero() {
			bp, _, err := planBinding(ctx, vc, facts, b)
			if err != nil {
				return nil, err
			}
			plan.Bindings = append(plan.Bindings, bp)
		}
	}
	slices.SortStableFunc(plan.Bindings, func(a, b BindingPlan) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	plan.summarize()
	return plan, nil
}

// planPolicies plans the policies the template's admitted bindings
// render with the template reconciler's own stages (policy.Planner).
func planPolicies(ctx context.Context, policies *policy.Planner, tpl *v1alpha1.MinionTemplate, cluster string, rendered map[types.NamespacedName]*render.Result) (TemplatePlan, []string, error) {
	tp := TemplatePlan{Name: tpl.Name, Changes: []vault.Change{}}
	pp, err := policies.Plan(ctx, tpl, cluster, rendered)
	if v, ok := admission.AsVerdict(err); ok {
		tp.Refused = &Refusal{Reason: v.Reason, Message: v.Message}
		return tp, nil, nil
	}
	if err != nil {
		return tp, nil, fmt.Errorf("MinionTemplate %s: %w", tpl.Name, err)
	}
	tp.Changes = pp.Changes
	if len(pp.NotOwned) > 0 {
		tp.Refused = &Refusal{Reason: v1alpha1.PolicyNotOwnedReason, Message: fmt.Sprintf(
			"ACL policies exist in Vault and were not written by this template (set adoptPolicies to take them over): %s", strings.Join(pp.NotOwned, ", "))}
	}
	return tp, pp.Warnings, nil
}

// summarize counts the changes and refusals, and warns of what the
// bindings' removals would leave or could not look at.
func (plan *PlanResult) summarize() {
	count := func(cs []vault.Change, refused *Refusal) {
		for _, c := range cs {
			switch c.Action {
			case "create":
				plan.Summary.Create++
			case "update":
				plan.Summary.Update++
			case "delete":
				plan.Summary.Delete++
			}
		}
		if refused != nil {
			plan.Summary.Refused++
		}
	}
	for _, t := range plan.Templates {
		count(t.Changes, t.Refused)
	}
	for _, b := range plan.Bindings {
		count(b.Changes, b.Refused)
		for _, w := range b.plan.NotOwned {
			plan.Warnings = append(plan.Warnings, fmt.Sprintf("MinionBinding %s/%s: would leave %s in Vault", b.Namespace, b.Name, w))
		}
		for _, w := range b.plan.Skipped {
			plan.Warnings = append(plan.Warnings, fmt.Sprintf("MinionBinding %s/%s: not planned: %s", b.Namespace, b.Name, w))
		}
	}
}

// planBinding passes the binding through the operator's admission gate,
// then plans its Vault objects with the binding reconciler's own planner.
// res is nil when the binding is refused (it then renders no policy
// documents either).
func planBinding(ctx context.Context, vc vault.Client, facts *manifestFacts, b *v1alpha1.MinionBinding) (BindingPlan, *render.Result, error) {
	a, err := admission.Admit(ctx, facts, b)
	if err != nil {
		if v, ok := admission.AsVerdict(err); ok {
			return refusedBinding(b, v.Reason, v.Message), nil, nil
		}
		return BindingPlan{}, nil, fmt.Errorf("MinionBinding %s/%s: %w", b.Namespace, b.Name, err)
	}
	bp, err := planVault(ctx, vc, facts.in, b, a)
	if bp.Refused != nil || err != nil {
		return bp, nil, err
	}
	return bp, a.Result, nil
}

// planVault prints the binding reconciler's own plan (observe, then
// planBinding) for b: its actions that write, in the order the reconciler
// makes them.
func planVault(ctx context.Context, vc vault.Client, in *planInput, b *v1alpha1.MinionBinding, a *admission.Admitted) (BindingPlan, error) {
	ns := ""
	if a.Template != nil {
		if conn := in.Connections[a.Template.Spec.ConnectionRef.Name]; conn != nil {
			ns = conn.Spec.Namespace
		}
	}
	plan, err := binding.PlanBinding(ctx, vc, ns, b, a)
	if err != nil {
		if reason, msg, ok := binding.Refusal(err); ok {
			return refusedBinding(b, reason, msg), nil
		}
		return BindingPlan{}, fmt.Errorf("MinionBinding %s/%s: %w", b.Namespace, b.Name, err)
	}
	bp := bindingPlan(b)
	bp.Changes, bp.plan = plan.Changes, plan
	return bp, nil
}

func templateNamed(in *planInput, name string) *v1alpha1.MinionTemplate {
	if t := in.Set.Template(name); t != nil {
		return t.Obj
	}
	return nil
}

func bindingPlan(b *v1alpha1.MinionBinding) BindingPlan {
	return BindingPlan{Namespace: b.Namespace, Name: b.Name, MinionID: b.Spec.MinionID, Template: b.Spec.TemplateRef.Name, Changes: []vault.Change{}}
}

func refusedBinding(b *v1alpha1.MinionBinding, reason, msg string) BindingPlan {
	bp := bindingPlan(b)
	bp.Refused = &Refusal{Reason: reason, Message: msg}
	return bp
}
