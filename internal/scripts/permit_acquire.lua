-- permit_acquire.lua: take one permit of a permit semaphore, with an id and
-- a lease (Redisson RPermitExpirableSemaphore layout).
--
-- KEYS[1]  free permits (string)
-- KEYS[2]  held permits (zset: permit id -> expiry in unix ms)
-- KEYS[3]  the semaphore's channel, told the number free when expired
--          permits come back. No key has its name: it is a guard. A node
--          whose slot migrates refuses, in the middle of a script and
--          after its first writes, a command on a key it does not have,
--          and this script may empty the held permits and add one after;
--          with the guard among the KEYS such a node answers it TRYAGAIN
--          until the migration ends instead (see docs/design.md, Scripts)
-- KEYS[4]  queue of waiting calls (see permit_lib.lua), given with a
--          queue member (ARGV[4]) or ARGV[6] "1" only
-- ARGV[1]  permit id (raw bytes: 24 of relock, 16 of Redisson); a retried request carries the same id
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  "publish" or "spublish"
-- ARGV[4]  the caller's queue member, "<lease ms>|o|<owner>" (its permit
--          id is then permit_id(owner)); "" for a call that does not queue
-- ARGV[5]  milliseconds the queue outlives the earliest expiry, at least
-- ARGV[6]  "1" when an earlier attempt of the call may have queued it
--
-- Expired permits are reclaimed first, by the server's clock.
--
-- Returns  0: acquired (now, or by an earlier attempt with the same id)
--          a positive integer r: no permit free; the earliest held permit
--          expires in r milliseconds
--          -1: no permit free, and no held permit expires
--          The caller is then in the queue, if it has a member. A permit
--          found held by the caller's id (a retry, or a grant) is held for
--          the lease from now.
--          a WRONGTYPE error, with nothing written, when KEYS[1] holds no
--          integer, or it or KEYS[2] holds another type

local now = now_ms()
-- The reads come first (see permit_lib.lua): the free count, the permits
-- expired, and the caller's own permit, unless it expired.
local free = free_count(KEYS[1])
if not free then
    return no_count(KEYS[1])
end
local reclaimed = expired(KEYS[2], now)
local mine = redis.call('zscore', KEYS[2], ARGV[1])
local acquired = mine and tonumber(mine) > now
free = free + reclaimed
if not acquired and free < 1 then
    local retry = -1
    -- The earliest expiry not reclaimed; Redisson marks a permit without
    -- a lease with the expiry 922337203685477.
    local first = redis.call('zrangebyscore', KEYS[2], '(' .. now, '+inf', 'withscores', 'limit', 0, 1)
    if first[1] and tonumber(first[2]) < 922337203685477 then
        retry = math.max(1, tonumber(first[2]) - now)
    end
    -- The first write: a queue of another type fails the call here.
    if ARGV[4] ~= '' then
        join_queue(KEYS[4], ARGV[4], retry, ARGV[5])
    end
    reclaim(KEYS[1], KEYS[2], now, reclaimed)
    return retry
end
-- The count's TTL, which the writes keep, is read before them.
local ttl = not acquired and redis.call('pttl', KEYS[1])
reclaim(KEYS[1], KEYS[2], now, reclaimed)
if acquired then
    redis.call('zadd', KEYS[2], 'gt', now + tonumber(ARGV[2]), ARGV[1])
else
    free = redis.call('decr', KEYS[1])
    redis.call('zadd', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
    if ttl > 0 then
        redis.call('pexpire', KEYS[2], ttl)
    end
end
if reclaimed > 0 and free > 0 then
    redis.call(ARGV[3], KEYS[3], free)
end
if ARGV[6] == '1' then
    unqueue(KEYS[4], ARGV[4])
end
return 0
