package acl

import "strings"

// Caps is a capability bitmap, Vault's CapabilitiesBitmap. The Deny bit, when
// set, is the only bit: the parser and the merge keep it alone.
type Caps uint16

// The capabilities, in Vault's bit order (the order does not show in any
// answer: names are sorted).
const (
	Deny Caps = 1 << iota
	Create
	Read
	Update
	Delete
	List
	Sudo
	Patch
	Subscribe
	Recover
)

// capNames is in alphabetical order, the order sys/capabilities answers in
// (Core sorts the names with sort.Strings).
var capNames = [...]struct {
	c    Caps
	name string
}{
	{Create, "create"},
	{Delete, "delete"},
	{List, "list"},
	{Patch, "patch"},
	{Read, "read"},
	{Recover, "recover"},
	{Subscribe, "subscribe"},
	{Sudo, "sudo"},
	{Update, "update"},
}

// ParseCap returns the bit of one capability name ("deny" included).
func ParseCap(name string) (Caps, bool) {
	if name == "deny" {
		return Deny, true
	}
	for _, n := range capNames {
		if n.name == name {
			return n.c, true
		}
	}
	return 0, false
}

// Names is the answer sys/capabilities gives for this bitmap: the names
// sorted, ["deny"] when the deny bit is set or nothing is granted.
func (c Caps) Names() []string {
	if c&Deny != 0 || c == 0 {
		return []string{"deny"}
	}
	out := make([]string, 0, 4)
	for _, n := range capNames {
		if c&n.c != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// Allows reports whether the bitmap grants every bit of want. A deny bitmap
// grants nothing.
func (c Caps) Allows(want Caps) bool {
	return c&Deny == 0 && want != 0 && c&want == want
}

// Granted is the bitmap without a deny: what the holder can actually do.
func (c Caps) Granted() Caps {
	if c&Deny != 0 {
		return 0
	}
	return c
}

func (c Caps) String() string { return strings.Join(c.Names(), ",") }

// merge is Vault's merge of two rules with the same key (vault/acl.go
// NewACL): deny is sticky, otherwise the bits are OR-ed. It is commutative,
// so the result does not depend on policy order.
func merge(a, b Caps) Caps {
	if a&Deny != 0 || b&Deny != 0 {
		return Deny
	}
	return a | b
}
