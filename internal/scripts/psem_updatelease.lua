-- psem_updatelease.lua: set a held permit's lease to a new duration from
-- now (longer or shorter).
--
-- KEYS[1]  free permits (string)
-- KEYS[2]  held permits (zset: permit id -> expiry in unix ms)
-- KEYS[3]  channel, told the number free when expired permits come back
-- ARGV[1]  permit id (16 raw bytes)
-- ARGV[2]  new lease in milliseconds
-- ARGV[3]  "publish" or "spublish"
--
-- Returns  1: updated; 0: no permit of that id is held (released,
--          expired, or never acquired)

local now = now_ms()
local reclaimed = reclaim(KEYS[1], KEYS[2], now)
if reclaimed > 0 then
    local free = tonumber(redis.call('get', KEYS[1]) or '0')
    if free > 0 then
        redis.call(ARGV[3], KEYS[3], free)
    end
end
if not redis.call('zscore', KEYS[2], ARGV[1]) then
    return 0
end
redis.call('zadd', KEYS[2], 'xx', now + tonumber(ARGV[2]), ARGV[1])
return 1
