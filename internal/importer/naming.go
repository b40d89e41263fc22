package importer

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// BindingName derives a MinionBinding name (a DNS-1123 subdomain) from a
// minion ID:
//
//   - an ID that already is a valid name (lowercase letters, digits, '-'
//     and '.', each dot-separated part starting and ending with a letter or
//     digit, at most 253 characters) is used as is: web01.example.com;
//   - any other ID is lowercased, every character other than a-z, 0-9, '-'
//     and '.' becomes '-', '-' is trimmed from both ends of every part,
//     empty parts are dropped, the result is cut to 244 characters, and
//     "-" plus the first 8 hex digits of the SHA-256 of the ID is appended:
//     Web_01 -> web-01-<hash>. The hash keeps names distinct (Web01 and
//     web01 differ) and stable whatever else is imported.
//
// spec.minionID always keeps the real ID.
func BindingName(id string) string { return bindingName(id, 8) }

func bindingName(id string, hashLen int) string {
	if isValidName(id) {
		return id
	}
	var b strings.Builder
	for _, r := range strings.ToLower(id) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	var parts []string
	for _, p := range strings.Split(b.String(), ".") {
		if p = strings.Trim(p, "-"); p != "" {
			parts = append(parts, p)
		}
	}
	base := strings.Join(parts, ".")
	if max := validation.DNS1123SubdomainMaxLength - 1 - hashLen; len(base) > max {
		base = strings.TrimRight(base[:max], "-.")
	}
	sum := sha256.Sum256([]byte(id))
	suffix := hex.EncodeToString(sum[:])[:hashLen]
	if base == "" {
		return "minion-" + suffix
	}
	return base + "-" + suffix
}

func isValidName(s string) bool { return len(validation.IsDNS1123Subdomain(s)) == 0 }

// bindingNames names every minion of ids. Should two names collide (an ID
// that is a valid name equal to another ID's derived name, or two equal
// 8-digit hashes), the derived names of the colliding minions use longer
// hashes; the result depends only on the IDs involved.
func bindingNames(ids []string) (map[string]string, error) {
	names := make(map[string]string, len(ids))
	for _, id := range ids {
		names[id] = BindingName(id)
	}
	for _, hashLen := range []int{16, 64} {
		byName := map[string][]string{}
		for _, id := range ids {
			byName[names[id]] = append(byName[names[id]], id)
		}
		collided := false
		for _, group := range byName {
			if len(group) < 2 {
				continue
			}
			collided = true
			for _, id := range group {
				if names[id] != id {
					names[id] = bindingName(id, hashLen)
				}
			}
		}
		if !collided {
			return names, nil
		}
	}
	seen := map[string]string{}
	for _, id := range ids {
		if other, ok := seen[names[id]]; ok {
			return nil, fmt.Errorf("minions %q and %q map to the same binding name %q", other, id, names[id])
		}
		seen[names[id]] = id
	}
	return names, nil
}
