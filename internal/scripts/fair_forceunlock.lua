-- fair_forceunlock.lua: delete a fair lock whatever its owner, and tell
-- the head of its queue.
--
-- KEYS[1..4]  as in fair_queue.lua
-- KEYS[5]  guard (see fair_queue.lua)
-- ARGV[1]  the prefix of its waiters' own channels (see fair_queue.lua)
-- ARGV[2]  "publish" or "spublish"
-- ARGV[3]  prefix of the grant channels of the lock's slot (see
--          fair_lock.lua); absent: relock waiters are told on their own
--          channels
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
-- The queue is read before the lock is deleted.
local head, dead, _, alive = live_head()
redis.call('del', KEYS[1])
purge(dead, head)
if head then
    wake(head, ARGV[2], ARGV[1], ARGV[3], alive)
end
return 1
