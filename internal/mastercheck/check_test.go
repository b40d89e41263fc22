package mastercheck

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/importer"
)

func template(t *testing.T, app *v1alpha1.MinionAppRoleSpec) *Template {
	t.Helper()
	tpl, err := FromTemplate(&v1alpha1.MinionTemplate{ObjectMeta: metav1.ObjectMeta{Name: "salt-minions"},
		Spec: v1alpha1.MinionTemplateSpec{AppRole: app}})
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

func master(t *testing.T, yaml ...string) *Master {
	t.Helper()
	var files []importer.File
	for i, y := range yaml {
		files = append(files, importer.File{Name: []string{"master", "master.d/a.conf", "master.d/b.conf"}[i], Data: []byte(y)})
	}
	m, err := Parse(files...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

const peerRun = `
peer_run:
  .*:
    - vault.get_config
    - vault.generate_secret_id
`

// keys lists "severity key" of the findings, sorted.
func keys(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, string(f.Severity)+" "+f.Key)
	}
	slices.Sort(out)
	return out
}

func TestCheck(t *testing.T) {
	nulls := "\n" + `        secret_id_num_uses: null
        secret_id_ttl: null
        token_explicit_max_ttl: null
        token_num_uses: null` + "\n"
	cases := []struct {
		name   string
		config string
		app    *v1alpha1.MinionAppRoleSpec
		want   []string
	}{
		{"saltext's defaults against the operator's: equal, each compared key a note",
			"vault:\n  issue:\n    type: approle\n" + peerRun, nil,
			[]string{"note vault:issue:approle:params:secret_id_num_uses", "note vault:issue:approle:params:secret_id_ttl",
				"note vault:issue:approle:params:token_explicit_max_ttl", "note vault:issue:approle:params:token_num_uses"}},
		{"the recommended nulls: nothing",
			"vault:\n  issue:\n    type: approle\n    approle:\n      params:" + nulls + peerRun, nil, nil},
		{"a default compared against a template that changed it",
			"vault:\n  issue:\n    type: approle\n" + peerRun, &v1alpha1.MinionAppRoleSpec{TokenNumUses: ptr.To[int64](3)},
			[]string{"fight vault:issue:approle:params:token_num_uses", "note vault:issue:approle:params:secret_id_num_uses",
				"note vault:issue:approle:params:secret_id_ttl", "note vault:issue:approle:params:token_explicit_max_ttl"}},
		{"CIDRs as a string, a /32, token_no_default_policy",
			"vault:\n  issue:\n    type: approle\n    approle:\n      params:" + nulls +
				"        token_bound_cidrs: 10.0.0.0/8\n        secret_id_bound_cidrs: [10.0.0.1/32]\n        token_no_default_policy: true\n" + peerRun,
			&v1alpha1.MinionAppRoleSpec{TokenBoundCIDRs: []string{"10.0.0.0/8"}, SecretIDBoundCIDRs: []string{"10.0.0.1"}},
			[]string{"fight vault:issue:approle:params:secret_id_bound_cidrs", "fight vault:issue:approle:params:token_bound_cidrs",
				"fight vault:issue:approle:params:token_no_default_policy"}},
		{"a /32 the operator's role also has is no fight: Vault keeps secret_id_bound_cidrs as written",
			"vault:\n  issue:\n    type: approle\n    approle:\n      params:" + nulls + "        secret_id_bound_cidrs: [10.0.0.1/32]\n" + peerRun,
			&v1alpha1.MinionAppRoleSpec{SecretIDBoundCIDRs: []string{"10.0.0.1/32"}},
			[]string{"note vault:issue:approle:params:secret_id_bound_cidrs"}},
		{"token issuing, another mount, overrides, bind_secret_id null",
			"vault:\n  issue:\n    allow_minion_override_params: true\n    approle:\n      mount: minions\n      params:" + nulls + "        bind_secret_id: null\n" + peerRun, nil,
			[]string{"fight vault:issue:allow_minion_override_params", "fight vault:issue:approle:mount",
				"fight vault:issue:approle:params:bind_secret_id", "fight vault:issue:type"}},
		{"bind_secret_id unlike the template's",
			"vault:\n  issue:\n    type: approle\n    approle:\n      params:" + nulls + "        bind_secret_id: true\n" + peerRun,
			&v1alpha1.MinionAppRoleSpec{BindSecretID: ptr.To(false), TokenBoundCIDRs: []string{"10.0.0.0/8"}},
			[]string{"fight vault:issue:approle:params:bind_secret_id"}},
		{"params null as a whole",
			"vault:\n  issue:\n    type: approle\n    approle:\n      params: null\n" + peerRun, nil,
			[]string{"fight vault:issue:approle:params"}},
		{"peer_run: the deprecated runner by a wide pattern, the issuing ones missing",
			"vault:\n  issue:\n    type: approle\n    approle:\n      params:" + nulls + "peer_run:\n  web.*:\n    - vault.gen.*\n", nil,
			[]string{"fight peer_run", "fight peer_run", "fight peer_run"}},
		{"no vault: at all", "interface: 0.0.0.0\n" + peerRun, nil, []string{"fight vault"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, fs, err := master(t, tc.config).Check([]*Template{template(t, tc.app)})
			if err != nil {
				t.Fatal(err)
			}
			if got := keys(fs); !slices.Equal(got, tc.want) {
				t.Errorf("findings %q, want %q\n%+v", got, tc.want, fs)
			}
		})
	}
}

func TestPeerRunFindingsNameTheRunners(t *testing.T) {
	_, fs, err := master(t, "vault:\n  issue:\n    type: approle\npeer_run:\n  web.*:\n    - vault.gen.*\n").Check([]*Template{template(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	text := ""
	for _, f := range fs {
		text += f.Problem + "\n"
	}
	for _, want := range []string{"no minion may run vault.get_config", "web.* may run vault.generate_token", "web.* may run vault.generate_new_token"} {
		if !strings.Contains(text, want) {
			t.Errorf("findings lack %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "may run vault.generate_secret_id") {
		t.Errorf("vault.generate_secret_id is an issuing runner:\n%s", text)
	}
}

// The configuration the import writes passes the check, keeps the
// master's other settings and copies no credential.
func TestConfigIsIssueOnly(t *testing.T) {
	stock := `vault:
  auth:
    method: approle
    role_id: 1a2b-secret-role
    secret_id: sdb://vault/master-secret
    token: hvs.secret-token
  keys: [unseal-key-1]
  server:
    url: https://vault.example.com:8200
  issue:
    type: approle
    wrap: 60s
    allow_minion_override_params: true
    approle:
      params:
        token_num_uses: 5
        token_bound_cidrs: 10.0.0.0/8
peer_run:
  .*:
    - vault.generate_token
`
	m := master(t, stock)
	tpl := template(t, &v1alpha1.MinionAppRoleSpec{Mount: "minions", BindSecretID: ptr.To(false), TokenBoundCIDRs: []string{"10.1.0.0/16"}})
	if _, fs, _ := m.Check([]*Template{tpl}); Fights(fs) < 4 {
		t.Fatalf("the stock configuration: %d fights, want at least 4: %+v", Fights(fs), fs)
	}
	out, err := Config(m, tpl)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"1a2b-secret-role", "hvs.secret-token", "unseal-key-1"} {
		if strings.Contains(string(out), secret) {
			t.Errorf("the configuration copies %q:\n%s", secret, out)
		}
	}
	for _, kept := range []string{"https://vault.example.com:8200", "wrap: 60s", "sdb://vault/master-secret", "method: approle", "mount: minions", "bind_secret_id: false"} {
		if !strings.Contains(string(out), kept) {
			t.Errorf("the configuration lacks %q:\n%s", kept, out)
		}
	}
	// Installed as the master.d file that held vault: (the main file has
	// none), it leaves no fight and no note.
	_, fs, err := master(t, "interface: 0.0.0.0\n", string(out)).Check([]*Template{tpl})
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 0 {
		t.Errorf("the written configuration: %+v", fs)
	}
	if got := string(Policy(tpl)); !strings.Contains(got, `path "auth/minions/role/+/secret-id"`) || strings.Contains(got, "salt-minions") {
		t.Errorf("policy for mount minions:\n%s", got)
	}
}

// Salt's merge: master.d files merge recursively with lists extended; the
// main file's top-level keys are replaced whole.
func TestParseMergesAsSalt(t *testing.T) {
	m := master(t,
		"vault:\n  server:\n    url: http://main\npeer_run:\n  .*: [vault.generate_token]\n",
		"vault:\n  issue:\n    type: approle\npeer_run:\n  .*: [vault.get_config]\n",
		"vault:\n  issue:\n    approle:\n      mount: m\npeer_run:\n  .*: [vault.generate_secret_id, vault.get_config]\n")
	if _, ok := m.lookup("server:url"); ok {
		t.Error("the main file's vault: survived a master.d vault:")
	}
	if v, _ := m.lookup("issue:type"); v.Str() != "approle" {
		t.Errorf("issue:type %v", v)
	}
	if v, _ := m.lookup("issue:approle:mount"); v.Str() != "m" {
		t.Errorf("issue:approle:mount %v", v)
	}
	runners, _ := m.PeerRun.GetString(".*")
	var got []string
	for _, it := range runners.Items() {
		got = append(got, it.Str())
	}
	if !slices.Equal(got, []string{"vault.get_config", "vault.generate_secret_id"}) {
		t.Errorf("peer_run .* %q", got)
	}
}

func TestReadFiles(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "master.d"), 0o755))
	for _, f := range []string{"master", "master.d/b.conf", "master.d/a.conf", "master.d/notes.txt"} {
		must(os.WriteFile(filepath.Join(dir, f), []byte("{}\n"), 0o644))
	}
	files, err := ReadFiles([]string{dir})
	must(err)
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimPrefix(f.Name, dir+"/"))
	}
	if !slices.Equal(names, []string{"master", "master.d/a.conf", "master.d/b.conf"}) {
		t.Errorf("read %q", names)
	}
	if _, err := ReadFiles([]string{filepath.Join(dir, "missing")}); err == nil {
		t.Error("a missing file read")
	}
}

