package connection

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/metrics"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
	"github.com/minionvault/minion-vault-operator/pkg/vaultversion"
)

func TestJudgeVersion(t *testing.T) {
	newest := vault.NewestTested()
	nv, _ := vaultversion.Parse(newest)
	otherPatch := vaultversion.Version{Major: nv.Major, Minor: nv.Minor, Patch: nv.Patch + 7}.String()
	for _, tc := range []struct {
		version    string
		known      bool
		reason     string
		tested     string
		msgContain string
	}{
		{version: ""},
		{version: newest, known: true, tested: "release"},
		{version: newest + "+minionvault-minimal", known: true, tested: "release"},
		{version: otherPatch, known: true, reason: v1alpha1.UntestedReleaseReason, tested: "line", msgContain: "tested against " + newest + " on that line"},
		{version: "1.14.8", known: true, reason: v1alpha1.UntestedLineReason, tested: "no", msgContain: "a line this operator is not tested against"},
		{version: "2.0.1", known: true, reason: v1alpha1.UntestedLineReason, tested: "no", msgContain: "docs/compatibility.md"},
		{version: "not-a-version", known: true, reason: v1alpha1.UntestedLineReason, tested: "no"},
	} {
		v, known := judgeVersion(tc.version)
		if known != tc.known || v.reason != tc.reason || v.tested != tc.tested || !strings.Contains(v.message, tc.msgContain) {
			t.Errorf("judgeVersion(%q) = %+v, %v; want reason %q, tested %q, known %v, message with %q", tc.version, v, known, tc.reason, tc.tested, tc.known, tc.msgContain)
		}
	}
}

// The version each check reads is in status and in the server-info
// metric; an untested one sets UntestedVersion (with an event) and leaves
// Ready and the work alone; an upgrade to a tested release clears it.
func TestUntestedVersionWarnsWithoutStopping(t *testing.T) {
	conn := &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "vault", Generation: 1}, Spec: v1alpha1.VaultConnectionSpec{Address: "http://vault"}}
	h := newHarness(t, conn)
	reg := prometheus.NewRegistry()
	r := &Reconciler{Client: h.c, Recorder: h.rec, Connections: h.conns, Metrics: metrics.New(reg)}
	check := func(version string) *v1alpha1.VaultConnection {
		t.Helper()
		h.v.SetVersion(version)
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "vault"}}); err != nil {
			t.Fatal(err)
		}
		got := &v1alpha1.VaultConnection{}
		if err := h.c.Get(context.Background(), types.NamespacedName{Name: "vault"}, got); err != nil {
			t.Fatal(err)
		}
		if got.Status.VaultVersion != version {
			t.Errorf("status.vaultVersion %q, want %q", got.Status.VaultVersion, version)
		}
		if !apimeta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ReadyCondition) {
			t.Errorf("Ready not True with Vault %s: %+v", version, got.Status.Conditions)
		}
		if h.conns.gated("vault", "") != nil {
			t.Errorf("Vault %s gates the connection's work", version)
		}
		return got
	}
	metric := func(version, tested string) {
		t.Helper()
		want := `# HELP minionvault_vault_server_info 1 per connection: the version its Vault reports at the last check, and how the project tests it (tested: release, line or no; docs/compatibility.md).
# TYPE minionvault_vault_server_info gauge
minionvault_vault_server_info{connection="vault",tested="` + tested + `",version="` + version + `"} 1
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "minionvault_vault_server_info"); err != nil {
			t.Error(err)
		}
	}

	got := check("2.0.1")
	c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.UntestedVersionCondition)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.UntestedLineReason || !strings.Contains(c.Message, "2.0.1") {
		t.Fatalf("UntestedVersion %+v, want True/%s naming 2.0.1", c, v1alpha1.UntestedLineReason)
	}
	metric("2.0.1", "no")
	if ev := drain(h); !strings.Contains(ev, "Warning UntestedLine") {
		t.Errorf("events %q, want an UntestedLine warning", ev)
	}
	check("2.0.1")
	if ev := drain(h); strings.Contains(ev, "UntestedLine") {
		t.Errorf("a second check with the same verdict emitted %q again", ev)
	}

	got = check(vault.NewestTested())
	if c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.UntestedVersionCondition); c != nil {
		t.Errorf("UntestedVersion %+v left after an upgrade to a tested release", c)
	}
	metric(vault.NewestTested(), "release")
}

func drain(h *harness) string {
	var out []string
	for {
		select {
		case e := <-h.rec.Events:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}
