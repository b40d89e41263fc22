package connection

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// versionVerdict is how the project tests the version a connection's Vault
// reports: the condition it sets (none for a tested release) and the
// metric's label.
type versionVerdict struct {
	// reason is UntestedVersion's reason; "" leaves the condition out.
	reason, message string
	// tested is the metric label: release, line or no.
	tested string
}

// judgeVersion compares a reported version with the tested ones. An
// unknown version (no check has answered yet) says nothing: the condition
// is about what Vault said, never a guess.
func judgeVersion(version string) (versionVerdict, bool) {
	if version == "" {
		return versionVerdict{}, false
	}
	tested := "v" + strings.Join(vault.TestedVersions(), ", v")
	switch state, release := vault.TestingOf(version); state {
	case vault.Tested:
		return versionVerdict{tested: "release"}, true
	case vault.LineTested:
		return versionVerdict{
			reason: v1alpha1.UntestedReleaseReason, tested: "line",
			message: fmt.Sprintf("Vault reports %s; this operator is tested against %s on that line (tested: %s). Work goes on; the access audit uses %s's ACL rules. See docs/compatibility.md",
				version, release, tested, version),
		}, true
	default:
		return versionVerdict{
			reason: v1alpha1.UntestedLineReason, tested: "no",
			message: fmt.Sprintf("Vault reports %s, a line this operator is not tested against (tested: %s). Work goes on; docs/compatibility.md says what is known to differ",
				version, tested),
		}, true
	}
}

// versionReported sets UntestedVersion from status.vaultVersion (present
// only while true) and the server-info metric, and says so in an event
// when the verdict changes. It never changes Ready: an untested version
// is a warning, not a failure.
func (r *Reconciler) versionReported(conn *v1alpha1.VaultConnection) {
	v, known := judgeVersion(conn.Status.VaultVersion)
	if !known {
		return
	}
	r.Metrics.VaultServer(conn.Name, conn.Status.VaultVersion, v.tested)
	conds := conn.GetConditions()
	was := meta.FindStatusCondition(conds, v1alpha1.UntestedVersionCondition)
	if v.reason == "" {
		meta.RemoveStatusCondition(&conds, v1alpha1.UntestedVersionCondition)
		conn.SetConditions(conds)
		return
	}
	meta.SetStatusCondition(&conds, metav1.Condition{
		Type: v1alpha1.UntestedVersionCondition, Status: metav1.ConditionTrue,
		Reason: v.reason, Message: v.message, ObservedGeneration: conn.Generation,
	})
	conn.SetConditions(conds)
	if r.Recorder != nil && (was == nil || was.Message != v.message) {
		outcome.Emit(r.Recorder, conn, "Warning", v.reason, "Check", "%s", v.message)
	}
}
