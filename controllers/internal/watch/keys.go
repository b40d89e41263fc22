package watch

import "strings"

// MinionIDKey is the minion-ID index's key: minion IDs are unique
// regardless of case, as the Salt master's are.
func MinionIDKey(id string) string { return strings.ToLower(id) }
