package saltmaster

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/minionvault/minion-vault-operator/internal/saltext"
	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// The trace is what saltext-vault 1.8.0 itself sent for each case
// (hack/saltext/issue_trace.py). Every case is replayed against a fake
// Vault built from the case's initial state; the port must send the same
// requests, byte for byte, and return what the runner returned.

const tracePath = "testdata/saltext-issue-trace.json"

type traceFile struct {
	Generator      string                `json:"generator"`
	SaltextVersion string                `json:"saltext_version"`
	StartTime      int64                 `json:"start_time"`
	VaultPolicies  map[string][]FakeRule `json:"vault_policies"`
	Cases          []traceCase           `json:"cases"`
}

type traceCase struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	MasterConfig json.RawMessage `json:"master_config"`
	Salt         json.RawMessage `json:"salt"`
	Vault        json.RawMessage `json:"vault"`
	Steps        []traceStep     `json:"steps"`
	FinalVault   json.RawMessage `json:"final_vault"`
}

type traceStep struct {
	Op           string            `json:"op"`
	Minion       string            `json:"minion"`
	Impersonated bool              `json:"impersonated"`
	IssueParams  json.RawMessage   `json:"issue_params"`
	Minions      *[]string         `json:"minions"`
	TTL          json.RawMessage   `json:"ttl"`
	Uses         json.RawMessage   `json:"uses"`
	Path         string            `json:"path"`
	Seconds      int64             `json:"seconds"`
	Change       string            `json:"change"`
	Params       map[string]any    `json:"params"`
	Entity       string            `json:"entity"`
	Metadata     map[string]string `json:"metadata"`
	Requests     []Request         `json:"requests"`
	Return       json.RawMessage   `json:"return"`
	Raised       *string           `json:"raised"`
}

func loadTraceBytes(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(tracePath)
	if err != nil {
		t.Fatalf("reading the trace: %v", err)
	}
	return data
}

func loadTrace(t *testing.T) *traceFile {
	t.Helper()
	data := loadTraceBytes(t)
	tf := &traceFile{}
	if err := json.Unmarshal(data, tf); err != nil {
		t.Fatalf("decoding the trace: %v", err)
	}
	if tf.SaltextVersion != "1.8.0" || len(tf.Cases) == 0 {
		t.Fatalf("trace for saltext %q with %d cases: regenerate it with %s", tf.SaltextVersion, len(tf.Cases), tf.Generator)
	}
	return tf
}

func decodeValue(t *testing.T, raw json.RawMessage) value.Value {
	t.Helper()
	if len(raw) == 0 {
		return value.Value{}
	}
	v, err := value.DecodeJSON(raw)
	if err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	return v
}

// jsonEqual compares as JSON documents: key order and int/float spelling
// of equal numbers do not matter.
func jsonEqual(t *testing.T, want json.RawMessage, got any) (bool, string) {
	t.Helper()
	var w, g any
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("decoding %s: %v", want, err)
	}
	gb, err := json.Marshal(got)
	if err != nil {
		t.Fatalf("encoding %#v: %v", got, err)
	}
	if err := json.Unmarshal(gb, &g); err != nil {
		t.Fatalf("decoding %s: %v", gb, err)
	}
	return reflect.DeepEqual(w, g), string(gb)
}

func TestTraceReplay(t *testing.T) {
	tf := loadTrace(t)
	requests := 0
	for _, c := range tf.Cases {
		for _, st := range c.Steps {
			requests += len(st.Requests)
		}
		t.Run(c.Name, func(t *testing.T) { replayCase(t, tf, c) })
	}
	t.Logf("%d cases, %d requests", len(tf.Cases), requests)
}

// replay holds one case's moving parts.
type replay struct {
	t       *testing.T
	now     time.Time
	fake    *FakeVault
	trace   *Trace
	master  *Master
	configs map[string]map[string]any // minion -> latest get_config answer
	secrets map[string]map[string]any // minion -> latest generate_secret_id answer
	minions map[string]*Minion
}

func (r *replay) clock() time.Time { return r.now }

