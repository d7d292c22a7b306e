-- permit_updatelease.lua: set a held permit's lease to a new duration from
-- now (longer or shorter).
--
-- KEYS[1]  free permits (string)
-- KEYS[2]  held permits (zset: permit id -> expiry in unix ms)
-- ARGV[1]  permit id (raw bytes: 24 of relock, 16 of Redisson)
-- ARGV[2]  new lease in milliseconds
-- ARGV[3]  "publish" or "spublish"
-- ARGV[4]  channel, told the number free when expired permits come back,
--          and "0" when the lease cut short is now the first to end
--
-- A lease cut below the earliest expiry held so far publishes the number
-- of free permits, 0: waiters sleeping until that earlier expiry check
-- again and learn the new one (Redisson's waiters take a 0 as no permit
-- freed).
--
-- Returns  1: updated; 0: no permit of that id is held (released,
--          expired, or never acquired)
--          a WRONGTYPE error, with nothing written, when KEYS[1] holds no
--          integer, or it or KEYS[2] holds another type

local now = now_ms()
-- The reads come first (see permit_lib.lua): the free count, the permits
-- expired, and the permit, unless it expired.
local free = free_count(KEYS[1])
if not free then
    return no_count(KEYS[1])
end
local reclaimed = expired(KEYS[2], now)
local score = redis.call('zscore', KEYS[2], ARGV[1])
local held = score and tonumber(score) > now
-- The earliest expiry once the expired permits are reclaimed, read
-- before.
local first = held and redis.call('zrangebyscore', KEYS[2], '(' .. now, '+inf', 'withscores', 'limit', 0, 1)
reclaim(KEYS[1], KEYS[2], now, reclaimed)
free = free + reclaimed
if reclaimed > 0 and free > 0 then
    redis.call(ARGV[3], ARGV[4], free)
end
if not held then
    return 0
end
local expiry = now + tonumber(ARGV[2])
redis.call('zadd', KEYS[2], 'xx', expiry, ARGV[1])
if expiry < tonumber(first[2]) and free <= 0 then
    redis.call(ARGV[3], ARGV[4], '0')
end
return 1
