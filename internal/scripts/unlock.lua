-- unlock.lua: release one hold of a reentrant lock.
--
-- KEYS[1]  lock hash: field <owner> -> hold count
-- KEYS[2]  release channel
-- KEYS[3]  release marker for this request, read and written only when
--          ARGV[4] is "1", so that a retried release of a reentrant hold is
--          applied once
-- ARGV[1]  owner id
-- ARGV[2]  release message published when the lock becomes free
-- ARGV[3]  "publish" or "spublish"
-- ARGV[4]  "1" to use the release marker, "0" not to
-- ARGV[5]  release marker lifetime in milliseconds
--
-- Returns  0: the owner holds no hold here (expired, deleted or never held)
--          1: one hold released, the owner still holds the lock
--          2: the last hold released, the lock is free

if ARGV[4] == '1' then
    local done = redis.call('get', KEYS[3])
    if done then
        return tonumber(done)
    end
end
local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
if count == nil then
    return 0
end
local result = 2
if count > 1 then
    redis.call('hincrby', KEYS[1], ARGV[1], -1)
    result = 1
else
    redis.call('del', KEYS[1])
    redis.call(ARGV[3], KEYS[2], ARGV[2])
end
if ARGV[4] == '1' then
    redis.call('set', KEYS[3], result, 'px', ARGV[5])
end
return result