func replayCase(t *testing.T, tf *traceFile, c traceCase) {
	r := &replay{
		t:       t,
		now:     time.Unix(tf.StartTime, 0),
		configs: map[string]map[string]any{},
		secrets: map[string]map[string]any{},
		minions: map[string]*Minion{},
	}
	state, err := LoadFakeState(c.Vault)
	if err != nil {
		t.Fatal(err)
	}
	r.fake = NewFakeVault(state, tf.VaultPolicies, r.clock)
	r.trace = &Trace{Next: r.fake, RecordTokens: true}
	cfg, err := saltext.NewConfigValue(decodeValue(t, c.MasterConfig))
	if err != nil {
		t.Fatalf("master config: %v", err)
	}
	r.master = NewMaster(cfg, r.trace)
	r.master.Now = r.clock
	salt := decodeValue(t, c.Salt)
	if v, ok := get(salt, "jid"); ok {
		r.master.JID = v.Str()
	}
	if v, ok := get(salt, "user"); ok {
		r.master.User = v.Str()
	}
	known, _ := get(salt, "known_minions")
	for _, k := range known.Items() {
		r.master.KnownMinions = append(r.master.KnownMinions, k.Str())
	}
	data, _ := get(salt, "minions")
	r.master.MinionData = func(minion string, _ bool) (value.Value, value.Value, error) {
		d, _ := get(data, minion)
		grains, _ := get(d, "grains")
		pillar, _ := get(d, "pillar")
		return grains, pillar, nil
	}

	for i, st := range c.Steps {
		ret, raised, ran := r.step(st)
		where := fmt.Sprintf("step %d (%s %s)", i, st.Op, st.Minion)
		compareRequests(t, where, st.Requests, r.trace.Take())
		switch {
		case !ran:
		case st.Raised != nil:
			if raised != *st.Raised {
				t.Errorf("%s: raised %q, saltext raised %q (returned %v)", where, raised, *st.Raised, ret)
			}
		default:
			if raised != "" {
				t.Errorf("%s: raised %q, saltext returned %s", where, raised, st.Return)
			} else if ok, got := jsonEqual(t, st.Return, ret); !ok {
				t.Errorf("%s: returned\n  %s\nsaltext returned\n  %s", where, got, st.Return)
			}
		}
	}
	if ok, got := jsonEqual(t, c.FinalVault, r.fake.State()); !ok {
		t.Errorf("final fake Vault state differs from the generator's:\n  go:     %s\n  python: %s", got, c.FinalVault)
	}
}

func compareRequests(t *testing.T, where string, want, got []Request) {
	t.Helper()
	for i := 0; i < len(want) || i < len(got); i++ {
		switch {
		case i >= len(got):
			t.Errorf("%s: request %d missing: saltext sent %s", where, i, want[i])
			return
		case i >= len(want):
			t.Errorf("%s: request %d not sent by saltext: %s", where, i, got[i])
			return
		}
		w, g := want[i], got[i]
		if w.Method != g.Method || w.Path != g.Path || w.WrapTTL != g.WrapTTL || w.Namespace != g.Namespace || w.Token != g.Token {
			t.Errorf("%s: request %d is\n  %s %s wrap=%q ns=%q token=%q\nsaltext sent\n  %s %s wrap=%q ns=%q token=%q",
				where, i, g.Method, g.Path, g.WrapTTL, g.Namespace, g.Token, w.Method, w.Path, w.WrapTTL, w.Namespace, w.Token)
			return
		}
		if (w.Body == nil) != (g.Body == nil) || w.Body != nil && *w.Body != *g.Body {
			t.Errorf("%s: request %d (%s %s) body is\n  %s\nsaltext sent\n  %s", where, i, g.Method, g.Path, bodyText(g.Body), bodyText(w.Body))
			return
		}
		if w.Status != g.Status {
			t.Errorf("%s: request %d (%s %s): the fake answered %d, the generator's fake %d", where, i, g.Method, g.Path, g.Status, w.Status)
			return
		}
		if len(w.Response) != 0 || len(g.Response) != 0 {
			var gv any
			_ = json.Unmarshal(g.Response, &gv)
			if ok, _ := jsonEqual(t, orNull(w.Response), gv); !ok {
				t.Errorf("%s: request %d (%s %s): the fake answered\n  %s\nthe generator's fake\n  %s", where, i, g.Method, g.Path, g.Response, w.Response)
				return
			}
		}
	}
}

func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

func bodyText(b *string) string {
	if b == nil {
		return "<no body>"
	}
	return *b
}

