package scripts

import (
	"crypto/sha1"
	"encoding/hex"
	"flag"
	"strings"
)

// auditPrelude goes before every script's source while this package's
// tests run (see auditScripts). It shadows redis.call and redis.pcall with
// functions that fail the script when, after its first write, it calls a
// command it did not call before that write: Redis does not undo the
// writes of a script that fails, so every command that an ACL or a
// renamed command may refuse (TIME, PUBSUB, the reads) must be called
// before the first write. A write may follow writes: a user without a
// write command relock needs fails at the first. PUBLISH and SPUBLISH,
// which New checks, may come after.
const auditPrelude = `local redis = (function(r)
    local writes = {}
    for _, c in ipairs({'set', 'del', 'hset', 'hdel', 'hincrby', 'pexpire', 'zadd', 'zrem',
        'zremrangebyscore', 'zincrby', 'incr', 'incrby', 'decrby', 'rpush', 'lpush', 'lrem',
        'lpop', 'rpop', 'ltrim', 'xadd', 'xtrim', 'decr', 'expire', 'persist', 'unlink', 'sadd',
        'srem', 'hsetnx', 'setnx', 'publish', 'spublish'}) do
        writes[c] = true
    end
    local before, wrote = {}, false
    local track = function(cmd)
        cmd = string.lower(cmd)
        if wrote and not writes[cmd] and not before[cmd] then
            error('AUDIT ' .. cmd .. ' called after the first write, not before it', 3)
        end
        before[cmd] = true
        return cmd
    end
    -- wrote notes a write: not a PUBLISH, nor a SET NX that set nothing,
    -- nor a write that failed.
    local done = function(cmd, reply)
        if writes[cmd] and cmd ~= 'publish' and cmd ~= 'spublish' and reply
            and not (type(reply) == 'table' and reply.err) then
            wrote = true
        end
        return reply
    end
    return setmetatable({
        call = function(cmd, ...) return done(track(cmd), r.call(cmd, ...)) end,
        pcall = function(cmd, ...) return done(track(cmd), r.pcall(cmd, ...)) end,
    }, {__index = r})
end)(redis)
`

// auditScripts puts auditPrelude before the source of every script, but
// for a benchmark, which measures the scripts as they are.
func auditScripts() {
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		return
	}
	for _, s := range byName {
		if strings.HasPrefix(s.src, auditPrelude) {
			continue
		}
		s.src = auditPrelude + s.src
		sum := sha1.Sum([]byte(s.src))
		s.sha = hex.EncodeToString(sum[:])
		s.shaArg, s.srcArg = s.sha, s.src
	}
}
