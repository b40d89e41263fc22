package importer

import (
	"bytes"
	"strings"
	"testing"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/internal/manifest"
)

func TestBindingName(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"web01", "web01"},
		{"web01.example.com", "web01.example.com"},
		{"db-1", "db-1"},
		{"Web01", "web01-" + hash8("Web01")},
		{"Web_01", "web-01-92939705"},                         // the example of the --help text
		{"Web_02.Example.COM", "web-02.example.com-344e1b24"}, // docs/migration.md
		{"web_01", "web-01-" + hash8("web_01")},
		{"Web_02.Example.COM", "web-02.example.com-" + hash8("Web_02.Example.COM")},
		{"a..b", "a.b-" + hash8("a..b")},
		{"-x-", "x-" + hash8("-x-")},
		{"x.y-", "x.y-" + hash8("x.y-")},
		{"ÄÖ", "minion-" + hash8("ÄÖ")},
		{"___", "minion-" + hash8("___")},
		{"db01:5", "db01-5-" + hash8("db01:5")},
	} {
		got := BindingName(tc.id)
		if got != tc.want {
			t.Errorf("BindingName(%q) = %q, want %q", tc.id, got, tc.want)
		}
		if !isValidName(got) {
			t.Errorf("BindingName(%q) = %q is not a DNS-1123 subdomain", tc.id, got)
		}
	}
	long := strings.Repeat("Ab", 200)
	if got := BindingName(long); len(got) > 253 || !isValidName(got) || !strings.HasSuffix(got, "-"+hash8(long)) {
		t.Errorf("long ID: %q", got)
	}
}

func hash8(id string) string { return bindingName(id, 8)[len(bindingName(id, 8))-8:] }

func TestBindingNamesCollisions(t *testing.T) {
	// A valid ID equal to another ID's derived name keeps its name; the
	// derived one gets a longer hash.
	derived := BindingName("Web_01")
	names, err := bindingNames([]string{"Web_01", derived})
	if err != nil {
		t.Fatal(err)
	}
	if names[derived] != derived || names["Web_01"] == derived || !isValidName(names["Web_01"]) {
		t.Errorf("names %v", names)
	}
	if len(names["Web_01"]) != len(derived)+8 {
		t.Errorf("derived name %q: want a 16-digit hash", names["Web_01"])
	}
	// Case variants never collide.
	names, err = bindingNames([]string{"WEB01", "Web01", "web01"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("duplicate name in %v", names)
		}
		seen[n] = true
	}
	if names["web01"] != "web01" {
		t.Errorf("web01 renamed: %v", names)
	}
}

