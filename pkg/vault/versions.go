package vault

import (
	_ "embed"
	"strings"

	"github.com/minionvault/minion-vault-operator/pkg/vaultversion"
)

// testedVersions is the one list of the Vault versions the project builds
// and tests; hack/tools.mk reads the same file.
//
//go:embed tested-versions.txt
var testedVersions string

// TestedVersions returns the Vault versions the project tests, oldest
// first, each as "1.21.4" (no "v").
func TestedVersions() []string {
	var out []string
	for _, line := range strings.Split(testedVersions, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, strings.TrimPrefix(line, "v"))
	}
	return out
}

// NewestTested is the default Vault version: the newest the project tests.
func NewestTested() string {
	v := TestedVersions()
	return v[len(v)-1]
}

// Testing says how the project tests a server version: Tested (that very
// release), LineTested (another patch release of a tested line) or
// Untested (a line the project does not build), with the tested release
// of the line when there is one.
type Testing int

const (
	Untested Testing = iota
	LineTested
	Tested
)

// TestingOf says how the project tests version s; an unreadable version
// is Untested.
func TestingOf(s string) (Testing, string) {
	v, err := vaultversion.Parse(s)
	if err != nil {
		return Untested, ""
	}
	state, release := Untested, ""
	for _, t := range TestedVersions() {
		tv, err := vaultversion.Parse(t)
		if err != nil || tv.Line() != v.Line() {
			continue
		}
		if tv == v {
			return Tested, t
		}
		state, release = LineTested, t
	}
	return state, release
}
