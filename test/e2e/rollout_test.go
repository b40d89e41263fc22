//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// TestRolloutAfterARestartReadsOnlyEntities: a template change of entity
// metadata rolled out by a new process (a restart, a new leader) reads and
// writes each minion's entity, and not its role: status says which role
// parameters the operator last wrote or found (appRole.paramsDigest), and
// the rendering leaves them as they were. Vault's audit log counts it.
func TestRolloutAfterARestartReadsOnlyEntities(t *testing.T) {
	const n, ns, conn, prefix = 40, "rollout", "rollout-vault", "rollout"
	s := start(t)
	ctx := context.Background()
	audit := s.vaultAudit(t)
	s.must(client.IgnoreAlreadyExists(s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})))
	s.must(s.c.Create(ctx, tokenConnection(conn, s.env.Vault.Addr, "vault-token")))
	// The bindings' first writes after the connection's first check: a
	// binding written before it has no Vault identity in its role digest,
	// and is checked again once the identity is known. A stop before that
	// check (a loaded machine) leaves it to the new process, whose rollout
	// then reads its role once, as designed, and this test would count it.
	s.waitConnectionReady(conn)
	tpl := minionTemplate(prefix, conn, "salt-minions", prefix)
	// A day between drift checks: a new process spreads its first checks
	// over it, so that hardly any falls within the test (a check reads the
	// role, as it must).
	tpl.Spec.Interval = &metav1.Duration{Duration: 24 * time.Hour}
	tpl.Spec.Metadata.Entity["wave"] = "1"
	s.must(s.c.Create(ctx, tpl))
	for i := range n {
		m := fmt.Sprintf("%s%03d", prefix, i)
		b := binding(ns, m, m, map[string]any{"roles": []string{"web"}})
		b.Spec.TemplateRef.Name = prefix
		s.must(s.c.Create(ctx, b))
	}
	rolledOut := func(wave string) func() error {
		return func() error {
			list := &v1alpha1.MinionBindingList{}
			if err := s.c.List(ctx, list, client.InNamespace(ns)); err != nil {
				return err
			}
			done := 0
			for i := range list.Items {
				b := &list.Items[i]
				if isReady(b) && b.Status.Entity != nil && b.Status.Entity.Metadata["wave"] == wave {
					done++
				}
			}
			if done != n {
				return fmt.Errorf("%d of %d bindings Ready with wave %s", done, n, wave)
			}
			return nil
		}
	}
	eventually(t, 2*time.Minute, "every binding Ready", rolledOut("1"))
	list := &v1alpha1.MinionBindingList{}
	s.must(s.c.List(ctx, list, client.InNamespace(ns)))
	for _, b := range list.Items {
		if b.Status.AppRole == nil || b.Status.AppRole.ParamsDigest == "" {
			t.Fatalf("%s: status.appRole %+v, want a paramsDigest", b.Name, b.Status.AppRole)
		}
	}

	s.stopOperator()
	s.runOperator(t)
	mark := audit.mark(t)
	s.must(s.patchTemplate(prefix, func(tpl *v1alpha1.MinionTemplate) { tpl.Spec.Metadata.Entity["wave"] = "2" }))
	eventually(t, 2*time.Minute, "the rollout", rolledOut("2"))
	audit.settle(t)
	got := audit.sinceExcept(t, mark, s.accessorOf(t, s.root.Token()))
	rolePrefix := "auth/salt-minions/role/" + prefix
	roleReads, entityReads := 0, 0
	for p, k := range got.ReadPaths {
		switch {
		case strings.HasPrefix(p, rolePrefix):
			roleReads += k
		case strings.HasPrefix(p, "identity/entity/name/"+prefix):
			entityReads += k
		}
	}
	var roleWrites, entityWrites int
	for _, p := range got.Paths {
		switch {
		case strings.Contains(p, rolePrefix):
			roleWrites++
		case strings.Contains(p, "identity/entity/"):
			entityWrites++
		}
	}
	t.Logf("a new process's rollout of entity metadata to %d bindings: role reads %d, entity reads %d, role writes %d, entity writes %d",
		n, roleReads, entityReads, roleWrites, entityWrites)
	// A few first checks may fall within the rollout (one in 2,000 per
	// binding per minute at a day's interval); every role read is a defect
	// past that.
	if roleReads > 3 {
		t.Errorf("the rollout read roles %d times for %d bindings whose role parameters did not change", roleReads, n)
		// Which, when and by whom, and what status said of those bindings.
		read := map[string]bool{}
		audit.scan(t, mark, func(line []byte) {
			var e auditEntry
			if json.Unmarshal(line, &e) == nil && e.Type == "response" && strings.HasPrefix(e.Request.Path, rolePrefix) {
				read[strings.Split(strings.TrimPrefix(e.Request.Path, "auth/salt-minions/role/"), "/")[0]] = true
			}
		})
		audit.scan(t, mark, func(line []byte) {
			var e auditEntry
			if json.Unmarshal(line, &e) != nil || e.Type != "response" {
				return
			}
			for m := range read {
				if strings.HasSuffix(e.Request.Path, "/"+m) || strings.Contains(e.Request.Path, "/"+m+"/") || strings.HasSuffix(e.Request.Path, "_"+m) {
					t.Logf("%s %s %s by %s %s", e.Time, e.Request.Operation, e.Request.Path, e.Auth.Accessor, e.Error)
				}
			}
		})
		for _, line := range operatorLines(func(line string) bool {
			for m := range read {
				if strings.Contains(line, m) {
					return true
				}
			}
			return false
		}) {
			t.Log(line)
		}
		s.must(s.c.List(ctx, list, client.InNamespace(ns)))
		for _, b := range list.Items {
			t.Logf("%s: appRole %+v conditions %+v", b.Name, b.Status.AppRole, b.Status.Conditions)
		}
	}
	if roleWrites != 0 {
		t.Errorf("the rollout wrote roles %d times", roleWrites)
	}
	if entityReads < n || entityWrites < n {
		t.Errorf("the rollout read %d and wrote %d entities, want each of the %d", entityReads, entityWrites, n)
	}
}