type fakeVault struct {
	roles map[string]map[string]any
	caps  map[string][]string
	err   error
}

func (f *fakeVault) ReadRole(_ context.Context, _, name string) (map[string]any, error) {
	return f.roles[name], f.err
}

func (f *fakeVault) MasterCapabilities(_ context.Context, path string) ([]string, error) {
	if c, ok := f.caps[path]; ok {
		return c, nil
	}
	return []string{"deny"}, nil
}

func TestCheckRolesAndRights(t *testing.T) {
	tpl := template(t, nil)
	m := master(t, "vault:\n  issue:\n    type: approle\n    approle:\n      params:\n        token_ttl: 1h\n"+peerRun)
	v := &fakeVault{roles: map[string]map[string]any{
		"web01": tpl.Role,
		"db01":  map[string]any{"token_ttl": "3600"}, // JSON numbers come as json.Number, a string never equals
	}}
	issueOnly := map[string][]string{
		"auth/salt-minions/role/web01":           {"read"},
		"auth/salt-minions/role/web01/role-id":   {"read"},
		"auth/salt-minions/role/web01/secret-id": {"update"},
	}
	quickstart := map[string][]string{
		"auth/salt-minions/role/web01":               {"create", "read", "update", "delete"},
		"auth/salt-minions/role":                     {"list"},
		"auth/salt-minions/role/web01/role-id":       {"read"},
		"auth/salt-minions/role/web01/secret-id":     {"update"},
		"identity/entity/name/salt_minion_web01":     {"create", "read", "update", "delete"},
		"identity/entity-alias":                      {"create", "update"},
		"sys/auth/salt-minions":                      {"read", "sudo"},
		"auth/token/create":                          {"deny"},
		"identity/lookup/entity":                     {"create", "update"},
		"auth/salt-minions/role/web01/secret-id-acc": {"deny"},
	}
	for _, tc := range []struct {
		name       string
		caps       map[string][]string
		wantRights []string
		wantRoles  []string
	}{
		{"issue only", issueOnly, nil, []string{"fight auth/salt-minions/role/db01", "fight auth/salt-minions/role/web01", "note auth/salt-minions/role/new01"}},
		{"quickstart", quickstart, []string{"fight auth/salt-minions/role", "fight auth/salt-minions/role/web01", "fight identity/"},
			[]string{"fight auth/salt-minions/role/db01", "fight auth/salt-minions/role/new01", "fight auth/salt-minions/role/web01"}},
		{"nothing", map[string][]string{}, []string{"fight master token"}, []string{"fight auth/salt-minions/role/db01", "fight auth/salt-minions/role/web01", "note auth/salt-minions/role/new01"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v.caps = tc.caps
			rights, fs, err := CheckRights(context.Background(), v, "salt-minions", "web01")
			if err != nil {
				t.Fatal(err)
			}
			if got := keys(fs); !slices.Equal(got, tc.wantRights) {
				t.Errorf("rights findings %q, want %q", got, tc.wantRights)
			}
			fs, err = m.CheckRoles(context.Background(), v, tpl, []string{"web01", "db01", "new01"}, rights)
			if err != nil {
				t.Fatal(err)
			}
			if got := keys(fs); !slices.Equal(got, tc.wantRoles) {
				t.Errorf("role findings %q, want %q\n%+v", got, tc.wantRoles, fs)
			}
		})
	}
	v.err = errors.New("connection refused")
	if _, err := m.CheckRoles(context.Background(), v, tpl, []string{"web01"}, Rights{}); err == nil || !strings.Contains(err.Error(), "auth/salt-minions/role/web01") {
		t.Errorf("a failed read: %v", err)
	}
}
