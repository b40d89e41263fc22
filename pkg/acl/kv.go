package acl

import (
	"fmt"
	"strings"
)

// KVRequest is what one operation on a KV secret needs: the physical path
// sys/capabilities is asked about, and the capabilities that allow it.
type KVRequest struct {
	Path string
	// Need are the capabilities that allow the operation; with Any, one of
	// them is enough (a write is a create or an update).
	Need Caps
	Any  bool
}

// Allowed reports whether a bitmap allows the request.
func (r KVRequest) Allowed(c Caps) bool {
	if r.Any {
		return c.Granted()&r.Need != 0
	}
	return c.Allows(r.Need)
}

// KVOps are the operations KVPath knows, in the order of the KV v2 table
// of the ACL specification (section 1.6).
var KVOps = []string{"read", "write", "patch", "delete", "delete-versions", "undelete", "destroy",
	"metadata-read", "metadata-write", "metadata-delete", "subkeys", "list"}

// KVPath maps a logical secret path (mount/P, as saltext and the pillar
// name it) to the physical path an operation uses. sys/capabilities does
// no translation of its own: KV v2 is pure string matching, and a LIST
// request carries a trailing "/" (http/logical.go).
func KVPath(mount, logical string, version int, op string) (KVRequest, error) {
	mount = strings.Trim(mount, "/")
	logical = strings.TrimLeft(logical, "/")
	p, ok := strings.CutPrefix(logical, mount+"/")
	if !ok || mount == "" {
		return KVRequest{}, fmt.Errorf("path %q is not under the KV mount %q", logical, mount)
	}
	if version == 1 {
		switch op {
		case "read":
			return KVRequest{Path: logical, Need: Read}, nil
		case "write":
			return KVRequest{Path: logical, Need: Create | Update, Any: true}, nil
		case "delete":
			return KVRequest{Path: logical, Need: Delete}, nil
		case "list":
			return KVRequest{Path: strings.TrimSuffix(logical, "/") + "/", Need: List}, nil
		}
		return KVRequest{}, fmt.Errorf("KV version 1 has no operation %q (read, write, delete, list)", op)
	}
	if version != 2 {
		return KVRequest{}, fmt.Errorf("KV version %d: want 1 or 2", version)
	}
	under := func(sub string) string { return mount + "/" + sub + "/" + p }
	switch op {
	case "read":
		return KVRequest{Path: under("data"), Need: Read}, nil
	case "write":
		return KVRequest{Path: under("data"), Need: Create | Update, Any: true}, nil
	case "patch":
		return KVRequest{Path: under("data"), Need: Patch}, nil
	case "delete":
		return KVRequest{Path: under("data"), Need: Delete}, nil
	case "delete-versions":
		return KVRequest{Path: under("delete"), Need: Update}, nil
	case "undelete":
		return KVRequest{Path: under("undelete"), Need: Update}, nil
	case "destroy":
		return KVRequest{Path: under("destroy"), Need: Update}, nil
	case "metadata-read":
		return KVRequest{Path: under("metadata"), Need: Read}, nil
	case "metadata-write":
		return KVRequest{Path: under("metadata"), Need: Update}, nil
	case "metadata-delete":
		return KVRequest{Path: under("metadata"), Need: Delete}, nil
	case "subkeys":
		return KVRequest{Path: under("subkeys"), Need: Read}, nil
	case "list":
		return KVRequest{Path: strings.TrimSuffix(under("metadata"), "/") + "/", Need: List}, nil
	}
	return KVRequest{}, fmt.Errorf("unknown KV operation %q (%s)", op, strings.Join(KVOps, ", "))
}
