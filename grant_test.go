package relock_test

import (
	"testing"

	"github.com/relock-go/relock/internal/conformance"
)

func TestGrants(t *testing.T) { conformance.Grants(t) }
