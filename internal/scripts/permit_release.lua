-- permit_release.lua: give back one permit of a permit semaphore by its id.
--
-- KEYS[1]  free permits (string)
-- KEYS[2]  held permits (zset: permit id -> expiry in unix ms)
-- KEYS[3]  channel, told the number free
-- ARGV[1]  permit id (16 raw bytes)
-- ARGV[2]  "publish" or "spublish"
--
-- Returns  1: released
--          2: the permit had expired and is reclaimed now
--          0: no permit of that id is held (released, reclaimed, or never
--          acquired)

local score = redis.call('zscore', KEYS[2], ARGV[1])
if not score then
    return 0
end
redis.call('zrem', KEYS[2], ARGV[1])
local free = redis.call('incr', KEYS[1])
if free > 0 then
    redis.call(ARGV[2], KEYS[3], free)
end
if tonumber(score) <= now_ms() then
    return 2
end
return 1
