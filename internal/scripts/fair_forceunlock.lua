-- fair_forceunlock.lua: delete a fair lock whatever its owner, tell the
-- head of its queue, and tell its holders' clients.
--
-- KEYS[1..4]  as in fair_queue.lua
-- KEYS[5]  guard (see fair_queue.lua)
-- ARGV[1]  the prefix of its waiters' own channels (see fair_queue.lua)
-- ARGV[2]  "publish" or "spublish"
-- ARGV[3]  prefix of the grant channels of the lock's slot (see
--          fair_lock.lua); absent: relock waiters are told on their own
--          channels, and no holder's client is told
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
-- The hash and the queue are read before the lock is deleted: a hash
-- that is no lock's fails the call before it writes.
local _, holders = lock_clients(KEYS[1], false)
local head, dead, _, alive = live_head()
redis.call('del', KEYS[1])
purge(dead, head)
if head then
    wake(head, ARGV[2], ARGV[1], ARGV[3], alive)
end
if ARGV[3] and ARGV[3] ~= '' then
    tell_holders(holders, ARGV[2], KEYS[1], function(c) return ARGV[3] .. c end)
end
return 1
