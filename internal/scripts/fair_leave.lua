-- fair_leave.lua: take a waiter that gives up out of the queue; for a lock
-- call whose last reply was lost, also undo the hold that call may have
-- taken. If the lock is free and the queue has a new head, the new head is
-- told on its own channel.
--
-- KEYS[1..4]  as in fair_queue.lua
-- KEYS[5]  guard (see fair_queue.lua)
-- KEYS[6]  request marker of the lost acquisition (reentrant owners),
--          given with ARGV[4] "2" only
-- ARGV[1]  owner id
-- ARGV[2]  the prefix of its waiters' own channels (see fair_queue.lua)
-- ARGV[3]  "publish" or "spublish"
-- ARGV[4]  "0": leave the queue only; "1": also undo a one-shot owner's
--          hold, which can only come from the lost call; "2": also undo
--          one hold of a reentrant owner if KEYS[6] shows the lost call
--          was applied
-- ARGV[5]  prefix of the grant channels of the lock's slot (see
--          fair_lock.lua); absent: relock waiters are told on their own
--          channels
--
-- Returns  1 if an entry or a hold was removed, 0 if there was nothing to
--          remove.

local owner = ARGV[1]
-- Everything that can fail is read before the first write: the queue,
-- the caller's place in it, the hold an undo takes back, whose count
-- must hold an integer, and what telling the next head needs.
local live, dead = live_head()
local head, changed = live, #dead > 0
local at, behind = place(owner)
if at and at < #dead then
    at = false -- dead, and purged with the others
end
-- Whether anyone is left in the list once the dead and owner are gone.
local others = live ~= false
if at then
    others = at > #dead or #behind > 0
end
-- The head once owner has left: the one behind it, when it was the head.
if head == owner then
    head = behind[1] or false
    changed = true
end
local count
if ARGV[4] ~= '0' then
    count = redis.call('hget', KEYS[1], owner)
    if count and not string.match(count, '^%-?%d+$') then
        return redis.error_reply('WRONGTYPE the hold count of ' .. owner .. ' in ' .. KEYS[1] .. ' holds no integer')
    end
end
-- The head is told if the lock is free once the writes are done: it was
-- free before, or the undo frees it.
local held, alive
if head then
    held = redis.call('exists', KEYS[1]) == 1
    if ARGV[5] and ARGV[5] ~= '' then
        alive = redis.call('hexists', KEYS[4], head) == 1
    end
end

-- The writes.
purge(dead, live)
local removed = 0
local freed = false
local undo = ARGV[4] == '1' or (ARGV[4] == '2' and redis.call('del', KEYS[6]) == 1)
if undo and count then
    if tonumber(count) <= 1 then
        redis.call('del', KEYS[1])
        freed = true
    else
        redis.call('hincrby', KEYS[1], owner, -1)
    end
    removed = 1
end
if leave(owner, at, behind, others) then
    removed = 1
end
if head and (changed or freed) and (freed or not held) then
    wake(head, ARGV[3], ARGV[2], ARGV[5], alive)
end
return removed
