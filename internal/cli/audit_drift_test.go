package cli

import (
	"strings"
	"testing"
)

func TestAuditDriftFlags(t *testing.T) {
	if code, _, errOut := runAudit(t, "drift"); code != 2 || !strings.Contains(errOut, "no manifests") {
		t.Fatalf("drift without -f: exit %d %s", code, errOut)
	}
	if code, _, errOut := runAudit(t, "drift", "-f", copySamples(t), "--verify", "-1"); code != 2 || !strings.Contains(errOut, "--verify") {
		t.Fatalf("drift --verify -1: exit %d %s", code, errOut)
	}
}
