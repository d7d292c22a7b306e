package systest

import (
	"testing"

	"github.com/relock-go/relock/internal/conformance"
)

func TestFaultClusterResharding(t *testing.T) { conformance.FaultClusterResharding(t) }
