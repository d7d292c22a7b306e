-- permit_renew.lua: renew or check many held permits in one call (keys of
-- one slot).
--
-- KEYS[i]     held permits zset of permit i (permit id -> expiry in unix ms)
-- ARGV[2i-1]  id of permit i (raw bytes: 24 of relock, 16 of Redisson)
-- ARGV[2i]    new lease in milliseconds for permit i; "0" checks the
--             permit without extending it
--
-- Returns     a table: element i is 1 if permit i is still held and not
--             expired by the server's clock (and, with a lease, now lives
--             at least that long), else 0. An expiry is never shortened.
--             A key of another type is a permit gone (0), as in renew.lua.

local now = now_ms()
local held = {}
for i = 1, #KEYS do
    local id = ARGV[2 * i - 1]
    local score = redis.pcall('zscore', KEYS[i], id)
    if type(score) == 'table' and not string.find(score.err, 'WRONGTYPE', 1, true) then
        redis.call('zscore', KEYS[i], id) -- raises it as the server gives it
    end
    score = tonumber(score) -- nil for another type
    if score and score > now then
        held[i] = 1
        local lease = tonumber(ARGV[2 * i])
        if lease > 0 and now + lease > score then
            redis.call('zadd', KEYS[i], 'xx', now + lease, id)
        end
    else
        held[i] = 0
    end
end
return held
