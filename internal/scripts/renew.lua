-- renew.lua: renew or check many holds in one call (keys of one slot).
--
-- KEYS[i]      lock hash of hold i
-- ARGV[2i-1]   owner id of hold i
-- ARGV[2i]     new lease in milliseconds for hold i; "0" checks the hold
--              without extending it
--
-- Returns      a table: element i is 1 if hold i is still held by its owner
--              (and, with a lease, now lives at least that long), else 0.

local held = {}
for i = 1, #KEYS do
    local key = KEYS[i]
    if redis.call('hexists', key, ARGV[2 * i - 1]) == 1 then
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
