package vault

import (
	"os"
	"strings"
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/vaultversion"
)

func TestTestedVersionsIsTheFileMakeReads(t *testing.T) {
	got := TestedVersions()
	if len(got) == 0 {
		t.Fatal("no tested versions")
	}
	// Oldest first, each parseable: the Makefile and the docs rely on both.
	var prev vaultversion.Version
	for i, s := range got {
		v, err := vaultversion.Parse(s)
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if i > 0 && prev.Compare(v) >= 0 {
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

func TestTestingOf(t *testing.T) {
	newest := NewestTested()
	nv, _ := vaultversion.Parse(newest)
	otherPatch := vaultversion.Version{Major: nv.Major, Minor: nv.Minor, Patch: nv.Patch + 1}.String()
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
