//go:build integration

package node

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

// auditEntry is what the test reads of one line of Vault's file audit
// device (a JSON object per request and per response).
type auditEntry struct {
	Type string `json:"type"`
	Auth *struct {
		DisplayName string   `json:"display_name"`
		Policies    []string `json:"policies"`
	} `json:"auth"`
	Request struct {
		Operation string `json:"operation"`
		Path      string `json:"path"`
	} `json:"request"`
	Error string `json:"error"`
}

// auditLog reads Vault's audit log from an offset on.
type auditLog struct{ path string }

// size is the current end of the log, the offset of the next entry.
func (l auditLog) size() (int64, error) {
	st, err := os.Stat(l.path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// requests are the request entries written after offset.
func (l auditLog) requests(offset int64) ([]auditEntry, error) {
	data, err := os.ReadFile(l.path)
	if err != nil {
		return nil, err
	}
	if offset > int64(len(data)) {
		return nil, fmt.Errorf("audit log %s shrank below %d bytes", l.path, offset)
	}
	var out []auditEntry
	s := bufio.NewScanner(bytes.NewReader(data[offset:]))
	s.Buffer(make([]byte, 1<<20), 16<<20)
	for s.Scan() {
		var e auditEntry
		if err := json.Unmarshal(s.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
		if e.Type == "request" {
			out = append(out, e)
		}
	}
	return out, s.Err()
}

func (e auditEntry) String() string {
	who := "-"
	if e.Auth != nil {
		who = e.Auth.DisplayName
	}
	return fmt.Sprintf("%s %s (%s)", e.Request.Operation, e.Request.Path, who)
}

// isWrite: a request that changes something in Vault.
func (e auditEntry) isWrite() bool {
	switch e.Request.Operation {
	case "create", "update", "delete":
		return true
	}
	return false
}

// byOperator: made with a token that carries the operator's policy.
func (e auditEntry) byOperator(policy string) bool {
	return e.Auth != nil && slices.Contains(e.Auth.Policies, policy)
}

// isLogin: a login, which every new operator process makes once per
// VaultConnection; it creates a token and changes no managed object.
func (e auditEntry) isLogin() bool {
	return strings.HasPrefix(e.Request.Path, "auth/") && strings.HasSuffix(e.Request.Path, "/login")
}
