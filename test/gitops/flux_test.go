package gitops

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"
)

// Flux's kustomize-controller computes health with kstatus (its fork
// github.com/fluxcd/cli-utils, whose pkg/kstatus/status is the same code as
// sigs.k8s.io/cli-utils v0.37.2's), except for kinds that have an entry in
// .spec.healthCheckExprs: those go through github.com/fluxcd/pkg/runtime/cel,
// reproduced here (status_evaluator.go, expression.go): observedGeneration
// differing from generation is InProgress; then inProgress, failed and
// current are evaluated in that order on the object itself, the first true
// decides, and none true is InProgress.

// fluxExpr is one entry of a Kustomization's .spec.healthCheckExprs.
type fluxExpr struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind,omitempty"`
	Current    string `json:"current"`
	InProgress string `json:"inProgress,omitempty"`
	Failed     string `json:"failed,omitempty"`
}

// fluxKustomization is the part of a Flux Kustomization read here.
type fluxKustomization struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		Wait             bool       `json:"wait"`
		HealthCheckExprs []fluxExpr `json:"healthCheckExprs"`
	} `json:"spec"`
}

var gitopsDoc = filepath.Join("..", "..", "docs", "gitops.md")

// fluxKustomizationFromDocs returns the Flux Kustomization that
// docs/gitops.md gives users to copy: the one yaml block with
// kind: Kustomization of kustomize.toolkit.fluxcd.io.
func fluxKustomizationFromDocs(path string) (*fluxKustomization, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var found []*fluxKustomization
	for _, block := range yamlBlocks(string(raw)) {
		for _, doc := range strings.Split(block, "\n---\n") {
			k := &fluxKustomization{}
			if err := yaml.Unmarshal([]byte(doc), k); err != nil {
				return nil, fmt.Errorf("%s: a yaml block does not parse: %w", path, err)
			}
			if k.Kind == "Kustomization" && strings.HasPrefix(k.APIVersion, "kustomize.toolkit.fluxcd.io/") {
				found = append(found, k)
			}
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%s: %d Flux Kustomizations, want one", path, len(found))
	}
	return found[0], nil
}

// yamlBlocks returns the contents of the ```yaml fences of a Markdown text.
func yamlBlocks(md string) []string {
	var out []string
	var cur *bytes.Buffer
	for _, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && trimmed == "```yaml":
			cur = &bytes.Buffer{}
		case cur != nil && trimmed == "```":
			out = append(out, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return out
}

// fluxHealth computes an object's health as Flux's kustomize-controller
// does with the given healthCheckExprs.
type fluxHealth struct {
	evaluators map[schema.GroupKind]*celEvaluator
}

func newFluxHealth(exprs []fluxExpr) (*fluxHealth, error) {
	f := &fluxHealth{evaluators: map[schema.GroupKind]*celEvaluator{}}
	for i, e := range exprs {
		gk := schema.FromAPIVersionAndKind(e.APIVersion, e.Kind).GroupKind()
		if _, dup := f.evaluators[gk]; dup {
			return nil, fmt.Errorf("healthCheckExprs[%d]: duplicate %s", i, gk)
		}
		ev, err := newCELEvaluator(e)
		if err != nil {
			return nil, fmt.Errorf("healthCheckExprs[%d]: %w", i, err)
		}
		f.evaluators[gk] = ev
	}
	return f, nil
}

func (f *fluxHealth) Compute(u *unstructured.Unstructured) (status.Status, error) {
	gk := u.GroupVersionKind().GroupKind()
	ev, ok := f.evaluators[gk]
	if !ok {
		ev, ok = f.evaluators[schema.GroupKind{Group: gk.Group}]
	}
	if !ok {
		res, err := status.Compute(u)
		if err != nil {
			return "", err
		}
		return res.Status, nil
	}
	st, err := ev.Evaluate(u)
	if err != nil {
		// Flux's status reader reports an error as Unknown (statusreaders'
		// errResourceToResourceStatus) and keeps polling until the timeout.
		return status.UnknownStatus, nil
	}
	return st, nil
}

type celEvaluator struct {
	current, inProgress, failed cel.Program
}

func newCELEvaluator(e fluxExpr) (*celEvaluator, error) {
	if e.Current == "" {
		return nil, fmt.Errorf("expression Current not specified")
	}
	var ev celEvaluator
	for _, x := range []struct {
		src  string
		prog *cel.Program
	}{{e.Current, &ev.current}, {e.InProgress, &ev.inProgress}, {e.Failed, &ev.failed}} {
		if x.src == "" {
			continue
		}
		p, err := celProgram(x.src)
		if err != nil {
			return nil, err
		}
		*x.prog = p
	}
	return &ev, nil
}

// celProgram parses (not compiles: the objects' fields are not declared)
// an expression in Flux's CEL environment.
func celProgram(expr string) (cel.Program, error) {
	env, err := cel.NewEnv(
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(),
		ext.Sets(),
		ext.Encoders(),
	)
	if err != nil {
		return nil, fmt.Errorf("CEL environment: %w", err)
	}
	ast, issues := env.Parse(expr)
	if issues != nil && issues.Err() != nil {
		return nil, fmt.Errorf("parsing %q: %w", expr, issues.Err())
	}
	return env.Program(ast, cel.EvalOptions(cel.OptOptimize), cel.InterruptCheckFrequency(100))
}

func (ev *celEvaluator) Evaluate(u *unstructured.Unstructured) (status.Status, error) {
	obj := u.UnstructuredContent()
	observed, ok, err := unstructured.NestedInt64(obj, "status", "observedGeneration")
	if err == nil && ok {
		if gen, ok, err := unstructured.NestedInt64(obj, "metadata", "generation"); err == nil && ok && observed != gen {
			return status.InProgressStatus, nil
		}
	}
	for _, x := range []struct {
		prog cel.Program
		st   status.Status
	}{{ev.inProgress, status.InProgressStatus}, {ev.failed, status.FailedStatus}, {ev.current, status.CurrentStatus}} {
		if x.prog == nil {
			continue
		}
		val, _, err := x.prog.ContextEval(context.Background(), obj)
		if err != nil {
			return "", fmt.Errorf("evaluating a health check expression: %w", err)
		}
		b, ok := val.(types.Bool)
		if !ok {
			return "", fmt.Errorf("a health check expression returned %v, not a bool", val)
		}
		if b {
			return x.st, nil
		}
	}
	return status.InProgressStatus, nil
}