// step runs one step; ran is false for steps without an outcome.
func (r *replay) step(st traceStep) (ret any, raised string, ran bool) {
	t := r.t
	m := r.master
	outcome := func(ret map[string]any, err error) (any, string, bool) {
		if ret == nil {
			return nil, PythonError(err), true
		}
		return ret, "", true
	}
	done := func(err error) (any, string, bool) {
		if err != nil {
			return nil, PythonError(err), true
		}
		return true, "", true
	}
	minions := func() []string {
		if st.Minions == nil {
			return nil
		}
		return *st.Minions
	}
	switch st.Op {
	case "advance":
		r.now = r.now.Add(time.Duration(st.Seconds) * time.Second)
		return nil, "", false
	case "vault_change":
		if err := r.fake.Apply(st.Change, st.Minion, st.Params, st.Entity, st.Metadata); err != nil {
			t.Fatal(err)
		}
		return nil, "", false
	case "get_config":
		ret, err := m.GetConfigValue(st.Minion, st.Impersonated, decodeValue(t, st.IssueParams))
		r.configs[st.Minion] = ret
		return outcome(ret, err)
	case "generate_secret_id":
		ret, err := m.GenerateSecretIDValue(st.Minion, st.Impersonated, decodeValue(t, st.IssueParams))
		r.secrets[st.Minion] = ret
		return outcome(ret, err)
	case "generate_token":
		return outcome(m.GenerateToken(st.Minion, st.Impersonated, toAny(decodeValue(t, st.TTL)), toAny(decodeValue(t, st.Uses))))
	case "sync_approles":
		return done(m.SyncApproles(minions()))
	case "sync_entities":
		return done(m.SyncEntities(minions()))
	case "cleanup_auth":
		ret, err := m.CleanupAuth(nil)
		if err != nil {
			return nil, PythonError(err), true
		}
		return ret, "", true
	case "manage_approle":
		return done(m.ManageApprole(st.Minion, toMap(decodeValue(t, st.IssueParams))))
	case "manage_entity":
		return done(m.ManageEntity(st.Minion))
	case "manage_entity_alias":
		return done(m.ManageEntityAlias(st.Minion))
	case "login":
		return r.login(st.Minion)
	case "read_pillar":
		mn := r.minions[st.Minion]
		if mn == nil || mn.Token() == "" {
			return map[string]any{"skipped": "not logged in"}, "", true
		}
		got, err := mn.ReadPillar(st.Path)
		if err != nil {
			return nil, PythonError(err), true
		}
		return got, "", true
	}
	t.Fatalf("unknown step %q", st.Op)
	return nil, "", false
}

// login is the generator's MinionSide.login: what the minion does with the
// master's latest answers.
func (r *replay) login(minion string) (any, string, bool) {
	cfg := r.configs[minion]
	if cfg == nil || cfg["error"] != nil {
		return map[string]any{"skipped": "no configuration from the master"}, "", true
	}
	auth := cfg["auth"].(map[string]any)
	server := cfg["server"].(map[string]any)
	ep := Endpoint{Address: server["url"].(string), Transport: r.trace}
	if ns, ok := server["namespace"].(string); ok {
		ep.Namespace = ns
	}
	mn := r.minions[minion]
	if mn == nil {
		mn = NewMinion(auth["approle_name"].(string), auth["approle_mount"].(string), ep)
		mn.Now = r.clock
		r.minions[minion] = mn
	}
	fail := func(err error) (any, string, bool) { return nil, PythonError(err), true }
	roleID, _ := auth["role_id"].(string)
	if tok := WrapToken(cfg, "auth", "role_id"); tok != "" {
		data, err := mn.Unwrap(tok, "role_id")
		if err != nil {
			return fail(err)
		}
		roleID, _ = data["role_id"].(string)
	}
	secretID := ""
	if b, _ := auth["secret_id"].(bool); b {
		ret := r.secrets[minion]
		if ret == nil || ret["error"] != nil {
			return map[string]any{"skipped": "no secret ID from the master"}, "", true
		}
		if tok := WrapToken(ret); tok != "" {
			data, err := mn.Unwrap(tok, "secret_id")
			if err != nil {
				return fail(err)
			}
			secretID, _ = data["secret_id"].(string)
		} else if d, ok := ret["data"].(map[string]any); ok {
			secretID, _ = d["secret_id"].(string)
		}
	}
	l, err := mn.LoginAppRole(roleID, secretID)
	if err != nil {
		return fail(err)
	}
	return map[string]any{
		"client_token":   l.ClientToken,
		"entity_id":      l.EntityID,
		"lease_duration": l.LeaseDuration,
		"num_uses":       l.NumUses,
		"renewable":      l.Renewable,
	}, "", true
}

// TestTraceCoversTheMatrix keeps the trace honest about what it covers.
func TestTraceCoversTheMatrix(t *testing.T) {
	tf := loadTrace(t)
	seen := map[string]bool{}
	for _, c := range tf.Cases {
		seen[strings.SplitN(c.Name, "/", 2)[0]] = true
		for _, st := range c.Steps {
			seen["op:"+st.Op] = true
		}
	}
	for _, want := range []string{
		"defaults", "nulls", "cidr-string", "cidr-32", "no-default-policy", "override-on", "override-off", "bind-false",
		"op:get_config", "op:generate_secret_id", "op:generate_token", "op:sync_approles", "op:sync_entities",
		"op:cleanup_auth", "op:manage_approle", "op:manage_entity", "op:manage_entity_alias", "op:login", "op:read_pillar",
		"op:advance",
	} {
		if !seen[want] {
			t.Errorf("the trace has no %s", want)
		}
	}
}
