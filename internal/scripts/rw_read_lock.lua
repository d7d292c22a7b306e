-- rw_read_lock.lua: acquire or re-enter the read lock of a read-write lock
-- (Redisson's RReadWriteLock layout).
--
-- KEYS[1]  lock hash: field "mode" = "read" or "write"; reader field
--          <owner> -> hold count; writer field <owner>:write -> hold count
-- KEYS[2]  fencing counter of the lock's slot (see fence.lua); read only
-- KEYS[3]  queue of waiters (see rw_write_lock.lua)
-- KEYS[4]  the lock's own token key (see fence.lua), read only, given by
--          a Client with WithPerNameTokens only (the call then has five
--          KEYS)
-- KEYS[#KEYS]  last: for a reentrant owner, its request marker, so that
--          a retried request is applied once; for a one-shot owner, the
--          reader hold key the call writes, its first (see ARGV[5]).
--          Either is missing until the call is
--          applied, so that the node of a slot being migrated answers the
--          call TRYAGAIN: it refuses, in the middle of a script and after
--          its first writes, a command on a key it does not have (see
--          docs/design.md, Scripts)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id "<uuid>:<n>"
-- ARGV[3]  "1" when the owner is reentrant, "0" for a one-shot owner
-- ARGV[4]  request marker lifetime in milliseconds
-- ARGV[5]  the rule of the lock's reader hold keys: hold i of owner o
--          is the key string.format(ARGV[5], o, i), with the hold's own
--          TTL (see rw_readers.lua)
-- ARGV[6]  the caller's kind of waiter, "R", or "" for a call that does
--          not queue (see rw_write_lock.lua)
-- ARGV[7]  milliseconds the queue outlives the holder's TTL, at least
-- ARGV[8]  "1" when an earlier attempt of the call may have queued it,
--          "2" when as "o" (see rw_wait.lua)
--
-- Returns  a non-negative integer: acquired (or re-entered); the value is
--          the write hold's token when the owner also holds the write lock,
--          otherwise the latest fencing token (see fence.lua; 0 before any).
--          a negative integer r: held by a writer (or by a lock of another
--          kind); see refused in rw_wait.lua. A caller with a kind is then
--          in the queue.
--          a WRONGTYPE error, with nothing written, when the fencing
--          counter holds no number or is of another type (see no_counter
--          in fence.lua).

-- One HMGET reads the mode, the write hold's token, and the caller's own
-- read and write holds.
local marker = ARGV[3] == '1' and KEYS[#KEYS]
local named
if #KEYS == 5 then
    named = KEYS[4]
end
local f = redis.call('hmget', KEYS[1], 'mode', token_field, ARGV[2], ARGV[2] .. ':write')
local mode = f[1]

-- token returns the reply of an acquisition: the token of the write hold
-- the lock has (only the caller's own can be there), else the newest
-- token handed (see latest in fence.lua), read with one GET, or one MGET
-- with the lock's own token key. It is read before the acquisition writes
-- anything: a counter that holds no number fails the call (no_counter in
-- fence.lua), and Redis would not undo the writes made before.
local function token()
    local write = tonumber(f[2])
    if write then
        return write
    end
    if not named then
        return latest(KEYS[2])
    end
    local t = redis.call('mget', KEYS[2], named)
    local counter = t[1]
    if not counter then
        -- Missing, or of another type, which MGET does not tell: GET fails
        -- on the latter (WRONGTYPE).
        counter = redis.call('get', KEYS[2])
    end
    counter = tonumber(counter or '0')
    if not counter then
        no_counter(KEYS[2])
    end
    -- A token key of another type reads as missing here: fence.lua's GET
    -- of it, by the next write acquisition, fails.
    return math.max(counter, tonumber(t[2] or '0') or 0)
end

if mode == false then
    -- One EXISTS reads, in the common case, that neither the lock nor its
    -- queue is there.
    if redis.call('exists', KEYS[1], KEYS[3]) > 0 then
        local err = not_free()
        if err then
            return err
        end
    end
    local t = token()
    redis.call('hset', KEYS[1], 'mode', 'read', ARGV[2], '1')
    redis.call('set', string.format(ARGV[5], ARGV[2], 1), '1', 'px', ARGV[1])
    redis.call('pexpire', KEYS[1], ARGV[1])
    if marker then
        redis.call('set', marker, '1', 'px', ARGV[4])
    end
    return taken(t)
end
-- A writer may take the read lock too (downgrade); other readers share it.
if mode ~= 'read' and not f[4] then
    return refused(not f[2])
end
local t = token()
-- A one-shot owner is never seen twice: a field of its own is a retry of
-- this very request, already applied.
if f[3] and (not marker or redis.call('exists', marker) == 1) then
    return taken(t)
end
-- The hash lives at least as long as its longest hold (its TTL read
-- before the writes, which do not change it).
local ttl = redis.call('pttl', KEYS[1])
local n = redis.call('hincrby', KEYS[1], ARGV[2], '1')
redis.call('set', string.format(ARGV[5], ARGV[2], n), '1', 'px', ARGV[1])
if ttl < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
end
if marker then
    redis.call('set', marker, '1', 'px', ARGV[4])
end
return taken(t)
