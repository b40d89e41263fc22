//go:build integration

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// TestAHangingVaultDelaysNoOtherConnection: a Vault that accepts
// connections and never answers (a firewall that drops, a wedged node)
// holds a check for its whole timeout, three attempts of 30 s. With
// connections behind it that do not answer at all (Vaults gone, checked
// again every few seconds), a new connection to a healthy Vault is still
// checked, and Ready, at once: the checks of one connection do not hold
// the others' (they once shared one worker, and a Vault restart test saw
// its connection checked only after its Vault had been restarted).
func TestAHangingVaultDelaysNoOtherConnection(t *testing.T) {
	s := start(t)
	ctx := context.Background()

	hang := hangingListener(t)
	// Gone: later tests count the requests to Vaults that do not answer.
	t.Cleanup(func() {
		for _, name := range []string{"hang-vault", "healthy-vault", "gone-vault-0", "gone-vault-1", "gone-vault-2", "gone-vault-3", "gone-vault-4", "gone-vault-5"} {
			_ = s.c.Delete(ctx, &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
	})
	s.must(s.c.Create(ctx, tokenConnection("hang-vault", "http://"+hang.addr(), "vault-token")))
	var gone []string
	for i := range 6 {
		name := fmt.Sprintf("gone-vault-%d", i)
		s.must(s.c.Create(ctx, tokenConnection(name, "http://"+closedAddr(t), "vault-token")))
		gone = append(gone, name)
	}
	eventually(t, 30*time.Second, "a check held by the hanging Vault", func() error {
		if hang.accepted() == 0 {
			return fmt.Errorf("no check has reached the hanging Vault")
		}
		return nil
	})

	created := time.Now()
	s.must(s.c.Create(ctx, tokenConnection("healthy-vault", s.env.Vault.Addr, "vault-token")))
	// Far below the hanging check's 90 s, far above a check's own time.
	eventually(t, 20*time.Second, "every connection checked while one check hangs", func() error {
		for _, name := range gone {
			if !connectionFailed(ctx, s, name) {
				return fmt.Errorf("%s not checked yet", name)
			}
		}
		vc := &v1alpha1.VaultConnection{}
		if err := s.c.Get(ctx, types.NamespacedName{Name: "healthy-vault"}, vc); err != nil {
			return err
		}
		if c := apimeta.FindStatusCondition(vc.Status.Conditions, v1alpha1.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue || vc.Status.Identity == "" {
			return fmt.Errorf("healthy-vault: conditions %+v, identity %q", vc.Status.Conditions, vc.Status.Identity)
		}
		return nil
	})
	if hang.open() == 0 {
		t.Fatal("the hanging Vault holds no request any more: the healthy connection was not checked while a check hung")
	}
	t.Logf("a healthy connection Ready %s after its creation, beside %d Vaults gone and a check held by a hanging one (%d held)",
		time.Since(created).Round(100*time.Millisecond), len(gone), hang.open())
}

func connectionFailed(ctx context.Context, s *suite, name string) bool {
	vc := &v1alpha1.VaultConnection{}
	if err := s.c.Get(ctx, types.NamespacedName{Name: name}, vc); err != nil {
		return false
	}
	c := apimeta.FindStatusCondition(vc.Status.Conditions, v1alpha1.ReadyCondition)
	return c != nil && c.Status == metav1.ConditionFalse
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// hanging accepts connections, reads what comes and never answers, until
// the test ends.
type hanging struct {
	l             net.Listener
	mu            sync.Mutex
	conns         []net.Conn
	total, closed int
}

func hangingListener(t *testing.T) *hanging {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hanging{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.conns = append(h.conns, c)
			h.total++
			h.mu.Unlock()
			go func() {
				// Until the client gives up and closes (or the test ends).
				_, _ = io.Copy(io.Discard, c)
				h.mu.Lock()
				h.closed++
				h.mu.Unlock()
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, c := range h.conns {
			c.Close()
		}
	})
	return h
}

func (h *hanging) addr() string { return h.l.Addr().String() }

func (h *hanging) accepted() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}

// open counts the connections the client still holds.
func (h *hanging) open() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total - h.closed
}
