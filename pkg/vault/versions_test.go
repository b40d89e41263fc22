package vault

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestTestedVersionsIsTheFileMakeReads(t *testing.T) {
	got := TestedVersions()
	if len(got) == 0 {
		t.Fatal("no tested versions")
	}
	// Oldest first, each parseable: the Makefile and the docs rely on both.
	var prev Version
	for i, s := range got {
		v, err := ParseVersion(s)
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if i > 0 && !less(prev, v) {
			t.Errorf("%s listed after %s: want oldest first", v, prev)
		}
		prev = v
	}
	if NewestTested() != got[len(got)-1] {
		t.Errorf("NewestTested = %s, want the last line %s", NewestTested(), got[len(got)-1])
	}
	// The default build (hack/tools.mk VAULT_VERSION) is the newest line.
	mk, err := os.ReadFile("../../hack/tools.mk")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "VAULT_VERSION          ?= v"+NewestTested()) {
		t.Errorf("hack/tools.mk's VAULT_VERSION is not v%s, the newest tested line", NewestTested())
	}
}

// Every tested line can be built: hack/tools/vault has its folder (go.mod,
// vault.patch) and build.sh pins its module hash (`make vaults`).
func TestEveryTestedVersionHasItsBuild(t *testing.T) {
	build, err := os.ReadFile("../../hack/tools/vault/build.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range TestedVersions() {
		for _, f := range []string{"go.mod", "go.sum", "vault.patch"} {
			if _, err := os.Stat("../../hack/tools/vault/v" + v + "/" + f); err != nil {
				t.Errorf("Vault %s: %v (hack/tools/vault/line.sh v%s writes go.mod)", v, err, v)
			}
		}
		if !strings.Contains(string(build), "[v"+v+`]="h1:`) {
			t.Errorf("Vault %s: hack/tools/vault/build.sh pins no module hash for it (module_sums)", v)
		}
	}
}

func less(a, b Version) bool {
	return slices.Compare([]int{a.Major, a.Minor, a.Patch}, []int{b.Major, b.Minor, b.Patch}) < 0
}

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Version
		err  bool
	}{
		{in: "1.21.4", want: Version{1, 21, 4}},
		{in: "v1.19.5", want: Version{1, 19, 5}},
		{in: "1.21.4+minionvault-minimal", want: Version{1, 21, 4}},
		{in: "1.19.5+ent", want: Version{1, 19, 5}},
		{in: "2.0.0-rc1", want: Version{2, 0, 0}},
		{in: " 2.1.0 ", want: Version{2, 1, 0}},
		{in: "", err: true},
		{in: "1.21", err: true},
		{in: "1.x.4", err: true},
		{in: "1.-1.4", err: true},
	} {
		got, err := ParseVersion(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestTestingOf(t *testing.T) {
	newest := NewestTested()
	nv, _ := ParseVersion(newest)
	otherPatch := Version{nv.Major, nv.Minor, nv.Patch + 1}.String()
	for _, tc := range []struct {
		in      string
		want    Testing
		release string
	}{
		{in: newest, want: Tested, release: newest},
		{in: newest + "+minionvault-minimal", want: Tested, release: newest},
		{in: otherPatch, want: LineTested, release: newest},
		{in: "1.14.8", want: Untested},
		{in: "2.0.1", want: Untested},
		{in: "garbage", want: Untested},
	} {
		got, release := TestingOf(tc.in)
		if got != tc.want || release != tc.release {
			t.Errorf("TestingOf(%q) = %v, %q; want %v, %q", tc.in, got, release, tc.want, tc.release)
		}
	}
}
