-- permit_available.lua: the number of free permits of a permit semaphore,
-- after reclaiming expired ones.
--
-- KEYS[1]  free permits (string)
-- KEYS[2]  held permits (zset: permit id -> expiry in unix ms)
-- ARGV[1]  "publish" or "spublish"
-- ARGV[2]  channel, told the number free when expired permits come back
--
-- Returns  the number of free permits (0 when the semaphore is not set)
--          a WRONGTYPE error, with nothing written, when KEYS[1] holds no
--          integer, or it or KEYS[2] holds another type

-- The reads come first (see permit_lib.lua).
local now = now_ms()
local free = free_count(KEYS[1])
if not free then
    return no_count(KEYS[1])
end
local reclaimed = expired(KEYS[2], now)
reclaim(KEYS[1], KEYS[2], now, reclaimed)
free = free + reclaimed
if reclaimed > 0 and free > 0 then
    redis.call(ARGV[1], ARGV[2], free)
end
return free
