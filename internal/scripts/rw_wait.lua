-- rw_wait.lua: a lock call's place in a read-write lock's queue of
-- waiters (see rw_queue.lua), for the scripts that acquire it; put
-- between each script's header and its body, after queue.lua. Not a
-- script of its own. The scripts share KEYS[3] (the queue) and ARGV[1]
-- (lease), ARGV[2] (owner) and ARGV[6..8] (kind, the queue's extra life,
-- and whether an earlier attempt may have queued the call: "1" as this
-- member, "2" as the one-shot writer that did not listen, "o", which
-- this "O" replaces in its place).

local member = ARGV[1] .. '|' .. ARGV[6] .. '|' .. ARGV[2]

-- refused returns the reply of an attempt that finds the lock held by
-- others: -1 - (2 * (ttl + 1) + o), ttl being the lock's TTL in
-- milliseconds (-1 when it has none) and o 1 when a holder may be other
-- than a relock writer (other is true: the read mode, whose readers carry
-- no mark of their client, or a write hold without relock_token), whose
-- release only publishes on the release channel. It queues a call that
-- has a kind, except a one-shot writer that does not listen on the
-- release channel ("o") when other is true: such a writer joins once it
-- listens, as "O" (see rw_queue.lua), or takes the place of its "o".
-- A hash with no TTL that no lock wrote fails the call instead
-- (lock_clients in lockhash.lua): every lock has a TTL, so a lock held by
-- others costs nothing there.
local function refused(other)
    local ttl = redis.call('pttl', KEYS[1])
    if ttl == -1 then
        -- A Mutex's hash (no mode) is a lock too, held by others.
        lock_clients(KEYS[1], redis.call('hexists', KEYS[1], 'mode') == 1)
    end
    if ARGV[6] ~= '' and not (other and ARGV[6] == 'o') then
        now_ms() -- read for join_queue before the writes
        if ARGV[8] == '2' then
            local unheard = ARGV[1] .. '|o|' .. ARGV[2]
            local at = redis.call('zscore', KEYS[3], unheard)
            if at then
                -- Added before the other goes, so that the queue is never
                -- gone meanwhile (see hold in unlock.lua).
                redis.call('zadd', KEYS[3], at, member)
                redis.call('zrem', KEYS[3], unheard)
            end
        end
        join_queue(KEYS[3], member, ttl, ARGV[7])
    end
    local o = 0
    if other then
        o = 1
    end
    return -1 - (2 * (ttl + 1) + o)
end

-- taken returns token, the reply of an attempt that took the lock, and
-- takes the call out of the queue if it may be there (unqueue, which
-- cannot fail after the attempt's writes).
local function taken(token)
    if ARGV[8] == '1' then
        unqueue(KEYS[3], member)
    elseif ARGV[8] == '2' then
        unqueue(KEYS[3], member, ARGV[1] .. '|o|' .. ARGV[2])
    end
    return token
end

-- not_free returns, for an acquisition that found a key among the lock's
-- and its queue's (KEYS[3]), what refused() returns when the lock is
-- there; else, the lock being free, nothing when the queue holds a zset,
-- or the WRONGTYPE error that fails the call before its first write: the
-- release would fail on it.
local function not_free()
    if redis.call('exists', KEYS[1]) == 1 then
        return refused(true)
    end
    local kind = redis.call('type', KEYS[3]).ok
    if kind ~= 'zset' and kind ~= 'none' then
        return redis.error_reply('WRONGTYPE the queue ' .. KEYS[3] .. ' of the lock holds another type of value')
    end
end
