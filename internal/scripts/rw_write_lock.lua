-- rw_write_lock.lua: acquire or re-enter the write lock of a read-write
-- lock (Redisson's RReadWriteLock layout).
--
-- KEYS[1]  lock hash: field "mode" = "read" or "write"; reader field
--          <owner> -> hold count; writer field <owner>:write -> hold count;
--          while a writer holds, field relock_token -> its fencing token
-- KEYS[2]  fencing counter of the lock's slot (see fence.lua)
-- KEYS[3]  queue of waiters: zset of "<lease ms>|<kind>|<owner>" scored by
--          the server time each joined (see rw_queue.lua)
-- KEYS[4]  the lock's own token key (see fence.lua), given with fencing
--          mode "0" only
-- KEYS[#KEYS]  request marker, last, given for a reentrant owner only, so
--          that a retried request is applied once
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id "<uuid>:<n>"
-- ARGV[3]  "1" when the owner is reentrant, "0" for a one-shot owner
-- ARGV[4]  request marker lifetime in milliseconds
-- ARGV[5]  fencing mode (see fence.lua): "0" when KEYS[4] is the lock's
--          own token key, "1" when the call has none
-- ARGV[6]  the caller's kind of waiter (see rw_queue.lua); "" for a call
--          that does not queue. Its member of the queue is
--          "<ARGV[1]>|<ARGV[6]>|<ARGV[2]>".
-- ARGV[7]  milliseconds the queue outlives the holder's TTL, at least
-- ARGV[8]  "1" when an earlier attempt of the call may have queued it,
--          "2" when as "o" (see rw_wait.lua)
--
-- Returns  a positive integer: acquired (or re-entered); the value is the
--          fencing token of the hold.
--          0: refused, the owner holds the read lock and not the write
--          lock: waiting would deadlock (upgrade). Nothing was changed.
--          a negative integer r: held by others (see refused in
--          rw_wait.lua): with v = -r-1, v // 2 - 1 is the lock's remaining
--          TTL in milliseconds (-1 when it has none), and v % 2 is 1 when
--          a holder may be other than a relock writer. A caller with a
--          kind is then in the queue, but for a one-shot writer that does
--          not listen ("o") when v % 2 is 1.

-- One HMGET reads the mode, the caller's write and read holds, and the
-- write hold's token, which only a relock writer's hash has.
local writer = ARGV[2] .. ':write'
local named = ARGV[5] == '0' and KEYS[4] or nil
local marker = ARGV[3] == '1' and KEYS[#KEYS]
local f = redis.call('hmget', KEYS[1], 'mode', writer, ARGV[2], token_field)
local mode = f[1]
if mode == false then
    -- One EXISTS reads, in the common case, that neither the lock, nor its
    -- queue, nor its own token key, if the call has one, is there.
    local n
    if named then
        n = redis.call('exists', KEYS[1], KEYS[3], named)
    else
        n = redis.call('exists', KEYS[1], KEYS[3])
    end
    -- The token key, kept for good once made, need not cost a look at the
    -- queue.
    if n > 0 and (not named or redis.call('exists', KEYS[1], KEYS[3]) > 0) then
        local err = not_free()
        if err then
            return err
        end
    end
    local token = fence(KEYS[2], named, n == 0)
    redis.call('hset', KEYS[1], 'mode', 'write', writer, '1', token_field, token)
    redis.call('pexpire', KEYS[1], ARGV[1])
    if marker then
        redis.call('set', marker, '1', 'px', ARGV[4])
    end
    return taken(token)
end
if mode ~= 'write' or not f[2] then
    if f[3] then
        return 0
    end
    return refused(mode ~= 'write' or not f[4])
end

local token = tonumber(f[4]) or latest(KEYS[2], named)
-- A one-shot owner is never seen twice: this is a retry of a request that
-- was already applied, or the lock was granted to this waiting owner by a
-- release (rw_queue.lua), perhaps for a shorter time than its lease.
if ARGV[3] == '0' then
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return taken(token)
end
if redis.call('exists', marker) == 1 then
    return token
end
-- Never shorten the life of a hold the owner already has (its TTL read
-- before the write, which does not change it).
local ttl = redis.call('pttl', KEYS[1])
redis.call('hincrby', KEYS[1], writer, '1')
if ttl < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
end
redis.call('set', marker, '1', 'px', ARGV[4])
return taken(token)
