package cli

import (
	"context"
	"fmt"
	"runtime"

	"github.com/relock-go/relock"
)

var versionCommand = &command{
	name:    "version",
	summary: "print relock's version",
	run:     runVersion,
	local:   true,
}

func runVersion(_ context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "version", "", "\nPrints the version of relock built into this program, and the Go toolchain and platform it was built for.")
	if code, done := parse(e, fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(e, fs, "unexpected argument %q", fs.Arg(0))
	}
	fmt.Fprintf(e.stdout, "relock %s %s %s/%s\n", relock.Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return exitOK
}
