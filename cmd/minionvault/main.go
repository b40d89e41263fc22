// Command minionvault is the operator's one binary: `render` for pull
// requests, and (later) `operator` to run the controllers.
package main

import (
	"os"

	"github.com/minionvault/minion-vault-operator/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
