package relock

import (
	"fmt"
	"strings"
	"testing"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/scripts"
)

// TestScriptConstants: what the scripts write in instead of taking as an
// argument matches the Go side.
func TestScriptConstants(t *testing.T) {
	for _, c := range []struct {
		s    *scripts.Script
		want string
	}{
		{scripts.Lock, fmt.Sprintf("local grant_ttl = %d\n", grantTTL.Milliseconds())},
		{scripts.Unlock, fmt.Sprintf("local grant_ttl = %d\n", grantTTL.Milliseconds())},
		{scripts.Unlock, fmt.Sprintf("local k = %d\n", runBlock)},
		{scripts.RWWriteUnlock, fmt.Sprintf("local k = %d\n", runBlock)},
		{scripts.RWReadUnlock, fmt.Sprintf("local k = %d\n", runBlock)},
		{scripts.Unlock, fmt.Sprintf("local unlock_message = '%s'\n", msgUnlock)},
		{scripts.Abandon, fmt.Sprintf("redis.call(ARGV[3], ARGV[2], '%s')", msgUnlock)},
		{scripts.ForceUnlock, fmt.Sprintf("redis.call(ARGV[2], ARGV[1], '%s')", msgUnlock)},
		{scripts.FairUnlock, fmt.Sprintf("'fn', '', '%s')", msgUnlock)},
		{scripts.RWReadUnlock, fmt.Sprintf("free(queue, grantee, token, subs, '%s')", msgUnlock)},
		{scripts.RWWriteUnlock, fmt.Sprintf("free(queue, grantee, token, subs, '%s')", msgReadUnlock)},
		{scripts.RWWriteUnlock, fmt.Sprintf("announce('%s', queue)", msgReadUnlock)},
		{scripts.RWForceUnlock, fmt.Sprintf("redis.call(ARGV[2], ARGV[1], '%s')", msgReadUnlock)},
		{scripts.Lock, fmt.Sprintf("local token_field = '%s'\n", layout.TokenField)},
		{scripts.Lock, fmt.Sprintf("local since_field = '%s'\n", layout.SinceField)},
		{scripts.Lock, fmt.Sprintf("local queued_field = '%s'\n", layout.QueuedField)},
		{scripts.Unlock, fmt.Sprintf("local queued_field = '%s'\n", layout.QueuedField)},
	} {
		if !strings.Contains(c.s.Source(), c.want) {
			t.Errorf("%s.lua lacks %q", c.s.Name(), c.want)
		}
	}
}
