-- renew.lua: renew or check many holds in one call (keys of one slot).
--
-- KEYS[i]      lock hash of hold i
-- ARGV[2i-1]   owner id of hold i
-- ARGV[2i]     new lease in milliseconds for hold i; "0" checks the hold
--              without extending it
--
-- Returns      a table: element i is 1 if hold i is still held by its owner
--              (and, with a lease, now lives at least that long), else 0:
--              also when its key now holds another type, which fails
--              neither the call nor the renewal of the other holds.

local held = {}
for i = 1, #KEYS do
    local key = KEYS[i]
    -- redis.pcall answers a key of another type with an error reply (a
    -- table), which is not 1: Redis does not undo the renewals made
    -- before an error, and a failed call would leave every hold of it
    -- unconfirmed. Another error is raised as the server gives it.
    local h = redis.pcall('hexists', key, ARGV[2 * i - 1])
    if type(h) == 'table' and not string.find(h.err, 'WRONGTYPE', 1, true) then
        redis.call('hexists', key, ARGV[2 * i - 1])
    end
    if h == 1 then
        held[i] = 1
        local lease = tonumber(ARGV[2 * i])
        if lease > 0 and redis.call('pttl', key) < lease then
            redis.call('pexpire', key, lease)
        end
    else
        held[i] = 0
    end
end
return held
