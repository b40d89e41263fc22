package acl

import (
	"errors"
	"strings"
)

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
// evaluates it as it is, but since 1.21.5 Vault refuses such a real request
// (Mode.RefuseUncleanedPaths).
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

// IsPattern reports a path that holds Vault's pattern characters: a "*"
// or a "+" (a literal path with them is rare, and taking a pattern as a
// literal silently answers for a path nobody meant).
func IsPattern(path string) bool {
	return strings.ContainsAny(path, "*+")
}

// ErrNotAPattern is a pattern that Vault's policy syntax does not have: a
// "*" before the end, or a "+" that is not a whole segment.
var ErrNotAPattern = errors.New(`not a Vault ACL pattern: "*" may only end it, "+" may only be a whole segment`)

// MatchPattern reports whether pattern, as a policy's path key, matches
// path, by the rules the stores apply (a trailing "*" is a byte-wise
// prefix; a "+" segment is any one segment, an empty one included).
// The leading "/" of both is dropped, as Vault drops it. A pattern Vault
// would refuse ("+*"), or a "*" or "+" that Vault would take literally,
// is an error: the caller asked for a pattern and would get a literal.
func MatchPattern(pattern, path string) (bool, error) {
	pattern, path = strings.TrimLeft(pattern, "/"), strings.TrimLeft(path, "/")
	k, err := classify(pattern)
	if err != nil {
		return false, err
	}
	body := strings.TrimSuffix(pattern, "*")
	if strings.Contains(body, "*") {
		return false, ErrNotAPattern
	}
	for _, seg := range strings.Split(body, "/") {
		if strings.Contains(seg, "+") && seg != "+" {
			return false, ErrNotAPattern
		}
	}
	switch k {
	case exactKind:
		return pattern == path, nil
	case prefixKind:
		return strings.HasPrefix(path, body), nil
	}
	isPrefix := strings.HasSuffix(pattern, "*")
	parts := strings.Split(body, "/")
	return segMatch(parts, isPrefix, path, strings.Count(path, "/")+1), nil
}
