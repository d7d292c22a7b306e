-- permit_available.lua: the number of free permits of a permit semaphore,
-- after reclaiming expired ones.
--
-- KEYS[1]  free permits (string)
-- KEYS[2]  held permits (zset: permit id -> expiry in unix ms)
-- KEYS[3]  channel, told the number free when expired permits come back
-- ARGV[1]  "publish" or "spublish"
--
-- Returns  the number of free permits (0 when the semaphore is not set)

local reclaimed = reclaim(KEYS[1], KEYS[2], now_ms())
local free = tonumber(redis.call('get', KEYS[1]) or '0')
if reclaimed > 0 and free > 0 then
    redis.call(ARGV[1], KEYS[3], free)
end
return free
