package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/minionvault/minion-vault-operator/internal/testing/vectors"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// These tests run the vectors through the built binary on manifests, the
// way users (and reviewers' tooling) call `minionvault render`.

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "minionvault-cli")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "minionvault")
	build := exec.Command("go", "build", "-o", binary, ".")
	// The binary as `make build` builds it, without cgo: `make unit` runs
	// these tests with CGO_ENABLED=1 for the race detector, and a cgo build
	// would compile all 690 dependencies a third time (150 s on a cold
	// cache) where the packages go vet compiled already serve.
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		panic("building minionvault: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func obj(kv ...any) value.Value {
	pairs := make([]value.Pair, 0, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		pairs = append(pairs, value.Pair{Key: value.NewString(kv[i].(string)), Val: kv[i+1].(value.Value)})
	}
	return value.NewMap(pairs)
}

func jsonValue(t testing.TB, raw json.RawMessage) value.Value {
	t.Helper()
	v, err := vectors.Value(raw)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func writeManifests(t testing.TB, dir string, tspec, bspec value.Value) (string, string) {
	t.Helper()
	tm := obj("apiVersion", value.NewString("minionvault.dev/v1alpha1"), "kind", value.NewString("MinionTemplate"),
		"metadata", obj("name", value.NewString("t")), "spec", tspec)
	bm := obj("apiVersion", value.NewString("minionvault.dev/v1alpha1"), "kind", value.NewString("MinionBinding"),
		"metadata", obj("name", value.NewString("b"), "namespace", value.NewString("default")),
		"spec", bspec.Set(value.NewString("templateRef"), obj("name", value.NewString("t"))))
	tp, bp := filepath.Join(dir, "t.yaml"), filepath.Join(dir, "b.yaml")
	for path, v := range map[string]value.Value{tp: tm, bp: bm} {
		out, err := yaml.Marshal(v.ToYAMLNode())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, out, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return tp, bp
}

// runRender returns the decoded output, or nil when the command failed.
func runRender(t testing.TB, args ...string) (map[string]any, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(binary, append([]string{"render", "-o", "json"}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, stderr.String()
	}
	var out map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, stdout.String())
	}
	return out, stderr.String()
}

// limit runs at most two renders at a time per CPU.
var limit = make(chan struct{}, 2*runtime.NumCPU())

func TestTemplatingVectorsThroughCLI(t *testing.T) {
	cases, err := vectors.Templating("../../pkg/template/testdata/templating.json")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	passed := 0
	t.Cleanup(func() { t.Logf("%d/%d templating vectors pass through the CLI", passed, len(cases)) })
	for _, c := range cases {
		t.Run(c.ID, func(t *testing.T) {
			t.Parallel()
			limit <- struct{}{}
			defer func() { <-limit }()
			var tspec value.Value
			bspec := obj("minionID", value.NewString(c.Minion))
			args := []string{}
			switch c.Kind {
			case "policies":
				items := []value.Value{}
				for _, p := range c.Patterns {
					items = append(items, value.NewString(p))
				}
				tspec = obj("policies", obj("assign", value.NewList(items)))
				bspec = bspec.Set(value.NewString("grains"), jsonValue(t, c.Grains))
			case "metadata":
				pairs := []value.Pair{}
				for _, kv := range c.Metadata {
					pairs = append(pairs, value.Pair{Key: value.NewString(kv[0]), Val: value.NewString(kv[1])})
				}
				tspec = obj("metadata", obj("entity", value.NewMap(pairs)))
				if c.JID != nil {
					args = append(args, "--jid", *c.JID)
				}
				if c.User != nil {
					args = append(args, "--user", *c.User)
				}
			default:
				tspec = obj("pillarPaths", value.NewList([]value.Value{value.NewString(*c.Pattern)}))
			}
			bspec = bspec.Set(value.NewString("pillar"), jsonValue(t, c.Pillar))
			tp, bp := writeManifests(t, t.TempDir(), tspec, bspec)
			out, stderr := runRender(t, append([]string{"--template", tp, "--binding", bp}, args...)...)

			if c.WantsError() {
				if out != nil {
					t.Fatalf("want a failed render, got %v", out)
				}
				if bytes.Count([]byte(stderr), []byte("\n")) != 1 {
					t.Fatalf("want a one-line reason on stderr, got %q", stderr)
				}
			} else {
				if out == nil {
					t.Fatalf("render failed: %s", stderr)
				}
				var got, want any
				switch c.Kind {
				case "policies":
					got = out["policies"]
				case "pillar_paths":
					got = out["pillarPaths"]
				default:
					entity := out["metadata"].(map[string]any)["entity"].(map[string]any)
					if !c.HasKey("minion-id") {
						delete(entity, "minion-id") // the default the template merges into
					}
					got = entity
				}
				if c.Kind == "metadata" {
					m := map[string]any{}
					for _, p := range c.WantPairs() {
						m[p[0]] = p[1]
					}
					want = m
				} else {
					_ = json.Unmarshal(c.Expected, &want)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("got  %v\nwant %v", got, want)
				}
			}
			mu.Lock()
			passed++
			mu.Unlock()
		})
	}
}

func TestParametersVectorsThroughCLI(t *testing.T) {
	cases, err := vectors.Parameters("../../pkg/parameters/testdata/parameters.json")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	passed := 0
	t.Cleanup(func() { t.Logf("%d/%d parameters vectors pass through the CLI", passed, len(cases)) })
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			limit <- struct{}{}
			defer func() { <-limit }()
			grains := jsonValue(t, c.Grains)
			minion := "minion"
			if id, ok := grains.GetString("id"); ok {
				minion = id.PyStr()
			}
			tspec := obj("parameters", obj("root", value.NewString(c.TplRoot), "files", jsonValue(t, c.Files)))
			bspec := obj("minionID", value.NewString(minion), "grains", grains,
				"pillar", jsonValue(t, c.Pillar), "config", jsonValue(t, c.Opts))
			tp, bp := writeManifests(t, t.TempDir(), tspec, bspec)
			out, stderr := runRender(t, "--template", tp, "--binding", bp)
			if c.ExpectedError {
				if out != nil {
					t.Fatalf("want a failed render, got mapdata %v", out["mapdata"])
				}
			} else {
				if out == nil {
					t.Fatalf("render failed: %s", stderr)
				}
				var want any
				_ = json.Unmarshal(c.Expected, &want)
				if !reflect.DeepEqual(out["mapdata"], want) {
					t.Fatalf("mapdata\ngot  %v\nwant %v", out["mapdata"], want)
				}
			}
			mu.Lock()
			passed++
			mu.Unlock()
		})
	}
}
