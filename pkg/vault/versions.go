package vault

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"
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

// Version is a Vault release number, as its sys/seal-status reports it
// ("1.21.4", "1.19.5+ent", "2.0.1") without build metadata.
type Version struct {
	Major, Minor, Patch int
}

// ParseVersion reads "1.21.4", "v1.21.4", "1.21.4+ent" or
// "1.21.4+minionvault-minimal"; a pre-release suffix ("-rc1") is dropped.
func ParseVersion(s string) (Version, error) {
	v := strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexAny(v, "+-"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return Version{}, fmt.Errorf("vault version %q: want MAJOR.MINOR.PATCH", s)
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 {
			return Version{}, fmt.Errorf("vault version %q: %q is not a number", s, p)
		}
		n[i] = x
	}
	return Version{Major: n[0], Minor: n[1], Patch: n[2]}, nil
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Line is "1.21": releases of one line share their API.
func (v Version) Line() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

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
	v, err := ParseVersion(s)
	if err != nil {
		return Untested, ""
	}
	state, release := Untested, ""
	for _, t := range TestedVersions() {
		tv, err := ParseVersion(t)
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
