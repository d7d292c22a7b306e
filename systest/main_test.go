package systest

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/relock-go/relock/internal/testkit"
)

// childEnv names the role a child process of a suite plays; the role's
// function runs instead of the tests (see children).
const childEnv = "RELOCK_TEST_CHILD"

// children are the roles of the suites' child processes: each holds or
// campaigns for something in a process of its own, so that a test can
// kill or stop it, and returns the process's exit code. The role's
// parameters come in the environment, as childCommand is given them.
var children = map[string]func() int{
	"holder":        helperProcess,       // faults_test.go
	"fair-holder":   fairHelperProcess,   // fairmutex_faults_test.go
	"rw-reader":     rwReaderProcess,     // rwmutex_faults_test.go
	"permit-holder": permitHolderProcess, // permitsemaphore_faults_test.go
	"paused-holder": pausedHolderProcess, // faultsuite_holder_test.go
	"campaigner":    campaignerProcess,   // election_hammer_linux_test.go
}

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		run, ok := children[role]
		if !ok {
			fmt.Fprintf(os.Stderr, "no child role %q\n", role)
			os.Exit(2)
		}
		os.Exit(run())
	}
	os.Exit(testkit.Main(m))
}

// childCommand returns the command that runs this test binary as a child
// process of role, with env added to its environment.
func childCommand(role string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+role), env...)
	return cmd
}
