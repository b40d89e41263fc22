package localenv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// ModulePath is this module's path, as its go.mod declares it.
const ModulePath = "github.com/minionvault/minion-vault-operator"

// ModuleRoot is the folder of this module's go.mod: the first one above the
// working directory (a test runs in its package's folder) that declares the
// module, else the one above this source file when its path is known (not
// in a binary built with -trimpath).
func ModuleRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		for {
			if isModuleRoot(dir) {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", errors.New("localenv: no go.mod of " + ModulePath + " above the working directory")
}

func isModuleRoot(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == ModulePath
		}
	}
	return false
}

// tails returns the last lines of each non-empty log file, for error messages.
func tails(paths ...string) string {
	const lines = 30
	var b strings.Builder
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil || len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(all) > lines {
			all = all[len(all)-lines:]
		}
		fmt.Fprintf(&b, "\n--- last lines of %s ---\n%s", filepath.Base(p), strings.Join(all, "\n"))
	}
	return b.String()
}
