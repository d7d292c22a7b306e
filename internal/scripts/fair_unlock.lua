-- fair_unlock.lua: release one hold of a fair lock. When that frees the
-- lock, it passes to the head of the queue without ever being free if the
-- head is one of the candidates (waiters of the releasing client), or a
-- relock waiter that takes grants (granted for at most ARGV[7] and until
-- its liveness deadline, told on its client's grant channel, and
-- confirmed by it); any other head is told that the lock is free (see
-- tell in fair_queue.lua).
--
-- KEYS[1..4]  as in fair_queue.lua
-- KEYS[5]  fencing counter of the lock's slot (see fence.lua)
-- KEYS[6]  guard (see fair_queue.lua)
-- KEYS[7]  the lock's own token key (see fence.lua), given with fencing
--          mode "0" only
-- KEYS[#KEYS]  release marker for this request, last, given when ARGV[4]
--          is "1" only, so that a retried release of a reentrant hold is
--          applied once
-- ARGV[1]  owner id releasing
-- ARGV[2]  the prefix of its waiters' own channels (see fair_queue.lua)
-- ARGV[3]  "publish" or "spublish"
-- ARGV[4]  "1" to use the release marker, "0" not to
-- ARGV[5]  release marker lifetime in milliseconds
-- ARGV[6]  fencing mode (see fence.lua): "0" when KEYS[7] is the lock's
--          own token key, "1" when the call has none
-- ARGV[7]  the longest, in milliseconds, a grant to another client's
--          waiter holds the lock before that waiter has renewed it; "0"
--          grants to candidates only
-- ARGV[8]  k: how many fencing tokens to reserve for the releasing
--          client to pass the lock on in process (see fair_pass.lua)
-- ARGV[9]  prefix of the grant channels of the lock's slot (see
--          fair_lock.lua); "": relock waiters are told on their own
--          channels
-- ARGV[10], ARGV[11], ...  candidates: pairs of a waiter's owner id and
--          its lease in milliseconds (none for a plain release)
--
-- Returns  0: the owner holds no hold here (expired, deleted or never held)
--          1: one hold released, the owner still holds the lock
--          2: the last hold released, the lock is free
--          3: the last hold released and the lock granted to the head of
--             the queue, a relock waiter of another client, told on its
--             client's grant channel "fg:<token>:<ttl ms>:<ms since its
--             entry was made>:<owner>" (on its own channel "g:<token>:
--             <ttl ms>:<ms since its entry was made>" without ARGV[9])
--          a table {t, i, h, r}: the last hold released and the lock
--             passed to candidate i (1-based), whose fencing token is t; h
--             lists the queue's next heads that are waiters of the
--             releasing client (at most k, up to the first that is not),
--             with tokens from r reserved for passing the lock on to them
--             in process (fair_pass.lua); h is empty and r 0 when none

-- The common call, a plain release of the owner's last hold with no one
-- queued, frees the lock here, before any of the functions below is made;
-- the count it read, and the queue's head it read (false: none), are
-- kept for the rest of the script.
local count, head
if ARGV[4] ~= '1' then
    count = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
    if count == nil then
        return 0
    end
    if count == 1 then
        head = redis.call('lindex', KEYS[2], 0)
        if not head then
            redis.call('del', KEYS[1])
            return 2
        end
    end
end

-- @library
local named = ARGV[6] == '0' and KEYS[7] or nil
local marker = ARGV[4] == '1' and KEYS[#KEYS]
if marker then
    local done = redis.call('get', marker)
    if done then
        return tonumber(done)
    end
end
-- find returns the index in ARGV of candidate owner, or nil.
local function find(owner)
    for i = 10, #ARGV - 1, 2 do
        if ARGV[i] == owner then
            return i
        end
    end
    return nil
end

if not count then
    count = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
    if count == nil then
        return 0
    end
end
local result = 2
if count > 1 then
    redis.call('hincrby', KEYS[1], ARGV[1], -1)
    result = 1
else
    -- Everything that can fail is read, and the grantee's token drawn,
    -- before the lock is deleted. A candidate is alive (it is asleep in
    -- the releasing process): if it is first, it needs no check of its
    -- deadline.
    if head == nil then
        head = redis.call('lindex', KEYS[2], 0)
    end
    local candidate = head and find(head)
    local dead = {} -- the dead waiters ahead of the head, purged below
    local alive, by -- the head's liveness entry and deadline, once live_head has read them
    if head and not candidate then
        head, dead, by, alive = live_head(head)
        candidate = head and find(head)
    end
    -- Any other head that is a relock waiter taking grants is granted
    -- the lock for its lease, at most ARGV[7], and never past its
    -- liveness deadline: a head that died holds up the queue no longer
    -- than its waiter timeout, and the waiter behind it moves on by then
    -- (see join).
    local lease, age
    if head and not candidate and ARGV[7] ~= '0' then
        lease, age = grantable(head, alive)
    end
    local ttl, c, rest, after, token, heads, first
    if candidate or lease then
        ttl = candidate and ARGV[candidate + 1] or math.min(lease, tonumber(ARGV[7]), by - now_ms())
        c = not candidate and relock_client(head, ARGV[9], alive)
        rest = budgets()
        local next = candidate and following(#dead + 1, ARGV[8])
        if candidate then
            heads = pass_to(ARGV[1], next)
        end
        if next and #next > 0 then
            after = true
        else
            after = redis.call('lindex', KEYS[2], #dead + 1) ~= false
        end
        now_ms() -- the grant's relock_since, read before the writes
        token = fence(KEYS[5], named)
        if candidate then
            first = reserved(heads, named)
        end
    end
    redis.call('del', KEYS[1])
    purge(dead, head)
    if token then
        take(head, rest, after, dead)
        redis.call('hset', KEYS[1], head, '1', token_field, token, since_field, now_ms())
        redis.call('pexpire', KEYS[1], ttl)
        if candidate then
            result = {token, (candidate - 8) / 2, heads, first}
        else
            local g = token .. ':' .. ttl .. ':' .. age
            tell(head, ARGV[3], ARGV[2], ARGV[9], c, 'fg', g .. ':', 'g:' .. g)
            result = 3
        end
    elseif head then
        wake(head, ARGV[3], ARGV[2], ARGV[9], alive)
    end
end
if marker then
    -- A retry of a release that passed the lock on learns it was released.
    redis.call('set', marker, count > 1 and 1 or 2, 'px', ARGV[5])
end
return result
