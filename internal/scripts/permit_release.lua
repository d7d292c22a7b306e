-- permit_release.lua: give back one permit of a permit semaphore by its id.
--
-- KEYS[1]  free permits (string)
-- KEYS[2]  held permits (zset: permit id -> expiry in unix ms)
-- KEYS[3]  channel, told the number free
-- KEYS[4]  queue of waiting calls (see permit_lib.lua)
-- ARGV[1]  permit id (raw bytes: 24 of relock, 16 of Redisson)
-- ARGV[2]  "publish" or "spublish"
-- ARGV[3]  "numsub" or "shardnumsub", to count the channel's subscribers
-- ARGV[4]  the releasing client's "<uuid>"
-- ARGV[5]  grant channel of the releasing client (see unlock.lua)
-- ARGV[6]  the longest, in milliseconds, a granted permit is held before
--          its call has renewed it
-- ARGV[7]  "1" to grant the permit to the first queued call, "0" not to
-- ARGV[8]  queue member to remove first (a call leaving the queue, whose
--          permit, if it was granted one meanwhile, is released); "" for
--          none
--
-- The permit freed goes to the first queued call when it can
-- (grant_permit); the channel is told the number still free, if any.
--
-- Returns  1: released
--          2: the permit had expired and is reclaimed now
--          0: no permit of that id is held (released, reclaimed, or never
--          acquired)

if ARGV[8] and ARGV[8] ~= '' then
    redis.call('zrem', KEYS[4], ARGV[8])
end
local score = redis.call('zscore', KEYS[2], ARGV[1])
if not score then
    return 0
end
redis.call('zrem', KEYS[2], ARGV[1])
local free = redis.call('incr', KEYS[1])
if free > 0 and ARGV[7] == '1' and grant_permit(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[2]) then
    free = free - 1
end
if free > 0 then
    redis.call(ARGV[2], KEYS[3], free)
end
if tonumber(score) <= now_ms() then
    return 2
end
return 1
