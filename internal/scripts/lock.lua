-- lock.lua: acquire or re-enter a reentrant lock (Redisson hash layout),
-- and keep the caller's place in the lock's queue of waiters while it waits.
--
-- KEYS[1]  lock hash: field <owner> -> hold count, field relock_token
--          -> the holder's fencing token, and field relock_since -> when
--          the holder was granted it (unix ms)
-- KEYS[2]  fencing counter of the lock's slot (see fence.lua)
-- KEYS[3]  queue of waiters: zset of "<lease ms>|<kind>|<owner>" scored
--          by the server time (ms) each joined (see unlock.lua)
-- KEYS[4]  the lock's own token key (see fence.lua), given with fencing
--          mode "0" only
-- KEYS[#KEYS]  request marker, last, given for a reentrant owner (with
--          ARGV[7]) and only for one, so that a retried request is
--          applied once; a one-shot owner is never seen twice
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id "<uuid>:<n>"
-- ARGV[3]  fencing mode (see fence.lua): "0" when KEYS[4] is the lock's
--          own token key, "1" when the call has none
-- ARGV[4]  the caller's kind of waiter (see unlock.lua); "" for a call
--          that will not wait. Its member of the queue is
--          "<ARGV[1]>|<ARGV[4]>|<ARGV[2]>".
-- ARGV[5]  the caller's clock in unix ms, recorded as relock_since by a
--          fresh acquisition
-- ARGV[6]  "1" when an earlier attempt of the call may have queued it;
--          may be left out (or "0") when not, unless ARGV[7] follows
-- ARGV[7]  request marker lifetime in milliseconds, given with the marker
--
-- Every argument costs the server on every call, so what is the same for
-- every call of every client is written here instead: the queue outlives
-- the holder's TTL by at least grant_ttl (queue.lua).
--
-- The hash of a holder with someone in the queue has the field
-- relock_queued (see fence.lua), so that its release learns of the queue
-- from the read of its hold count: a caller that joins the queue writes it
-- into the holder's hash, and an acquisition of a free lock whose queue
-- exists writes it into its own.
--
-- Returns  a positive integer: acquired (or re-entered); the value is the
--          fencing token of the hold.
--          a negative integer r: held by another owner. With v = -r-1,
--          v // 2 - 1 is the holder's remaining TTL in milliseconds (-1 when
--          it has none), and v % 2 is 1 when the holder is not a relock
--          client (no relock_token field): its release only publishes on
--          the release channel. A caller with a member is then in the queue.

local function member()
    return ARGV[1] .. '|' .. ARGV[4] .. '|' .. ARGV[2]
end

-- A fresh acquisition, the common case, reads with one EXISTS that the
-- lock, its queue and its own token key, if the call has one, are all
-- missing; any of them there and PTTL tells whether the lock is free.
--
-- Redis does not undo the writes of a script that fails, so nothing is
-- written before what may fail: the queue's type is read, and then the
-- token drawn (fence fails, on a fencing counter that holds no number,
-- before it writes), before the writes.
local named = ARGV[3] == '0' and KEYS[4] or nil
local marker = ARGV[7] and KEYS[#KEYS]
local ttl, fresh = -2, true
local found
if named then
    found = redis.call('exists', KEYS[1], KEYS[3], named)
else
    found = redis.call('exists', KEYS[1], KEYS[3])
end
if found > 0 then
    fresh = false
    ttl = redis.call('pttl', KEYS[1])
end
if ttl == -2 then
    -- The queue, read before the token is drawn: a key of another type
    -- there, which the release would fail on, fails the acquisition; one
    -- that holds others than the caller marks the new hold.
    local queued = false
    if not fresh then
        local kind = redis.call('type', KEYS[3]).ok
        if kind ~= 'zset' and kind ~= 'none' then
            return redis.error_reply('WRONGTYPE the queue ' .. KEYS[3] .. ' of the lock holds another type of value')
        end
        queued = kind == 'zset'
        if queued and ARGV[6] == '1' then
            local first = redis.call('zrange', KEYS[3], 0, 1)
            queued = #first > 1 or first[1] ~= member()
        end
    end
    local token = fence(KEYS[2], named, fresh)
    if not fresh and ARGV[6] == '1' then
        redis.call('zrem', KEYS[3], member())
    end
    if queued then
        redis.call('hset', KEYS[1], ARGV[2], '1', token_field, token, since_field, ARGV[5], queued_field, '1')
    else
        redis.call('hset', KEYS[1], ARGV[2], '1', token_field, token, since_field, ARGV[5])
    end
    redis.call('pexpire', KEYS[1], ARGV[1])
    if marker then
        redis.call('set', marker, '1', 'px', ARGV[7])
    end
    return token
end

-- A fresh acquisition, the common case, has returned without making the
-- closures of the functions below.
-- @library
local f = redis.call('hmget', KEYS[1], ARGV[2], token_field)
if not f[1] then
    if ttl == -1 then
        lock_clients(KEYS[1], false) -- fails on a hash no lock wrote
    end
    -- A caller already in the queue found it there: the holder's hash
    -- is marked already.
    if ARGV[4] ~= '' and join_queue(KEYS[3], member(), ttl, grant_ttl) then
        redis.call('hset', KEYS[1], queued_field, '1')
    end
    local other = 0
    if not f[2] then
        other = 1
    end
    return -1 - (2 * (ttl + 1) + other)
end

local token = tonumber(f[2]) or latest(KEYS[2], named)
-- A one-shot owner is never seen twice: this is a retry of a request that
-- was already applied, or the lock was granted to this waiting owner by a
-- release (unlock.lua), perhaps for a shorter time than its lease.
if not marker then
    if ttl < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    if ARGV[6] == '1' then
        unqueue(KEYS[3], member())
    end
    return token
end
if redis.call('exists', marker) == 1 then
    return token
end
redis.call('hincrby', KEYS[1], ARGV[2], '1')
-- Never shorten the life of a hold the owner already has.
if ttl < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
end
redis.call('set', marker, '1', 'px', ARGV[7])
if ARGV[6] == '1' then
    unqueue(KEYS[3], member())
end
return token
