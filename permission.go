package relock

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/scripts"
)

// probeScript is the script New runs to learn whether the Redis user may
// run scripts: it touches no key.
const probeScript = "return 1"

// probeSHA is probeScript's SHA1 digest, for EVALSHA.
const probeSHA = "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"

// checkScripts asks the server, in one round trip, whether this Redis
// user may run scripts by EVAL and EVALSHA, as every primitive does, and
// publish on every kind of channel relock publishes on (start.lua), as
// every release does. A user whose ACL denies scripts would otherwise see
// New succeed and every later call fail; one whose ACL denies a channel
// would see releases fail after their writes, which Redis does not undo: an
// Unlock returning ErrNoPermission with the lock freed or granted, a
// Release returning it with the permits given back. It returns an error
// wrapping ErrNoPermission when the server answers NOPERM or names a
// channel denied, ErrUnsupportedServer when the server lacks one of these
// commands (rename-command), the server's reply when it refuses the
// client's credentials (NOAUTH, WRONGPASS), and nil otherwise: a server
// that cannot be reached now, or is busy, is the business of the calls
// that will need it.
//
// publish is the Client's publish command ("publish" or "spublish"), which
// New has not stored yet.
func (c *Client) checkScripts(publish string) error {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.cleanup)
	defer cancel()
	// The same script makes the Client known (identity.go), only when
	// the user may publish; the watchdog's rounds keep it so.
	channels, patterns := c.publishChannels()
	keys, args := scripts.StartRequest{Publish: publish, Channels: channels, Announce: c.announceRequest()}.Build()
	xs := []door.Exchange{
		{Cmd: door.Cmd{Args: []any{"eval", probeScript, 0}}},
		{Cmd: door.Cmd{Args: []any{"evalsha", probeSHA, 0}}},
		{Cmd: door.Eval(scripts.Start, keys, args)},
	}
	c.door.Pipe(ctx, xs)
	start := xs[2].Reply
	var denied, unknown []string
	var first error
	for _, x := range xs[:2] {
		err := x.Reply.Err()
		name := strings.ToUpper(x.Cmd.Args[0].(string))
		switch {
		case door.ClassOf(err) == door.Auth:
			// Every call would get the same answer.
			return fmt.Errorf("relock: the server refuses the Redis client's credentials: %w", err)
		case isNoPerm(err):
			denied = append(denied, name)
		case isUnknownCommand(err):
			unknown = append(unknown, name)
		default:
			continue
		}
		if first == nil {
			first = err
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("%w: the server has no %s command (rename-command?), which relock needs for every lock call: %w",
			ErrUnsupportedServer, strings.Join(unknown, " or "), first)
	}
	if first != nil {
		return fmt.Errorf("%w: the Redis user may not run %s, which relock needs for every lock call; "+
			"grant the commands listed in relock's README (ACL SETUSER): %w", ErrNoPermission, strings.Join(denied, " or "), first)
	}
	v, err := start.Result()
	if err != nil {
		return nil
	}
	if v == int64(0) {
		return fmt.Errorf("%w: the server has no %s command (rename-command?), which relock's releases call to wake waiters "+
			"(a release would fail with its writes applied)", ErrUnsupportedServer, strings.ToUpper(publish))
	}
	refused, _ := start.StringSlice()
	if len(refused) == 0 {
		return nil
	}
	var lacks []string
	for i, ch := range channels {
		if slices.Contains(refused, ch.(string)) && !slices.Contains(lacks, patterns[i]) {
			lacks = append(lacks, patterns[i])
		}
	}
	return fmt.Errorf("%w: the Redis user may not %s on %s, the channels on which relock's releases wake waiters "+
		"(a release refused there would fail with its writes applied); grant them as relock's README lists (ACL SETUSER)",
		ErrNoPermission, strings.ToUpper(publish), strings.Join(lacks, " "))
}

// permissionCheck is the lock name of the channels start.lua checks: one
// that no lock is expected to have, since on a server without
// redis.acl_check_cmd (Redis 6.2) it publishes on them.
const permissionCheck = "relock:permission-check"

// publishChannels returns one channel of each kind relock publishes on
// (see internal/layout), and for each the ACL channel pattern that grants
// its kind.
func (c *Client) publishChannels() (channels []any, patterns []string) {
	add := func(channel, pattern string) {
		channels = append(channels, channel)
		patterns = append(patterns, "&"+pattern)
	}
	lock := layout.Companion(layout.LockChannel, permissionCheck)
	add(lock, layout.Pattern(layout.LockChannel))
	add(layout.WaiterChannel(lock, c.id+":1"), layout.Pattern(layout.LockChannel)) // a FairMutex waiter's own
	add(layout.Companion(layout.RWChannel, permissionCheck), layout.Pattern(layout.RWChannel))
	add(layout.Companion(layout.SemaphoreChannel, permissionCheck), layout.Pattern(layout.SemaphoreChannel))
	add(layout.LatchChannel(permissionCheck, c.cluster), layout.LatchChannels)
	add(layout.Companion(layout.ElectionChannel, permissionCheck), layout.Pattern(layout.ElectionChannel))
	add(c.grantChannel(permissionCheck), layout.Pattern(layout.GrantChannel))
	return channels, patterns
}

// isNoPerm reports whether err is the server's refusal by ACL: a NOPERM
// reply, or the error of a script that ran a command, or touched a key or
// channel, its user may not. Inside a script the refusal reads "ERR The
// user executing the script can't ..." on Redis 6.2 and 7.0, and "ERR ACL
// failure in script: ..." on Redis 7.2 and later and on Valkey.
func isNoPerm(err error) bool { return door.ClassOf(err) == door.NoPerm }

// isUnknownCommand reports whether err is the server's answer to a command
// it does not know ("ERR unknown command 'eval', with args beginning
// with: ..."): one renamed or disabled by rename-command.
func isUnknownCommand(err error) bool {
	return err != nil && isServerError(err) && strings.Contains(strings.ToLower(err.Error()), "unknown command")
}
