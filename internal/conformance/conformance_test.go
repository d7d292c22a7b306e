package conformance_test

import (
	"os"
	"testing"

	"github.com/relock-go/relock/internal/conformance"
	"github.com/relock-go/relock/internal/testkit"
)

// The suite on go-redis, as an adapter module runs it on its own client
// library: the moved tests also run under their old names in the root and
// in systest, the suite's own ones only here.
func TestMain(m *testing.M) { os.Exit(conformance.Main(m, testkit.GoRedis)) }

func TestConformance(t *testing.T) { conformance.Run(t) }
