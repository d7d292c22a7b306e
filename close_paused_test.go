package relock_test

import (
	"testing"

	"github.com/relock-go/relock/internal/conformance"
)

func TestCloseWithServerPaused(t *testing.T) { conformance.CloseWithServerPaused(t) }
