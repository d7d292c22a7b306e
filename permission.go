package relock

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/scripts"
)

// probeScript is the script New runs to learn whether the Redis user may
// run scripts: it touches no key.
const probeScript = "return 1"

// probeSHA is probeScript's SHA1 digest, for EVALSHA.
const probeSHA = "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"

// checkScripts asks the server, in one round trip, whether this Redis
// user may run scripts by EVAL and EVALSHA, as every primitive does. A
// user whose ACL denies them would otherwise see New succeed and every
// later call fail. It returns an error wrapping ErrNoPermission when the
// server answers NOPERM, and nil otherwise: a server that cannot be
// reached now is the business of the calls that will need it.
func (c *Client) checkScripts() error {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.cleanup)
	defer cancel()
	pipe := c.rdb.Pipeline()
	eval := pipe.Eval(ctx, probeScript, nil)
	evalsha := pipe.EvalSha(ctx, probeSHA, nil)
	// The same round trip makes the Client known (identity.go); the
	// watchdog's rounds keep it so.
	keys, args := c.announceArgs()
	scripts.Announce.QueueSource(ctx, pipe, keys, args...)
	_, _ = pipe.Exec(ctx)
	var denied []string
	var first error
	for _, cmd := range []*redis.Cmd{eval, evalsha} {
		if err := cmd.Err(); isNoPerm(err) {
			denied = append(denied, strings.ToUpper(cmd.Name()))
			if first == nil {
				first = err
			}
		}
	}
	if first == nil {
		return nil
	}
	return fmt.Errorf("%w: the Redis user may not run %s, which relock needs for every lock call; "+
		"grant the commands listed in relock's README (ACL SETUSER): %w", ErrNoPermission, strings.Join(denied, " or "), first)
}

// isNoPerm reports whether err is the server's refusal by ACL: a NOPERM
// reply, or the error of a script that ran a command its user may not.
func isNoPerm(err error) bool {
	if err == nil || !isServerError(err) {
		return false
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "NOPERM") || strings.Contains(msg, "The user executing the script can't")
}
