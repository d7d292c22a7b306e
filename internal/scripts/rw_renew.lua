-- rw_renew.lua: renew or check many read holds in one call (keys of one
-- slot). A reader's holds are the hash field <owner> -> count and one key
-- per hold, <prefix>:<owner>:rwlock_timeout:<i> for i = 1..count, where
-- <prefix> is "{name}", or the name itself when it has a hash tag.
--
-- KEYS[i]      lock hash of hold i
-- ARGV[2i-1]   owner id of hold i
-- ARGV[2i]     new lease in milliseconds for hold i; "0" checks the hold
--              without extending it
--
-- Returns      a table: element i is 1 if owner i still holds the read
--              lock (its field is there and at least one of its hold keys
--              is alive), else 0. With a lease, its live hold keys and the
--              hash now live at least that long. Only owner i's own hold
--              keys are renewed: other readers' holds expire on their own.
--              A key of another type is a hold gone (0), as in renew.lua.

local held = {}
for i = 1, #KEYS do
    local key, owner, lease = KEYS[i], ARGV[2 * i - 1], tonumber(ARGV[2 * i])
    held[i] = 0
    local count = redis.pcall('hget', key, owner)
    if type(count) == 'table' and not string.find(count.err, 'WRONGTYPE', 1, true) then
        redis.call('hget', key, owner) -- raises it as the server gives it
    end
    count = tonumber(count) -- nil for another type
    if count ~= nil then
        local prefix = key
        if string.find(key, '{', 1, true) == nil then
            prefix = '{' .. key .. '}'
        end
        prefix = prefix .. ':' .. owner .. ':rwlock_timeout:'
        for j = 1, count do
            local ttl = redis.call('pttl', prefix .. j)
            if ttl ~= -2 then
                held[i] = 1
                if lease > 0 and ttl >= 0 and ttl < lease then
                    redis.call('pexpire', prefix .. j, lease)
                end
            end
        end
        if held[i] == 1 and lease > 0 and redis.call('pttl', key) < lease then
            redis.call('pexpire', key, lease)
        end
    end
end
return held
