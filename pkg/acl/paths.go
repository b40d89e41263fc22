package acl

import "strings"

// SplitPaths reads the paths parameter of sys/capabilities when it is sent
// as one string: TypeCommaStringSlice splits at commas and trims each
// element (parseutil.ParseCommaStringSlice). A JSON list is not split.
func SplitPaths(s string) []string {
	if s == "" {
		return []string{}
	}
	out := strings.Split(s, ",")
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	return out
}

// Uncleaned reports a path with "//", "." or ".." segments: sys/capabilities
// evaluates it as it is, but since 1.21.5 Vault refuses such a real request.
func Uncleaned(path string) bool {
	path = strings.TrimLeft(path, "/")
	if strings.Contains(path, "//") {
		return true
	}
	for _, seg := range strings.Split(path, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}
