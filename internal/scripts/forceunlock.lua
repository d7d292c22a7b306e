-- forceunlock.lua: delete a lock whatever its owner, and wake its waiters.
--
-- KEYS[1]  lock hash
-- KEYS[2]  queue of waiters (see lock.lua)
-- ARGV[1]  the lock's release channel, told Redisson's release message "0"
-- ARGV[2]  "publish" or "spublish"
-- ARGV[3]  grant channel of the calling client (see unlock.lua)
-- ARGV[4]  the calling client's "<uuid>"
--
-- Returns  1 if the lock was held and is now deleted, 0 if it was not held.
--          A key of another type is left alone and reported as an error.

local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
    return 0
end
if kind ~= 'hash' then
    return redis.error_reply('WRONGTYPE key holds a ' .. kind .. ', not a lock')
end
-- The queue is read before the first write: one of another type fails
-- the call before it deletes anything.
local queue = waiting(KEYS[2])
redis.call('del', KEYS[1])
redis.call(ARGV[2], ARGV[1], '0')
wake_clients(queue, ARGV[2], ARGV[3], ARGV[4])
return 1
