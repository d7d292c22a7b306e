package relock

import "testing"

// TestRenewScriptForEveryKind: every renewal kind has its script, so that
// a new kind of hold cannot be watched without one.
func TestRenewScriptForEveryKind(t *testing.T) {
	for k, s := range renewScripts {
		if s == nil {
			t.Errorf("renewal kind %d has no script", k)
		}
	}
}
