//go:build integration

package harness

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// tally counts the calls of one actor (the operator, the floor) in a
// phase, from an audit log.
type tally struct {
	Reads, Writes int
	// By counts calls by kind: for Vault "<class> R" or "<class> W" (see
	// vaultClass), for Kubernetes "<verb> <resource>[/<subresource>]".
	By map[string]int
	// Failed counts calls answered with an error (Vault) or a status of
	// 400 or more (Kubernetes; 409 conflicts among them), by the same kinds.
	Failed map[string]int
}

func newTally() *tally { return &tally{By: map[string]int{}, Failed: map[string]int{}} }

func (t *tally) add(kind string, write, failed bool) {
	if write {
		t.Writes++
	} else {
		t.Reads++
	}
	t.By[kind]++
	if failed {
		t.Failed[kind]++
	}
}

// eachLine calls fn with every complete line of path between the byte
// offsets from and to.
func eachLine(path string, from, to int64, fn func([]byte) error) error {
	if to < from {
		return fmt.Errorf("%s shrank from %d to %d bytes during the phase (rotated?): its calls cannot be counted", path, from, to)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return err
	}
	r := bufio.NewReaderSize(io.LimitReader(f, to-from), 1<<20)
	// A phase starts where the last one ended, after the logs went quiet;
	// should a line still have been in the middle of being written, its
	// end is no JSON and belongs to the phase before.
	partial := from > 0
	for {
		line, err := r.ReadBytes('\n')
		if partial {
			partial = false
			if len(line) > 0 && line[0] != '{' {
				continue
			}
		}
		if len(line) > 0 && line[len(line)-1] == '\n' {
			if err := fn(line); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func fileSize(path string) (int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// auditLogs are the files of Vault's file audit device: a dev server's
// one, or one per node of an HA cluster (each node writes the requests it
// handles as the active node to its own file). Offsets into them go
// together, one per file; a file not written yet is empty.
type auditLogs []string

// auditOffsets are the sizes of auditLogs' files at one moment.
type auditOffsets []int64

// offsets are the files' sizes now (0 for one not there yet: a node that
// was never active).
func (a auditLogs) offsets() (auditOffsets, error) {
	out := make(auditOffsets, len(a))
	for i, p := range a {
		n, err := fileSize(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// read counts the responses between two offsets by actor, over every
// file (readVaultAudit).
func (a auditLogs) read(from, to auditOffsets, accessors map[string]string) (map[string]*tally, error) {
	out := map[string]*tally{}
	for _, actor := range accessors {
		out[actor] = newTally()
	}
	for i, p := range a {
		if to[i] == from[i] {
			continue
		}
		got, err := readVaultAudit(p, from[i], to[i], accessors)
		if err != nil {
			return nil, err
		}
		for actor, t := range got {
			out[actor].merge(t)
		}
	}
	return out, nil
}

// calls lists the responses to actor between two offsets over every
// file, in time order (vaultCalls).
func (a auditLogs) calls(from, to auditOffsets, accessors map[string]string, actor string) ([]vaultCall, error) {
	var out []vaultCall
	for i, p := range a {
		if to[i] == from[i] {
			continue
		}
		got, err := vaultCalls(p, from[i], to[i], accessors, actor)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, nil
}

// merge adds u's counts to t.
func (t *tally) merge(u *tally) {
	t.Reads += u.Reads
	t.Writes += u.Writes
	for k, v := range u.By {
		t.By[k] += v
	}
	for k, v := range u.Failed {
		t.Failed[k] += v
	}
}

// vaultAuditEntry is what the harness reads of a Vault file audit device
// entry (enabled with hmac_accessor=false, so the accessor is plain).
type vaultAuditEntry struct {
	Time time.Time `json:"time"`
	Type string    `json:"type"`
	Auth *struct {
		Accessor string `json:"accessor"`
	} `json:"auth"`
	Request struct {
		Operation string `json:"operation"`
		Path      string `json:"path"`
	} `json:"request"`
	Error string `json:"error"`
}

// readVaultAudit counts the responses in Vault's audit log between two
// offsets by the actor whose token accessor maps to it (accessors:
// accessor → actor). Calls by other tokens (the harness's root token) are
// not counted.
func readVaultAudit(path string, from, to int64, accessors map[string]string) (map[string]*tally, error) {
	out := map[string]*tally{}
	for _, actor := range accessors {
		out[actor] = newTally()
	}
	err := eachLine(path, from, to, func(line []byte) error {
		var e vaultAuditEntry
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("vault audit log: %w", err)
		}
		if e.Type != "response" || e.Auth == nil {
			return nil
		}
		actor, ok := accessors[e.Auth.Accessor]
		if !ok {
			return nil
		}
		class, write := vaultClass(e.Request.Operation, e.Request.Path)
		rw := " R"
		if write {
			rw = " W"
		}
		out[actor].add(class+rw, write, e.Error != "")
		return nil
	})
	return out, err
}

// vaultCall is one response in Vault's audit log: when, and what it was
// about, for the phases that need more than counts.
type vaultCall struct {
	At    time.Time
	Class string // vaultClass
	Write bool
	Path  string
}

// vaultCalls lists the responses to actor in Vault's audit log between
// two offsets, in the log's order.
func vaultCalls(path string, from, to int64, accessors map[string]string, actor string) ([]vaultCall, error) {
	var out []vaultCall
	err := eachLine(path, from, to, func(line []byte) error {
		var e vaultAuditEntry
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("vault audit log: %w", err)
		}
		if e.Type != "response" || e.Auth == nil || accessors[e.Auth.Accessor] != actor {
			return nil
		}
		class, write := vaultClass(e.Request.Operation, e.Request.Path)
		out = append(out, vaultCall{At: e.Time, Class: class, Write: write, Path: e.Request.Path})
		return nil
	})
	return out, err
}

// vaultClass names the kind of object a Vault call is about, and whether
// the call changes something. Vault logs the operation it authorised:
// read or list for GET, create or update for POST/PUT, delete. A lookup
// (identity/lookup/*) is a POST that reads, so it counts as a read.
func vaultClass(op, path string) (class string, write bool) {
	write = op != "read" && op != "list"
	seg := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case strings.HasPrefix(path, "identity/lookup/"):
		return "lookup", false
	case op == "list" && len(seg) == 3 && seg[0] == "auth" && seg[2] == "role":
		return "role list", false
	case op == "list" && strings.Trim(path, "/") == "identity/entity/id":
		return "entity list", false
	case len(seg) >= 4 && seg[0] == "auth" && seg[2] == "role":
		if len(seg) >= 5 {
			return "role/" + seg[4], write // role-id, secret-id, ...
		}
		return "role", write
	case strings.HasPrefix(path, "identity/entity-alias"):
		return "alias", write
	case strings.HasPrefix(path, "identity/entity/"):
		return "entity", write
	case strings.HasPrefix(path, "sys/policies/acl") || strings.HasPrefix(path, "sys/policy"):
		return "policy", write
	case path == "sys/auth" || strings.HasPrefix(path, "sys/auth/"):
		return "sys/auth", write
	case strings.HasPrefix(path, "auth/token/"):
		return "token", write
	case strings.HasPrefix(path, "sys/"):
		return "sys", write
	}
	return "other", write
}

// kubeAuditEvent is what the harness reads of an API server audit event.
type kubeAuditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// kubeAuditPolicy logs, at Metadata level and once per request (when the
// response is complete), every request of the users the harness counts,
// and nothing else: the log stays small and costs the API server little.
func kubeAuditPolicy(users ...string) string {
	quoted := make([]string, len(users))
	for i, u := range users {
		quoted[i] = fmt.Sprintf("%q", u)
	}
	return `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  users: [` + strings.Join(quoted, ", ") + `]
- level: None
`
}

// kubeWriteVerbs are the verbs that change something.
var kubeWriteVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true}

// readKubeAudit counts the requests in the API server's audit log between
// two offsets by user (users: user name → actor). Watches are left out:
// they are logged only when they end, long after the phase.
func readKubeAudit(path string, from, to int64, users map[string]string) (map[string]*tally, error) {
	out := map[string]*tally{}
	for _, actor := range users {
		out[actor] = newTally()
	}
	err := eachLine(path, from, to, func(line []byte) error {
		var e kubeAuditEvent
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("kube audit log: %w", err)
		}
		actor, ok := users[e.User.Username]
		if !ok || e.Stage != "ResponseComplete" || e.Verb == "watch" {
			return nil
		}
		kind := e.Verb
		if e.ObjectRef != nil {
			kind += " " + e.ObjectRef.Resource
			if e.ObjectRef.Subresource != "" {
				kind += "/" + e.ObjectRef.Subresource
			}
		}
		failed := e.ResponseStatus != nil && e.ResponseStatus.Code >= 400
		out[actor].add(kind, kubeWriteVerbs[e.Verb], failed)
		return nil
	})
	return out, err
}
