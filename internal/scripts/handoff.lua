-- handoff.lua: release one hold and, if that frees the lock and nobody but
-- the releasing client is subscribed to its channel, pass the lock straight
-- to a waiter of that client instead of freeing it.
--
-- KEYS[1]  lock hash: field <owner> -> hold count
-- KEYS[2]  release channel
-- KEYS[3]  fencing counter of the lock's slot (see fence.lua)
-- KEYS[4]  the lock's own token key (see fence.lua)
-- KEYS[5]  release marker of this request (see unlock.lua)
-- ARGV[1]  owner id releasing
-- ARGV[2]  release message published when the lock becomes free
-- ARGV[3]  "publish" or "spublish"
-- ARGV[4]  "1" to use the release marker, "0" not to
-- ARGV[5]  release marker lifetime in milliseconds
-- ARGV[6]  owner id of the waiter that takes the lock over
-- ARGV[7]  the waiter's lease in milliseconds
-- ARGV[8]  "numsub" or "shardnumsub", to count the channel's subscribers
-- ARGV[9]  fencing mode (see fence.lua)
--
-- Returns  0: the owner holds no hold here
--          1: one hold released, the owner still holds the lock
--          2: the last hold released and the lock freed, because other
--             clients wait on the channel; the waiter was not given it
--          a negative integer -t: the lock passed to the waiter, whose
--             fencing token is t

if ARGV[4] == '1' then
    local done = redis.call('get', KEYS[5])
    if done then
        return tonumber(done)
    end
end
local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
if count == nil then
    return 0
end
local result
if count > 1 then
    redis.call('hincrby', KEYS[1], ARGV[1], -1)
    result = 1
elseif redis.call('pubsub', ARGV[8], KEYS[2])[2] > 1 then
    redis.call('del', KEYS[1])
    redis.call(ARGV[3], KEYS[2], ARGV[2])
    result = 2
else
    redis.call('hdel', KEYS[1], ARGV[1])
    local token = fence(KEYS[3], KEYS[4], ARGV[9])
    redis.call('hset', KEYS[1], ARGV[6], 1, token_field, token)
    redis.call('pexpire', KEYS[1], ARGV[7])
    result = -token
end
if ARGV[4] == '1' then
    redis.call('set', KEYS[5], result, 'px', ARGV[5])
end
return result
