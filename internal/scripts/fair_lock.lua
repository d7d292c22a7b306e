-- fair_lock.lua: acquire or re-enter a fair lock, or join its queue (or,
-- already in it, refresh the entry's deadline). The lock is acquired only
-- when it is free and the queue is empty or starts with the caller.
--
-- KEYS[1..4]  as in fair_queue.lua
-- KEYS[5]  fencing counter of the lock's slot (see fence.lua)
-- KEYS[6]  the lock's own token key (see fence.lua), given with fencing
--          mode "0" only
-- KEYS[#KEYS]  request marker, last, given for a reentrant owner only, so
--          that a retried request is applied once
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id "<uuid>:<n>"
-- ARGV[3]  "1" when the owner is reentrant, "0" for a one-shot owner
-- ARGV[4]  request marker lifetime in milliseconds
-- ARGV[5]  waiter timeout in milliseconds: a caller that is not granted
--          the lock joins the queue, or stays in it, with the liveness
--          deadline now + ARGV[5] (see join); "0" for a single attempt
--          that never queues
-- ARGV[6]  the prefix of its waiters' own channels (see fair_queue.lua)
-- ARGV[7]  "publish" or "spublish"
-- ARGV[8]  fencing mode (see fence.lua): "0" when KEYS[6] is the lock's
--          own token key, "1" when the call has none
-- ARGV[9]  lease in milliseconds for which another client's release may
--          grant the lock to the caller once it is first (fair_unlock.lua);
--          "0" when the caller takes no such grant
-- ARGV[10] the caller's clock in unix ms, recorded as relock_since by an
--          acquisition (absent: the server's clock, one more call)
-- ARGV[11] prefix of the grant channels of the lock's slot: a relock
--          waiter is told on its client's, the prefix followed by its
--          "<uuid>" (see tell in fair_queue.lua); absent: on its own
--          channel
-- ARGV[12] "1" when the owner cannot be in the queue yet: the first
--          attempt of a one-shot owner's call, whose id is new; absent or
--          "0" otherwise
--
-- Returns  a positive integer: acquired (or re-entered); the value is the
--          fencing token of the hold.
--          zero or a negative integer r: not acquired. With v = -r-1,
--          v // 2 - 1 is how long to wait, in milliseconds, before trying
--          again: the holder's remaining TTL or, while the lock is free
--          for the head of the queue, the time until the head's deadline
--          (-1: unknown); for a caller that queues, no longer than until
--          the liveness deadline of the relock waiter directly ahead. v % 2 is 1 when the holder is not a relock
--          client, or anyone but relock's waiters is ahead of the caller
--          in the queue (see others_ahead): such a client's release tells
--          the next head on its own channel, which the caller must then
--          listen on.

local owner = ARGV[2]
local named = ARGV[8] == '0' and KEYS[6] or nil
local marker = ARGV[3] == '1' and KEYS[#KEYS]

-- acquire takes the free lock for the caller and returns its token;
-- fresh is true when the caller has read that the lock's own token key
-- does not exist.
local function acquire(fresh)
    local since = ARGV[10] or now_ms()
    local token = fence(KEYS[5], named, fresh)
    redis.call('hset', KEYS[1], owner, '1', token_field, token, since_field, since)
    redis.call('pexpire', KEYS[1], ARGV[1])
    if marker then
        redis.call('set', marker, '1', 'px', ARGV[4])
    end
    return token
end

local ttl = redis.call('pttl', KEYS[1]) -- -2: free

-- The common call, for a free lock with no one queued, takes it here,
-- before any of the functions below is made: one EXISTS reads that the
-- queue and the lock's own token key, if the call has one, are missing.
-- (A held lock, the common case of a call that waits, costs no more than
-- its PTTL.)
if ttl == -2 then
    local found
    if named then
        found = redis.call('exists', KEYS[2], named)
    else
        found = redis.call('exists', KEYS[2])
    end
    if found == 0 then
        return acquire(true)
    end
end

-- @library
local timeout = tonumber(ARGV[5])

-- wait joins the queue, or refreshes the caller's place in it, and
-- returns the reply for waiting ms, or less: until the liveness deadline
-- of the relock waiter directly ahead, when that comes first, since the
-- caller moves up then if that one has died. other tells that the holder
-- is not a relock client, and ttl is the lock's PTTL; joining is what
-- join returned, when the caller called it before its own writes.
local function wait(ms, other, ttl, joining)
    if timeout > 0 then
        joining = joining or join(owner, timeout, ARGV[9], ttl, ARGV[12] == '1')
        local ahead, by = joining()
        other = other or ahead
        local left = by and by - now_ms()
        if left and left > 0 and (ms < 0 or left < ms) then
            ms = left
        end
    end
    local v = 2 * (ms + 1)
    if other then
        v = v + 1
    end
    return -1 - v
end

if ttl ~= -2 then
    local f = redis.call('hmget', KEYS[1], owner, token_field)
    if not f[1] then
        if ttl == -1 then
            lock_clients(KEYS[1], false) -- fails on a hash no lock wrote
        end
        return wait(ttl, not f[2], ttl)
    end
    local token = held(KEYS[1], KEYS[5], named)
    -- A one-shot owner is never seen twice: this is a retry of a request
    -- that was applied, or the owner was handed the lock by a release,
    -- perhaps granted for less than its lease.
    if ARGV[3] == '0' then
        if ttl < tonumber(ARGV[1]) then
            redis.call('pexpire', KEYS[1], ARGV[1])
        end
        return token
    end
    if redis.call('exists', marker) == 1 then
        return token
    end
    -- Another call of the owner may have queued before the owner took
    -- the lock: the owner waits no more. Its place is read before the
    -- first write, the count's HINCRBY (which fails, on a count that holds
    -- no integer, before it writes).
    local at, behind, others = place(owner)
    redis.call('hincrby', KEYS[1], owner, '1')
    leave(owner, at, behind, others)
    -- Never shorten the life of a hold the owner already has.
    if ttl < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    redis.call('set', marker, '1', 'px', ARGV[4])
    return token
end

-- The lock is free. The queue is read, and a token drawn for the caller,
-- before the dead waiters at its head are purged.
local head, dead, deadline, alive = live_head()
if not head or head == owner then
    local rest, after
    if head then
        rest = budgets()
        after = redis.call('lindex', KEYS[2], #dead + 1) ~= false
    end
    local token = acquire()
    purge(dead, head)
    if head then
        take(owner, rest, after, dead)
    end
    return token
end
-- Free, and another waiter is first: it has until its deadline. The
-- caller joins behind it after the purge, and join reads the budgets,
-- which live_head reads only for a waiter without a liveness entry: they
-- are read (ZCARD) before the purge writes, with what join reads.
local joining
if #dead > 0 then
    redis.call('zcard', KEYS[3])
    if timeout > 0 then
        joining = join(owner, timeout, ARGV[9], ttl, ARGV[12] == '1', dead)
    end
    purge(dead, head)
    wake(head, ARGV[7], ARGV[6], ARGV[11], alive)
end
return wait(deadline - now_ms(), false, ttl, joining)
