// Command svc is the agent action firewall: `svc serve` runs the decision
// engine; the other subcommands are its terminal clients.
package main

import (
	"os"

	"github.com/svc-dev/svc/cmd"
)

func main() {
	os.Exit(cmd.Execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
