package relock_test

import (
	"testing"

	"github.com/relock-go/relock/internal/conformance"
)

func TestSentinel(t *testing.T) { conformance.Sentinel(t) }
