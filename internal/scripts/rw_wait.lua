-- rw_wait.lua: a lock call's place in a read-write lock's queue of
-- waiters (see rw_queue.lua), for the scripts that acquire it; put
-- between each script's header and its body, after queue.lua. Not a
-- script of its own. The scripts share KEYS[5] (the queue) and ARGV[1]
-- (lease), ARGV[2] (owner) and ARGV[6..8] (kind, the queue's extra life,
-- and whether an earlier attempt may have queued the call).

local member = ARGV[1] .. '|' .. ARGV[6] .. '|' .. ARGV[2]

-- refused returns the reply of an attempt that finds the lock held by
-- others, -2 minus the lock's TTL, and queues the call if it has a kind.
local function refused()
    local ttl = redis.call('pttl', KEYS[1])
    if ARGV[6] ~= '' then
        join_queue(KEYS[5], member, ttl, ARGV[7])
    end
    return -2 - ttl
end

-- taken returns token, the reply of an attempt that took the lock, and
-- takes the call out of the queue if it may be there.
local function taken(token)
    if ARGV[8] == '1' then
        redis.call('zrem', KEYS[5], member)
    end
    return token
end
