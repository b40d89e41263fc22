package outcome

import (
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// Emit hands the event to the recorder and logs it at V(1) with the
// object's name and the reason, so that an event client-go drops (its
// queue full) is still in the operator's log.
func TestEmitLogsTheEvent(t *testing.T) {
	var lines []string
	saved := eventLog
	t.Cleanup(func() { eventLog = saved })
	eventLog = funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 1})
	rec := events.NewFakeRecorder(1)
	conn := &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "vault"}}
	Emit(rec, conn, "Warning", "VaultChanged", "Check", "Vault's identity changed (%s)", "x")
	if got := <-rec.Events; got != "Warning VaultChanged Vault's identity changed (x)" {
		t.Errorf("recorded %q", got)
	}
	if len(lines) != 1 || !strings.Contains(lines[0], `"reason"="VaultChanged"`) || !strings.Contains(lines[0], `"name"="vault"`) ||
		!strings.Contains(lines[0], `"msg"="Vault's identity changed (x)"`) {
		t.Errorf("logged %q", lines)
	}
}
