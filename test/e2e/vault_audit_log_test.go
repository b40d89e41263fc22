//go:build integration

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
)

// auditLog counts Vault requests from Vault's own file audit device, not
// from the operator's client: what Vault saw is the measure.
type auditLog struct {
	path string
}

var (
	auditOnce sync.Once
	audit     *auditLog
	auditErr  error
)

// vaultAudit enables a file audit device on the suite's Vault (once), with
// token accessors in clear so that requests can be told apart by token.
func (s *suite) vaultAudit(t testing.TB) *auditLog {
	t.Helper()
	auditOnce.Do(func() {
		path := filepath.Join(s.env.Dir, "vault-audit.log")
		auditErr = s.root.Sys().EnableAuditWithOptionsWithContext(context.Background(), "e2e-file", &vaultapi.EnableAuditOptions{
			Type: "file", Options: map[string]string{"file_path": path, "hmac_accessor": "false"},
		})
		audit = &auditLog{path: path}
	})
	if auditErr != nil {
		t.Fatal(auditErr)
	}
	return audit
}

// accessorOf returns a token's accessor.
func (s *suite) accessorOf(t testing.TB, token string) string {
	t.Helper()
	sec, err := s.root.Auth().Token().Lookup(token)
	if err != nil {
		t.Fatal(err)
	}
	acc, _ := sec.Data["accessor"].(string)
	return acc
}

// vaultCalls are the requests one token made, from the audit log.
type vaultCalls struct {
	Reads, Writes int
	Paths         []string       // "operation path" of the writes
	ReadPaths     map[string]int // how often each path was read
	// Denied counts the requests Vault refused (403), reads and writes,
	// DeniedPaths names them ("operation path").
	Denied      int
	DeniedPaths []string
}

// readTwice lists the paths read more than once (at most n of them).
func (c vaultCalls) readTwice(n int) []string {
	var out []string
	for p, k := range c.ReadPaths {
		if k > 1 && len(out) < n {
			out = append(out, fmt.Sprintf("%s ×%d", p, k))
		}
	}
	sort.Strings(out)
	return out
}

// settle waits until the log stops growing for a second (at most 30 s):
// the calls a wait on status did not see through are in it.
func (a *auditLog) settle(t testing.TB) {
	t.Helper()
	last, since := a.mark(t), time.Now()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if n := a.mark(t); n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= time.Second {
			return
		}
	}
}

// mark is the log's current size: count from there.
func (a *auditLog) mark(t testing.TB) int64 {
	t.Helper()
	st, err := os.Stat(a.path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// since counts the responses to requests made with the token of accessor
// after offset. The token's own upkeep (auth/token/*) is left out: it is
// not work on minions.
func (a *auditLog) since(t testing.TB, offset int64, accessor string) vaultCalls {
	t.Helper()
	return a.count(t, offset, func(acc string) bool { return acc == accessor })
}

// sinceExcept counts the responses to requests made with any token but the
// one of accessor (the test's root token) after offset.
func (a *auditLog) sinceExcept(t testing.TB, offset int64, accessor string) vaultCalls {
	t.Helper()
	return a.count(t, offset, func(acc string) bool { return acc != "" && acc != accessor })
}

// responses counts every response after offset to a request whose token
// has an accessor that counted accepts; a refused token has none (""):
// what a dead token costs Vault.
func (a *auditLog) responses(t testing.TB, offset int64, counted func(accessor string) bool) int {
	t.Helper()
	n := 0
	a.scan(t, offset, func(line []byte) {
		var e auditEntry
		if json.Unmarshal(line, &e) == nil && e.Type == "response" && counted(e.Auth.Accessor) {
			n++
		}
	})
	return n
}

// requestsAfter lists the responses after offset to requests whose
// token's accessor counted accepts, as "time operation path (error)":
// what a failing count was.
func (a *auditLog) requestsAfter(t testing.TB, offset int64, counted func(accessor string) bool) []string {
	t.Helper()
	var out []string
	a.scan(t, offset, func(line []byte) {
		var e auditEntry
		if json.Unmarshal(line, &e) != nil || e.Type != "response" || !counted(e.Auth.Accessor) {
			return
		}
		s := e.Time + " " + e.Request.Operation + " " + e.Request.Path
		if e.Error != "" {
			s += " (" + e.Error + ")"
		}
		out = append(out, s)
	})
	return out
}

// auditEntry is what the tests read of a line of Vault's audit log.
type auditEntry struct {
	Type string `json:"type"`
	Time string `json:"time"`
	Auth struct {
		Accessor string `json:"accessor"`
	} `json:"auth"`
	Request struct {
		Operation string          `json:"operation"`
		Path      string          `json:"path"`
		Data      json.RawMessage `json:"data"` // HMAC'd strings: equal bodies log equal
	} `json:"request"`
	Error string `json:"error"`
}

// scan calls each with every line of the log after offset.
func (a *auditLog) scan(t testing.TB, offset int64, each func([]byte)) {
	t.Helper()
	f, err := os.Open(a.path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		each(sc.Bytes())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

func (a *auditLog) count(t testing.TB, offset int64, counted func(accessor string) bool) vaultCalls {
	t.Helper()
	out := vaultCalls{ReadPaths: map[string]int{}}
	a.scan(t, offset, func(line []byte) {
		var e auditEntry
		if json.Unmarshal(line, &e) != nil || e.Type != "response" || !counted(e.Auth.Accessor) {
			return
		}
		if strings.HasPrefix(e.Request.Path, "auth/token/") {
			return
		}
		if strings.Contains(e.Error, "permission denied") {
			out.Denied++
			out.DeniedPaths = append(out.DeniedPaths, e.Request.Operation+" "+e.Request.Path)
		}
		switch e.Request.Operation {
		case "read", "list":
			out.Reads++
			out.ReadPaths[e.Request.Path]++
		default:
			out.Writes++
			out.Paths = append(out.Paths, e.Request.Operation+" "+e.Request.Path)
		}
	})
	return out
}
