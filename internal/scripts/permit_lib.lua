-- permit_lib.lua: functions shared by the permit semaphore's scripts, put
-- between each script's header and its body. Not a script of its own.

-- reclaim removes every permit whose expiry is at or before now from the
-- expiries zset and adds them back to the free count. It returns how many
-- it reclaimed.
local function reclaim(permits, expiries, now)
    local n = 0
    while true do
        local ids = redis.call('zrangebyscore', expiries, '-inf', now, 'limit', 0, 1000)
        if #ids == 0 then
            break
        end
        redis.call('zrem', expiries, unpack(ids))
        n = n + #ids
    end
    if n > 0 then
        redis.call('incrby', permits, n)
    end
    return n
end
