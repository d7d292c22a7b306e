-- forceunlock.lua: delete a lock whatever its owner, wake its waiters, and
-- tell its holders' clients.
--
-- KEYS[1]  lock hash
-- KEYS[2]  queue of waiters (see lock.lua)
-- ARGV[1]  the lock's release channel, told Redisson's release message "0"
-- ARGV[2]  "publish" or "spublish"
-- ARGV[3]  grant channel of the calling client (see unlock.lua)
-- ARGV[4]  the calling client's "<uuid>"
--
-- Returns  1 if the lock was held and is now deleted, 0 if it was not held.
--          A key of another type, or a hash that is no lock's (see
--          lockhash.lua), is left alone and reported as a WRONGTYPE error.
--
-- The client of each holder is told on its grant channel to check its
-- holds of the lock now (tell_holders in lockhash.lua).

local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
    return 0
end
if kind ~= 'hash' then
    return redis.error_reply('WRONGTYPE key holds a ' .. kind .. ', not a lock')
end
-- The hash and the queue are read before the first write: a hash that is
-- no lock's, or a queue of another type, fails the call before it deletes
-- anything.
local _, holders = lock_clients(KEYS[1], false)
local queue = waiting(KEYS[2])
redis.call('del', KEYS[1])
redis.call(ARGV[2], ARGV[1], '0')
wake_clients(queue, ARGV[2], ARGV[3], ARGV[4])
tell_holders(holders, ARGV[2], KEYS[1], function(c) return grant_channel(ARGV[3], ARGV[4], c) end)
return 1
