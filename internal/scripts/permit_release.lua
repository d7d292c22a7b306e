-- permit_release.lua: give back one permit of a permit semaphore by its id.
--
-- KEYS[1]  free permits (string)
-- KEYS[2]  held permits (zset: permit id -> expiry in unix ms)
-- KEYS[3]  the semaphore's channel, told the number free. No key has its
--          name: it is a guard. A node whose slot migrates refuses, in the
--          middle of a script and after its first writes, a command on a
--          key it does not have, and this script may empty the held
--          permits and add one after; with the guard among the KEYS such a
--          node answers it TRYAGAIN until the migration ends instead (see
--          docs/design.md, Scripts)
-- KEYS[4]  queue of waiting calls (see permit_lib.lua), given with
--          ARGV[7] "1" or a member in ARGV[8] only
-- ARGV[1]  permit id (raw bytes: 24 of relock, 16 of Redisson)
-- ARGV[2]  "publish" or "spublish"
-- ARGV[3]  "numsub" or "shardnumsub", to count the channel's subscribers
-- ARGV[4]  the releasing client's "<uuid>"
-- ARGV[5]  grant channel of the releasing client (see unlock.lua)
-- ARGV[6]  the longest, in milliseconds, a granted permit is held before
--          its call has renewed it
-- ARGV[7]  "1" to grant the permit to the first queued call, "0" not to
-- ARGV[8]  queue member to remove (a call leaving the queue, whose
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
--          a WRONGTYPE error, with nothing written, when KEYS[1] holds no
--          integer, or it or KEYS[2] holds another type (a queue of
--          another type holds no member to remove)

local leaving = ARGV[8] or ''
-- The reads come first (see permit_lib.lua): the permit, the server's
-- clock and, for a grant, the queue without the call leaving it and what
-- the grant needs; the INCR of the free count is the first write, which
-- fails, if it does, before any other. The leaving call is taken out of
-- the queue by unqueue, which cannot fail.
local score = redis.call('zscore', KEYS[2], ARGV[1])
if not score then
    -- No permit of that id: the count is read for its type only.
    if not free_count(KEYS[1]) then
        return no_count(KEYS[1])
    end
    if leaving ~= '' then
        unqueue(KEYS[4], leaving)
    end
    return 0
end
local queued, grant
if ARGV[7] == '1' then
    queued = waiting(KEYS[4])
    if leaving ~= '' then
        queued = without(queued, leaving)
    end
    grant = permit_grant(KEYS[1], KEYS[2], KEYS[3], queued, ARGV[3], ARGV[6], ARGV[1])
end
local expired = tonumber(score) <= now_ms()
local free = redis.pcall('incr', KEYS[1])
if type(free) == 'table' then
    if string.find(free.err, 'not an integer', 1, true) then
        return no_count(KEYS[1])
    end
    return free -- another type, OOM: as the server gave it
end
if leaving ~= '' then
    unqueue(KEYS[4], leaving)
end
redis.call('zrem', KEYS[2], ARGV[1])
if free > 0 and grant and grant_permit(KEYS[1], KEYS[2], KEYS[4], queued, grant, ARGV[4], ARGV[5], ARGV[6], ARGV[2]) then
    free = free - 1
end
if free > 0 then
    redis.call(ARGV[2], KEYS[3], free)
end
if expired then
    return 2
end
return 1