func TestParseMinionData(t *testing.T) {
	stream := `{"b": {"id": "b", "x": 1.0}, "a": {"id": "a"}}
{"c": false}
{"b": {"id": "b", "x": 2}}
`
	data, warnings, err := ParseMinionData("grains", []byte(stream))
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 2 || data[0].ID != "b" || data[1].ID != "a" {
		t.Fatalf("data %+v", data)
	}
	if x, _ := data[0].Data.GetString("x"); x.PyStr() != "2" {
		t.Errorf("b's x = %s, want the later 2", x.PyStr())
	}
	all := strings.Join(warnings, "\n")
	if !strings.Contains(all, `"c" is a bool`) || !strings.Contains(all, `"b" given twice`) {
		t.Errorf("warnings %q", warnings)
	}
	for _, bad := range []string{`[1]`, `{"a": {}`, `{"a": {}} x`, `"s"`} {
		if _, _, err := ParseMinionData("pillar", []byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func importString(t *testing.T, cfg, grains, pillar string, opts Options) (*Output, string) {
	t.Helper()
	in := Input{Config: []File{{Name: "master.yaml", Data: []byte(cfg)}}}
	if grains != "" {
		in.Grains = &File{Name: "grains.json", Data: []byte(grains)}
	}
	if pillar != "" {
		in.Pillar = &File{Name: "pillar.json", Data: []byte(pillar)}
	}
	out, err := Import(in, opts)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := out.WriteYAML(&buf); err != nil {
		t.Fatal(err)
	}
	return out, buf.String()
}

func bindings(t *testing.T, stream string) []v1alpha1.MinionBinding {
	t.Helper()
	docs, err := manifest.Parse([]byte(stream))
	if err != nil {
		t.Fatal(err)
	}
	var out []v1alpha1.MinionBinding
	for _, d := range docs {
		if d.Kind != "MinionBinding" {
			continue
		}
		var mb v1alpha1.MinionBinding
		if err := d.Decode(&mb); err != nil {
			t.Fatal(err)
		}
		out = append(out, mb)
	}
	return out
}

// TestSecretsNeverInOutput: the master's credentials never reach the
// manifests or the warnings, and pillar keys no pattern reads stay out
// unless --all-pillar asks for them.
func TestSecretsNeverInOutput(t *testing.T) {
	pillar := `{"web01": {"roles": ["web"], "db_password": "PILLAR-SECRET", "nested": {"k": "NESTED-SECRET"}}}`
	for _, cfg := range []string{modernConfig, legacyCoreConfig} {
		out, stream := importString(t, cfg, "", pillar, Options{})
		text := stream + strings.Join(out.Warnings, "\n")
		for _, s := range append(plantedSecrets, "PILLAR-SECRET", "NESTED-SECRET", "db_password") {
			if strings.Contains(text, s) {
				t.Errorf("%q in the output:\n%s", s, text)
			}
		}
		if !strings.Contains(stream, "FILL IN") {
			t.Errorf("no placeholder comment for the connection's auth:\n%s", stream)
		}
	}
	// --all-pillar is the user's explicit choice.
	_, stream := importString(t, modernConfig, "", pillar, Options{AllPillar: true})
	if !strings.Contains(stream, "PILLAR-SECRET") {
		t.Errorf("--all-pillar dropped pillar keys:\n%s", stream)
	}
	for _, s := range plantedSecrets {
		if strings.Contains(stream, s) {
			t.Errorf("%q in the --all-pillar output", s)
		}
	}
}

func TestGrainAndPillarSelection(t *testing.T) {
	cfg := `vault:
  server: {url: 'https://v:8200'}
  policies: {assign: ['r_{pillar[roles]}', 'os_{grains[os]}', 'fmt_{minion:{pillar[width]}}']}
  metadata: {entity: {team: '{pillar[team][name]}'}}
ext_pillar: [{vault: 'path=kv/{pillar[site]}'}]
`
	grains := `{"m1": {"id": "m1", "os": "Debian", "secret_grain": "x", "num_cpus": 2}}`
	pillar := `{"m1": {"zzz": 1, "site": "par", "roles": ["a"], "team": {"name": "T", "pager": "555"}, "width": 5, "other": {"k": "v"}}}`

	for _, tc := range []struct {
		opts                 Options
		wantGrains, wantPill string
	}{
		{Options{}, `{"id":"m1","os":"Debian"}`, `{"site":"par","roles":["a"],"team":{"name":"T","pager":"555"},"width":5}`},
		{Options{AllGrains: true, AllPillar: true}, `{"id":"m1","os":"Debian","secret_grain":"x","num_cpus":2}`,
			`{"zzz":1,"site":"par","roles":["a"],"team":{"name":"T","pager":"555"},"width":5,"other":{"k":"v"}}`},
	} {
		out, stream := importString(t, cfg, grains, pillar, tc.opts)
		bs := bindings(t, stream)
		if len(bs) != 1 {
			t.Fatalf("%d bindings", len(bs))
		}
		if g := string(bs[0].Spec.Grains.Raw); g != tc.wantGrains {
			t.Errorf("%+v: grains %s, want %s", tc.opts, g, tc.wantGrains)
		}
		if p := string(bs[0].Spec.Pillar.Raw); p != tc.wantPill {
			t.Errorf("%+v: pillar %s, want %s", tc.opts, p, tc.wantPill)
		}
		if !strings.Contains(stream, "trustMinionGrains: true") || !strings.Contains(strings.Join(out.Warnings, "\n"), "grains[os]") {
			t.Errorf("grains[os] in policies: trustMinionGrains not set or not warned")
		}
	}

	// A template that reads no pillar and only grains[id]: bindings carry
	// only the id grain and no pillar.
	_, stream := importString(t, "vault: {policies: {assign: ['p_{grains[id]}']}}", grains, pillar, Options{})
	bs := bindings(t, stream)
	if string(bs[0].Spec.Grains.Raw) != `{"id":"m1"}` || bs[0].Spec.Pillar != nil {
		t.Errorf("grains %s, pillar %v", bs[0].Spec.Grains.Raw, bs[0].Spec.Pillar)
	}
	if strings.Contains(stream, "trustMinionGrains") {
		t.Errorf("trustMinionGrains set for grains[id] only")
	}

	// {pillar} as a whole keeps the whole pillar.
	_, stream = importString(t, "vault: {metadata: {entity: {all: '{pillar}'}}}", "", pillar, Options{})
	if !strings.Contains(stream, "zzz") {
		t.Errorf("{pillar}: pillar filtered:\n%s", stream)
	}
}

func TestBindingsNamesAndOrder(t *testing.T) {
	grains := `{"web01": {"id": "web01"}, "Web_02": {"id": "Web_02"}, "a b": {}, "db01": {"id": "db01"}}`
	pillar := `{"zz": {"roles": []}, "db01": {}}`
	out, stream := importString(t, "vault: {policies: {assign: ['r_{pillar[roles]}']}}", grains, pillar,
		Options{TemplateName: "fleet", Namespace: "salt", Connection: "prod-vault"})
	bs := bindings(t, stream)
	var got []string
	for _, b := range bs {
		got = append(got, b.Namespace+"/"+b.Name+"="+b.Spec.MinionID+"@"+b.Spec.TemplateRef.Name)
	}
	want := []string{
		"salt/web-02-" + hash8("Web_02") + "=Web_02@fleet",
		"salt/db01=db01@fleet",
		"salt/web01=web01@fleet",
		"salt/zz=zz@fleet",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("bindings\n got %v\nwant %v", got, want)
	}
	warnings := strings.Join(out.Warnings, "\n")
	for _, w := range []string{`minion "a b": not a valid minionID`, `minion "zz" has no grains`, `minion "web01" has no pillar`} {
		if !strings.Contains(warnings, w) {
			t.Errorf("no warning %q in\n%s", w, warnings)
		}
	}
	if !strings.Contains(stream, "connectionRef:\n    name: prod-vault") {
		t.Errorf("connection name not used:\n%s", stream)
	}

	for _, opts := range []Options{{TemplateName: "Bad_Name"}, {Namespace: "a.b"}, {Connection: "-x"}} {
		if _, err := Import(Input{Config: []File{{Name: "c", Data: []byte("vault: {}")}}}, opts); err == nil {
			t.Errorf("%+v: no error", opts)
		}
	}
}

// TestDeterministic: the same input gives the same bytes, and the order of
// minions in the input does not matter.
func TestDeterministic(t *testing.T) {
	cfg := "vault: {server: {url: 'https://v'}, policies: {assign: ['r_{pillar[roles]}']}}"
	_, a := importString(t, cfg, `{"b": {"id": "b"}, "a": {"id": "a"}}`, `{"a": {"roles": ["x", "y"]}, "b": {"roles": "z"}}`, Options{})
	_, b := importString(t, cfg, `{"a": {"id": "a"}, "b": {"id": "b"}}`, `{"b": {"roles": "z"}, "a": {"roles": ["x", "y"]}}`, Options{})
	if a != b {
		t.Errorf("outputs differ:\n%s\n---\n%s", a, b)
	}
	for range 5 {
		if _, c := importString(t, cfg, `{"b": {"id": "b"}, "a": {"id": "a"}}`, `{"a": {"roles": ["x", "y"]}, "b": {"roles": "z"}}`, Options{}); c != a {
			t.Fatal("output changes between runs")
		}
	}
}

// TestTemplateOutput checks the MinionTemplate written for the modern
// configuration field by field, through the API type.
func TestTemplateOutput(t *testing.T) {
	_, stream := importString(t, modernConfig, "", "", Options{})
	docs, err := manifest.Parse([]byte(stream))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, d := range docs {
		kinds = append(kinds, d.Kind)
	}
	if strings.Join(kinds, ",") != "VaultConnection,MinionTemplate" {
		t.Fatalf("kinds %v", kinds)
	}
	var vc v1alpha1.VaultConnection
	if err := docs[0].Decode(&vc); err != nil {
		t.Fatal(err)
	}
	if vc.Name != "vault" || vc.Spec.Address != "https://vault.example.com:8200" || vc.Spec.Namespace != "admin/salt" || vc.Spec.Auth.Token == nil {
		t.Errorf("connection %+v", vc.Spec)
	}
	var mt v1alpha1.MinionTemplate
	if err := docs[1].Decode(&mt); err != nil {
		t.Fatal(err)
	}
	s := mt.Spec
	if mt.Name != "salt-minions" || s.ConnectionRef.Name != "vault" || s.TrustMinionGrains {
		t.Errorf("template %+v", mt)
	}
	if s.Policies == nil || strings.Join(s.Policies.Assign, " ") != "saltstack/minions salt_role_{pillar[roles]}" {
		t.Errorf("policies %+v", s.Policies)
	}
	if s.Metadata == nil || s.Metadata.Entity["minion-id"] != "id:{minion}" || s.Metadata.Secret["job"] != "{jid}" {
		t.Errorf("metadata %+v", s.Metadata)
	}
	if order := docs[1].MetadataOrder(); strings.Join(order["entity"], ",") != "roles,minion-id" {
		t.Errorf("entity metadata order %v", order)
	}
	a := s.AppRole
	if a == nil || a.Mount != "salt/minions" || a.TokenTTL.String() != "5400" || a.SecretIDTTL.String() != "90s" || *a.SecretIDNumUses != 2 || *a.TokenNumUses != 0 {
		t.Errorf("appRole %+v", a)
	}
	if len(s.PillarPaths) != 3 {
		t.Errorf("pillarPaths %v", s.PillarPaths)
	}

	// Legacy: no metadata, no appRole, policies from the list.
	_, stream = importString(t, legacyCoreConfig, "", "", Options{})
	if strings.Contains(stream, "appRole:") || strings.Contains(stream, "metadata:\n    entity") {
		t.Errorf("legacy output has fields the config does not set:\n%s", stream)
	}
	if !strings.Contains(stream, "address: https://legacy.example.com:8200") || !strings.Contains(stream, "namespace: legacy-ns") {
		t.Errorf("legacy connection:\n%s", stream)
	}
}

// TestReportsProblems: what the operator would refuse is reported.
func TestReportsProblems(t *testing.T) {
	_, stream := importString(t, "vault: {policies: {assign: ['p {pillar[x]}', 'ok']}}", "", `{"m": {"x": "a"}}`, Options{})
	rs, err := Check([]byte(stream))
	if err != nil {
		t.Fatal(err)
	}
	ps := Problems(rs)
	if len(ps) != 1 || !strings.Contains(ps[0], `minion "m": the operator would refuse it: InvalidPolicyName`) {
		t.Errorf("problems %q", ps)
	}
	_, stream = importString(t, "vault: {policies: {assign: ['{pillar[x]']}}", "", `{"m": {"x": "a"}, "n": {}}`, Options{})
	rs, err = Check([]byte(stream))
	if err != nil {
		t.Fatal(err)
	}
	if ps := Problems(rs); len(ps) != 1 || !strings.Contains(ps[0], "2 minions") || !strings.Contains(ps[0], "cannot render") {
		t.Errorf("problems %q", ps)
	}
}
