package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The CI examples of docs/gitops.md are run as written: the GitHub Actions
// step's run and the GitLab job's script, taken from the doc, under sh -e
// (as both runners run them) with the built binary, on the fleets of
// testdata/gitops; gh and curl are stubs that record what they would post.

// ciExamples are the commands of the doc's two examples.
func ciExamples(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/gitops.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		block = block[:strings.Index(block, "```")]
		var y struct {
			Name string
			Jobs map[string]struct {
				Steps []struct{ Name, Run string }
			}
			VaultAccess struct {
				Script []string
			} `yaml:"vault-access"`
		}
		if err := yaml.Unmarshal([]byte(block), &y); err != nil {
			continue // other examples (Flux, Argo CD) may not be this shape
		}
		for _, s := range y.Jobs["audit"].Steps {
			if y.Name == "vault-access" && s.Name == "Access diff" {
				out["github"] = s.Run
			}
		}
		if len(y.VaultAccess.Script) > 0 {
			out["gitlab"] = strings.Join(y.VaultAccess.Script, "\n")
		}
	}
	if out["github"] == "" || out["gitlab"] == "" {
		t.Fatalf("docs/gitops.md: the examples' commands not found: %q", out)
	}
	return out
}

// stubs are gh and curl: each logs its arguments and copies the comment
// it would post to $STUB_BODY.
const ghStub = `#!/bin/sh
echo "gh $*" >> "$STUB_LOG"
while [ $# -gt 0 ]; do
  [ "$1" = "--body-file" ] && cp "$2" "$STUB_BODY"
  shift
done
exit 0
`

const curlStub = `#!/bin/sh
echo "curl $*" >> "$STUB_LOG"
for a in "$@"; do
  case "$a" in body@*) cp "${a#body@}" "$STUB_BODY" ;; esac
done
exit 0
`

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	if from == "" {
		return
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) != ".yaml" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestGitOpsCIExamples(t *testing.T) {
	examples := ciExamples(t)
	fleets, err := filepath.Abs("testdata/gitops")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		head  string // a folder of testdata/gitops; "" is an empty folder
		code  int
		first string // the comment's first line; "" no comment
	}{
		{"no change", "base", 0, "## ✅ Vault access: no minion gains access"},
		{"a minion gains access", "head", 1, "## ❌ Vault access: 1 minion gains access"},
		{"the operator would refuse a binding", "refused", 1, "## ❌ Vault access: 1 binding the operator would refuse"},
		{"an empty head", "", 2, ""},
	}
	for ci, script := range examples {
		for _, c := range cases {
			t.Run(ci+"/"+c.name, func(t *testing.T) {
				work := t.TempDir()
				copyDir(t, filepath.Join(fleets, "base"), filepath.Join(work, "base", "minion-vault"))
				head := ""
				if c.head != "" {
					head = filepath.Join(fleets, c.head)
				}
				copyDir(t, head, filepath.Join(work, "head", "minion-vault"))
				bin := filepath.Join(work, ".bin")
				if err := os.MkdirAll(bin, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(binary, filepath.Join(bin, "minionvault")); err != nil {
					t.Fatal(err)
				}
				for name, text := range map[string]string{"gh": ghStub, "curl": curlStub} {
					if err := os.WriteFile(filepath.Join(bin, name), []byte(text), 0o755); err != nil {
						t.Fatal(err)
					}
				}
				log, body := filepath.Join(work, ".stub.log"), filepath.Join(work, ".stub.body")
				cmd := exec.Command("sh", "-e", "-c", script)
				cmd.Dir = work
				cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
					"STUB_LOG="+log, "STUB_BODY="+body,
					// GitHub Actions
					"GH_TOKEN=t", "PR=7", "GITHUB_REPOSITORY=o/fleet", "GITHUB_STEP_SUMMARY="+filepath.Join(work, ".summary"),
					// GitLab CI
					"GITLAB_API_TOKEN=t", "CI_API_V4_URL=https://gitlab.example/api/v4", "CI_PROJECT_ID=3", "CI_MERGE_REQUEST_IID=7")
				out, err := cmd.CombinedOutput()
				code := 0
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				} else if err != nil {
					t.Fatal(err)
				}
				if code != c.code {
					t.Fatalf("exit %d, want %d:\n%s", code, c.code, out)
				}
				posted, err := os.ReadFile(body)
				if c.first == "" {
					if err == nil {
						t.Fatalf("a comment was posted:\n%s", posted)
					}
					if !strings.Contains(string(out), "no MinionBinding among the manifests") {
						t.Fatalf("no reason given:\n%s", out)
					}
					return
				}
				if err != nil {
					t.Fatalf("no comment posted: %v\n%s", err, out)
				}
				// The comment is the report, byte for byte.
				want, _, _ := run(t, "audit", "diff", "--base", filepath.Join(work, "base", "minion-vault"),
					"--head", filepath.Join(work, "head", "minion-vault"), "-o", "markdown")
				if string(posted) != want || !strings.HasPrefix(want, c.first+"\n") {
					t.Fatalf("posted:\n%s\nwant (first line %q):\n%s", posted, c.first, want)
				}
				calls, err := os.ReadFile(log)
				if err != nil {
					t.Fatal(err)
				}
				wantCall := map[string]string{
					"github": "gh pr comment 7 --repo o/fleet --body-file access-diff.md\n",
					"gitlab": "https://gitlab.example/api/v4/projects/3/merge_requests/7/notes\n",
				}[ci]
				if !strings.HasSuffix(string(calls), wantCall) || strings.Count(string(calls), "\n") != 1 {
					t.Fatalf("calls:\n%s\nwant one ending in %q", calls, wantCall)
				}
			})
		}
	}
}
