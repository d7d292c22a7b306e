package goredis

import (
	"os"
	"testing"

	"github.com/relock-go/relock/internal/redistest"
)

// srv is the package's shared standalone server.
var srv *redistest.Server

func TestMain(m *testing.M) {
	os.Exit(redistest.Main(m, func(s *redistest.Server) func() { srv = s; return nil }))
}
