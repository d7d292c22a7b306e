package relock

// withNamed returns keys followed by named, the lock's own token key, when
// the Client keeps one (see Client.tokenKeys): the KEYS of a script that
// draws or reads fencing tokens, which takes the key, when given, after
// its fixed keys (see fence.lua). A request or release marker, when a
// call has one, goes last.
func withNamed(named string, keys ...any) []any {
	if named != "" {
		keys = append(keys, named)
	}
	return keys
}

// with returns keys, a primitive's KEYS for one-shot owners' calls (shared,
// never modified), followed by key in a slice of its own: a reentrant
// owner's request or release marker, which goes last, or the hold key a
// one-shot reader's lock call writes (see rw_read_lock.lua).
func with(keys []any, key string) []any {
	return append(keys[:len(keys):len(keys)], key)
}

// Release messages published on a lock's channel.
const (
	msgUnlock     = "0"
	msgReadUnlock = "1"
)

// Script arguments boxed once, so that calls do not allocate for them.
var (
	argEmpty any = ""
	argZero  any = "0"
	argOne   any = "1"
)
