-- fair_tell.lua: tell the head of a fair lock's queue to check again. A
-- waiter that took the lock for a fixed lease calls it: the head, told
-- the previous holder's TTL at its last attempt, would otherwise sleep
-- past the new hold's silent end, until its heartbeat.
--
-- KEYS[1..4]  as in fair_queue.lua
-- ARGV[1]  the prefix of its waiters' own channels (see fair_queue.lua)
-- ARGV[2]  "publish" or "spublish"
-- ARGV[3]  prefix of the grant channels of the lock's slot (see
--          fair_lock.lua); absent: relock waiters are told on their own
--          channels
--
-- Returns  1 if a waiter was told, 0 if the queue is empty.

local head = redis.call('lindex', KEYS[2], 0)
if head then
    wake(head, ARGV[2], ARGV[1], ARGV[3])
    return 1
end
return 0
