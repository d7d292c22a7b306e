package gocronlock_test

import (
	"os"
	"testing"

	"github.com/relock-go/relock/internal/redistest"
)

// redisAddr is the address of the server redistest.Main starts for the
// package's tests.
var redisAddr string

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		// The test binary started again as a scheduler to kill (kill_test.go).
		os.Exit(runChild(mode))
	}
	os.Exit(redistest.Main(m, func(s *redistest.Server) func() { redisAddr = s.Addr; return nil }))
}
