// Command relock runs commands under distributed locks on Redis, shows who
// holds which lock, and demonstrates mutual exclusion. Run "relock help".
package main

import (
	"os"

	"github.com/relock-go/relock/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
