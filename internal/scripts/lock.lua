-- lock.lua: acquire or re-enter a reentrant lock (Redisson hash layout),
-- and keep the caller's place in the lock's queue of waiters while it waits.
--
-- KEYS[1]  lock hash: field <owner> -> hold count, field relock_token
--          -> the holder's fencing token, and field relock_since -> when
--          the holder was granted it (unix ms)
-- KEYS[2]  fencing counter of the lock's slot (see fence.lua)
-- KEYS[3]  the lock's own token key (see fence.lua)
-- KEYS[4]  request marker, written only for reentrant owners so that a
--          retried request is applied once
-- KEYS[5]  queue of waiters: zset of "<lease ms>|<kind>|<owner>" scored
--          by the server time (ms) each joined (see unlock.lua)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id "<uuid>:<n>"
-- ARGV[3]  "1" when the owner is reentrant, "0" for a one-shot owner
-- ARGV[4]  request marker lifetime in milliseconds
-- ARGV[5]  fencing mode (see fence.lua)
-- ARGV[6]  the caller's kind of waiter (see unlock.lua); "" for a call
--          that will not wait. Its member of the queue is
--          "<ARGV[1]>|<ARGV[6]>|<ARGV[2]>".
-- ARGV[7]  milliseconds the queue outlives the holder's TTL, at least
-- ARGV[8]  "1" when an earlier attempt of the call may have queued it
-- ARGV[9]  the caller's clock in unix ms, recorded as relock_since by a
--          fresh acquisition (absent: the server's clock, one more call)
--
-- Returns  a positive integer: acquired (or re-entered); the value is the
--          fencing token of the hold.
--          a negative integer r: held by another owner. With v = -r-1,
--          v // 2 - 1 is the holder's remaining TTL in milliseconds (-1 when
--          it has none), and v % 2 is 1 when the holder is not a relock
--          client (no relock_token field): its release only publishes on
--          the release channel. A caller with a member is then in the queue.

local ttl = redis.call('pttl', KEYS[1])
local function member()
    return ARGV[1] .. '|' .. ARGV[6] .. '|' .. ARGV[2]
end
if ttl == -2 then
    local token = fence(KEYS[2], KEYS[3], ARGV[5])
    redis.call('hset', KEYS[1], ARGV[2], 1, token_field, token, since_field, ARGV[9] or now_ms())
    redis.call('pexpire', KEYS[1], ARGV[1])
    if ARGV[3] == '1' then
        redis.call('set', KEYS[4], 1, 'px', ARGV[4])
    end
    if ARGV[8] == '1' then
        redis.call('zrem', KEYS[5], member())
    end
    return token
end

-- A fresh acquisition, the common case, has returned without making the
-- closures of the functions below.
-- @library
local f = redis.call('hmget', KEYS[1], ARGV[2], token_field)
if not f[1] then
    if ARGV[6] ~= '' then
        join_queue(KEYS[5], member(), ttl, ARGV[7])
    end
    local other = 0
    if not f[2] then
        other = 1
    end
    return -1 - (2 * (ttl + 1) + other)
end

local token = tonumber(f[2]) or latest(KEYS[2], KEYS[3])
-- A one-shot owner is never seen twice: this is a retry of a request that
-- was already applied, or the lock was granted to this waiting owner by a
-- release (unlock.lua), perhaps for a shorter time than its lease.
if ARGV[3] == '0' then
    if ttl < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    if ARGV[8] == '1' then
        redis.call('zrem', KEYS[5], member())
    end
    return token
end
if redis.call('exists', KEYS[4]) == 1 then
    return token
end
redis.call('hincrby', KEYS[1], ARGV[2], 1)
-- Never shorten the life of a hold the owner already has.
if ttl < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
end
redis.call('set', KEYS[4], 1, 'px', ARGV[4])
if ARGV[8] == '1' then
    redis.call('zrem', KEYS[5], member())
end
return token
