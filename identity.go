package relock

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/scripts"
)

// Every Client makes itself known in Redis, so that an operator can tell
// who holds what: a hash layout.ClientKey(uuid) with its host name,
// process id, program, relock version, start time and the name given by
// WithClientName. New writes it in its one round trip, and the watchdog
// keeps it alive every round, off the path of every lock call; Close
// deletes it, and a Client that dies leaves it to expire. Lock data keeps Redisson's
// "<uuid>:<n>" owner fields: the uuid leads to the hash.

// WithClientName gives the Client a name that `relock ls`, `relock show`
// and `relock web` show beside its host and process, such as the service
// or job it runs. It must be at most 200 bytes, or New fails with
// ErrInvalidOption.
func WithClientName(name string) Option {
	return func(c *config) error {
		if len(name) > 200 {
			return fmt.Errorf("%w: client name of %d bytes is over 200", ErrInvalidOption, len(name))
		}
		c.name = name
		return nil
	}
}

// Version returns the version of relock built into the program, as the Go
// toolchain recorded it: a module version such as "v1.2.3", or "(devel)"
// for a build from a work tree.
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	if info.Main.Path == modulePath {
		return info.Main.Version
	}
	for _, d := range info.Deps {
		if d.Path == modulePath {
			if d.Replace != nil {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return "(unknown)"
}

const modulePath = "github.com/relock-go/relock"

// identity returns the fields of the Client's hash.
func (c *Client) identity() []any {
	host, _ := os.Hostname()
	program := ""
	if len(os.Args) > 0 {
		program = filepath.Base(os.Args[0])
	}
	return []any{
		"host", host,
		"pid", strconv.Itoa(os.Getpid()),
		"program", program,
		"version", Version(),
		"started", c.started.UTC().Format(time.RFC3339),
		"name", c.cfg.name,
	}
}

// infoField returns the value of one field of the Client's identity.
func (c *Client) infoField(name string) string {
	for i := 0; i+1 < len(c.info); i += 2 {
		if c.info[i] == name {
			s, _ := c.info[i+1].(string)
			return s
		}
	}
	return ""
}

// infoKey is the key of the Client's hash.
func (c *Client) infoKey() string { return layout.ClientKey(c.id) }

// infoTTL is how long the hash outlives the last round that wrote it.
func (c *Client) infoTTL() time.Duration { return 2 * c.cfg.watchdog }

// announceRequest returns the call of announce.lua.
func (c *Client) announceRequest() scripts.AnnounceRequest {
	return scripts.AnnounceRequest{Key: c.infoKey(), TTL: c.infoTTL(), Fields: c.info}
}

// announce writes the Client's hash with a fresh TTL (announce.lua). New
// writes it first, in its one round trip; the watchdog's rounds keep it.
func (c *Client) announce(ctx context.Context) {
	keys, args := c.announceRequest().Build()
	if err := c.door.Once(ctx, scripts.Announce, keys, args...).Err(); err != nil {
		c.cfg.logger.Debug("relock: cannot write the client's identity", "key", c.infoKey(), "err", err)
	}
}

// retire deletes the Client's hash as it closes.
func (c *Client) retire() {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.cleanup)
	defer cancel()
	if err := c.door.Command(ctx, door.Cmd{Args: []any{"del", c.infoKey()}, Key: 1}).Err(); err != nil {
		c.cfg.logger.Debug("relock: cannot delete the client's identity; it expires", "key", c.infoKey(), "err", err)
	}
}
