package scripts

import "time"

// The Client's own scripts. Each file's header names its KEYS, ARGV and
// return values.
var (
	Announce = load("announce")
	Start    = load("start")
)

// AnnounceRequest is a call of announce.lua: write a Client's identity
// hash with its TTL, in one step.
type AnnounceRequest struct {
	Key    string        // the identity hash (layout.ClientKey)
	TTL    time.Duration // its TTL
	Fields []any         // field, value, field, value...
}

// Build returns the request's KEYS and ARGV.
func (r AnnounceRequest) Build() (keys, args []any) {
	args = make([]any, 0, 1+len(r.Fields))
	return []any{r.Key}, append(append(args, r.TTL.Milliseconds()), r.Fields...)
}

// StartRequest is a call of start.lua, New's script: check that the Redis
// user may publish on Channels, one of each kind relock publishes on, and
// only then make the Client known as Announce does. Its reply lists the
// channels refused (empty: none), or is 0 when the server has no command
// Publish.
type StartRequest struct {
	Publish  string // "publish" or "spublish"
	Channels []any
	Announce AnnounceRequest
}

// Build returns the request's KEYS and ARGV.
func (r StartRequest) Build() (keys, args []any) {
	keys, announce := r.Announce.Build()
	args = make([]any, 0, 2+len(r.Channels)+len(announce))
	args = append(args, r.Publish, len(r.Channels))
	args = append(args, r.Channels...)
	return keys, append(args, announce...)
}
